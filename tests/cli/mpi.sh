#!/usr/bin/env bash
# Distributed runs over Open MPI (src/dist/, issue 27): `mpirun -np 2
# generate --tp 2` and `--pp 2` give the single-process logits within
# 1e-4 * max(1, max|ref|) and the same greedy ids (with --lookup-ngram too) on a dense multi-head one
# (gpt2: fused qkv, Conv1D layout, biases; TP only), a GQA (llama; its 4-bit
# copy: TP only, see below for its bound), a MoE (mixtral: TP splits every expert's width) and, pipeline
# only, a hybrid (jamba: Mamba + attention + MoE) fixture, TP=4 with one KV head copied in each part
# (llama-f16) and two Mamba2 groups over four parts (granitemoehybrid), and TP=2 x PP=2 on llama (every
# causal fixture's own parity at TP=2, PP=2 and TP=2 x PP=2 is mpi_fixtures.sh's); pipeline
# micro-batches (a prompt cut between runs, a batched server); images (the vision
# tower on rank 0 only: qwen2_vl's M-RoPE positions, gemma3's bidirectional
# image spans, qwen3_vl's DeepStack rows, aya_vision's unscaled head) at
# PP=2 and TP=2; a draft model (on rank 0 only) at TP=2 and PP=2; the server
# under mpirun (PP=2; with an image, with a draft model); chat under mpirun
# (PP=2, TP=2, /image at PP=2: the single process's replies); the JSON line
# and the --logits-out file come from rank 0 only; a
# world size that does not match --tp x --pp, a family TP cannot split, a
# rank that cannot load its part and a vision tower rank 0 cannot open are
# refused with one line on rank 0, a rank
# killed mid-session stops the job without a hang; the
# embeddings and the LM head are split by vocabulary among the first and the
# last stage's parts. Then
# one rank in each of two network namespaces joined by a veth pair (Open MPI
# over TCP), or a skip line where namespaces cannot be made.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-$PWD/build/mlxcel}
T=$(mktemp -d)
NS=mxmpi$$
cleanup() {
  ip netns del ${NS}a 2>/dev/null; ip netns del ${NS}b 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
ok() { echo "ok mpi/$1"; }
fail() { echo "FAIL mpi/$1: $2"; }
if ! command -v mpirun >/dev/null; then fail setup "mpirun is missing (make deps installs openmpi-bin)"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the plain shared-memory / TCP transports: no UCX or libfabric probing at each start (a third faster here)
export OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_mtl=^ofi
F=tests/fixtures
P=1,5,9,33,7,7,12,90,5,9,33,7
GEN=(generate --prompt-ids $P -n 8 --temp 0 --ignore-eos --output-format json -t 1)
LAUNCH=(mpirun -np 2 --oversubscribe)
ids() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])['generated_ids'])" 2>/dev/null; }

# the single-process reference of a fixture
ref() { "$M" "${GEN[@]}" -m $F/$1 --logits-out "$T/$1.ref.st" 2>"$T/err" | ids >"$T/$1.ref"; }
# name, fixture, flags...: under ${LAUNCH[@]}, the reference's ids and logits, one JSON line
same() {
  local n=$1 fam=$2; shift 2
  rm -f "$T/x.st"
  "${LAUNCH[@]}" "$M" "${GEN[@]}" -m $F/$fam --logits-out "$T/x.st" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  ids <"$T/out" >"$T/x"
  if [ $rc -eq 0 ] && [ "$(grep -c generated_ids "$T/out")" -eq 1 ] && [ "$(wc -l <"$T/out")" -eq 1 ] && cmp -s "$T/$fam.ref" "$T/x" &&
     python3 tests/lib/st_cmp.py "$T/$fam.ref.st" "$T/x.st" $BOUND >"$T/cmp" 2>&1; then ok "$n"
  else fail "$n" "rc $rc: $(cat "$T/$fam.ref" "$T/x" "$T/cmp" 2>/dev/null | tr '\n' ' ') $(grep -m2 . "$T/err" | tr '\n' ' ')"; fi
}
BOUND=
for fam in gpt2 llama mixtral jamba; do
  ref $fam || { fail "$fam/ref" "$(tail -1 "$T/err")"; continue; }
  [ $fam = gpt2 ] || same "$fam/pp2" $fam --pp 2 # (a stage boundary does not depend on the weights' format)
  # micro-batches (default --pp: the 12-token prompt in two runs, its second half reading the first's keys)
  case $fam in llama|jamba) same "$fam/pp2_micro1" $fam --pp 2 --pp-micro 1; same "$fam/pp2_micro5" $fam --pp 2 --pp-micro 5 ;; esac
  [ $fam = jamba ] || same "$fam/tp2" $fam --tp 2
