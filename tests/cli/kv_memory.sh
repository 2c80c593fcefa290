#!/usr/bin/env bash
# KV memory on demand (issue 30, item 2): a slot's cache is reserved address
# space whose pages take memory once written (nn/decoder.c mx_kv_new), so a
# server with 4 slots of 262144 positions starts without that memory and a
# request takes what its positions write; --kv-memory bounds all slots
# together (runtime/scheduler.c make_room, grow): a request is admitted with
# room for its prompt and 64 more positions and grows 64 at a time; when the
# bound is reached the generating request admitted last is pre-empted (its
# cache released, queued again with what it generated, read again later),
# idle slots' caches are released for room, one that could never fit gets a
# 400, and the replies equal an unbounded server's (greedy text and
# logprobs); a prefix several slots share is charged once.
set -u
cd "$(dirname "$0")/../.."
PREFIX=kv_memory
. tests/lib/serve.sh
mkdir -p "$T/m"; cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$T/m/"
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
met() { curl -s localhost:$1/metrics | awk -v k=$2 '$1 == k {print $2}'; }
req() { # port, prompt ids[, max_tokens[, sampling]] -> the reply
  curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\":[$2],\"max_tokens\":${3:-32},${4:-\"temperature\":0},\"ignore_eos\":true,\"logprobs\":1}"
}
SEEDED='"temperature":0.8,"seed":5' # the third long request samples: its sampler goes with it when pre-empted
ids() { python3 -c "print(','.join(str(1 + (i * $1) % 300) for i in range(60)))"; }

serve_up $port "$T/a.log" "$M" serve -m "$T/m" --port $port -t 2 -c 262144 -np 4 || exit 0
pid=${srvs[-1]}
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status); res=$(met $port mlxcel_kv_cache_reserved_bytes)
[ "$res" = $((4 * 262144 * 512)) ] && [ "$rss" -lt 131072 ] && [ "$(met $port mlxcel_kv_cache_bytes)" = 0 ] &&
  ok "reserved_not_taken ($((res >> 20)) MiB reserved, ${rss} kB resident)" || fail reserved_not_taken "reserved $res, VmRSS $rss kB"
for i in 0 1 2; do req $port "$(ids $((7 + 6 * i)))" >"$T/ref$i"; done
used=$(met $port mlxcel_kv_cache_bytes)
for i in 0 1; do req $port "$(ids $((7 + 6 * i)))" 4000 >"$T/long$i"; done
req $port "$(ids 19)" 4000 "$SEEDED" >"$T/long2"
# three slots of 93 positions at 512 bytes each, and each layer's K and V pages begun
[ "$used" -gt 0 ] && [ "$used" -le $((3 * (93 * 512 + 2 * 2 * 4096))) ] && ok "taken_as_written ($used bytes)" || fail taken_as_written "$used bytes"

# a bound too small for any request: 400 naming what it needs
serve_up $((port + 1)) "$T/b.log" "$M" serve -m "$T/m" --port $((port + 1)) -t 2 -c 8192 -np 3 --kv-memory 4K || exit 0
r=$(curl -s -w ' %{http_code}' localhost:$((port + 1))/v1/completions -H 'content-type: application/json' \
  -d "{\"prompt\":[$(ids 7)],\"max_tokens\":4000}")
need=$(echo "$r" | sed -n 's/.*needs \([0-9.]*\) KiB of KV cache.*/\1/p')
case "$r" in *"more than the server's --kv-memory of 4.0 KiB"*" 400") ok "refused (needs $need KiB)" ;; *) fail refused "$r" ;; esac

# room for one request and a half: more than one runs at once, they grow, and the last admitted are
# pre-empted and go on later, never more than the bound in use, the same replies (greedy, and seeded sampling)
budget=$(python3 -c "print(int(float('$need') * 1024 * 1.5))")
serve_up $((port + 2)) "$T/c.log" "$M" serve -m "$T/m" --port $((port + 2)) -t 2 -c 8192 -np 3 --kv-memory $budget || exit 0
cl=(); for i in 0 1; do req $((port + 2)) "$(ids $((7 + 6 * i)))" 4000 >"$T/got$i" & cl+=($!); done
for _ in $(seq 200); do [ "$(met $((port + 2)) mlxcel_requests_active)" = 2 ] && break; sleep 0.01; done # admitted last: pre-empted first
req $((port + 2)) "$(ids 19)" 4000 "$SEEDED" >"$T/got2" & cl+=($!)
max_act=0; max_used=0; max_q=0
while kill -0 "${cl[@]}" 2>/dev/null; do
  m=$(curl -s localhost:$((port + 2))/metrics)
  a=$(echo "$m" | awk '$1 == "mlxcel_requests_active" {print $2}'); u=$(echo "$m" | awk '$1 == "mlxcel_kv_cache_bytes" {print $2}')
  q=$(echo "$m" | awk '$1 == "mlxcel_queue_depth" {print $2}')
  [ "${a:-0}" -gt $max_act ] && max_act=$a; [ "${u:-0}" -gt $max_used ] && max_used=$u; [ "${q:-0}" -gt $max_q ] && max_q=$q
  sleep 0.02
