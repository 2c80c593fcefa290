#!/usr/bin/env bash
# The prompt cache (runtime/scheduler.c, mx_sched_set_prompt_cache; serve
# --cache-ram; issue 30 item 3): a slot's cache that another prompt replaces
# is kept, and a later prompt starting the same way takes its rows from it.
#  - one slot: A, then B (A kept), then A again reuses 99 of its 100 tokens
#    (one is always fed), with the greedy text and logprobs of a server with
#    the cache off (which computes it all); /metrics counts the hit;
#  - LRU under a --cache-ram of about one and a half entries: A, B, C, then
#    B is still there and A is gone (evicted for C's entry);
#  - two slots in one memory pool (pages shared, not copied): A, B, C, A;
#  - a DeltaNet hybrid (Qwen3-Next): the entry keeps its slot's state
#    snapshots, so a next turn of A (all of A, then more) after B reuses all
#    60 tokens of A;
#  - OpenAI's prompt_cache_key is taken (chat, Responses) and
#    prompt_cache_retention "24h" refused (no fixed retention here);
#  - the ready line names the bound; a bad --cache-ram is refused.
set -u
export MLXCEL_KV_CHUNK=4096
cd "$(dirname "$0")/../.."
PREFIX=cache
. tests/lib/serve.sh
for f in llama qwen3_next; do
  mkdir -p "$T/$f"; cp tests/server/tinymodel/tokenizer*.json tests/fixtures/$f/*.json tests/fixtures/$f/model.safetensors "$T/$f/"
done
cp tests/server/tinymodel/config.json "$T/llama/"
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
ids() { python3 -c "print(','.join(str(1 + ($1 + i * $2) % 300) for i in range($3)))"; }
A=$(ids 3 7 100) B=$(ids 5 11 100) C=$(ids 2 13 100)
req() { # port, prompt ids -> "cached text logprobs" on one line
  curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\":[$2],\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":1}" |
    python3 -c "import json,sys; d=json.load(sys.stdin); c=d['choices'][0]; print(d['usage'].get('prompt_tokens_details',{}).get('cached_tokens',0), json.dumps([c['text'], c['logprobs']['token_logprobs']]))" 2>&1
}
metric() { curl -s localhost:$1/metrics | awk -v k="$2" '$1 == k {print $2}'; }
stop() { kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}" 2>/dev/null; srvs=(); }

# one slot: the cache on (the default) against off
serve_up $port "$T/on.log" "$M" serve -m "$T/llama" --port $port -t 2 -c 512 -np 1 || exit 0
serve_up $((port + 1)) "$T/off.log" "$M" serve -m "$T/llama" --port $((port + 1)) -t 2 -c 512 -np 1 --cache-ram 0 || exit 0
for p in $port $((port + 1)); do req $p "$A" >/dev/null; req $p "$B" >/dev/null; done
got=$(req $port "$A") ref=$(req $((port + 1)) "$A")
[ "${got%% *}" = 99 ] && [ "${ref%% *}" = 0 ] && ok one_slot/cached || fail one_slot/cached "cached ${got%% *} (want 99), cache off ${ref%% *} (want 0)"
[ "${got#* }" = "${ref#* }" ] && case "$got" in *'["'*) true ;; *) false ;; esac && ok one_slot/same_reply || fail one_slot/same_reply "$got / $ref"
[ "$(metric $port mlxcel_prompt_cache_hit_tokens_total)" = 99 ] && [ "$(metric $port mlxcel_prompt_cache_entries)" = 2 ] &&
  [ -z "$(metric $((port + 1)) mlxcel_prompt_cache_entries)" ] && ok one_slot/metrics ||
  fail one_slot/metrics "hits '$(metric $port mlxcel_prompt_cache_hit_tokens_total)', entries '$(metric $port mlxcel_prompt_cache_entries)'"
# one entry's bytes (A's and B's are alike): room for one and a half
e=$(( $(metric $port mlxcel_prompt_cache_bytes) / 2 ))
grep -q "prompt cache up to 8192 MiB" "$T/on.log" && ok ready_line || fail ready_line "$(grep ready "$T/on.log")"
# OpenAI's prompt-cache hints: a key is taken (it changes nothing), retention only "in_memory"
code() { curl -s -o "$T/hint" -w '%{http_code}' localhost:$port/v1/$1 -H 'content-type: application/json' -d "$2"; }
c1=$(code chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"prompt_cache_key":"agent-7","prompt_cache_retention":"in_memory"}')
c2=$(code responses '{"input":"hi","max_output_tokens":2,"prompt_cache_key":"agent-7"}')
c3=$(code chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"prompt_cache_retention":"24h"}')
[ "$c1" = 200 ] && [ "$c2" = 200 ] && [ "$c3" = 400 ] && grep -q "prompt_cache_retention" "$T/hint" && ok openai_hints ||
  fail openai_hints "codes $c1 $c2 $c3: $(head -c 200 "$T/hint")"
stop

serve_up $port "$T/lru.log" "$M" serve -m "$T/llama" --port $port -t 2 -c 512 -np 1 --cache-ram $((e * 3 / 2048))K || exit 0
req $port "$A" >/dev/null; req $port "$B" >/dev/null; req $port "$C" >/dev/null
got_b=$(req $port "$B") got_a=$(req $port "$A")
[ "${got_b%% *}" = 99 ] && [ "${got_a%% *}" = 0 ] && [ "$(metric $port mlxcel_prompt_cache_entries)" = 1 ] &&
  [ "$(metric $port mlxcel_prompt_cache_evictions_total)" -ge 2 ] && ok lru ||
  fail lru "B cached ${got_b%% *} (want 99), A ${got_a%% *} (want 0); entries $(metric $port mlxcel_prompt_cache_entries)"
stop

# under --kv-memory: entries are charged beside the slot and go for room, least recently used first
serve_up $port "$T/kvm.log" "$M" serve -m "$T/llama" --port $port -t 2 -c 512 -np 1 --kv-memory 1G || exit 0
req $port "$A" >/dev/null
f=$(metric $port mlxcel_kv_cache_charged_bytes) # one slot's charge for A
stop
serve_up $port "$T/kvm.log" "$M" serve -m "$T/llama" --port $port -t 2 -c 512 -np 1 --kv-memory $((f * 5 / 2)) || exit 0
req $port "$A" >/dev/null; req $port "$B" >/dev/null
got=$(req $port "$A")
ch=$(metric $port mlxcel_kv_cache_charged_bytes)
[ "${got%% *}" = 99 ] && [ "$(metric $port mlxcel_prompt_cache_entries)" = 1 ] && [ "$(metric $port mlxcel_prompt_cache_evictions_total)" = 1 ] &&
  [ "${ch:-0}" -gt 0 ] && [ "$ch" -le $((f * 5 / 2)) ] && ok kv_memory ||
  fail kv_memory "cached ${got%% *} (want 99), entries $(metric $port mlxcel_prompt_cache_entries) (want 1), charged '$ch' of $((f * 5 / 2))"
stop

# two slots in one pool: the entry's pages are mapped into the slot that borrows them
serve_up $port "$T/on2.log" "$M" serve -m "$T/llama" --port $port -t 2 -c 512 -np 2 || exit 0
serve_up $((port + 1)) "$T/off2.log" "$M" serve -m "$T/llama" --port $((port + 1)) -t 2 -c 512 -np 2 --cache-ram 0 || exit 0
for p in $port $((port + 1)); do req $p "$A" >/dev/null; req $p "$B" >/dev/null; req $p "$C" >/dev/null; done
got=$(req $port "$A") ref=$(req $((port + 1)) "$A")
sh=$(metric $port mlxcel_kv_cache_shared_bytes)
[ "${got%% *}" = 99 ] && [ "${ref%% *}" = 0 ] && [ "${got#* }" = "${ref#* }" ] && [ "${sh:-0}" -gt 0 ] && ok pooled ||
  fail pooled "cached ${got%% *} / ${ref%% *}, shared bytes '$sh': $got / $ref"
stop

# a hybrid: the entry's state snapshot at A's end
A2=$(ids 3 7 60) B2=$(ids 5 11 60) X=$(ids 8 5 20)
serve_up $port "$T/h.log" "$M" serve -m "$T/qwen3_next" --port $port -t 2 -c 256 -np 1 --snapshot-every 16 || exit 0
serve_up $((port + 1)) "$T/h0.log" "$M" serve -m "$T/qwen3_next" --port $((port + 1)) -t 2 -c 256 -np 1 --cache-ram 0 || exit 0
for p in $port $((port + 1)); do req $p "$A2" >/dev/null; req $p "$B2" >/dev/null; done
got=$(req $port "$A2,$X") ref=$(req $((port + 1)) "$A2,$X")
[ "${got%% *}" = 60 ] && [ "${ref%% *}" = 0 ] && [ "${got#* }" = "${ref#* }" ] && case "$got" in *'["'*) true ;; *) false ;; esac &&
  ok hybrid || fail hybrid "cached ${got%% *} (want 60) / ${ref%% *}: $got / $ref"
stop

out=$("$M" serve -m "$T/llama" --cache-ram lots 2>&1); rc=$?
[ $rc = 2 ] && case "$out" in *"--cache-ram 'lots'"*) true ;; *) false ;; esac && ok bad_value || fail bad_value "rc $rc: $out"