done
# 4-bit weights, TP=2: with exact activations (MLXCEL_INT8=0) within 1e-4 of the single process; with the
# default 12-bit ones (AVX-512 VNNI) a sum the all-reduce rounds another way may code an activation one
# step apart, so there the bound is how far the 12-bit coding itself moves the single process's logits.
q=mlxq_affine_b4_g64
if ref $q && mv "$T/$q.ref.st" "$T/q12.st" && mv "$T/$q.ref" "$T/q12" && MLXCEL_INT8=0 ref $q; then
  LAUNCH=(mpirun -np 2 --oversubscribe -x MLXCEL_INT8=0)
  same $q/tp2_exact $q --tp 2
  mv "$T/$q.ref.st" "$T/qx.st"; mv "$T/q12.st" "$T/$q.ref.st"; mv "$T/q12" "$T/$q.ref"
  LAUNCH=(mpirun -np 2 --oversubscribe)
  BOUND="$T/$q.ref.st $T/qx.st" same $q/tp2 $q --tp 2
else fail $q/ref "$(tail -1 "$T/err")"; fi
LAUNCH=(mpirun -np 4 --oversubscribe)
same llama/tp2pp2 llama --tp 2 --pp 2
# Every causal fixture runs at TP=2, PP=2 and TP=2 x PP=2 in mpi_fixtures.sh; here the layouts it cannot
# reach with two parts: one KV head copied in four (llama-f16), two Mamba2 groups over four parts
# (granitemoehybrid)
for fam in llama-f16 granitemoehybrid; do
  ref $fam || { fail "$fam/ref" "$(tail -1 "$T/err")"; continue; }
  LAUNCH=(mpirun -np 4 --oversubscribe); same $fam/tp4 $fam --tp 4
done
LAUNCH=(mpirun -np 4 --oversubscribe)
# the embedding table split by vocabulary among the first stage's two parts, the head among the last
# stage's (-v names their rows; 320 / 2)
"${LAUNCH[@]}" "$M" "${GEN[@]}" -m $F/llama --tp 2 --pp 2 -v >/dev/null 2>"$T/err"
grep -q '^mpi: rank 0 (stage 0: layers 0-0, part 0, table rows 0-159)' "$T/err" && grep -q '^mpi: rank 1 (stage 0: layers 0-0, part 1, table rows 160-319)' "$T/err" &&
  grep -q '^mpi: rank 2 (stage 1: layers 1-1, part 0, head rows 0-159)' "$T/err" && grep -q '^mpi: rank 3 (stage 1: layers 1-1, part 1, head rows 160-319)' "$T/err" &&
  ok vocab_split || fail vocab_split "$(grep '^mpi:' "$T/err" | tr '\n' ' ')"
# a vocabulary that does not divide by T: 321 rows over two parts, 161 and 160 (a random model, untied head)
cat >"$T/v321.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 321, "max_position_embeddings": 256,
 "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2}
JSON
if build/mkmodel --config "$T/v321.json" -o "$T/v321" --dtype f32 --std 0.3 >/dev/null 2>"$T/err" && F=$T ref v321; then
  LAUNCH=(mpirun -np 2 --oversubscribe)
  F=$T same v321/tp2 v321 --tp 2 -v
  grep -q '^mpi: rank 0 (stage 0: layers 0-1, part 0, table rows 0-160, head rows 0-160)' "$T/err" &&
    grep -q '^mpi: rank 1 (stage 0: layers 0-1, part 1, table rows 161-320, head rows 161-320)' "$T/err" &&
    ok vocab_uneven || fail vocab_uneven "$(grep '^mpi:' "$T/err" | tr '\n' ' ')"
