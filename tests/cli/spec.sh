#!/usr/bin/env bash
# Speculative decoding from the command line (runtime/spec.h): generate with
# --draft-model / --lookup-ngram gives the ids of plain greedy decoding and
# --logits-out still the target's logits for every prompt position and
# generated token (recurrent targets too); a draft with another tokenizer and two
# drafters at once are refused with one clear line; bench reports it.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-$PWD/build/mlxcel}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ok() { echo "ok spec/$1"; }
fail() { echo "FAIL spec/$1: $2"; }
F=tests/fixtures
P=1,5,9,33,7,7,12,90,5,9,33,7,7

ids() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())['generated_ids'])"; }

for fam in llama gemma2 qwen3 mamba qwen3_next; do # the last two keep recurrent state (restored past a rejection)
  "$M" generate -m $F/$fam --prompt-ids $P -n 24 -t 2 --output-format json --logits-out "$T/plain.st" 2>"$T/err" | ids >"$T/plain" ||
    { fail "$fam/plain" "$(tail -1 "$T/err")"; continue; }
  for d in "self:--draft-model $F/$fam" "other:--draft-model $F/mistral --draft-max 3" "ngram:--lookup-ngram 3 --draft-max 6"; do
    name=${d%%:*}; opts=${d#*:}
    if "$M" generate -m $F/$fam --prompt-ids $P -n 24 -t 2 --output-format json --logits-out "$T/spec.st" $opts 2>"$T/err" | ids >"$T/spec" &&
       cmp -s "$T/plain" "$T/spec" && python3 tests/lib/st_cmp.py "$T/plain.st" "$T/spec.st" >"$T/cmp" 2>&1; then ok "$fam/$name"
    else fail "$fam/$name" "$(cat "$T/plain" "$T/spec" "$T/cmp" 2>/dev/null | tr '\n' ' ') $(tail -1 "$T/err")"; fi
  done
done

# a next-n (MTP) module: split out of a checkpoint that stores one (split-mtp), then the draft of
# generate and bench (its drafts come from the target's hidden states); the output is plain decoding's
for fam in glm4_moe deepseek_v3 qwen3_next; do # Qwen3-Next's layout (mtp.*) and a recurrent target
  python3 tests/lib/add_mtp.py $F/$fam "$T/$fam-full" $([ $fam = qwen3_next ] && echo qwen) && "$M" split-mtp -m "$T/$fam-full" -o "$T/$fam-mtp" 2>"$T/err" ||
    { fail "mtp/$fam/split" "$(tail -1 "$T/err")"; continue; }
  "$M" generate -m $F/$fam --prompt-ids $P -n 24 -t 2 --output-format json --logits-out "$T/plain.st" 2>"$T/err" | ids >"$T/plain"
  if "$M" generate -m "$T/$fam-full" --prompt-ids $P -n 24 -t 2 --output-format json --logits-out "$T/spec.st" --draft-model "$T/$fam-mtp" \
       >"$T/out" 2>"$T/err" && ids <"$T/out" >"$T/spec" && cmp -s "$T/plain" "$T/spec" &&
     python3 tests/lib/st_cmp.py "$T/plain.st" "$T/spec.st" >"$T/cmp" 2>&1 &&
     python3 -c "import json,sys; s=json.loads(open(sys.argv[1]).read())['speculative']; sys.exit(not s['drafted'] > 0)" "$T/out"; then ok "mtp/$fam"
  else fail "mtp/$fam" "$(cat "$T/plain" "$T/spec" "$T/cmp" 2>/dev/null | tr '\n' ' ') $(tail -1 "$T/err")"; fi
done
if [ -d "$T/glm4_moe-mtp" ]; then
  "$M" bench -m "$T/glm4_moe-full" -p 0 -n 16 -r 1 -t 2 --bw-mb 16 --draft-model "$T/glm4_moe-mtp" --json >"$T/b.json" 2>"$T/err" &&
    python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['speculative']; sys.exit(not (s['draft'] == 'next-n module' and s['runs_differing'] == 0))" "$T/b.json" &&
    ok mtp/bench || fail mtp/bench "$(tail -1 "$T/err") $(head -c 300 "$T/b.json")"
fi

# text output and the statistics line
"$M" generate -m $F/llama --prompt-ids $P -n 16 -t 2 --draft-model $F/llama >"$T/out" 2>"$T/err" &&
  grep -q '^speculative: .* verification passes, [0-9]* of [0-9]* drafted tokens accepted' "$T/err" && ok stats_line || fail stats_line "$(cat "$T/err")"

# refusals: one line, non-zero exit
refuse() { # name, pattern, args...
  local n=$1 pat=$2; shift 2
  "$M" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "$pat" "$T/err"; then ok "$n"; else fail "$n" "rc $rc: $(cat "$T/err")"; fi
}
mk() { # a fixture with a tokenizer: dir, fixture, tokenizer folder
  mkdir -p "$1"; for f in config.json model.safetensors; do ln -s "$PWD/$F/$2/$f" "$1/$f"; done
  [ -n "$3" ] && cp tests/tokenizers/$3/tokenizer.json tests/tokenizers/$3/tokenizer_config.json "$1/"
}
mk "$T/t-gpt2" llama gpt2; mk "$T/d-qwen" mistral qwen3; mk "$T/d-gpt2" mistral gpt2
refuse other_tokenizer "needs the target's tokenizer" generate -m "$T/t-gpt2" --prompt-ids $P -n 4 --draft-model "$T/d-qwen"
refuse no_tokenizer "one of the two folders has none" generate -m "$T/t-gpt2" --prompt-ids $P -n 4 --draft-model $F/mistral
"$M" generate -m "$T/t-gpt2" --prompt-ids $P -n 8 -t 2 --draft-model "$T/d-gpt2" >/dev/null 2>"$T/err" && ok same_tokenizer || fail same_tokenizer "$(cat "$T/err")"
refuse two_drafters "not both" generate -m $F/llama --prompt-ids $P -n 4 --lookup-ngram 2 --draft-model $F/llama
refuse draft_max_range "draft-max" generate -m $F/llama --prompt-ids $P -n 4 --lookup-ngram 2 --draft-max 0
refuse mtp_none "num_nextn_predict_layers is 0" split-mtp -m $F/llama -o "$T/none-mtp"
[ -d "$T/glm4_moe-mtp" ] && refuse mtp_alone "takes each token with a hidden state of its target" generate -m "$T/glm4_moe-mtp" --prompt-ids $P -n 4
if [ -d "$T/glm4_moe-mtp" ]; then
  timeout 30 "$M" serve -m "$T/glm4_moe-mtp" --port $((${MX_PORT_BASE:-20000} + 48)) >"$T/out" 2>"$T/err"; rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && tail -1 "$T/err" | grep -q "is a next-n module" && ok mtp_serve_alone || fail mtp_serve_alone "rc $rc: $(tail -1 "$T/err")"
fi
mkdir -p "$T/glm-nomodule" && python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['num_nextn_predict_layers']=1; json.dump(c,open(sys.argv[2],'w'))" \
  $F/glm4_moe/config.json "$T/glm-nomodule/config.json" && ln -s "$PWD/$F/glm4_moe/model.safetensors" "$T/glm-nomodule/"
refuse mtp_not_stored "does not hold its next-n module" split-mtp -m "$T/glm-nomodule" -o "$T/nm-mtp"

# bench: the oracle is accepted whole and the outputs agree
if "$M" bench -m $F/llama -p 0 -n 24 -r 2 -t 2 --bw-mb 64 --spec-oracle --json >"$T/b.json" 2>"$T/err"; then
  python3 - "$T/b.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])).get("speculative")
good = s and s["draft"] == "oracle" and s["acceptance"] == 1 and s["runs_differing"] == 0 and s["plain_tps"] > 0 and s["spec_tps"] > 0 \
    and 4 < s["tokens_per_pass"] <= 5
print("ok spec/bench_oracle" if good else f"FAIL spec/bench_oracle: {s}")
PY
else fail bench_oracle "$(tail -1 "$T/err")"; fi
"$M" bench -m $F/llama -p 0 -n 24 -r 1 -t 2 --bw-mb 64 --lookup-ngram 2 >"$T/b.txt" 2>"$T/err" &&
  grep -q '^speculative decoding (n-gram lookup, draft-max 4' "$T/b.txt" && grep -q 'identical to plain decoding' "$T/b.txt" &&
  ok bench_ngram || fail bench_ngram "$(cat "$T/b.txt" "$T/err" | tail -3)"

# the server (--lookup-ngram): three concurrent greedy requests give the text and logprobs of a server
# without speculation, and /metrics counts accepted drafts; speculative.n_max 0 turns it off for one request;
# a server without speculation refuses the field
S="$T/srv"; mkdir -p "$S"; cp tests/server/tinymodel/*.json $F/llama/model.safetensors "$S/"
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
srvs=()
serve_at() { # port, flags...: started and healthy, or a FAIL line
  local p=$1; shift
  "$M" serve -m "$S" --port $p -t 2 -c 256 -np 4 "$@" >"$T/srv$p.log" 2>&1 &
  srvs+=($!)
  for i in $(seq 100); do curl -sf localhost:$p/health >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "serve$p" "$(tail -2 "$T/srv$p.log")"; return 1
}
# the draft-model servers: the target itself (every greedy draft kept) and another model with the same
# tokenizer (Mistral's weights: sliding-window layers, so its cache is cut back from a ring)
D="$T/draft"; mkdir -p "$D"; cp tests/server/tinymodel/tokenizer*.json $F/mistral/config.json $F/mistral/model.safetensors "$D/"
serve_at $port && serve_at $((port + 1)) --lookup-ngram 3 --draft-max 4 &&
  serve_at $((port + 2)) --draft-model "$S" --draft-max 3 && serve_at $((port + 3)) -md "$D" --draft-max 5 -ub 8
complete() { # port, prompt ids, extra json -> one line of text and logprobs
  curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\":[$2],\"max_tokens\":48,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":2$3}" |
    python3 -c "import json,sys; c=json.load(sys.stdin)['choices'][0]; print(json.dumps([c['text'], c['logprobs']['token_logprobs'], c['logprobs']['top_logprobs']]))" 2>&1
}
prompts=("1,5,9,13,17,3,8" "1,22,7,7,40,22,7" "1,9,9,9,31,2,9,9")
for p in 0 1 2 3; do
  cl=(); for i in 0 1 2; do complete $((port + p)) "${prompts[$i]}" "" >"$T/c$p$i" & cl+=($!); done; wait "${cl[@]}"
done
met() { curl -s localhost:$((port + ${2:-1}))/metrics | awk -v k=$1 '$1 == k {print $2}'; }
for p in 1 2 3; do
  same=1; for i in 0 1 2; do cmp -s "$T/c0$i" "$T/c$p$i" && grep -q '^\["' "$T/c0$i" || same=0; done
  acc=$(met mlxcel_spec_accepted_tokens_total $p); dr=$(met mlxcel_spec_draft_tokens_total $p)
  n=$(case $p in 1) echo ngram ;; 2) echo draft_self ;; 3) echo draft_other ;; esac)
  [ $same = 1 ] && ok server/$n/greedy_same || fail server/$n/greedy_same "$(head -c 300 "$T/c00") vs $(head -c 300 "$T/c$p"0)"
  # the target as its own draft: every greedy draft kept
  { [ "${acc:-0}" -gt 0 ] && [ "$dr" -ge "$acc" ] && { [ $p != 2 ] || [ "$dr" = "$acc" ]; }; } &&
    ok "server/$n/metrics ($acc of $dr drafted tokens accepted)" || fail server/$n/metrics "drafted '$dr', accepted '$acc'"
done
acc=$(met mlxcel_spec_accepted_tokens_total); dr=$(met mlxcel_spec_draft_tokens_total)
complete $((port + 1)) "${prompts[0]}" ',"speculative.n_max":0' >"$T/off"
[ "$(met mlxcel_spec_draft_tokens_total)" = "$dr" ] && cmp -s "$T/off" "$T/c00" && ok server/n_max_0 || fail server/n_max_0 "$(head -c 200 "$T/off")"
r=$(curl -s -w ' %{http_code}' localhost:$port/v1/completions -H 'content-type: application/json' -d '{"prompt":[1,5],"max_tokens":4,"speculative.n_max":2}')
case "$r" in *"start it with --lookup-ngram"*" 400") ok server/refused ;; *) fail server/refused "$r" ;; esac
# sampled: same seed, same text (the draws a speculation step makes are the sampler's own)
s1=$(complete $((port + 1)) "${prompts[1]}" ',"temperature":0.8,"seed":7'); s2=$(complete $((port + 1)) "${prompts[1]}" ',"temperature":0.8,"seed":7')
[ "$s1" = "$s2" ] && case "$s1" in '["'*) true ;; *) false ;; esac && ok server/sampled || fail server/sampled "$s1 / $s2"
s1=$(complete $((port + 3)) "${prompts[2]}" ',"temperature":0.8,"seed":11'); s2=$(complete $((port + 3)) "${prompts[2]}" ',"temperature":0.8,"seed":11')
[ "$s1" = "$s2" ] && case "$s1" in '["'*) true ;; *) false ;; esac && ok server/draft_other/sampled || fail server/draft_other/sampled "$s1 / $s2"
grep -q "speculation: draft model 'draft', up to 5 drafts" "$T/srv$((port + 3)).log" && ok server/draft_ready || fail server/draft_ready "$(grep ready "$T/srv$((port + 3)).log")"
kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}"
# a next-n module as the servers' draft (GLM-4.5's layout; Qwen3-Next's on a recurrent target): the
# target's hidden rows kept per slot, replies as a server without drafts, drafts offered
for fam in glm4_moe qwen3_next; do
  N="$T/srv-$fam"; python3 tests/lib/add_mtp.py $F/$fam "$N" $([ $fam = qwen3_next ] && echo qwen) && cp tests/server/tinymodel/tokenizer*.json "$N/" &&
    "$M" split-mtp -m "$N" -o "$N-mtp" 2>"$T/err" || { fail server/mtp/$fam "$(tail -1 "$T/err")"; continue; }
  S=$N; srvs=()
  serve_at $((port + 9)) && serve_at $((port + 10)) --draft-model "$N-mtp" --draft-max 3 || continue
  for p in 9 10; do
    cl=(); for i in 0 1 2; do complete $((port + p)) "${prompts[$i]}" "" >"$T/m$p$i" & cl+=($!); done; wait "${cl[@]}"
  done
  same=1; for i in 0 1 2; do cmp -s "$T/m9$i" "$T/m10$i" && grep -q '^\["' "$T/m9$i" || same=0; done
  dr=$(met mlxcel_spec_draft_tokens_total 10)
  [ $same = 1 ] && [ "${dr:-0}" -gt 0 ] && grep -q "speculation: next-n module" "$T/srv$((port + 10)).log" && ok "server/mtp/$fam ($dr drafted)" ||
    fail server/mtp/$fam "drafted '$dr': $(head -c 200 "$T/m90") vs $(head -c 200 "$T/m100") $(grep -m1 ready "$T/srv$((port + 10)).log")"
  kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}"
done
# modules whose every draft is the pending token (add_mtp.py's hidden and token modes: through the target's
# hidden state, through the token): the drafts kept are known from the greedy reply alone (a round keeps the
# run of tokens equal to the one before), so the CLI and the server must both keep exactly that many; a module
# reading the token or the hidden state one position off keeps others
for mode in hidden token; do
  N="$T/$mode"; python3 tests/lib/add_mtp.py $F/glm4_moe "$N" deepseek $mode && cp tests/server/tinymodel/tokenizer*.json "$N/" &&
    "$M" split-mtp -m "$N" -o "$N-mtp" 2>/dev/null
  "$M" generate -m "$N" --prompt-ids 3,3,3 -n 48 -t 2 --ignore-eos --output-format json --draft-model "$N-mtp" --draft-max 3 >"$T/$mode.json" 2>"$T/err"
  want=$(python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); g=d['generated_ids']; t, acc = 1, 0
while t < len(g):
    k = min(3, len(g) - t - 1); a = 0
    while a < k and g[t + a] == g[t - 1]: a += 1
    acc += a; t += a + 1
print(acc, d['speculative']['accepted'])" "$T/$mode.json" 2>/dev/null)
  set -- $want
  [ -n "$want" ] && [ "$1" = "$2" ] && [ "$1" -gt 5 ] && ok "mtp/known_drafts_$mode ($1 kept)" || fail mtp/known_drafts_$mode "want/got '$want' $(tail -1 "$T/err")"
  exp=${1:-x}
  S=$N; srvs=()
  if serve_at $((port + 11)) --draft-model "$N-mtp" --draft-max 3; then
    complete $((port + 11)) "3,3,3" "" >/dev/null
    got=$(met mlxcel_spec_accepted_tokens_total 11)
    [ "$got" = "$exp" ] && ok "server/mtp/known_drafts_$mode ($got kept)" || fail server/mtp/known_drafts_$mode "kept '$got', the CLI '$exp'"
    kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}"
  fi
done
# one slot: A, then B takes the slot (A's cache goes to the prompt cache with the target's rows), then A's
# next turn (A, its reply, one more token) borrows A's rows from the entry: each reply keeps the drafts it keeps
# from generate, where nothing was borrowed
N="$T/hidden"; S=$N; srvs=()
A2=$(python3 -c "import json,sys; print(','.join(map(str, [3, 3, 3] + json.load(open(sys.argv[1]))['generated_ids'] + [7])))" "$T/hidden.json")
if serve_at $((port + 12)) --draft-model "$N-mtp" --draft-max 3 -np 1; then
  for p in "3,3,3" "100,100,100,100,100" "$A2"; do complete $((port + 12)) "$p" "" >/dev/null; done
  got=$(met mlxcel_spec_accepted_tokens_total 12); hit=$(met mlxcel_prompt_cache_hit_tokens_total 12)
  want=0
  for p in "3,3,3" "100,100,100,100,100" "$A2"; do
    "$M" generate -m "$N" --prompt-ids "$p" -n 48 -t 2 --ignore-eos --output-format json --draft-model "$N-mtp" --draft-max 3 >"$T/b.json" 2>/dev/null
    want=$((want + $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['speculative']['accepted'])" "$T/b.json" 2>/dev/null || echo 1000)))
  done
  [ "$got" = "$want" ] && [ "${hit:-0}" -gt 16 ] && ok "server/mtp/prompt_cache ($got kept, $hit tokens from the entry)" ||
    fail server/mtp/prompt_cache "kept '$got', generate '$want'; cache hits '$hit'"
  kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}"
fi
S="$T/srv"
# a draft with another tokenizer, or both drafters, refused at start with one line
X="$T/xtok"; mkdir -p "$X"; cp $F/mistral/config.json $F/mistral/model.safetensors "$X/"
timeout 30 "$M" serve -m "$S" --port $((port + 5)) -t 1 --draft-model "$X" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && tail -1 "$T/err" | grep -q "^mlxcel serve: the draft model needs the target's tokenizer" && ok server/draft_tokenizer || fail server/draft_tokenizer "rc $rc: $(tail -2 "$T/err")"
timeout 30 "$M" serve -m "$S" --port $((port + 5)) -t 1 --draft-model "$D" --lookup-ngram 2 >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "not both" "$T/err" && ok server/two_drafters || fail server/two_drafters "rc $rc: $(tail -2 "$T/err")"
# models with recurrent state (a pure SSM, a DeltaNet hybrid): each slot's state is kept from before
# its drafts and, past a rejection, restored and read again; greedy replies as a server without drafts
# (the draft model: Mistral's weights, its own cache cut back as usual)
for fam in mamba qwen3_next; do
  R="$T/rec-$fam"; mkdir -p "$R"; cp tests/server/tinymodel/tokenizer*.json "$R/"; ln -s "$PWD/$F/$fam/config.json" "$PWD/$F/$fam/model.safetensors" "$R/"
  S=$R; srvs=()
  serve_at $((port + 6)) && serve_at $((port + 7)) --lookup-ngram 3 --draft-max 4 && serve_at $((port + 8)) --draft-model "$D" --draft-max 3 || continue
  for p in 6 7 8; do
    cl=(); for i in 0 1 2; do complete $((port + p)) "${prompts[$i]}" "" >"$T/r$p$i" & cl+=($!); done; wait "${cl[@]}"
  done
  for p in 7 8; do
    same=1; for i in 0 1 2; do cmp -s "$T/r6$i" "$T/r$p$i" && grep -q '^\["' "$T/r6$i" || same=0; done
    dr=$(met mlxcel_spec_draft_tokens_total $p); acc=$(met mlxcel_spec_accepted_tokens_total $p)
    [ $same = 1 ] && [ "${dr:-0}" -gt 0 ] && ok "server/recurrent/$fam/$p ($acc of $dr accepted)" ||
      fail server/recurrent/$fam/$p "drafted '$dr': $(head -c 200 "$T/r60") vs $(head -c 200 "$T/r$p"0)"
  done
  kill -INT "${srvs[@]}" 2>/dev/null; wait "${srvs[@]}"
done
