#!/usr/bin/env bash
# GLM-4.1V (tests/fixtures/glm4v) under the parity contract of the vision
# fixtures: `generate --image PNG --prompt-ids IDS -n 16 --temp 0 --ignore-eos
# --logits-out F --output-format json` with the fixture's input_ids gives
# Hugging Face's prompt logits [T, V] and step logits [16, V] within
# 1e-4 * max(1, max|ref|) and the greedy ids exactly, with the whole prompt in
# one pass and with --prefill-chunk 1; -p with the processor's prompt text
# (<|begin_of_image|><|image|><|end_of_image|>) expands to the same ids, and so
# does a GLM-style chat template (chat's /image and the server's image_url part
# reply as generate --image);
# the folder runs text-only; a config whose vision and text widths disagree is
# refused with one line. Then glm4v_moe on a repackaged folder (below).
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
F=tests/fixtures/glm4v
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok vision_glm4v/$1"; }
fail() { echo "FAIL vision_glm4v/$1: $2"; }

C=tests/lib/vlm_check.py # the parity checks (vision_tiles.sh uses it too)

ids=$(python3 $C ids $F/reference.safetensors)
for chunk in 512 1; do
  if "$M" generate -m $F --image $F/inputs/image.png --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos --prefill-chunk $chunk \
       --logits-out "$tmp/l.st" --output-format json >"$tmp/out" 2>"$tmp/err"; then
    if msg=$(python3 $C parity $F/reference.safetensors "$tmp/l.st" "$tmp/out" 2>&1); then ok "chunk$chunk parity"
    else fail "chunk$chunk parity" "$msg"; fi
  else fail "chunk$chunk parity" "$(head -c 300 "$tmp/err")"; fi
done

# -f FILE (keeps the prompt's final newline): the engine expands <|image|> itself
python3 -c "import json, sys; sys.stdout.write(json.load(open('$F/reference.json'))['prompt_text'])" >"$tmp/prompt.txt"
if "$M" generate -m $F --image $F/inputs/image.png -f "$tmp/prompt.txt" -n 16 --temp 0 --ignore-eos --output-format json \
     >"$tmp/out" 2>"$tmp/err"; then
  if msg=$(python3 $C ids_match $F/reference.safetensors "$tmp/out" 2>&1); then ok "-p expands to the reference ids"
  else fail "-p expands to the reference ids" "$(head -c 400 <<<"$msg")"; fi
else fail "-p expands to the reference ids" "$(head -c 300 "$tmp/err")"; fi

# chat: /image attaches the image to the next message; with a GLM-4.1V-style
# template (image parts as <|begin_of_image|><|image|><|end_of_image|>) the
# prompt is the reference's and the reply generate --image's
cat >"$tmp/glm4v.jinja" <<'TPL'
[gMASK]<sop>{% for m in messages %}{% if m['role'] == 'user' %}<|user|>{% elif m['role'] == 'assistant' %}<|assistant|>{% else %}<|system|>{% endif %}{{ '\n' }}{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}{% if p['type'] == 'image' %}<|begin_of_image|><|image|><|end_of_image|>{% elif p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>
{% endif %}
TPL
"$M" generate -m $F --image $F/inputs/image.png --chat-template-file "$tmp/glm4v.jinja" -p "Describe this image." -n 16 --temp 0 \
  --ignore-eos --output-format json >"$tmp/out" 2>"$tmp/err"
if msg=$(python3 $C ids_match $F/reference.safetensors "$tmp/out" 2>&1); then ok "chat template renders the reference prompt"
else fail "chat template renders the reference prompt" "$(head -c 300 "$tmp/err") $msg"; fi
want=$("$M" generate -m $F --image $F/inputs/image.png --chat-template-file "$tmp/glm4v.jinja" -p "Describe this image." -n 12 --temp 0 \
  --output-format json 2>"$tmp/err" | tail -1 | python3 -c "import json, sys; sys.stdout.write(json.load(sys.stdin)['text'])")
printf '/image %s\nDescribe this image.\n/exit\n' $F/inputs/image.png |
  "$M" chat -m $F --chat-template-file "$tmp/glm4v.jinja" -n 12 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && [ -n "$want" ] && [ "$(cat "$tmp/out")" = "$want" ]; then ok "chat /image reply = generate --image"
else fail "chat /image reply = generate --image" "$(head -c 200 "$tmp/out") vs $want: $(head -c 300 "$tmp/err")"; fi

# the server: an OpenAI chat request with the image as a data URL gets generate's greedy reply
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}
"$M" serve -m $F --port $port --chat-template-file "$tmp/glm4v.jinja" -t 1 --shutdown-grace 1 2>"$tmp/server.log" & spid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
python3 - $F/inputs/image.png >"$tmp/req.json" <<'PY'
import base64, json, sys
url = "data:image/png;base64," + base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"model": "glm4v", "temperature": 0, "max_tokens": 12, "messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Describe this image."}]}]}))
PY
got=$(curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d @"$tmp/req.json" |
  python3 -c "import json, sys; sys.stdout.write(json.load(sys.stdin)['choices'][0]['message']['content'])" 2>&1)