else fail v321/ref "$(tail -1 "$T/err")"; fi
LAUNCH=(mpirun -np 2 --oversubscribe)
# images: the vision tower runs on rank 0 alone, each pass carries the image rows it reads, the M-RoPE
# positions and the bidirectional spans to the others. Chunks of 8 tokens: an image's rows over several
# passes (gemma3's 16-token block in one pass of its own). gemma3 and qwen2_vl at TP=2 split the embedding
# table by vocabulary (an image row is then rank 0's part alone); qwen3_vl adds its DeepStack rows in the
# stage that holds those layers; aya_vision's head runs without the text model's logit scale, on the last
# stage's parts at TP=2 (rank 0 tells the others).
GEN0=("${GEN[@]}")
for fx in qwen2_vl gemma3 qwen3_vl aya_vision; do
  GEN=(generate --prompt-ids "$(python3 tests/lib/vlm_check.py ids $F/$fx/reference.safetensors)" --image $F/$fx/inputs/image.png
       -n 8 --temp 0 --ignore-eos --output-format json -t 1 --prefill-chunk 8)
  ref $fx || { fail "$fx/image_ref" "$(tail -1 "$T/err")"; continue; }
  [ $fx = aya_vision ] || same "$fx/image_pp2" $fx --pp 2
  same "$fx/image_tp2" $fx --tp 2
  if [ $fx = qwen3_vl ]; then
    LAUNCH=(mpirun -np 4 --oversubscribe)
    same "$fx/image_tp2pp2" $fx --tp 2 --pp 2
    LAUNCH=(mpirun -np 2 --oversubscribe)
  fi
done
GEN=("${GEN0[@]}")
# speculation by prompt lookup (qwen3 and this prompt: drafts kept and refused): a verification pass and
# its cut-back cache go through every rank; the plain single process's ids and logits. A draft model runs
# whole on rank 0 alone: the target itself (every draft kept) and llama's weights (same vocabulary, drafts
# refused: the target's cache cut back in every rank).
SG=(generate --prompt-ids 1,5,9,13,17,3,8 -n 40 --temp 0 --ignore-eos --output-format json -t 1 -m $F/qwen3)
"$M" "${SG[@]}" --logits-out "$T/sref.st" 2>/dev/null | ids >"$T/sref"
spec_same() { # name, python condition on the speculative counts (s), flags...
  local n=$1 cond=$2; shift 2
  mpirun -np 2 --oversubscribe "$M" "${SG[@]}" --logits-out "$T/s.st" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  ids <"$T/out" >"$T/s"
  if [ $rc -eq 0 ] && [ -s "$T/sref" ] && cmp -s "$T/sref" "$T/s" && python3 tests/lib/st_cmp.py "$T/sref.st" "$T/s.st" >"$T/cmp" 2>&1 &&
     python3 -c "import json,sys; s=json.loads(open(sys.argv[1]).read())['speculative']; sys.exit(not ($cond))" "$T/out"; then
    ok "$n"
  else fail "$n" "rc $rc: $(cat "$T/sref" "$T/s" "$T/cmp" 2>/dev/null | tr '\n' ' ') $(grep -m2 'speculative\|mlxcel' "$T/out" "$T/err" | tr '\n' ' ')"; fi
}
for d in "--tp 2" "--pp 2"; do
  # shellcheck disable=SC2086
  spec_same "qwen3/lookup_${d//[ -]/}" "s['accepted'] >= 1" --lookup-ngram 2 --draft-max 6 $d
  # shellcheck disable=SC2086
  spec_same "qwen3/draft_self_${d//[ -]/}" "s['drafted'] > 0 and s['accepted'] == s['drafted']" --draft-model $F/qwen3 --draft-max 4 $d
  # shellcheck disable=SC2086
  spec_same "qwen3/draft_other_${d//[ -]/}" "s['drafted'] > s['accepted']" --draft-model $F/llama --draft-max 4 $d
