#!/usr/bin/env bash
# A vision-language model behind the server (the gemma3 fixture with a
# Gemma-style chat template that writes image parts), driven by the official
# openai npm client (tests/server/test_vision.mjs); a text model beside it
# must refuse images. Prints ok/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
. tests/lib/npm_client.sh
need_npm server_vision openai 4
need_npm server_vision @anthropic-ai/sdk 0
tmp=$(mktemp -d)
pid=""; pid2=""
trap 'kill $pid $pid2 2>/dev/null; rm -rf "$tmp"' EXIT
model=tests/fixtures/gemma3
tmpl=tests/server/vision_template.jinja
mkdir -p "$tmp/allowed" "$tmp/tinychat"
cp $model/inputs/image.png "$tmp/allowed/"
cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$tmp/tinychat/"
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}; port2=$((port + 1))
"$MLXCEL" serve -m $model --port $port --parallel 2 --ctx-size 256 -t 2 --chat-template-file $tmpl \
  --allowed-image-dir "$tmp/allowed" 2>"$tmp/server.log" & pid=$!
"$MLXCEL" serve -m "$tmp/tinychat" --port $port2 --parallel 1 --ctx-size 256 -t 1 2>"$tmp/server2.log" & pid2=$!
up=0
for i in $(seq 1 100); do
  if node -e "Promise.all([$port,$port2].map(p=>fetch('http://127.0.0.1:'+p+'/health'))).then(rs=>process.exit(rs.every(r=>r.status===200)?0:1)).catch(()=>process.exit(1))" 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
if [ $up = 1 ]; then echo "ok server_vision/health_ready"; else echo "FAIL server_vision/health_ready: no 200 from /health"; cat "$tmp"/server*.log; exit 1; fi
cp tests/server/test_vision.mjs "$node_dir/"
timeout 300 node "$node_dir/test_vision.mjs" $port $port2 "$(realpath "$MLXCEL")" "$(realpath $model)" "$(realpath $tmpl)" \
  "$(realpath $model/inputs/image.png)" "$(realpath "$tmp/allowed")"
kill -TERM $pid $pid2
rcs=""
for p in $pid $pid2; do wait $p; rcs="$rcs $?"; done
pid=""; pid2=""
if [ "$rcs" = " 0 0" ]; then echo "ok server_vision/sigterm_clean_exit"; else echo "FAIL server_vision/sigterm_clean_exit: status$rcs"; tail -5 "$tmp/server.log"; fi
