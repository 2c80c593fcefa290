#!/usr/bin/env bash
# Runs every test program and script; each prints "ok NAME" / "FAIL NAME: why"
# lines. A program that crashes or exits non-zero without a FAIL line counts as
# one failure. Ends with the summary line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
export MLXCEL=${MLXCEL:-$PWD/build/mlxcel}
pass=0; fail=0
log=$(mktemp -d)
run_one() { # label, command...
  local label=$1; shift
  local out="$log/out.txt"
  local t0=$SECONDS
  "$@" >"$out" 2>&1
  local rc=$?
  local p f
  p=$(grep -c '^ok ' "$out"); f=$(grep -c '^FAIL ' "$out")
  grep '^FAIL ' "$out" | sed "s|^|[$label] |"
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL [$label] exited with status $rc"; tail -5 "$out" | sed 's/^/    /'; f=1
  fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-40s %4d ok %3d failed %4ds\n' "$label" "$p" "$f" $((SECONDS - t0))
}
for t in build/tests/test_*; do [ -x "$t" ] && run_one "unit/${t##*/}" "$t"; done
for t in build/asan/tests/test_*; do
  [ -x "$t" ] && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_one "asan/${t##*/}" "$t"
done
for t in tests/cli/*.sh; do [ -f "$t" ] && run_one "cli/$(basename "$t" .sh)" bash "$t"; done
rm -rf "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
