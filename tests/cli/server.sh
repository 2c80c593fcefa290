#!/usr/bin/env bash
# Starts real server processes on a test model and drives them with the
# official openai npm client (tests/server/test_server.mjs), then checks that
# SIGTERM stops them cleanly. Prints ok/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
node_dir=tests/cache/node
if [ ! -d "$node_dir/node_modules/openai" ]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm install --silent --no-audit --no-fund openai@4 >/dev/null 2>&1) || { echo "FAIL server/setup: npm install openai failed"; exit 1; }
fi
tmp=$(mktemp -d)
trap 'kill $pid $pid2 2>/dev/null; rm -rf "$tmp"' EXIT
model="$tmp/tinychat"
mkdir -p "$model"
cp tests/server/tinymodel/*.json "$model/"
cp tests/fixtures/llama/model.safetensors "$model/"
port=$((20000 + RANDOM % 20000)); port2=$((port + 1))
"$MLXCEL" serve -m "$model" --port $port --parallel 16 --ctx-size 512 -t 2 2>"$tmp/server.log" & pid=$!
"$MLXCEL" serve -m "$model" --port $port2 --parallel 1 --ctx-size 256 -t 1 --api-key s3cret 2>"$tmp/server2.log" & pid2=$!
up=0
for i in $(seq 1 100); do
  if node -e "fetch('http://127.0.0.1:$port/health').then(r=>process.exit(r.status===200?0:1)).catch(()=>process.exit(1))" 2>/dev/null &&
     node -e "fetch('http://127.0.0.1:$port2/health').then(r=>process.exit(r.status===200?0:1)).catch(()=>process.exit(1))" 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
if [ $up = 1 ]; then echo "ok server/health_ready"; else echo "FAIL server/health_ready: no 200 from /health"; cat "$tmp/server.log"; exit 1; fi
cp tests/server/test_server.mjs "$node_dir/"
timeout 300 node "$node_dir/test_server.mjs" $port $port2
kill -TERM $pid $pid2
wait $pid; rc1=$?
wait $pid2; rc2=$?
if [ $rc1 = 0 ] && [ $rc2 = 0 ]; then echo "ok server/sigterm_clean_exit"; else echo "FAIL server/sigterm_clean_exit: status $rc1 $rc2"; tail -5 "$tmp/server.log"; fi
