#!/usr/bin/env bash
# KV cache types on the command line (--cache-type-k/-v, --kv-bits): the
# cache's size by type from --verbose and bench --json, greedy output with an
# f16 cache equal to f32's on the llama fixture, the refusals, and the line
# for a model without attention caches. (The numerics: build/tests/test_kvcache.)
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-$PWD/build/mlxcel}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }
FX=tests/fixtures/llama # 2 layers, 2 kv heads of 16: a position is 2 * 2 * 2 rows of 16 values

gen() { "$MLXCEL" generate -m $FX --prompt-ids 5,17,42,99,7,3,250,11,5,17,42 -n 24 --ignore-eos -t 1 -v "$@"; }
gen >"$T/f32.out" 2>"$T/f32.err" || fail kv/generate_f32 "$(tail -1 "$T/f32.err")"
for spec in "f16|--cache-type-k f16 --cache-type-v f16" "q8_0|--kv-bits 8" "q4_0|--kv-bits 4" "mixed|--cache-type-k q8_0 --cache-type-v bf16"; do
  name=${spec%%|*}; args=${spec#*|}
  # shellcheck disable=SC2086
  if gen $args >"$T/$name.out" 2>"$T/$name.err"; then ok "kv/generate_$name"; else fail "kv/generate_$name" "$(tail -1 "$T/$name.err")"; fi
done
cmp -s "$T/f32.out" "$T/f16.out" && ok kv/f16_same_greedy_text || fail kv/f16_same_greedy_text "f16 cache output differs from f32's"
# cache sizes (the exact bytes --verbose prints): positions of 8 rows of 16 values: f32 64 B a row, f16 32, q8_0 one block 34, q4_0 18;
# each layer's K and V regions padded to 64 bytes
python3 - "$T" <<'PY'
import re, sys
t = sys.argv[1]
row = {"f32": (64, 64), "f16": (32, 32), "q8_0": (34, 34), "q4_0": (18, 18), "mixed": (34, 32)}
names = {"f32": ("f32", "f32"), "f16": ("f16", "f16"), "q8_0": ("q8_0", "q8_0"), "q4_0": ("q4_0", "q4_0"), "mixed": ("q8_0", "bf16")}
pad = lambda n, a: (n + a - 1) // a * a
for k, (rk, rv) in row.items():
    err = open(f"{t}/{k}.err").read()
    m = re.search(r"KV cache \S+ \S+ \((\d+) bytes\) for (\d+) positions \((\S+) keys, (\S+) values\)", err)
    if not m:
        print(f"FAIL kv/verbose_size_{k}: no KV cache line in --verbose"); continue
    cap = int(m.group(2))
    layer = pad(pad(cap * 2 * rk, 64) + cap * 2 * rv, 64)  # K region 64-aligned, the layer's state 16 floats aligned
    want = 2 * layer
    if (m.group(3), m.group(4)) != names[k] or int(m.group(1)) != want:
        print(f"FAIL kv/verbose_size_{k}: {m.group(0)}; expected {want} bytes of {names[k]}")
    else:
        print(f"ok kv/verbose_size_{k}")
PY
"$MLXCEL" bench -m $FX -p 8 -n 8 -r 1 -t 1 --bw-mb 16 --kv-bits 8 --json >"$T/b.json" 2>"$T/b.err" || fail kv/bench_json "$(tail -1 "$T/b.err")"
python3 - "$T/b.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL kv/bench_json: {e}"); sys.exit()
if d.get("cache_type_k") == "q8_0" and d.get("cache_type_v") == "q8_0" and 0 < d.get("kv_bytes_per_position", 0) < 2 * 2 * 2 * 64:
    print("ok kv/bench_json")
else:
    print(f"FAIL kv/bench_json: {d.get('cache_type_k')} {d.get('cache_type_v')} {d.get('kv_bytes_per_position')}")
PY
refuse() { # name, expected text, args...
  local name=$1 want=$2; shift 2
  "$MLXCEL" generate -m $FX --prompt-ids 1,2 -n 1 "$@" >/dev/null 2>"$T/r.err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" "$T/r.err"; then ok "kv/refuse_$name"; else fail "kv/refuse_$name" "rc $rc: $(head -1 "$T/r.err")"; fi
}
refuse bits "--kv-bits: 5 is not 4 or 8" --kv-bits 5
refuse both "not both" --kv-bits 8 --cache-type-v f16
refuse name "q5_0" --cache-type-k q5_0
"$MLXCEL" generate -m tests/fixtures/mamba --prompt-ids 1,2,3 -n 2 --kv-bits 4 >/dev/null 2>"$T/m.err" && grep -q "are ignored" "$T/m.err" \
  && ok kv/recurrent_only_ignored || fail kv/recurrent_only_ignored "$(head -1 "$T/m.err")"
# speculative decoding over a quantized cache: the same greedy text (verification writes and cuts back typed rows)
for d in "ngram|--lookup-ngram 3" "draft|--draft-model $FX"; do
  # shellcheck disable=SC2086
  gen --kv-bits 8 ${d#*|} >"$T/spec.out" 2>"$T/spec.err"
  cmp -s "$T/q8_0.out" "$T/spec.out" && ok "kv/spec_${d%%|*}_q8_0_same_text" || fail "kv/spec_${d%%|*}_q8_0_same_text" "differs from plain q8_0 decoding: $(tail -1 "$T/spec.err")"
done
# an encoder-decoder: the decoder's self-attention takes the types, the cross-attention stays f32
W=tests/fixtures/whisper
aud() { "$MLXCEL" generate -m $W --audio $W/inputs/speech.wav --prompt-ids 317,318,322,326 -n 16 --temp 0 --ignore-eos -t 1 "$@" 2>"$T/w.err"; }
a=$(aud); b=$(aud --cache-type-k f16 --cache-type-v f16)
[ -n "$a" ] && [ "$a" = "$b" ] && ok kv/whisper_f16_same_text || fail kv/whisper_f16_same_text "f32 '$a' vs f16 '$b' $(tail -1 "$T/w.err")"
# inspect's memory estimate lays the cache out in the types asked for
"$MLXCEL" inspect $FX -c 100 --kv-bits 4 2>&1 | grep -q "cache .* (q4_0 keys, q4_0 values)" && ok kv/inspect_types || fail kv/inspect_types "no q4_0 cache in inspect's memory line"