done

# the server under mpirun: rank 0 answers HTTP, the pipeline's second stage serves its passes; the
# completion is generate's text (the small chat model: llama fixture + test tokenizer)
mkdir -p "$T/chat"
cp tests/server/tinymodel/*.json $F/llama/model.safetensors "$T/chat/"
want=$("$M" generate -m "$T/chat" --prompt-ids 1,5,9,13,17,3,8 -n 6 --temp 0 --ignore-eos -t 1 --output-format json 2>/dev/null |
       python3 -c "import json,sys; print(json.dumps(json.loads(sys.stdin.read())['text']))")
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
mpirun -np 2 --oversubscribe "$M" serve -m "$T/chat" --port $port -t 1 -c 64 --pp 2 >"$T/srv.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$port/health >/dev/null 2>&1 && break; sleep 0.1; done
got=$(curl -s localhost:$port/v1/completions -H 'content-type: application/json' \
      -d '{"prompt":[1,5,9,13,17,3,8],"max_tokens":6,"temperature":0,"ignore_eos":true}' |
      python3 -c "import json,sys; print(json.dumps(json.loads(sys.stdin.read())['choices'][0]['text']))" 2>/dev/null)
# n = 3 samples of one prompt: each sample's cache is complete in every stage (the single process's replies)
nreq() { curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
  -d '{"prompt":[1,5,9,13,17,3,8],"max_tokens":6,"temperature":0.9,"seed":5,"n":3,"ignore_eos":true}' |
  python3 -c "import json,sys; print([c['text'] for c in json.load(sys.stdin)['choices']])" 2>&1; }
gotn=$(nreq $port)
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
if [ -n "$want" ] && [ "$want" = "$got" ]; then ok serve/pp2; else fail serve/pp2 "generate $want, served $got: $(tail -2 "$T/srv.out" | tr '\n' ' ')"; fi
"$M" serve -m "$T/chat" --port $((port + 1)) -t 1 -c 64 >"$T/srv1.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$((port + 1))/health >/dev/null 2>&1 && break; sleep 0.1; done
wantn=$(nreq $((port + 1)))
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
case "$wantn" in "['"*) [ "$wantn" = "$gotn" ] ;; *) false ;; esac && ok serve/pp2_n3 || fail serve/pp2_n3 "single process $wantn, mpirun $gotn"
# the server speculating under mpirun: the single process's greedy reply and logprobs, drafts kept
sreq() { curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
  -d '{"prompt":[1,5,9,13,17,3,8],"max_tokens":40,"temperature":0,"logprobs":1,"ignore_eos":true}'; }
mpirun -np 2 --oversubscribe "$M" serve -m "$T/chat" --port $port -t 1 -c 128 --pp 2 --lookup-ngram 3 >"$T/srv.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$port/health >/dev/null 2>&1 && break; sleep 0.1; done
gots=$(sreq $port); acc=$(curl -s localhost:$port/metrics | awk '$1 == "mlxcel_spec_accepted_tokens_total" {print $2}')
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
"$M" serve -m "$T/chat" --port $((port + 1)) -t 1 -c 128 >"$T/srv1.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$((port + 1))/health >/dev/null 2>&1 && break; sleep 0.1; done
wants=$(sreq $((port + 1)))
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
w=$(printf '%s' "$wants" | python3 -c "import json,sys; c=json.load(sys.stdin)['choices'][0]; print(json.dumps([c['text'], c['logprobs']]))" 2>&1)
g=$(printf '%s' "$gots" | python3 -c "import json,sys; c=json.load(sys.stdin)['choices'][0]; print(json.dumps([c['text'], c['logprobs']]))" 2>&1)
case "$w" in '["'*) [ "$w" = "$g" ] && [ "${acc:-0}" -gt 0 ] ;; *) false ;; esac && ok serve/pp2_lookup ||
  fail serve/pp2_lookup "accepted '$acc': $(printf '%s' "$g" | head -c 200) vs $(printf '%s' "$w" | head -c 200)"
# a draft model in the PP=2 server: on rank 0 alone, outside the passes the ranks share (Mistral's weights
# with the chat model's tokenizer: most drafts refused, its sliding-window cache cut back from a ring)
mkdir -p "$T/draft"
cp tests/server/tinymodel/tokenizer*.json $F/mistral/config.json $F/mistral/model.safetensors "$T/draft/"
mpirun -np 2 --oversubscribe "$M" serve -m "$T/chat" --port $port -t 1 -c 128 --pp 2 --draft-model "$T/draft" --draft-max 4 >"$T/srv.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$port/health >/dev/null 2>&1 && break; sleep 0.1; done
gotd=$(sreq $port); dr=$(curl -s localhost:$port/metrics | awk '$1 == "mlxcel_spec_draft_tokens_total" {print $2}')
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
g=$(printf '%s' "$gotd" | python3 -c "import json,sys; c=json.load(sys.stdin)['choices'][0]; print(json.dumps([c['text'], c['logprobs']]))" 2>&1)
case "$w" in '["'*) [ "$w" = "$g" ] && [ "${dr:-0}" -gt 0 ] ;; *) false ;; esac && ok serve/pp2_draft ||
  fail serve/pp2_draft "drafted '$dr': $(printf '%s' "$g" | head -c 200) vs $(printf '%s' "$w" | head -c 200) $(grep -m2 'mlxcel serve: [^GP]' "$T/srv.out" | tr '\n' ' ')"
# an image in a chat request (gemma3 and a template that writes image parts): the PP=2 and TP=2 servers give
# the single server's reply (PP=2: its logprobs too; TP=2 sums in another order)
V=$F/gemma3
python3 - $V/inputs/image.png >"$T/vreq.json" <<'PY'
import base64, json, sys
u = "data:image/png;base64," + base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}}, {"type": "text", "text": "Describe this image."}]}],
                  "max_tokens": 12, "temperature": 0, "logprobs": True, "top_logprobs": 1}))
PY
vserve() { # port, launcher (words; "" for none), flags...: the reply's [text, logprobs], the server stopped
  local p=$1 launch=$2; shift 2
  # shellcheck disable=SC2086
  $launch "$M" serve -m $V --chat-template-file tests/server/vision_template.jinja --port $p -t 1 -c 256 "$@" >"$T/vsrv.out" 2>&1 &
  local pid=$!
  for i in $(seq 100); do curl -sf localhost:$p/health >/dev/null 2>&1 && break; sleep 0.1; done
  curl -s localhost:$p/v1/chat/completions -H 'content-type: application/json' -d @"$T/vreq.json" |
    python3 -c "import json,sys; c=json.load(sys.stdin)['choices'][0]; print(json.dumps([c['message']['content'], c['logprobs']]))" 2>&1
  kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null
}
text_of() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[0])" "$1" 2>&1; }
vw=$(vserve $((port + 1)) "")
vg=$(vserve $port "mpirun -np 2 --oversubscribe" --pp 2)
case "$vw" in '["'*) [ "$vw" = "$vg" ] ;; *) false ;; esac && ok serve/pp2_image ||
  fail serve/pp2_image "$(printf '%s' "$vg" | head -c 200) vs $(printf '%s' "$vw" | head -c 200) $(grep -m2 'mlxcel serve: [^GP]' "$T/vsrv.out" | tr '\n' ' ')"
vg=$(vserve $port "mpirun -np 2 --oversubscribe" --tp 2)
case "$vw" in '["'*) [ "$(text_of "$vw")" = "$(text_of "$vg")" ] ;; *) false ;; esac && ok serve/tp2_image ||
  fail serve/tp2_image "$(printf '%s' "$vg" | head -c 200) vs $(printf '%s' "$vw" | head -c 200) $(grep -m2 'mlxcel serve: [^GP]' "$T/vsrv.out" | tr '\n' ' ')"

# micro-batches split a pass: the prompt pass in 3 runs is 2 more messages each way than in one
msgs() { mpirun -np 2 --oversubscribe "$M" "${GEN[@]}" -m $F/llama --pp 2 --pp-micro $1 -n 1 -v 2>&1 >/dev/null |
  sed -n 's/^mpi: rank 0 .*passes, \([0-9]*\) messages.*/\1/p'; }
