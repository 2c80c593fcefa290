#!/usr/bin/env bash
# Sliding-window layers keep a ring of rows (nn/attention.c kv_shape_of, issue
# 30 item 2): with 1100 positions the ring wraps, a 700-token prompt read in
# one 2048-token chunk goes by 512-token slices, and the logits of every
# prompt position and generated token equal, bit for bit, those of the whole
# cache (MLXCEL_KV_RING=0) on five families with windows, with q8_0 / q4_0
# rows, and on Gemma 3 with an image block across a slice boundary; the
# cache is smaller. The server: a second request sharing only
# the first 100 tokens of a wrapped slot starts over (the ring no longer
# holds what it would need), the next turn of the same conversation reuses
# it, and both replies equal a server without rings. Then --max-kv-size.
set -u
cd "$(dirname "$0")/../.."
PREFIX=kvring
. tests/lib/serve.sh
# the fixtures with a longer position limit (their windows: 16)
mk() { mkdir -p "$T/$1"; ln -s "$PWD/tests/fixtures/$1/model.safetensors" "$T/$1/"
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['max_position_embeddings']=4096; json.dump(c, open(sys.argv[2],'w'))" \
    tests/fixtures/$1/config.json "$T/$1/config.json"; }
P=$(python3 -c "print(','.join(str(3 + (i * 37) % 300) for i in range(700)))")
bytes() { sed -n 's/.*KV cache [^(]*(\([0-9]*\) bytes).*/\1/p' "$1" | head -1; }
run() { # family, name, flags...
  local fam=$1 n=$2; shift 2
  for mode in 1 0; do
    MLXCEL_KV_RING=$mode "$M" generate -m "$T/$fam" --prompt-ids "$P" -n 400 -t 2 --temp 0 --ignore-eos --prefill-chunk 2048 -c 1200 \
      --output-format json --logits-out "$T/$n.$mode.st" -v "$@" >/dev/null 2>"$T/$n.$mode.err"
  done
  local a b; a=$(bytes "$T/$n.1.err"); b=$(bytes "$T/$n.0.err")
  if [ -s "$T/$n.1.st" ] && cmp -s "$T/$n.1.st" "$T/$n.0.st" && [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; then ok "$n ($a vs $b bytes)"
  else fail "$n" "$(cmp "$T/$n.1.st" "$T/$n.0.st" 2>&1) ring $a bytes, whole $b $(grep -m1 mlxcel "$T/$n.1.err")"; fi
}
for fam in gemma2 gemma3_text cohere2 gpt_oss mistral; do mk $fam; run $fam $fam; done
run gemma2 gemma2_q8_0_q4_0 --cache-type-k q8_0 --cache-type-v q4_0
# Gemma 3 with an image whose 16-token block (seen both ways) straddles the first 512-token slice: the
# slice ends before the block
mkdir -p "$T/g3"; for f in tests/fixtures/gemma3/*; do ln -s "$PWD/$f" "$T/g3/"; done; rm "$T/g3/config.json"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['text_config']['max_position_embeddings']=4096; json.dump(c, open(sys.argv[2],'w'))" \
  tests/fixtures/gemma3/config.json "$T/g3/config.json"
PG=$(python3 - "$(python3 tests/lib/vlm_check.py ids tests/fixtures/gemma3/reference.safetensors)" <<'PY'
import sys
ids = sys.argv[1].split(",")
a, b = ids.index("400"), len(ids) - 1 - ids[::-1].index("400")  # the image tokens, with boi before and eoi after
pre = [str(3 + (i * 37) % 300) for i in range(500)]
post = [str(5 + (i * 11) % 250) for i in range(200)]
print(",".join(["2"] + pre + ids[a - 1:b + 2] + post))
PY
)
P=$PG run g3 gemma3_image --image tests/fixtures/gemma3/inputs/image.png

# the server, one slot
mkdir -p "$T/srv"; cp tests/server/tinymodel/*.json "$T/srv/"; cp "$T/mistral/config.json" "$T/srv/config.json"
ln -s "$PWD/tests/fixtures/mistral/model.safetensors" "$T/srv/"
port=${MX_PORT_BASE:-$((20000 + $$ % 12000))}
for mode in 1 0; do
  serve_up $((port + mode)) "$T/srv$mode.log" env MLXCEL_KV_RING=$mode "$M" serve -m "$T/srv" --port $((port + mode)) -t 2 -c 1500 -np 1 || exit 0
done
req() { curl -s localhost:$1/v1/completions -H 'content-type: application/json' \
  -d "{\"prompt\":[$2],\"max_tokens\":$3,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":1}"; }
pick() { python3 -c "import json,sys; d=json.load(sys.stdin); c=d['choices'][0]; print(json.dumps([c['text'], c['logprobs']['token_logprobs'], d['usage']['prompt_tokens_details']['cached_tokens']]))" 2>&1; }
B=$(python3 -c "print(','.join(str(3 + (i * 37) % 300) for i in range(100)) + ',' + ','.join(str(5 + (i * 11) % 250) for i in range(50)))")
for p in $port $((port + 1)); do
  req $p "$P" 300 | pick >"$T/a$p"
  req $p "$B" 8 | pick >"$T/b$p"
done
# text and logprobs alike (the cached counts differ by design)
eq() { python3 -c "import json,sys; a, b = (json.loads(open(p).read()) for p in sys.argv[1:3]); sys.exit(a[:2] != b[:2])" "$1" "$2"; }
same=1; for x in a b; do eq "$T/$x$port" "$T/$x$((port + 1))" || same=0; done
# (port + 1: the ring; port: the whole cache, which keeps the 100 tokens)
python3 -c "import json,sys; sys.exit(json.loads(open(sys.argv[1]).read())[2] != 0)" "$T/b$((port + 1))" && [ $same = 1 ] &&
  ok server_restart || fail server_restart "$(head -c 200 "$T/b$((port + 1))") vs $(head -c 200 "$T/b$port")"
# the same conversation again: its whole prompt is still in the ring
for p in $port $((port + 1)); do req $p "$B,7,7,7" 8 | pick >"$T/c$p"; done
python3 -c "import json,sys; sys.exit(json.loads(open(sys.argv[1]).read())[2] < 150)" "$T/c$((port + 1))" && eq "$T/c$port" "$T/c$((port + 1))" &&
  ok server_reuse || fail server_reuse "$(head -c 200 "$T/c$port") vs $(head -c 200 "$T/c$((port + 1))")"

# --max-kv-size N (mlx-lm's rotating cache): every causal layer reads the first 4 keys and the last N - 4.
# Below N positions the logits are the plain cache's; past them they differ, and are the same whether the
# rows sit in a ring (-c 1200) or in order (-c 1100, too short for one), and whatever the prefill chunk.
for fam in llama gemma2; do
  [ -d "$T/$fam" ] || mk $fam
  R=(generate -m "$T/$fam" --prompt-ids "$P" -n 400 -t 2 --temp 0 --ignore-eos --output-format json)
  "$M" "${R[@]}" --prefill-chunk 2048 -c 1200 --max-kv-size 64 --logits-out "$T/rot.st" -v >/dev/null 2>"$T/rot.err"
  "$M" "${R[@]}" --prefill-chunk 2048 -c 1100 --max-kv-size 64 --logits-out "$T/rot_flat.st" >/dev/null 2>&1
  "$M" "${R[@]}" --prefill-chunk 7 -c 1200 --max-kv-size 64 --logits-out "$T/rot7.st" >/dev/null 2>&1
  "$M" "${R[@]}" --prefill-chunk 2048 -c 1200 --logits-out "$T/plain.st" >/dev/null 2>&1
  msg=$(python3 - "$T/rot.st" "$T/plain.st" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    s, e = h["logits"]["data_offsets"]; V = h["logits"]["shape"][-1]
    x = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return [x[r * V:(r + 1) * V] for r in range(len(x) // V)]
a, b = load(sys.argv[1]), load(sys.argv[2])
same = [x == y for x, y in zip(a, b)]
print("ok" if all(same[:64]) and not any(same[64:]) else f"rows equal to plain: {sum(same[:64])} of the first 64, {sum(same[64:])} after")
PY
)
  if [ "$msg" = ok ] && cmp -s "$T/rot.st" "$T/rot_flat.st" && cmp -s "$T/rot.st" "$T/rot7.st"; then ok "max_kv_size/$fam"
  else fail "max_kv_size/$fam" "$msg; $(cmp "$T/rot.st" "$T/rot_flat.st" 2>&1) $(cmp "$T/rot.st" "$T/rot7.st" 2>&1) $(grep -m1 mlxcel "$T/rot.err")"; fi
done
