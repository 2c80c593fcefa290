#!/usr/bin/env bash
# The prompt cache (serve --cache-ram; docs/kv-cache.md "The prompt cache"):
# one slot, K conversations of P-token prompts taken in turn for R rounds
# (an agent switching between tasks), each request its conversation's prompt
# and a new 16-token tail, 16 tokens generated. Two servers side by side,
# the cache on (default) and off (--cache-ram 0), requests interleaved
# between them; prints each request's seconds and cached tokens, then the
# median of rounds 2..R for each server and their ratio.
#
#   tools/prompt_cache_bench.sh /tmp/llama1b-q4
# Environment: P (1024), K (3), R (3), PORT (18090), MLXCEL (build/mlxcel).
set -u
cd "$(dirname "$0")/.." || exit 1
M=${1:?model folder}
B=${MLXCEL:-build/mlxcel}
P=${P:-1024} K=${K:-3} R=${R:-3} PORT=${PORT:-18090}
ids() { python3 -c "import sys; print(','.join(str(100 + (i * 7919 + int(sys.argv[2]) * 104729) % 20000) for i in range(int(sys.argv[1]))))" "$1" "$2"; }
srvs=()
trap 'kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}" 2>/dev/null' EXIT
for s in 0 1; do
  flag=(); [ $s = 1 ] && flag=(--cache-ram 0)
  "$B" serve -m "$M" --port $((PORT + s)) -t 2 -c $((P + 16 * R + 64)) -np 1 "${flag[@]}" >/tmp/prompt_cache_bench.$s.log 2>&1 &
  srvs+=($!)
done
for s in 0 1; do
  for _ in $(seq 600); do curl -sf localhost:$((PORT + s))/health >/dev/null 2>&1 && break; sleep 0.2; done
done
declare -a conv
for k in $(seq 1 "$K"); do conv[k]=$(ids "$P" "$k"); done
out=$(mktemp)
for r in $(seq 1 "$R"); do
  for k in $(seq 1 "$K"); do
    tail=$(ids 16 $((1000 + r * 10 + k)))
    for s in 0 1; do
      t0=$(date +%s.%N)
      c=$(curl -s localhost:$((PORT + s))/v1/completions -H 'content-type: application/json' \
        -d "{\"prompt\":[${conv[k]},$tail],\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true}" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['usage'].get('prompt_tokens_details',{}).get('cached_tokens',0))")
      dt=$(python3 -c "import time; print(round(time.time() - $t0, 3))")
      echo "round $r conversation $k cache=$([ $s = 0 ] && echo on || echo off) seconds $dt cached $c" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for cache in ("on", "off"):
    v = [float(r[6]) for r in rows if r[4] == "cache=" + cache and int(r[1]) > 1]
    med[cache] = statistics.median(v) if v else float("nan")
print(f"median seconds per request, rounds 2..: cache on {med['on']:.3f}, off {med['off']:.3f}, ratio {med['off'] / med['on']:.1f}x")
PY
rm -f "$out"
