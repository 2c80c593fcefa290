#!/usr/bin/env bash
# build/mkmodel, the benchmark checkpoint writer: --bits writes the language
# model's matrices as MLX affine codes (U32 words, bf16 scales and biases of
# the right shapes, values with N(0, SD)'s spread), says so in config.json,
# and mlxcel loads and runs the result; the qwen3_vl writer names and sizes
# every tensor as the released layout does (checked against the qwen3_vl
# fixture, which Hugging Face wrote); bad options are refused in one line.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-$PWD/build/mlxcel}
K=build/mkmodel
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ok() { echo "ok mkmodel/$1"; }
fail() { echo "FAIL mkmodel/$1: $2"; }
[ -x $K ] || { fail setup "$K is not built (make build/mkmodel)"; exit 0; }

# the header of a safetensors file as JSON
hdr() { python3 -c "
import json, struct, sys
f = open(sys.argv[1], 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); h.pop('__metadata__', None)
print(json.dumps(h))" "$1"; }

$K --config tests/basemodel/config.json -o "$T/f" --seed 3 >/dev/null 2>"$T/err" || fail float "$(cat "$T/err")"
if $K --config tests/basemodel/config.json -o "$T/q" --seed 3 --bits 4 --group 32 >/dev/null 2>"$T/err"; then
  hdr "$T/f/model.safetensors" >"$T/f.json"; hdr "$T/q/model.safetensors" >"$T/q.json"
  if python3 - "$T/f.json" "$T/q.json" "$T/q/config.json" "$T/q/model.safetensors" <<'PY' >"$T/err" 2>&1; then ok bits_layout; else fail bits_layout "$(tail -3 "$T/err" | tr '\n' ' ')"; fi
import json, struct, sys, math
f, q, cfg = (json.load(open(p)) for p in sys.argv[1:4])
assert cfg["quantization"] == {"group_size": 32, "bits": 4} == cfg["quantization_config"], cfg.get("quantization")
n_q = 0
for name, t in f.items():
    if name.endswith(".weight") and len(t["shape"]) == 2:
        r, c = t["shape"]; base = name[:-7]; n_q += 1
        assert q[name]["dtype"] == "U32" and q[name]["shape"] == [r, c * 4 // 32], (name, q[name])
        for s in ("scales", "biases"):
            assert q[f"{base}.{s}"]["dtype"] == "BF16" and q[f"{base}.{s}"]["shape"] == [r, c // 32], (base, s)
    else:
        assert q[name]["dtype"] == t["dtype"] and q[name]["shape"] == t["shape"], name
assert len(q) == len(f) + 2 * n_q and n_q >= 8, (len(q), len(f), n_q)
# the dequantized values of one matrix: mean ~0, spread ~SD (0.02)
raw = open(sys.argv[4], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; base = 8 + n
def get(name):
    a, b = q[name]["data_offsets"]; return raw[base + a:base + b]
bf = lambda b: [struct.unpack("<f", b"\0\0" + b[i:i + 2])[0] for i in range(0, len(b), 2)]
w = "model.layers.0.mlp.down_proj"
codes, sc, bi = get(w + ".weight"), bf(get(w + ".scales")), bf(get(w + ".biases"))
r, c = f[w + ".weight"]["shape"]
vals = []
for i in range(r):
    words = struct.unpack(f"<{c // 8}I", codes[i * c // 2:(i + 1) * c // 2])
    for j in range(c):
        code = (words[j // 8] >> (4 * (j % 8))) & 15
        vals.append(sc[i * (c // 32) + j // 32] * code + bi[i * (c // 32) + j // 32])
mean = sum(vals) / len(vals); sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
assert abs(mean) < 0.004 and 0.018 < sd < 0.022, (mean, sd)
PY
  "$M" inspect "$T/q" >"$T/insp" 2>"$T/err"
  if grep -q "^quantized *affine, 4 bits, group 32" "$T/insp"; then ok bits_inspect; else fail bits_inspect "$(head -c 300 "$T/insp") $(cat "$T/err")"; fi
  if "$M" generate -m "$T/q" --prompt-ids 1,5,9 -n 4 --temp 0 --ignore-eos --output-format json -t 1 2>"$T/err" | grep -q '"generated_ids":\[[0-9]*,[0-9]*,[0-9]*,[0-9]*\]'; then
    ok bits_runs; else fail bits_runs "$(tail -1 "$T/err")"; fi
else
  fail bits "$(cat "$T/err")"
fi

# qwen3_vl: every tensor of the fixture (written by transformers) under the same name and size
if $K --config tests/fixtures/qwen3_vl/config.json -o "$T/q3" --seed 1 --dtype f32 >/dev/null 2>"$T/err"; then
  hdr "$T/q3/model.safetensors" >"$T/q3.json"; hdr tests/fixtures/qwen3_vl/model.safetensors >"$T/ref.json"
  if python3 - "$T/q3.json" "$T/ref.json" <<'PY' >"$T/err" 2>&1; then ok qwen3_vl_layout; else fail qwen3_vl_layout "$(tail -3 "$T/err" | tr '\n' ' ')"; fi
import json, sys, math
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert sorted(a) == sorted(b), (sorted(set(a) ^ set(b)))[:6]
for k in a:  # a convolution is written as [out, in * kernel]: compare sizes, and the first dimension
    assert math.prod(a[k]["shape"]) == math.prod(b[k]["shape"]) and a[k]["shape"][0] == b[k]["shape"][0], (k, a[k]["shape"], b[k]["shape"])
PY
  cp tests/fixtures/qwen3_vl/preprocessor_config.json "$T/q3/"
  if "$M" generate -m "$T/q3" --prompt-ids 1,5,9 -n 2 --temp 0 --ignore-eos --output-format json -t 1 >/dev/null 2>"$T/err"; then ok qwen3_vl_runs; else fail qwen3_vl_runs "$(tail -1 "$T/err")"; fi
else
  fail qwen3_vl "$(cat "$T/err")"
fi

# refusals: one line, exit 2
for bad in "--bits 7" "--group 48" "--bits"; do
  $K --config tests/basemodel/config.json -o "$T/bad" $bad >/dev/null 2>"$T/err"; rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ]; then ok "refuse${bad//[ -]/_}"; else fail "refuse${bad//[ -]/_}" "rc=$rc $(cat "$T/err")"; fi
done