kill $spid 2>/dev/null; wait $spid 2>/dev/null
if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "server image_url reply = generate --image"
else fail "server image_url reply = generate --image" "$(head -c 200 <<<"$got") vs $want: $(tail -c 300 "$tmp/server.log")"; fi

# text only: the same folder without an image
if "$M" generate -m $F --prompt-ids 337,338,340,10,68,285 -n 4 --temp 0 --ignore-eos --output-format json >"$tmp/out" 2>"$tmp/err" &&
   grep -q '"generated_ids":\[[0-9]*,[0-9]*,[0-9]*,[0-9]*\]' "$tmp/out"; then ok "text only"
else fail "text only" "$(head -c 300 "$tmp/err")"; fi

# an edited config: the tower's output width must be the text model's
mkdir "$tmp/bad"
for f in $F/*; do ln -s "$PWD/$f" "$tmp/bad/"; done
rm "$tmp/bad/config.json"
python3 -c "import json; c = json.load(open('$F/config.json')); c['vision_config']['out_hidden_size'] = 48; json.dump(c, open('$tmp/bad/config.json', 'w'))"
if "$M" generate -m "$tmp/bad" --image $F/inputs/image.png --prompt-ids "$ids" -n 1 >/dev/null 2>"$tmp/err"; then
  fail "mismatched out_hidden_size refused" "succeeded"
elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "out_hidden_size 48" "$tmp/err"; then ok "mismatched out_hidden_size refused"
else fail "mismatched out_hidden_size refused" "$(head -c 300 "$tmp/err")"; fi

# transformers v5 writes rope_parameters (mrope_section, rope_theta, partial_rotary_factor) instead of rope_scaling
mkdir "$tmp/v5"
for f in $F/*; do ln -s "$PWD/$f" "$tmp/v5/"; done
rm "$tmp/v5/config.json"
python3 -c "
import json; c = json.load(open('$F/config.json')); t = c['text_config']
t['rope_parameters'] = dict(t.pop('rope_scaling'), rope_theta=10000.0, partial_rotary_factor=t.pop('partial_rotary_factor'))
json.dump(c, open('$tmp/v5/config.json', 'w'))"
if "$M" generate -m "$tmp/v5" --image $F/inputs/image.png --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos --logits-out "$tmp/l.st" \
     --output-format json >"$tmp/out" 2>"$tmp/err"; then
  if msg=$(python3 $C parity $F/reference.safetensors "$tmp/l.st" "$tmp/out" 2>&1); then ok "rope_parameters config parity"
  else fail "rope_parameters config parity" "$msg"; fi
else fail "rope_parameters config parity" "$(head -c 300 "$tmp/err")"; fi

# a position table that is not [S*S, D] (here [8, 64] for a 32-wide tower)
mkdir "$tmp/badpos"
for f in $F/*; do ln -s "$PWD/$f" "$tmp/badpos/"; done
rm "$tmp/badpos/model.safetensors"
python3 - $F/model.safetensors "$tmp/badpos/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
h["model.visual.embeddings.position_embedding.weight"]["shape"] = [8, 64]
hb = json.dumps(h).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
if "$M" generate -m "$tmp/badpos" --image $F/inputs/image.png --prompt-ids "$ids" -n 1 >/dev/null 2>"$tmp/err"; then
  fail "malformed position table refused" "succeeded"
elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "position_embedding.weight' (not a square table" "$tmp/err"; then ok "malformed position table refused"
else fail "malformed position table refused" "$(head -c 300 "$tmp/err")"; fi

# glm4v_moe (GLM-4.5V; no fixture of its own): the glm4_moe fixture's text
# model packaged as Glm4vMoeForConditionalGeneration (text under
# model.language_model., M-RoPE sections over its partial rotary dims) beside
# the glm4v fixture's tower. Text-only, every M-RoPE axis holds the same
# position, so it must meet glm4_moe's Hugging Face reference
# (test_fixtures on the folder); with an image the whole path runs.
d="$tmp/moe/glm4v_moe"; mkdir -p "$d"
cp tests/fixtures/glm4_moe/reference.json tests/fixtures/glm4_moe/reference.safetensors $F/preprocessor_config.json "$d/"
python3 - tests/fixtures/glm4_moe $F "$d" <<'PY' || fail "glm4v_moe packaging" "python failed"
import json, struct, sys
text, vis, dst = sys.argv[1:]
tc = json.load(open(f"{text}/config.json")); vc = json.load(open(f"{vis}/config.json"))["vision_config"]
tc.update(model_type="glm4v_moe_text", rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3]})
vc.update(model_type="glm4v_moe", out_hidden_size=tc["hidden_size"])
json.dump({"model_type": "glm4v_moe", "architectures": ["Glm4vMoeForConditionalGeneration"], "text_config": tc,
           "vision_config": vc, "image_token_id": 300, "image_start_token_id": 299, "image_end_token_id": 301},
          open(f"{dst}/config.json", "w"))
def read(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
out, data = {}, b""
for src, keep in ((f"{text}/model.safetensors", lambda k: True), (f"{vis}/model.safetensors", lambda k: k.startswith("model.visual."))):
    h, raw = read(src)
    for k, v in h.items():
        if k == "__metadata__" or not keep(k): continue
        s, e = v["data_offsets"]
        name = "model.language_model." + k[6:] if k.startswith("model.") and not k.startswith("model.visual.") else k
        out[name] = dict(v, data_offsets=[len(data), len(data) + e - s]); data += raw[s:e]
hb = json.dumps(out).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(f"{dst}/model.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + data)
PY
out=$(build/tests/test_fixtures "$tmp/moe" 2>&1)
n_ok=$(grep -c '^ok ' <<<"$out"); n_fail=$(grep -c '^FAIL ' <<<"$out")
if [ "$n_fail" -eq 0 ] && [ "$n_ok" -ge 6 ]; then ok "glm4v_moe text-only meets glm4_moe's reference ($n_ok checks)"
else fail "glm4v_moe text-only meets glm4_moe's reference" "$n_ok ok, $(grep '^FAIL' <<<"$out" | head -3 | tr '\n' ' ')"; fi
moe_ids="1,5,299,$(printf '300,%.0s' $(seq 20))301,7,8"
if "$M" generate -m "$d" --image $F/inputs/image.png --prompt-ids "$moe_ids" -n 4 --temp 0 --ignore-eos --output-format json \
     >"$tmp/out" 2>"$tmp/err" && grep -q '"generated_ids":\[[0-9]*,[0-9]*,[0-9]*,[0-9]*\]' "$tmp/out"; then ok "glm4v_moe runs with an image"
else fail "glm4v_moe runs with an image" "$(head -c 300 "$tmp/err")"; fi
