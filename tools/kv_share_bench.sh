#!/usr/bin/env bash
# Memory of a prompt prefix shared by several slots (issue 30 item 3,
# docs/kv-cache.md "Shared prefix pages"): one request with a long shared
# prefix (a system prompt of P tokens) generates while NB more requests with
# the same prefix arrive; each borrows the prefix from the first one's slot.
# Prints the server's /metrics KV figures while all of them run, with
# sharing on (the default) and off (MLXCEL_KV_SHARE=0: the rows copied).
#
#   tools/kv_share_bench.sh /tmp/llama1b-q4
# The folder needs a tokenizer (the replies are text): for build/mkmodel's
# checkpoints, copy tests/tokenizers/llama3/tokenizer*.json into it.
# Environment: P (2048), NB (3), PORT (18080), MLXCEL (build/mlxcel).
set -u
cd "$(dirname "$0")/.." || exit 1
M=${1:?model folder}
B=${MLXCEL:-build/mlxcel}
P=${P:-2048}
NB=${NB:-3}
PORT=${PORT:-18080}
ids() { python3 -c "import sys; print(','.join(str(100 + (i * 7919 + int(sys.argv[2])) % 20000) for i in range(int(sys.argv[1]))))" "$1" "$2"; }
pre=$(ids "$P" 0)
req() { # unique tail seed, max_tokens
  curl -s localhost:$PORT/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\":[$pre,$(ids 16 "$1")],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true}" >/tmp/kv_share_reply.$1
}
metric() { curl -s localhost:$PORT/metrics | awk -v k="$1" '$1 == k {print $2}'; }
for share in 1 0; do
  MLXCEL_KV_SHARE=$share "$B" serve -m "$M" --port $PORT -t 2 -c $((P + 512)) -np $((NB + 1)) >/tmp/kv_share_bench.log 2>&1 &
  srv=$!
  for _ in $(seq 600); do curl -sf localhost:$PORT/health >/dev/null 2>&1 && break; sleep 0.2; done
  rm -f /tmp/kv_share_reply.*
  req 1 400 &
  first=$!
  # the first request's prompt is in its slot once it generates
  for _ in $(seq 600); do
    [ "$(metric mlxcel_generation_tokens_total)" -gt 0 ] 2>/dev/null && break
    grep -q error /tmp/kv_share_reply.1 2>/dev/null && { cat /tmp/kv_share_reply.1; kill $srv; exit 1; }
    sleep 0.5
  done
  t0=$(date +%s.%N)
  pids=()
  for k in $(seq 2 $((NB + 1))); do req "$k" 64 & pids+=($!); done
  sleep 3
  echo "sharing=$share borrowed=$(metric mlxcel_prompt_tokens_borrowed_total) kv_bytes=$(metric mlxcel_kv_cache_bytes)" \
    "shared_bytes=$(metric mlxcel_kv_cache_shared_bytes) rss_kb=$(awk '/VmRSS/ {print $2}' /proc/$srv/status)"
  wait "${pids[@]}"
  echo "sharing=$share the $NB borrowers took $(python3 -c "import time; print(round(time.time() - $t0, 2))") s"
  kill $first 2>/dev/null
  kill -INT $srv; wait $srv 2>/dev/null
done