m1=$(msgs 1); m3=$(msgs 3)
[ -n "$m1" ] && [ -n "$m3" ] && [ $((m3 - m1)) -eq 2 ] && ok micro_messages || fail micro_messages "micro 1: '$m1' messages, micro 3: '$m3'"
# a micro-batched server's continuous batch: four greedy requests at once (one decode pass of four rows in
# two runs; prompts cut across runs) get the single server's replies
creq() { for p in "1,5,9,13,17,3,8" "2,6,10" "4,4,4,4,4,4,4,4,4" "7,3"; do
    curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
      -d "{\"prompt\":[$p],\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true}" >"$T/c$1_${p//,/_}" &
  done; wait
  for p in "1,5,9,13,17,3,8" "2,6,10" "4,4,4,4,4,4,4,4,4" "7,3"; do
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'][0]['text'])" "$T/c$1_${p//,/_}" 2>&1; done; }
mpirun -np 2 --oversubscribe "$M" serve -m "$T/chat" --port $port -t 1 -c 64 -np 4 --pp 2 --pp-micro 2 >"$T/srv.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$port/health >/dev/null 2>&1 && break; sleep 0.1; done
gotc=$(creq $port)
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
"$M" serve -m "$T/chat" --port $((port + 1)) -t 1 -c 64 -np 4 >"$T/srv1.out" 2>&1 &
srv=$!
for i in $(seq 100); do curl -sf localhost:$((port + 1))/health >/dev/null 2>&1 && break; sleep 0.1; done
wantc=$(creq $((port + 1)))
kill -INT $srv 2>/dev/null; wait $srv 2>/dev/null
[ "$(printf '%s\n' "$wantc" | grep -c .)" -ge 4 ] && ! grep -q Traceback <<<"$wantc" && [ "$wantc" = "$gotc" ] && ok serve/pp2_micro_batch ||
  fail serve/pp2_micro_batch "single $(printf '%s' "$wantc" | head -c 200) vs mpirun $(printf '%s' "$gotc" | head -c 200)"

# chat under mpirun: rank 0 reads the two turns from stdin and prints the replies, the other rank serves its
# part of each pass and ends with it (EOF, /exit); the replies are the single-process chat's (greedy), a
# failed /image (no such file) changes nothing
CHAT=(chat -m "$T/chat" --temp 0 -n 8 -t 1)
printf 'hello there\nhow are you\n' | "$M" "${CHAT[@]}" >"$T/chat.ref" 2>"$T/err"
chat_same() { # name, stdin, flags...
  local n=$1 in=$2; shift 2
  printf "$in" | timeout 60 mpirun -np 2 --oversubscribe "$M" "${CHAT[@]}" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l <"$T/chat.ref")" -eq 2 ] && cmp -s "$T/chat.ref" "$T/out" && [ "$(grep -c '^mlxcel chat:' "$T/err")" -eq 1 ]; then ok "$n"
  else fail "$n" "rc $rc: $(head -c 200 "$T/chat.ref" | od -c | head -2) vs $(head -c 200 "$T/out" | od -c | head -2) $(grep -m3 . "$T/err" | tr '\n' ' ')"; fi
}
chat_same chat/pp2 'hello there\nhow are you\n' --pp 2
chat_same chat/tp2 'hello there\n/image x.png\nhow are you\n/exit\n' --tp 2
# /image: rank 0 reads and encodes the image, the passes carry its rows (gemma3: the single process's reply)
VCHAT=(chat -m $F/gemma3 --chat-template-file tests/server/vision_template.jinja -n 12 --temp 0 -t 1)
printf '/image %s\nDescribe this image.\n/exit\n' $F/gemma3/inputs/image.png | "$M" "${VCHAT[@]}" >"$T/vchat.ref" 2>/dev/null
printf '/image %s\nDescribe this image.\n/exit\n' $F/gemma3/inputs/image.png |
  timeout 60 mpirun -np 2 --oversubscribe "$M" "${VCHAT[@]}" --pp 2 >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -eq 0 ] && [ -s "$T/vchat.ref" ] && cmp -s "$T/vchat.ref" "$T/out" && grep -qF '[image attached' "$T/err"; then ok chat/pp2_image
