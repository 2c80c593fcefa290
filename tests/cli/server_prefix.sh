#!/usr/bin/env bash
# Prompt prefixes shared across slots (runtime/scheduler.c borrow_prefix,
# issue 30 item 3): a second conversation whose prompt starts with the
# first one's 96 tokens (a shared system prompt) but is more than twice as
# long goes to another slot (the first slot's own cache is kept for its
# conversation) and copies those K/V rows from it instead of computing them:
# its usage reports them cached, /metrics counts them borrowed, and its
# greedy text and logprobs equal those of a fresh server that computed the
# whole prompt; also with q8_0 keys and q4_0 values (the rows copied as stored) and for
# DeepSeek-V3.2's MLA cache (latent rows and the sparse indexer's keys).
# Cache pages are shared one page at a time (MLXCEL_KV_CHUNK: this model's
# 96 f32 rows fill whole pages, which the second slot then maps instead of
# copying: /metrics reports them shared), and a server with sharing off
# (MLXCEL_KV_SHARE=0) gives the same replies.
set -u
export MLXCEL_KV_CHUNK=4096
cd "$(dirname "$0")/../.."
PREFIX=prefix
. tests/lib/serve.sh
for f in llama deepseek_v32; do
  mkdir -p "$T/$f"; cp tests/server/tinymodel/tokenizer*.json tests/fixtures/$f/*.json tests/fixtures/$f/model.safetensors "$T/$f/"
done
cp tests/server/tinymodel/config.json "$T/llama/"
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
serve_at() { # port, flags...
  local p=$1; shift
  serve_up $p "$T/srv$p.log" "$M" serve -m "$T/$fam" --port $p -t 2 -c 512 -np 2 "$@" || exit 0
}
P=$(python3 -c "print(','.join(str(5 + (i * 7) % 200) for i in range(96)))") # the shared prefix: 96 tokens
req() { # port, prompt ids, max_tokens, stream(true/false) -> the reply
  curl -sN localhost:$1/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\":[$2],\"max_tokens\":$3,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":2,\"stream\":$4}"
}
for run in "llama:" "llama:--cache-type-k q8_0 --cache-type-v q4_0" "deepseek_v32:"; do
fam=${run%%:*}; kv=${run#*:}
sfx=${kv:+/q8_0_q4_0}; [ $fam = llama ] || sfx=/$fam
# shellcheck disable=SC2086
serve_at $port $kv; serve_at $((port + 1)) $kv
Q=$(python3 -c "print(','.join(str(5 + (i * 13) % 240) for i in range(100)))")
req $port "$P,11" 8 false >"$T/a"
req $port "$P,$Q" 8 false >"$T/b"
req $((port + 1)) "$P,$Q" 8 false >"$T/fresh"
python3 - "$T/b" "$T/fresh" "$sfx" <<'PY'
import json, sys
b, f = (json.load(open(p)) for p in sys.argv[1:3])
cached = b["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
print(f"ok prefix/cached{sys.argv[3]}" if cached == 96 else f"FAIL prefix/cached{sys.argv[3]}: {cached} cached tokens, want 96")
cb, cf = b["choices"][0], f["choices"][0]
same = cb["text"] == cf["text"] and cb["logprobs"] == cf["logprobs"]
print(f"ok prefix/same_as_fresh{sys.argv[3]}" if same else f"FAIL prefix/same_as_fresh{sys.argv[3]}: {cb['text']!r} vs {cf['text']!r}")
PY
n=$(curl -s localhost:$port/metrics | awk '$1 == "mlxcel_prompt_tokens_borrowed_total" {print $2}')
[ "$n" = 96 ] && ok metrics$sfx || fail metrics$sfx "borrowed '$n'"
if [ -z "$kv" ] && [ $fam = llama ]; then
  sh=$(curl -s localhost:$port/metrics | awk '$1 == "mlxcel_kv_cache_shared_bytes" {print $2}')
  [ "${sh:-0}" -gt 0 ] && ok shared_pages || fail shared_pages "shared bytes '$sh'"
  # the same replies with sharing off (rows copied)
  MLXCEL_KV_SHARE=0 serve_at $((port + 2))
  req $((port + 2)) "$P,11" 8 false >/dev/null
  req $((port + 2)) "$P,$Q" 8 false >"$T/nosh"
  cmp -s <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'])" "$T/b") \
    <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'])" "$T/nosh") &&
    ok same_without_sharing || fail same_without_sharing "$(head -c 200 "$T/nosh")"
fi
# the first conversation's next turn still finds its own slot whole
req $port "$P,11,7,8" 4 false >"$T/a2"
python3 -c "import json,sys; u=json.load(open(sys.argv[1]))['usage']; sys.exit(u['prompt_tokens_details']['cached_tokens'] < 97)" "$T/a2" &&
  ok own_slot_kept$sfx || fail own_slot_kept$sfx "$(head -c 300 "$T/a2")"
kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}" 2>/dev/null; srvs=()
done
# Two prompts with a common prefix sent at once: the second borrows the prefix (admitted after the first
# read it) or, where both were admitted in one step and computed it apart, it is deduplicated when the
# second reads its prompt (scheduler.c dedupe, mx_kv_dedupe_prefix: pages
# whose bytes agree; test_kvshare checks it directly); the replies equal those of a server with sharing off.
fam=llama
serve_at $((port + 3)); MLXCEL_KV_SHARE=0 serve_at $((port + 4))
Q2=$(python3 -c "print(','.join(str(7 + (i * 5) % 230) for i in range(60)))")
req $((port + 3)) "$P,$Q" 8 false >"$T/d1" & c1=$!
req $((port + 3)) "$P,$Q2" 8 false >"$T/d2" & c2=$!
wait $c1 $c2
req $((port + 4)) "$P,$Q" 8 false >"$T/n1"; req $((port + 4)) "$P,$Q2" 8 false >"$T/n2"
m=$(curl -s localhost:$((port + 3))/metrics)
dd=$(echo "$m" | awk '$1 == "mlxcel_kv_cache_dedup_bytes_total" {print $2}'); sh=$(echo "$m" | awk '$1 == "mlxcel_kv_cache_shared_bytes" {print $2}')
# (which of the two happens is the timing's; the pages are shared in either unless the rows of the two
# prompt chunkings differ in their last bits, which the dedupe leaves apart, so only the counter is asked for)
[ -n "$dd" ] && ok "dedup_counter ($sh bytes shared, $dd deduplicated)" || fail dedup_counter "no mlxcel_kv_cache_dedup_bytes_total"
for i in 1 2; do
  cmp -s <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'])" "$T/d$i") \
    <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'])" "$T/n$i") &&
    ok same_as_unshared$i || fail same_as_unshared$i "$(head -c 200 "$T/d$i") vs $(head -c 200 "$T/n$i")"
done
