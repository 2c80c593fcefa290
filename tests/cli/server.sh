#!/usr/bin/env bash
# Starts real server processes on a test model and drives them with the
# official openai npm client (tests/server/test_server.mjs), then checks that
# SIGTERM stops them cleanly. Prints ok/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
. tests/lib/npm_client.sh
need_npm server openai 4
need_npm server @anthropic-ai/sdk 0
tmp=$(mktemp -d)
trap 'kill $pid $pid2 $pid3 $pid4 $pid5 $pid6 $pid7 2>/dev/null; rm -rf "$tmp"' EXIT
model="$tmp/tinychat"
mkdir -p "$model"
cp tests/server/tinymodel/*.json "$model/"
cp tests/fixtures/llama/model.safetensors "$model/"
# the same model whose generation_config.json asks for greedy decoding
mkdir -p "$tmp/gencfg"
cp "$model"/* "$tmp/gencfg/"
echo '{"eos_token_id": 313, "do_sample": false, "temperature": 0.9}' > "$tmp/gencfg/generation_config.json"
# a thinking model: a template that opens <think>, an EOS (319) the model never samples
mkdir -p "$tmp/think"
cp "$model"/* "$tmp/think/"
echo '{"eos_token_id": 319}' > "$tmp/think/generation_config.json"
for fx in bert-embed bert-cls; do
  mkdir -p "$tmp/$fx"
  cp tests/fixtures/$fx/config.json tests/fixtures/$fx/model.safetensors tests/server/tinybert/tokenizer.json "$tmp/$fx/"
done
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}; port2=$((port + 1)); port3=$((port + 2)); port4=$((port + 3)); port5=$((port + 4)); port7=$((port + 5))
"$MLXCEL" serve -m "$model" --port $port --parallel 16 --ctx-size 512 -t 2 2>"$tmp/server.log" & pid=$!
"$MLXCEL" serve -m "$model" --port $port2 --parallel 1 --ctx-size 256 -t 1 --api-key s3cret 2>"$tmp/server2.log" & pid2=$!
"$MLXCEL" serve -m "$tmp/bert-embed" --port $port3 -t 1 2>"$tmp/server3.log" & pid3=$!
"$MLXCEL" serve -m "$tmp/bert-cls" --port $port4 -t 1 2>"$tmp/server4.log" & pid4=$!
# a template that writes Hermes/Qwen <tool_call> blocks (tool calls that tool_choice requires)
"$MLXCEL" serve -m "$model" --port $port5 --parallel 8 --ctx-size 2048 -t 1 --chat-template-file tests/templates/Qwen-Qwen2.5-7B-Instruct.jinja 2>"$tmp/server5.log" & pid5=$!
"$MLXCEL" serve -m "$tmp/think" --port $port7 --parallel 2 --ctx-size 2048 -t 1 --chat-template-file tests/templates/llama-cpp-deepseek-r1.jinja 2>"$tmp/server7.log" & pid7=$!
# --port 0: the system's choice, printed in the listening line
"$MLXCEL" serve -m "$tmp/gencfg" --port 0 --parallel 2 --ctx-size 512 -t 1 --cors https://app.example 2>"$tmp/server6.log" & pid6=$!
port6=0
for i in $(seq 1 100); do
  port6=$(sed -n 's|^mlxcel serve: listening on http://127.0.0.1:\([0-9]*\),.*|\1|p' "$tmp/server6.log" 2>/dev/null)
  [ -n "$port6" ] && break
  sleep 0.05
done
if [ -n "$port6" ] && [ "$port6" != 0 ]; then echo "ok server/port_0_prints_bound_port"; else echo "FAIL server/port_0_prints_bound_port: '$port6'"; cat "$tmp/server6.log"; port6=1; fi
up=0
for i in $(seq 1 100); do
  if node -e "Promise.all([$port,$port2,$port3,$port4,$port5,$port6,$port7].map(p=>fetch('http://127.0.0.1:'+p+'/health'))).then(rs=>process.exit(rs.every(r=>r.status===200)?0:1)).catch(()=>process.exit(1))" 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
if [ $up = 1 ]; then echo "ok server/health_ready"; else echo "FAIL server/health_ready: no 200 from /health"; cat "$tmp"/server*.log; exit 1; fi
cp tests/server/check.mjs tests/server/test_cache.mjs tests/server/test_server.mjs tests/server/test_structured.mjs tests/server/test_messages.mjs tests/server/test_responses.mjs tests/server/test_everyday.mjs "$node_dir/"
# first, on the fresh --parallel 1 server: the cached prompt tokens each format reports
timeout 120 node "$node_dir/test_cache.mjs" $port2 s3cret
timeout 300 node "$node_dir/test_server.mjs" $port $port2 $port3 $port4 "$(realpath "$MLXCEL")" "$tmp/bert-embed" "$tmp/bert-cls"
timeout 300 node "$node_dir/test_structured.mjs" $port $port5
timeout 300 node "$node_dir/test_messages.mjs" $port $port2 $port5 $port7
timeout 300 node "$node_dir/test_responses.mjs" $port $port5
timeout 300 node "$node_dir/test_everyday.mjs" $port $port6
# one line per request: method, path, status, tokens, time
if grep -aqE '^mlxcel serve: POST /v1/chat/completions 200 prompt_tokens=[1-9][0-9]* completion_tokens=[1-9][0-9]* [0-9]+ ms$' "$tmp/server.log" &&
   grep -aqE '^mlxcel serve: GET /v1/models 200 prompt_tokens=0 completion_tokens=0 [0-9]+ ms$' "$tmp/server.log" &&
   grep -aqE '^mlxcel serve: OPTIONS /v1/chat/completions 204 ' "$tmp/server6.log"; then echo "ok server/request_log"
else echo "FAIL server/request_log: $(grep -a 'mlxcel serve: [A-Z]' "$tmp/server.log" | tail -3)"; fi
if grep -aq 'sampling defaults from generation_config.json: temperature 0.9, do_sample false (greedy)' "$tmp/server6.log"; then echo "ok server/gencfg_announced"
else echo "FAIL server/gencfg_announced: $(head -3 "$tmp/server6.log")"; fi
kill -TERM $pid $pid2 $pid3 $pid4 $pid5 $pid6 $pid7
rcs=""
for p in $pid $pid2 $pid3 $pid4 $pid5 $pid6 $pid7; do wait $p; rcs="$rcs $?"; done
if [ "$rcs" = " 0 0 0 0 0 0 0" ]; then echo "ok server/sigterm_clean_exit"; else echo "FAIL server/sigterm_clean_exit: status$rcs"; tail -5 "$tmp/server.log"; fi