done
wait "${cl[@]}"
same=1; for i in 0 1 2; do
  python3 -c "import json,sys; a,b=(json.load(open(p))['choices'][0] for p in sys.argv[1:]); sys.exit(a['text']!=b['text'] or a['logprobs']!=b['logprobs'])" \
    "$T/long$i" "$T/got$i" 2>/dev/null || same=0; done
[ $same = 1 ] && ok same_replies || fail same_replies "$(head -c 200 "$T/got0") vs $(head -c 200 "$T/ref0")"
rel=$(met $((port + 2)) mlxcel_kv_cache_releases_total); waits=$(met $((port + 2)) mlxcel_kv_cache_waits_total)
pre=$(met $((port + 2)) mlxcel_kv_cache_preemptions_total)
[ $max_act -ge 2 ] && [ "${pre:-0}" -ge 1 ] && [ $max_used -le $budget ] && [ "$(met $((port + 2)) mlxcel_kv_cache_budget_bytes)" = $budget ] &&
  ok "bounded ($max_act at once, up to $max_used of $budget bytes, $pre pre-emptions, queue up to $max_q, $rel releases)" ||
  fail bounded "active $max_act, used $max_used of $budget, pre-emptions $pre, releases $rel, waits $waits"

# a page several slots share is charged once (docs/kv-cache.md "Shared prefix pages"): a request generating
# while two more with its 96-token prefix arrive; each borrows the prefix (pages of one 4 KiB chunk mapped,
# MLXCEL_KV_CHUNK), and the third is admitted on what the second's sharing saves (each request charged
# its whole need at admission, MLXCEL_KV_GROW, so that the admission alone decides)
P=$(python3 -c "print(','.join(str(5 + (i * 7) % 200) for i in range(96)))")
three() { # port -> the three requests started (the first one generating before the other two)
  curl -s localhost:$1/v1/completions -H 'content-type: application/json' -o /dev/null \
    -d "{\"prompt\":[$P,11],\"max_tokens\":7000,\"temperature\":0,\"ignore_eos\":true}" & cl=($!)
  for _ in $(seq 200); do [ "$(met $1 mlxcel_generation_tokens_total)" -gt 0 ] 2>/dev/null && break; sleep 0.02; done
  for k in 2 3; do
    curl -s localhost:$1/v1/completions -H 'content-type: application/json' -o /dev/null \
      -d "{\"prompt\":[$P,$(ids $((k + 20)))],\"max_tokens\":7000,\"temperature\":0,\"ignore_eos\":true}" & cl+=($!)
  done
  act=0; for _ in $(seq 300); do # until all three run, or one waits for room
    act=$(met $1 mlxcel_requests_active); [ "${act:-0}" = 3 ] && break
    [ "$(met $1 mlxcel_kv_cache_waits_total)" -gt 0 ] 2>/dev/null && break; sleep 0.02
  done
}
export MLXCEL_KV_CHUNK=4096 MLXCEL_KV_GROW=100000
serve_up $((port + 3)) "$T/d.log" "$M" serve -m "$T/m" --port $((port + 3)) -t 2 -c 8192 -np 3 --kv-memory 1G || exit 0
three $((port + 3))
charged=$(met $((port + 3)) mlxcel_kv_cache_charged_bytes); shared=$(met $((port + 3)) mlxcel_kv_cache_shared_bytes)
kill "${cl[@]}" 2>/dev/null; wait "${cl[@]}" 2>/dev/null
[ "$act" = 3 ] && [ "${shared:-0}" -gt 0 ] && ok "shared_charged_once ($charged bytes charged, $shared shared)" ||
  fail shared_charged_once "active $act, charged $charged, shared $shared"
# a bound between the charges with and without that saving: the third waits only when sharing is off
budget=$((charged + shared * 3 / 4)) # charged counts both borrowers' saving, the third is admitted on the first one's
for share in 1 0; do
  pt=$((port + 5 - share))
  MLXCEL_KV_SHARE=$share serve_up $pt "$T/e$share.log" "$M" serve -m "$T/m" --port $pt -t 2 -c 8192 -np 3 --kv-memory $budget || exit 0
  three $pt
  w=$(met $pt mlxcel_kv_cache_waits_total)
  kill "${cl[@]}" 2>/dev/null; wait "${cl[@]}" 2>/dev/null
  if [ $share = 1 ]; then [ "$act" = 3 ] && [ "$w" = 0 ] && ok "admitted_on_sharing (bound $budget)" || fail admitted_on_sharing "active $act, waits $w"
  else [ "$act" != 3 ] && [ "${w:-0}" -ge 1 ] && ok "waits_without_sharing" || fail waits_without_sharing "active $act, waits $w"; fi
done
unset MLXCEL_KV_CHUNK MLXCEL_KV_GROW

"$M" serve -m "$T/m" --kv-memory 12Q >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "^mlxcel serve: --kv-memory '12Q': give a size" "$T/err" && ok bad_size || fail bad_size "rc $rc: $(cat "$T/err")"
