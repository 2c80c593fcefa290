#!/usr/bin/env bash
# Prefix reuse for models with recurrent state (runtime/scheduler.c,
# mx_sched_set_snapshots; issue 30 item 3): their caches cannot be cut back,
# so each slot keeps snapshots of the state at its prompt's end and at the
# first --snapshot-every boundaries. After a 60-token prompt A, a prompt
# sharing all of A (a next turn that rewrote the reply) reuses 60 tokens and
# one sharing 40 tokens reuses the snapshot at 32; each reply (greedy text and
# logprobs) equals that of a server without snapshots, which computes the
# whole prompt; and a prompt sharing a prefix with another slot's snapshot
# borrows that slot's rows and state there. (The prompt cache is off here: it would
# keep C whole and serve E and D from it; server_cache.sh tests that.)
set -u
cd "$(dirname "$0")/../.."
PREFIX=snapshots
. tests/lib/serve.sh
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
ids() { python3 -c "print(','.join(str(1 + ($1 + i * $2) % 300) for i in range($3)))"; }
A=$(ids 3 7 60) X=$(ids 5 11 20)
C="$A,$X"                            # all of A, then another continuation
B="$(ids 3 7 40),$X"                 # A's first 40 tokens
req() { # port, prompt ids -> "cached text logprobs" on one line
  curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\":[$2],\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":1}" |
    python3 -c "import json,sys; d=json.load(sys.stdin); c=d['choices'][0]; print(d['usage'].get('prompt_tokens_details',{}).get('cached_tokens',0), json.dumps([c['text'], c['logprobs']['token_logprobs']]))" 2>&1
}
for fam in jamba qwen3_next falcon_h1 lfm2 recurrent_gemma mamba2 zamba2; do
  mkdir -p "$T/$fam"; cp tests/server/tinymodel/tokenizer*.json tests/fixtures/$fam/*.json tests/fixtures/$fam/model.safetensors "$T/$fam/"
  serve_up $port "$T/s.log" "$M" serve -m "$T/$fam" --port $port -t 2 -c 256 -np 2 --snapshot-every 16 --cache-ram 0 || continue
  serve_up $((port + 1)) "$T/f.log" "$M" serve -m "$T/$fam" --port $((port + 1)) -t 2 -c 256 -np 2 --state-snapshots 0 || continue
  req $port "$A" >/dev/null
  got_c=$(req $port "$C"); got_b=$(req $port "$B")
  ref_c=$(req $((port + 1)) "$C"); ref_b=$(req $((port + 1)) "$B")
  [ "${got_c%% *}" = 60 ] && [ "${got_b%% *}" = 32 ] && [ "${ref_c%% *}" = 0 ] && ok "$fam/cached" ||
    fail "$fam/cached" "next turn ${got_c%% *}, shared prefix ${got_b%% *} (want 60, 32); without snapshots ${ref_c%% *}"
  [ "${got_c#* }" = "${ref_c#* }" ] && [ "${got_b#* }" = "${ref_b#* }" ] && case "$got_c" in *'["'*) true ;; *) false ;; esac &&
    ok "$fam/same_replies" || fail "$fam/same_replies" "$got_c / $ref_c; $got_b / $ref_b"
  # E shares 40 tokens with slot 0's last prompt (B) and nothing with slot 1: it goes to the empty slot 1
  # and borrows slot 0's rows and its state at 32; D then shares 48 tokens with E and restores E's
  # stride snapshot at 48 in slot 1
  E="$C,9" D="$(ids 3 7 48),$(ids 8 5 30)"
  got_e=$(req $port "$E"); ref_e=$(req $((port + 1)) "$E")
  bor=$(curl -s localhost:$port/metrics | awk '$1 == "mlxcel_prompt_tokens_borrowed_total" {print $2}')
  got_d=$(req $port "$D"); ref_d=$(req $((port + 1)) "$D")
  [ "${got_e#* }" = "${ref_e#* }" ] && [ "${got_e%% *}" = 32 ] && [ "$bor" = 32 ] && ok "$fam/borrowed" ||
    fail "$fam/borrowed" "$got_e / $ref_e, borrowed $bor"
  [ "${got_d#* }" = "${ref_d#* }" ] && [ "${got_d%% *}" = 48 ] && ok "$fam/stride" || fail "$fam/stride" "$got_d / $ref_d"
  kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}" 2>/dev/null; srvs=()
done
grep -q "up to 3 state snapshots of .* MiB per slot, every 16 prompt tokens" "$T/s.log" && ok ready_line || fail ready_line "$(grep ready "$T/s.log")"
