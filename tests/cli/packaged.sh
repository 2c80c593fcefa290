#!/usr/bin/env bash
# Vision-language checkpoints hold their text model under a prefix, with the
# text config in text_config. Each text fixture below is repackaged under the
# three layouts (transformers >= 4.52 "model.language_model." + "lm_head.",
# older transformers / mlx-vlm "language_model.model." +
# "language_model.lm_head.", Idefics3 "model.text_model." + "lm_head."), with
# a vision tower tensor beside it, and must still meet its Hugging Face
# reference (test_fixtures on the repackaged folders). A stray tensor inside
# the text model is still refused. Then the vision fixtures run text-only.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
tmp=$(mktemp -d)
trap "rm -rf $tmp" EXIT
ok() { echo "ok packaged/$1"; }
fail() { echo "FAIL packaged/$1: $2"; }

for fx in llama gemma3_text; do
  for layout in model.language_model.:lm_head. language_model.model.:language_model.lm_head. model.text_model.:lm_head.; do
    d="$tmp/fx/${fx}_${layout%%:*}"; mkdir -p "$d"
    cp tests/fixtures/$fx/reference.json tests/fixtures/$fx/reference.safetensors "$d/"
    python3 - tests/fixtures/$fx "$d" "${layout%%:*}" "${layout##*:}" <<'PY' || fail "$fx/$layout" "repackaging failed"
import json, struct, sys
src, dst, text, head = sys.argv[1:]
cfg = json.load(open(f"{src}/config.json"))
json.dump({"model_type": "packaged_" + cfg["model_type"], "architectures": ["XForConditionalGeneration"],
           "text_config": cfg, "vision_config": {"model_type": "siglip_vision_model"}}, open(f"{dst}/config.json", "w"))
b = open(f"{src}/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
out = {}
for k, v in h.items():
    if k == "__metadata__": out[k] = v
    elif k.startswith("model."): out[text + k[6:]] = v
    elif k.startswith("lm_head."): out[head + k[8:]] = v
    else: out[k] = v
end = len(data)
out["vision_tower.patch_embedding.weight"] = {"dtype": "F32", "shape": [2], "data_offsets": [end, end + 8]}
data += b"\0" * 8
hb = json.dumps(out).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(f"{dst}/model.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + data)
PY
  done
done
out=$(build/tests/test_fixtures "$tmp/fx" 2>&1)
n_ok=$(grep -c '^ok ' <<<"$out"); n_fail=$(grep -c '^FAIL ' <<<"$out")
if [ "$n_fail" -eq 0 ] && [ "$n_ok" -ge 36 ]; then ok "repackaged text fixtures meet their references ($n_ok checks)"
else fail "repackaged text fixtures" "$n_ok ok, $(grep '^FAIL' <<<"$out" | head -3 | tr '\n' ' ')"; fi

# a stray tensor inside the text model is still an error
d="$tmp/stray"; cp -r "$tmp/fx/llama_model.language_model." "$d"
python3 - "$d/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); data = b[8 + n:]
h["model.language_model.layers.0.bogus"] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
hb = json.dumps(h).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hb)) + hb + data + b"\0" * 8)
PY
if ! "$M" generate -m "$d" --prompt-ids 1,2,3 -n 1 >/dev/null 2>"$tmp/err" && grep -q "unexpected tensor 'model.language_model.layers.0.bogus'" "$tmp/err"; then
  ok "stray tensor inside the text model refused"
else fail "stray tensor inside the text model refused" "$(head -c 300 "$tmp/err")"; fi

# the vision fixtures' text models, text-only (no image given)
for fx in llava llava_next paligemma idefics3 gemma3; do
  if "$M" generate -m tests/fixtures/$fx --prompt-ids 1,5,6,7 -n 4 --temp 0 --ignore-eos --output-format json >"$tmp/out" 2>"$tmp/err" &&
     grep -q '"generated_ids"' "$tmp/out"; then ok "$fx text-only"
  else fail "$fx text-only" "$(head -c 300 "$tmp/err")"; fi
done