else fail chat/pp2_image "rc $rc: $(head -c 200 "$T/vchat.ref") vs $(head -c 200 "$T/out") $(grep -m3 . "$T/err" | tr '\n' ' ')"; fi

# bench under mpirun: one JSON report, from rank 0
mpirun -np 2 --oversubscribe "$M" bench -m $F/llama -p 8 -n 4 -r 1 -t 1 --tp 2 --bw-mb 16 --json >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '"tg_tps"' "$T/out")" -eq 1 ]; then ok bench/tp2; else fail bench/tp2 "rc $rc: $(head -c 300 "$T/out") $(grep -m2 . "$T/err")"; fi
# at a depth: the depth's prefill and every cut back to it go through both ranks
mpirun -np 2 --oversubscribe "$M" bench -m $F/llama -d 64 -p 8 -n 4 -r 2 -t 1 --pp 2 --bw-mb 16 --json >"$T/out" 2>"$T/err"; rc=$?
python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read()); sys.exit(not (d['n_depth'] == 64 and d['pp_tps'] > 0 and d['tg_tps'] > 0))" "$T/out" 2>/dev/null &&
  [ $rc -eq 0 ] && ok bench/pp2_depth || fail bench/pp2_depth "rc $rc: $(head -c 300 "$T/out") $(grep -m2 . "$T/err")"
