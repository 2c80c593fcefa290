#!/usr/bin/env bash
# Server benchmark: starts `mlxcel serve` on MODEL_DIR on a free local port,
# waits for /health, runs tools/bench_server.mjs against it, then stops the
# server with SIGTERM.
#   tools/bench_server.sh MODEL_DIR [bench_server.mjs options...]
# Environment: MLXCEL (default build/mlxcel), PARALLEL (16), CTX (2048),
# THREADS (serve's -t; default: the binary's default), SERVE_ARGS (extra serve
# options), SERVER_LOG (where the server's stderr goes; default a temp file,
# printed on failure). PEER=PATH runs that llama-server binary on MODEL (a GGUF
# file) instead, with the same slots, per-slot context (its -c is the total),
# threads and continuous batching, for side-by-side runs (use --api completions:
# the GGUF files tools/hf_to_gguf.py writes have no chat template). LAUNCH="mpirun -np 2 --oversubscribe"
# starts mlxcel through that launcher (a distributed server: give --pp / --tp in SERVE_ARGS).
set -u
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -e "$1" ]; then
  echo "usage: tools/bench_server.sh MODEL_DIR [bench_server.mjs options]" >&2
  exit 2
fi
model=$1; shift
MLXCEL=${MLXCEL:-build/mlxcel}
PARALLEL=${PARALLEL:-16}
CTX=${CTX:-2048}
node_dir=tests/cache/node
if [ ! -d "$node_dir/node_modules/openai" ]; then
  npm install --prefix "$node_dir" --silent --no-audit --no-fund openai@4 >/dev/null 2>&1 ||
    { echo "bench_server: npm install openai failed" >&2; exit 1; }
fi
# a free port: ask the kernel for one
port=$(node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
log=${SERVER_LOG:-$(mktemp)}
threads=()
[ -n "${THREADS:-}" ] && threads=(-t "$THREADS")
if [ -n "${PEER:-}" ]; then
  # shellcheck disable=SC2086
  "$PEER" -m "$model" --port "$port" --parallel "$PARALLEL" --ctx-size $((PARALLEL * CTX)) "${threads[@]}" --cont-batching \
    --no-webui ${SERVE_ARGS:-} >"$log" 2>&1 &
else
  # shellcheck disable=SC2086
  ${LAUNCH:-} "$MLXCEL" serve -m "$model" --port "$port" --parallel "$PARALLEL" --ctx-size "$CTX" "${threads[@]}" ${SERVE_ARGS:-} 2>"$log" &
fi
pid=$!
trap 'kill -TERM $pid 2>/dev/null' EXIT
up=0
for _ in $(seq 1 600); do
  kill -0 $pid 2>/dev/null || break
  if node -e "fetch('http://127.0.0.1:$port/health').then(r=>process.exit(r.status===200?0:1)).catch(()=>process.exit(1))" 2>/dev/null; then
    up=1; break
  fi
  sleep 0.5
done
if [ $up != 1 ]; then
  echo "bench_server: the server did not become ready; its log:" >&2
  cat "$log" >&2
  exit 1
fi
echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "${LAUNCH:+$LAUNCH }${PEER:-serve} -m $model --parallel $PARALLEL --ctx-size $CTX ${threads[*]} ${SERVE_ARGS:-}" >&2
node tools/bench_server.mjs --url "http://127.0.0.1:$port" "$@"
rc=$?
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
kill -TERM $pid
wait $pid
src=$?
trap - EXIT
[ -z "${SERVER_LOG:-}" ] && rm -f "$log"
if [ $src != 0 ]; then echo "bench_server: the server exited with status $src" >&2; [ $rc = 0 ] && rc=1; fi
exit $rc
