#!/usr/bin/env bash
# Runs every test program and script; each prints "ok NAME" / "FAIL NAME: why"
# lines. A program that crashes or exits non-zero without a FAIL line counts as
# one failure. Ends with the summary line "N passed, N failed".
# The unit programs (release and ASan/UBSan builds) run MX_TEST_JOBS at a time
# (default 2: most are single-threaded); the CLI scripts two at a time too
# (below). Reports print in a fixed order.
set -u
cd "$(dirname "$0")/.."
export MLXCEL=${MLXCEL:-$PWD/build/mlxcel}
jobs=${MX_TEST_JOBS:-2}
pass=0; fail=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
# The scripts start python3 a few hundred times: where `python3` is a version
# manager's shim (pyenv's is a shell script: 0.35 s a start here, the
# interpreter 0.09 s), they get the interpreter it resolves to.
py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
if [ -n "$py" ] && [ "$py" != "$(command -v python3)" ]; then
  mkdir -p "$log/bin" && ln -s "$py" "$log/bin/python3" && export PATH="$log/bin:$PATH"
fi
exec_one() { # n, label, command... : runs it, leaves out/rc/secs in $log/n.*
  local n=$1; shift; shift
  local t0=$SECONDS
  "$@" >"$log/$n.out" 2>&1
  echo $? >"$log/$n.rc"; echo $((SECONDS - t0)) >"$log/$n.secs"
}
report() { # n, label
  local n=$1 label=$2 out="$log/$1.out" rc p f
  rc=$(cat "$log/$n.rc")
  p=$(grep -c '^ok ' "$out"); f=$(grep -c '^FAIL ' "$out")
  grep '^FAIL ' "$out" | sed "s|^|[$label] |"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL [$label] exited with status $rc"; tail -5 "$out" | sed 's/^/    /'; f=1
  fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-40s %4d ok %3d failed %4ds\n' "$label" "$p" "$f" "$(cat "$log/$n.secs")"
}
labels=(); cmds=()
for t in build/tests/test_*; do [ -x "$t" ] && { labels+=("unit/${t##*/}"); cmds+=("$t"); }; done
for t in build/asan/tests/test_*; do [ -x "$t" ] && { labels+=("asan/${t##*/}"); cmds+=("$t"); }; done
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 # for the asan/ programs; no effect on the others

for ((n = 0; n < ${#cmds[@]}; n++)); do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  exec_one "$n" "${labels[n]}" "${cmds[n]}" &
done
wait
for ((n = 0; n < ${#cmds[@]}; n++)); do report "$n" "${labels[n]}"; done
unset ASAN_OPTIONS UBSAN_OPTIONS
# The CLI scripts: MX_TEST_CLI_JOBS (2) at a time, as most of their time is
# spent waiting on servers, small processes and curl; each gets ports of its
# own (MX_PORT_BASE, 50 of them). Those that keep both cores busy by
# themselves run alone: fuzz and convert run jobs in parallel, MPI's ranks
# poll while they wait.
solo=" convert fuzz mpi mpi_fixtures "
clis=(); for t in tests/cli/*.sh; do [ -f "$t" ] && clis+=("$t"); done
n=${#cmds[@]}
for ((i = 0; i < ${#clis[@]}; i++)); do
  name=$(basename "${clis[i]}" .sh)
  if [[ "$solo" == *" $name "* ]]; then
    wait
    (export MX_PORT_BASE=$((20000 + 50 * i)); exec_one "$((n + i))" x bash "${clis[i]}")
    continue
  fi
  while [ "$(jobs -rp | wc -l)" -ge "${MX_TEST_CLI_JOBS:-2}" ]; do wait -n; done
  (export MX_PORT_BASE=$((20000 + 50 * i)); exec_one "$((n + i))" x bash "${clis[i]}") &
done
wait
for ((i = 0; i < ${#clis[@]}; i++)); do report "$((n + i))" "cli/$(basename "${clis[i]}" .sh)"; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