# --depth-random: every process fills its part of the cache (the same seed), q8_0 rows at TP=2 x PP=2
mpirun -np 4 --oversubscribe "$M" bench -m $F/llama -d 64 --depth-random -p 8 -n 4 -r 2 -t 1 --tp 2 --pp 2 --bw-mb 16 --kv-bits 8 --json \
  >"$T/out" 2>"$T/err"; rc=$?
python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read()); sys.exit(not (d['n_depth'] == 64 and d['pp_tps'] > 0 and d['tg_tps'] > 0))" "$T/out" 2>/dev/null &&
  [ $rc -eq 0 ] && ok bench/tp2pp2_depth_random || fail bench/tp2pp2_depth_random "rc $rc: $(head -c 300 "$T/out") $(grep -m2 . "$T/err")"
# its oracle drafter: every draft kept, the speculative run's output the plain one's
mpirun -np 2 --oversubscribe "$M" bench -m $F/llama -p 0 -n 24 -r 2 -t 1 --tp 2 --bw-mb 16 --spec-oracle --json >"$T/out" 2>"$T/err"; rc=$?
python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['speculative']; sys.exit(not (s['acceptance'] == 1 and s['runs_differing'] == 0))" "$T/out" 2>/dev/null &&
  [ $rc -eq 0 ] && ok bench/tp2_oracle || fail bench/tp2_oracle "rc $rc: $(head -c 300 "$T/out") $(grep -m2 . "$T/err")"

