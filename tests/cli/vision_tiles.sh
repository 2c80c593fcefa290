#!/usr/bin/env bash
# The parity contract of vision-language models (tests/cli/vision.sh) on the
# tiled and newer families of "Vision-language models II": SmolVLM
# (Idefics3 tiling, pixel shuffle x4), Mistral 3 (Pixtral tower, [IMG_BREAK]
# rows), InternVL and Aya Vision (dynamic tiles + thumbnail, pixel shuffle).
# Per fixture: `generate --image PNG --prompt-ids IDS -n 16 --temp 0
# --ignore-eos --logits-out F` gives Hugging Face's prompt logits and step
# logits (1e-4 * max(1, max|ref|)) and greedy ids, with the whole prompt and
# with --prefill-chunk 1; -p with the processor's prompt text arrives at the
# same ids. Then: `mlxcel arch` lists them, folders with the released
# checkpoints' older tensor names give the same logits, processor configs the
# tower cannot follow are refused, and chat's /image replies as generate.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
C=tests/lib/vlm_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok vision_tiles/$1"; }
fail() { echo "FAIL vision_tiles/$1: $2"; }

for fx in smolvlm mistral3 internvl aya_vision; do
  F=tests/fixtures/$fx
  ids=$(python3 $C ids $F/reference.safetensors)
  for chunk in 512 1; do
    if "$M" generate -m $F --image $F/inputs/image.png --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos --prefill-chunk $chunk \
         --logits-out "$tmp/l.st" --output-format json >"$tmp/out" 2>"$tmp/err"; then
      if msg=$(python3 $C parity $F/reference.safetensors "$tmp/l.st" "$tmp/out" 2>&1); then ok "$fx/chunk$chunk parity"
      else fail "$fx/chunk$chunk parity" "$msg"; fi
    else fail "$fx/chunk$chunk parity" "$(head -c 300 "$tmp/err")"; fi
  done
  # -f FILE rather than -p, to keep the prompt text's bytes exactly
  python3 -c "import json, sys; sys.stdout.write(json.load(open('$F/reference.json'))['prompt_text'])" >"$tmp/prompt.txt"
  if "$M" generate -m $F --image $F/inputs/image.png -f "$tmp/prompt.txt" -n 16 --temp 0 --ignore-eos --output-format json \
       >"$tmp/out" 2>"$tmp/err"; then
    if msg=$(python3 $C ids_match $F/reference.safetensors "$tmp/out" 2>&1); then ok "$fx/-p expands to the reference ids"
    else fail "$fx/-p expands to the reference ids" "$msg"; fi
  else fail "$fx/-p expands to the reference ids" "$(head -c 300 "$tmp/err")"; fi
done

# `mlxcel arch` lists the vision-language families (text and JSON)
"$M" arch >"$tmp/arch" 2>"$tmp/err"
"$M" arch --json >"$tmp/arch.json" 2>>"$tmp/err"
for mt in smolvlm mistral3 internvl aya_vision; do
  if grep -q "^$mt .*supported.*\[vlm\]$" "$tmp/arch" &&
     python3 -c "import json, sys; sys.exit(0 if any(r['model_type'] == '$mt' and r['task'] == 'vlm' for r in json.load(open('$tmp/arch.json'))) else 1)"; then
    ok "arch lists $mt"
  else fail "arch lists $mt" "$(grep "^$mt " "$tmp/arch") $(head -c 200 "$tmp/err")"; fi
done

# released Mistral-3.1 / Aya Vision / InternVL folders name their tensors the
# older way (vision_tower.*, multi_modal_projector.*, language_model.model.*,
# language_model.lm_head.*): the same folder renamed so gives the same ids
for fx in mistral3 internvl aya_vision; do
  F=tests/fixtures/$fx; R=$tmp/$fx-old
  mkdir -p "$R" && cp $F/*.json $F/tokenizer* $F/vocab.json $F/merges.txt "$R"/ 2>/dev/null
  python3 - $F/model.safetensors "$R/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
def rename(k):
    for a, z in (("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head."),
                 ("model.vision_tower.", "vision_tower."), ("model.multi_modal_projector.", "multi_modal_projector.")):
        if k.startswith(a): return z + k[len(a):]
    return k
h = {rename(k): v for k, v in h.items()}
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
  ids=$(python3 $C ids $F/reference.safetensors)
  if "$M" generate -m "$R" --image $F/inputs/image.png --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos \
       --logits-out "$tmp/l.st" --output-format json >"$tmp/out" 2>"$tmp/err" &&
     msg=$(python3 $C parity $F/reference.safetensors "$tmp/l.st" "$tmp/out" 2>&1); then ok "$fx/older tensor names"
  else fail "$fx/older tensor names" "${msg:-} $(head -c 300 "$tmp/err")"; fi
done

# a processor config the tower cannot follow: one clear error, not a wrong answer
edit_pre() { # fixture key json -> a copy in $tmp/edit
  rm -rf "$tmp/edit"; cp -r tests/fixtures/$1 "$tmp/edit"
  python3 -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); c[sys.argv[2]] = json.loads(sys.argv[3]); json.dump(c, open(p, 'w'))" \
    "$tmp/edit/preprocessor_config.json" "$2" "$3"
}
check_err() { # name, expected substring, command...
  local n=$1 want=$2; shift 2
  if "$@" >/dev/null 2>"$tmp/err"; then fail "$n" "succeeded"
  elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$want" "$tmp/err"; then ok "$n"
  else fail "$n" "$(head -c 300 "$tmp/err")"; fi
}
edit_pre mistral3 size '{"longest_edge": 1000}'
check_err "mistral3: a view wider than the tower's rope table refused" "more patches per side" \
  "$M" generate -m "$tmp/edit" --image "$tmp/edit/inputs/image.png" -p "[IMG]" -n 1
edit_pre internvl size '{"height": 42, "width": 42}'
check_err "internvl: tiles of another size than the position table refused" "interpolated positions" \
  "$M" generate -m "$tmp/edit" --image "$tmp/edit/inputs/image.png" -p "<IMG_CONTEXT>" -n 1

# chat's /image goes through the chat path (the template's placeholder expanded
# as markup): its reply is generate --image's with the same template
for fx in mistral3:'[IMG]' aya_vision:'<image>' internvl:'<IMG_CONTEXT>'; do
  name=${fx%%:*}; ph=${fx#*:}; F=tests/fixtures/$name
  printf '%s' "{{ bos_token }}{% for m in messages %}<|user|>{% for p in m['content'] %}{% if p['type'] == 'image' %}$ph{% else %}{{ p['text'] }}{% endif %}{% endfor %}\n{% endfor %}<|bot|>" \
    >"$tmp/t.jinja"
  want=$("$M" generate -m $F --image $F/inputs/image.png --chat-template-file "$tmp/t.jinja" -p "Describe this image." -n 8 --temp 0 \
    --output-format json 2>"$tmp/err" | tail -1 | python3 -c "import json, sys; sys.stdout.write(json.load(sys.stdin)['text'])")
  printf '/image %s\nDescribe this image.\n/exit\n' $F/inputs/image.png |
    "$M" chat -m $F --chat-template-file "$tmp/t.jinja" -n 8 --temp 0 -t 1 >"$tmp/out" 2>>"$tmp/err"
  if [ $? -eq 0 ] && [ -n "$want" ] && [ "$(cat "$tmp/out")" = "$want" ]; then ok "$name/chat /image reply = generate --image"
  else fail "$name/chat /image reply = generate --image" "$(head -c 200 "$tmp/out") vs $want: $(head -c 300 "$tmp/err")"; fi
done
