#!/usr/bin/env bash
# mlxcel embed / rerank: the CLI contract on the encoder fixtures. Hidden
# states and pooler output (--hidden-out) and cross-encoder logits against the
# Hugging Face references, output formats, batching, pooling/dimensions
# options, truncation, text input through a tokenizer, and clean errors.
set -u
cd "$(dirname "$0")/../.."
here=tests/cli
MLXCEL=${MLXCEL:-build/mlxcel}
F=tests/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }

# ids of a fixture's reference tensor (valid positions only), comma-separated
ref_ids() { # fixture tensor
  python3 - "$F/$1/reference.safetensors" "$2" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
def get(k):
    s, e = h[k]['data_offsets']; return struct.unpack('<%dq' % ((e - s) // 8), b[8 + n + s:8 + n + e])
mask = get('attention_mask')
print(','.join(str(v) for v, m in zip(get(sys.argv[2]), mask) if m))
EOF
}

# compares tensors of two safetensors files over the first `rows` rows: name tol
st_close() { # got ref name rows
  python3 - "$@" <<'EOF'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); return b, n, h
def get(f, k):
    b, n, h = f; t = h[k]; s, e = t['data_offsets']
    return t['shape'], struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
got, ref, name, rows = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3], int(sys.argv[4])
gs, g = get(got, name); rs, r = get(ref, name)
w = rs[-1] if len(rs) > 1 else len(r)
k = rows * w if len(rs) > 1 else len(r)
if len(gs) > 1 and gs[-1] != w: print('shape', gs, rs); sys.exit(1)
tol = 1e-4 * max(1.0, max(abs(x) for x in r))
d = max(abs(a - b) for a, b in zip(g[:k], r[:k]))
if len(g) < k or d > tol: print('max diff %g > %g (%d values)' % (d, tol, len(g))); sys.exit(1)
EOF
}

# --- embed --hidden-out: last_hidden_state / pooler_output vs the references
for fx in bert-embed xlm-roberta-embed modernbert-embed embeddinggemma; do
  ids=$(ref_ids $fx input_ids)
  types=""
  [ $fx = bert-embed ] && types="--token-type-ids $(ref_ids $fx token_type_ids)"
  rows=$(echo "$ids" | tr ',' '\n' | wc -l)
  if ! "$MLXCEL" embed -m $F/$fx --prompt-ids "$ids" $types --hidden-out "$tmp/h.st" >/dev/null 2>"$tmp/err"; then
    fail "embed hidden-out $fx" "$(head -c 300 "$tmp/err")"; continue
  fi
  if msg=$(st_close "$tmp/h.st" $F/$fx/reference.safetensors last_hidden_state $rows); then ok "embed hidden-out $fx last_hidden_state"
  else fail "embed hidden-out $fx last_hidden_state" "$msg"; fi
  if [ $fx != modernbert-embed ] && [ $fx != embeddinggemma ]; then
    if msg=$(st_close "$tmp/h.st" $F/$fx/reference.safetensors pooler_output 1); then ok "embed hidden-out $fx pooler_output"
    else fail "embed hidden-out $fx pooler_output" "$msg"; fi
  elif python3 -c "import sys,json,struct;b=open('$tmp/h.st','rb').read();n=struct.unpack('<Q',b[:8])[0];sys.exit('pooler_output' in json.loads(b[8:8+n]))"; then
    ok "embed hidden-out $fx has no pooler_output"
  else fail "embed hidden-out $fx" "wrote a pooler_output for a model without a pooler"; fi
done