# refusals: one line from rank 0, non-zero exit
refuse() { # name, pattern, np, flags...
  local n=$1 pat=$2 np=$3; shift 3
  mpirun -np $np --oversubscribe "$M" "${GEN[@]}" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  local lines; lines=$(grep -c '^mlxcel' "$T/err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "$pat" "$T/err" && [ ! -s "$T/out" ]; then ok "$n"
  else fail "$n" "rc $rc, $lines lines: $(grep -m3 . "$T/err" | tr '\n' ' ')"; fi
}
refuse world_size "needs 2 processes, but mpirun started 3" 3 -m $F/llama --tp 2
refuse tp_recurrent "zamba2 layer 1 runs a 'zamba' mixer, which cannot be split" 2 -m $F/zamba2 --tp 2
refuse tp_heads "jamba has 3 attention heads and 1 KV heads: the attention heads must divide by 2" 2 -m $F/jamba --tp 2
# a checkpoint whose second half lacks a tensor: only rank 1 (stage 1) fails to load
mkdir -p "$T/broken"
cp $F/llama/config.json $F/llama/generation_config.json "$T/broken/"
python3 - $F/llama/model.safetensors "$T/broken/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
del h["model.layers.1.mlp.down_proj.weight"]
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
refuse rank_load "rank 1 (stage 1, part 0): .*model.layers.1.mlp.down_proj" 2 -m "$T/broken" --pp 2
# a vision tower rank 0 (alone) cannot open: its one line, every rank stops
mkdir -p "$T/badvis"
for f in $F/gemma3/*; do ln -s "$PWD/$f" "$T/badvis/"; done
rm "$T/badvis/config.json"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['vision_config']['num_hidden_layers'] = 0; json.dump(c, open(sys.argv[2], 'w'))" \
  $F/gemma3/config.json "$T/badvis/config.json"
refuse vision_rank0 "badvis/config.json: num_hidden_layers: value 0" 2 -m "$T/badvis" --pp 2

# a rank that dies: the job stops (mpirun names the rank and exits non-zero), nothing hangs. The chat's
# rank 0 waits for input while rank 1 is killed.
mkfifo "$T/in"
sleep 60 >"$T/in" & holder=$!
timeout 60 mpirun -np 2 --oversubscribe "$M" chat -m "$T/chat" --tp 2 -t 1 -n 4 --temp 0 <"$T/in" >"$T/out" 2>"$T/err" & job=$!
victim=
for i in $(seq 100); do
  for p in $(pgrep -f "$M chat -m $T/chat"); do
    [ "$(tr '\0' '\n' </proc/$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = 1 ] && victim=$p
  done
  [ -n "$victim" ] && break; sleep 0.1
done
sleep 1; [ -n "$victim" ] && kill -9 "$victim"
wait $job; rc=$?; kill $holder 2>/dev/null
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'rank 1 .*exited on signal 9' "$T/err"; then ok rank_dies
else fail rank_dies "victim '$victim', rc $rc: $(grep -m3 . "$T/err" | tr '\n' ' ')"; fi

# two hosts: one rank in each of two network namespaces joined by a veth pair
if ip netns add ${NS}a 2>/dev/null && ip netns add ${NS}b 2>/dev/null &&
   ip link add ${NS}x type veth peer name ${NS}y 2>/dev/null &&
   ip link set ${NS}x netns ${NS}a && ip link set ${NS}y netns ${NS}b &&
   ip -n ${NS}a addr add 10.233.0.1/24 dev ${NS}x && ip -n ${NS}b addr add 10.233.0.2/24 dev ${NS}y &&
   ip -n ${NS}a link set ${NS}x up && ip -n ${NS}b link set ${NS}y up &&
   ip -n ${NS}a link set lo up && ip -n ${NS}b link set lo up; then
  # the "remote shell" that starts Open MPI's daemon on host 10.233.0.2 runs it in namespace b
  cat >"$T/nsrsh" <<EOF
#!/bin/sh
host=\$1; shift
[ "\$host" = 10.233.0.2 ] || { echo "nsrsh: unknown host \$host" >&2; exit 1; }
exec ip netns exec ${NS}b sh -c "\$*"
EOF
  chmod +x "$T/nsrsh"
  printf '10.233.0.1 slots=1\n10.233.0.2 slots=1\n' >"$T/hosts"
  LAUNCH=(ip netns exec ${NS}a mpirun -np 2 --hostfile "$T/hosts" --mca plm_rsh_agent "$T/nsrsh"
          --mca btl tcp,self --mca btl_tcp_if_include 10.233.0.0/24 --mca oob_tcp_if_include 10.233.0.0/24)
  same two_hosts/tp2 llama --tp 2
  same two_hosts/pp2_micro llama --pp 2 --pp-micro 3 # non-blocking sends over TCP, moved on between layers
else
  echo "skip mpi/two_hosts: cannot create network namespaces here"
fi
