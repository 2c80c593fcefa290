# Sourced by the CLI tests that start servers (after `set -u` and the cd to the repository): M (the
# binary), T (a temporary folder, removed at exit), ok / fail lines under "$PREFIX/", and serve_up,
# whose servers are stopped at exit.
M=${MLXCEL:-$PWD/build/mlxcel}
T=$(mktemp -d)
srvs=()
trap 'kill "${srvs[@]}" 2>/dev/null; rm -rf "$T"' EXIT
ok() { echo "ok $PREFIX/$1"; }
fail() { echo "FAIL $PREFIX/$1: $2"; }
# port, log, command...: runs the command in the background and waits for /health (a FAIL line and
# status 1 when it does not come up in 10 s)
serve_up() {
  local p=$1 log=$2; shift 2
  "$@" >"$log" 2>&1 &
  srvs+=($!)
  for _ in $(seq 100); do curl -sf localhost:$p/health >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "serve:$p" "$(tail -2 "$log")"; return 1
}