# --- EmbeddingGemma (bidirectional Gemma 3): the default pooling of a bidirectional model is the mean of
# the valid rows of the reference hidden states, and the server's /v1/embeddings serves the same vector
G=$F/embeddinggemma
gids=$(ref_ids embeddinggemma input_ids)
mean_close() { # json-file
  python3 - "$1" $G/reference.safetensors <<'EOF'
import json, struct, sys
j = json.load(open(sys.argv[1])); v = j['embeddings'][0] if 'embeddings' in j else j['data'][0]['embedding']
b = open(sys.argv[2], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
def get(k, f):
    s, e = h[k]['data_offsets']; return struct.unpack('<%d%s' % ((e - s) // struct.calcsize(f), f), b[8 + n + s:8 + n + e])
mask, hid = get('attention_mask', 'q'), get('last_hidden_state', 'f'); H = len(v)
rows = [hid[t * H:(t + 1) * H] for t in range(len(mask)) if mask[t]]
ref = [sum(r[i] for r in rows) / len(rows) for i in range(H)]
tol = 1e-4 * max(1.0, max(abs(x) for x in hid))
d = max(abs(a - b) for a, b in zip(v, ref))
if d > tol: print('max diff %g > %g' % (d, tol)); sys.exit(1)
EOF
}
if "$MLXCEL" embed -m $G --prompt-ids "$gids" --output-format json >"$tmp/g.json" 2>"$tmp/err" && msg=$(mean_close "$tmp/g.json"); then
  ok "embed embeddinggemma: bidirectional, mean pooling of the reference rows"
else fail "embed embeddinggemma" "$msg $(head -c 300 "$tmp/err")"; fi
mkdir -p "$tmp/eg" # a server needs a tokenizer: the test WordPiece (tests/server/tinybert) over the fixture ids
cp $G/config.json $G/model.safetensors tests/server/tinybert/tokenizer.json "$tmp/eg/"
gport=$((${MX_PORT_BASE:-$((20000 + RANDOM % 12000))} + 25))
"$MLXCEL" serve -m "$tmp/eg" --port $gport -t 1 2>"$tmp/gserve.log" & gpid=$!
for i in $(seq 1 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$gport/health')" 2>/dev/null && break; sleep 0.1
done
if python3 - $gport "$gids" "$tmp/gs.json" <<'EOF'
import json, sys, urllib.request
body = json.dumps({"input": [[int(x) for x in sys.argv[2].split(',')]], "encoding_format": "float"}).encode()
r = urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:%s/v1/embeddings' % sys.argv[1], body, {'content-type': 'application/json'}))
open(sys.argv[3], 'w').write(r.read().decode())
EOF
then
  if msg=$(mean_close "$tmp/gs.json") && python3 -c "import json,sys; a=json.load(open('$tmp/gs.json'))['data'][0]['embedding']; b=json.load(open('$tmp/g.json'))['embeddings'][0]; sys.exit(max(abs(x-y) for x,y in zip(a,b)) > 1e-6)"; then
    ok "serve embeddinggemma: /v1/embeddings equals the CLI and the reference"
  else fail "serve embeddinggemma" "$msg"; fi
else fail "serve embeddinggemma" "$(tail -3 "$tmp/gserve.log")"; fi
kill -TERM $gpid 2>/dev/null; wait $gpid 2>/dev/null

# --- rerank logits vs the references (json: logits, scores = sigmoid)
for fx in bert-cls xlm-roberta-cls modernbert-cls; do
  ids=$(ref_ids $fx input_ids)
  types=""
  [ $fx = bert-cls ] && types="--token-type-ids $(ref_ids $fx token_type_ids)"
  if ! "$MLXCEL" rerank -m $F/$fx --prompt-ids "$ids" $types --output-format json >"$tmp/r.json" 2>"$tmp/err"; then
    fail "rerank $fx" "$(head -c 300 "$tmp/err")"; continue
  fi
  if msg=$(python3 - "$tmp/r.json" $F/$fx/reference.safetensors <<'EOF'
import json, math, struct, sys
j = json.load(open(sys.argv[1]))
b = open(sys.argv[2], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
s, e = h['logits']['data_offsets']; ref = struct.unpack('<f', b[8 + n + s:8 + n + e])[0]
tol = 1e-4 * max(1, abs(ref)); lg, sc = j['logits'][0], j['scores'][0]
if abs(lg - ref) > tol or abs(sc - 1 / (1 + math.exp(-ref))) > tol or j['ranking'] != [0]:
    print('logit %g ref %g score %g' % (lg, ref, sc)); sys.exit(1)
EOF
  ); then ok "rerank $fx logits and scores"; else fail "rerank $fx" "$msg"; fi
done

# --- LFM2.5-Embedding-style bidirectional LFM2 (the lfm2 fixture's weights): hidden states against a
# plain-Python reference of transformers' Lfm2BidirectionalModel (tests/cli/lfm2_bidir_ref.py), under
# model_type lfm2_bidirectional and under lfm2 with an Lfm2BidirectionalModel architecture
lids=2,17,45,3,200,91,8,150,33,61,5,270,19
python3 $here/lfm2_bidir_ref.py $F/lfm2 $lids "$tmp/lfm2_ref.st"
for mt in lfm2_bidirectional lfm2; do
  mkdir -p "$tmp/lfm2bi_$mt"
  ln -sf "$PWD/$F/lfm2/model.safetensors" "$tmp/lfm2bi_$mt/"
  python3 -c "import json,sys; c=json.load(open('$F/lfm2/config.json')); c['model_type']='$mt'; c['architectures']=['Lfm2BidirectionalModel']; json.dump(c, open('$tmp/lfm2bi_$mt/config.json','w'))"
  if "$MLXCEL" embed -m "$tmp/lfm2bi_$mt" --prompt-ids $lids --hidden-out "$tmp/lh.st" >/dev/null 2>"$tmp/err" &&
     msg=$(st_close "$tmp/lh.st" "$tmp/lfm2_ref.st" last_hidden_state 13); then ok "embed bidirectional lfm2 ($mt): hidden states equal the reference"
  else fail "embed bidirectional lfm2 ($mt)" "$msg $(head -c 300 "$tmp/err")"; fi
done

# --- embed output formats, batching, options
B=$F/bert-embed
if "$MLXCEL" embed -m $B --prompt-ids 2,10,11,3 --prompt-ids 2,20,21,22,23,3 --prompt-ids 2,30,3 --output-format json >"$tmp/all.json" 2>"$tmp/err" &&
   "$MLXCEL" embed -m $B --prompt-ids 2,20,21,22,23,3 --output-format json >"$tmp/one.json" 2>>"$tmp/err" &&
   python3 - "$tmp/all.json" "$tmp/one.json" <<'EOF'
import json, sys
a, o = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a['dim'] == 64 and len(a['embeddings']) == 3 and a['tokens'] == [4, 6, 3], (a['dim'], a['tokens'])
assert all(len(v) == 64 for v in a['embeddings'])
assert a['embeddings'][1] == o['embeddings'][0], 'batched differs from single'
EOF
then ok "embed json: three inputs, batched equals single"; else fail "embed json batching" "$(head -c 300 "$tmp/err")"; fi

if out=$("$MLXCEL" embed -m $B --prompt-ids 2,10,11,3 --prompt-ids 2,30,3 2>"$tmp/err") &&
   [ "$(echo "$out" | wc -l)" = 2 ] && [ "$(echo "$out" | head -1 | wc -w)" = 64 ]; then ok "embed text: one line of 64 values per input"
else fail "embed text" "$(echo "$out" | head -c 200) $(head -c 200 "$tmp/err")"; fi

if out=$("$MLXCEL" embed -m $B --prompt-ids 2,10,11,3 --dimensions 8 2>"$tmp/err") && [ "$(echo "$out" | wc -w)" = 8 ] &&
   full=$("$MLXCEL" embed -m $B --prompt-ids 2,10,11,3 2>>"$tmp/err") && [ "$(echo "$full" | cut -d' ' -f1-8)" = "$out" ]; then
  ok "embed --dimensions 8 keeps the first 8 values"
else fail "embed --dimensions" "$out $(head -c 200 "$tmp/err")"; fi

if "$MLXCEL" embed -m $B --prompt-ids 2,10,11,12,3 --pooling cls --output-format json >"$tmp/cls.json" 2>"$tmp/err" &&
   "$MLXCEL" embed -m $B --prompt-ids 2,10,11,12,3 --pooling none --output-format json >"$tmp/none.json" 2>>"$tmp/err" &&
   "$MLXCEL" embed -m $B --prompt-ids 2,10,11,12,3 --pooling mean --output-format json >"$tmp/mean.json" 2>>"$tmp/err" &&
   python3 - "$tmp/cls.json" "$tmp/none.json" "$tmp/mean.json" <<'EOF'
import json, sys
c, n, m = (json.load(open(p)) for p in sys.argv[1:4])
rows = n['embeddings'][0]
assert len(rows) == 5 and all(len(r) == 64 for r in rows), 'pooling none shape'
assert max(abs(a - b) for a, b in zip(c['embeddings'][0], rows[0])) < 1e-6, 'cls != row 0'
mean = [sum(r[i] for r in rows) / 5 for i in range(64)]
assert max(abs(a - b) for a, b in zip(m['embeddings'][0], mean)) < 1e-5, 'mean != mean of rows'
EOF
then ok "embed --pooling cls / mean / none agree with the token states"; else fail "embed --pooling" "$(head -c 300 "$tmp/err")"; fi

# truncation: bert-embed has 64 positions
long=$(seq -s, 5 74) # 70 ids
if out=$("$MLXCEL" embed -m $B --prompt-ids "$long" --output-format json 2>"$tmp/err") && echo "$out" | grep -q '"tokens":\[64\]'; then
  ok "embed truncates inputs over the maximum length"
else fail "embed truncation" "$(head -c 300 "$tmp/err")"; fi
if "$MLXCEL" embed -m $B --prompt-ids "$long" --no-truncate >/dev/null 2>"$tmp/err"; then fail "embed --no-truncate" "accepted 70 tokens"
elif grep -q "more than the maximum 64" "$tmp/err"; then ok "embed --no-truncate refuses long inputs"
else fail "embed --no-truncate" "$(cat "$tmp/err")"; fi

# --- text input through a tokenizer (a tiny WordPiece over the fixture vocabulary)
for fx in bert-embed bert-cls; do
  mkdir -p "$tmp/$fx"
  ln -s "$PWD/$F/$fx/config.json" "$PWD/$F/$fx/model.safetensors" "$tmp/$fx/"
  python3 - "$tmp/$fx/tokenizer.json" <<'EOF'
import json, sys
special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
words = ["hello", "world", "the", "cat", "sat", "on", "mat", "dog", "runs", "fast", "##s"]
vocab = {w: i for i, w in enumerate(special + words)}
tp = lambda seqs: [x for s in seqs for x in s]
cls = {"SpecialToken": {"id": "[CLS]", "type_id": 0}}
sep = lambda t: {"SpecialToken": {"id": "[SEP]", "type_id": t}}
seq = lambda n, t: {"Sequence": {"id": n, "type_id": t}}
tok = {"version": "1.0", "truncation": None, "padding": None,
       "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                         "normalized": False, "special": True} for i, s in enumerate(special)],
       "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
       "pre_tokenizer": {"type": "BertPreTokenizer"},
       "post_processor": {"type": "TemplateProcessing", "single": [cls, seq("A", 0), sep(0)],
                          "pair": [cls, seq("A", 0), sep(0), seq("B", 1), sep(1)],
                          "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                             "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
       "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
       "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                 "max_input_chars_per_word": 100, "vocab": vocab}}
json.dump(tok, open(sys.argv[1], "w"))
EOF
done
if a=$("$MLXCEL" embed -m "$tmp/bert-embed" -p "Hello world" -p "the cats" 2>"$tmp/err") &&
   b=$("$MLXCEL" embed -m "$tmp/bert-embed" --prompt-ids 2,5,6,3 --prompt-ids 2,7,8,15,3 2>>"$tmp/err") && [ -n "$a" ] && [ "$a" = "$b" ]; then
  ok "embed -p TEXT tokenizes with the special tokens"
else fail "embed -p TEXT" "$(head -c 300 "$tmp/err")"; fi
words=$(printf 'hello %.0s' $(seq 70))
cut=2,$(printf '5,%.0s' $(seq 62))3
if a=$("$MLXCEL" embed -m "$tmp/bert-embed" -p "$words" 2>"$tmp/err") && b=$("$MLXCEL" embed -m "$tmp/bert-embed" --prompt-ids "$cut" 2>>"$tmp/err") &&
   [ -n "$a" ] && [ "$a" = "$b" ]; then ok "embed -p TEXT over the maximum keeps [CLS] and [SEP]"
else fail "embed -p TEXT truncation" "$(head -c 300 "$tmp/err")"; fi
err_case0() { if "$@" >/dev/null 2>"$tmp/err"; then fail "embed -p --no-truncate" "accepted"; elif grep -q "72 tokens, more than the maximum 64" "$tmp/err"; then ok "embed -p --no-truncate refuses long texts"; else fail "embed -p --no-truncate" "$(cat "$tmp/err")"; fi; }
err_case0 "$MLXCEL" embed -m "$tmp/bert-embed" -p "$words" --no-truncate
if a=$("$MLXCEL" rerank -m "$tmp/bert-cls" -q "the cat" -d "sat on the mat" -d "dog runs fast" --output-format json 2>"$tmp/err") &&
   b=$("$MLXCEL" rerank -m "$tmp/bert-cls" --prompt-ids 2,7,8,3,9,10,7,11,3 --token-type-ids 0,0,0,0,1,1,1,1,1 \
        --prompt-ids 2,7,8,3,12,13,14,3 --token-type-ids 0,0,0,0,1,1,1,1 --output-format json 2>>"$tmp/err") &&
   python3 -c "import json,sys; a,b=json.loads(sys.argv[1]),json.loads(sys.argv[2]); sys.exit(not (a['logits']==b['logits'] and a['scores']==b['scores']))" "$a" "$b"; then
  ok "rerank -q/-d pairs the texts as [CLS] q [SEP] d [SEP] with token types"
else fail "rerank -q/-d" "$a / $b $(head -c 300 "$tmp/err")"; fi
if out=$("$MLXCEL" rerank -m "$tmp/bert-cls" -q "the cat" -d "dog runs fast" -d "sat on the mat" -d "hello" 2>"$tmp/err") &&
   [ "$(echo "$out" | wc -l)" = 3 ] && echo "$out" | awk 'NR>1 && $2>prev {bad=1} {prev=$2} END {exit bad}' &&
   [ "$(echo "$out" | head -1 | cut -d' ' -f1)" = 1 ]; then ok "rerank text: documents sorted by score"
else fail "rerank text" "$out $(head -c 200 "$tmp/err")"; fi

# --- errors
err_case() { # name, expected message fragment, command...
  local name=$1 want=$2; shift 2
  if "$@" >/dev/null 2>"$tmp/err"; then fail "$name" "succeeded"
  elif grep -q -- "$want" "$tmp/err"; then ok "$name"
  else fail "$name" "$(head -c 300 "$tmp/err")"; fi
}
err_case "embed without -m" "-m MODEL is required" "$MLXCEL" embed --prompt-ids 1,2
err_case "embed -p and --prompt-ids together" "one of them" "$MLXCEL" embed -m $B -p hi --prompt-ids 1,2
err_case "embed token types count" "one per input" "$MLXCEL" embed -m $B --prompt-ids 2,3 --prompt-ids 2,3 --token-type-ids 0,0
err_case "embed token types length" "has 3 ids for 2 tokens" "$MLXCEL" embed -m $B --prompt-ids 2,3 --token-type-ids 0,0,0
err_case "embed bad pooling" "is not one of" "$MLXCEL" embed -m $B --prompt-ids 2,3 --pooling sum
err_case "embed -p without a tokenizer" "use --prompt-ids" "$MLXCEL" embed -m $B -p "hello"
err_case "embed --hidden-out with two inputs" "exactly one input" "$MLXCEL" embed -m $B --prompt-ids 2,3 --prompt-ids 2,3 --hidden-out "$tmp/x.st"
err_case "embed --dimensions too large" "64-dim" "$MLXCEL" embed -m $B --prompt-ids 2,3 --dimensions 65
err_case "embed token id out of range" "outside the vocabulary" "$MLXCEL" embed -m $B --prompt-ids 2,999,3
err_case "embed token type out of range" "token type id 2" "$MLXCEL" embed -m $B --prompt-ids 2,3 --token-type-ids 0,2
err_case "rerank with an embedding model" "not a one-label cross-encoder" "$MLXCEL" rerank -m $B --prompt-ids 2,3
err_case "rerank without documents" "at least one -d" "$MLXCEL" rerank -m $F/bert-cls -q "x"
err_case "rerank bad output format" "is not one of text|json" "$MLXCEL" rerank -m $F/bert-cls --prompt-ids 2,3 --output-format xml
err_case "generate with a bidirectional model" "attends bidirectionally" "$MLXCEL" generate -m $F/embeddinggemma --prompt-ids 2,3 -n 1
exit 0
