#!/usr/bin/env bash
# The parity contract of Vision I (tests/cli/vision.sh) on the Qwen ViT
# families of issue 23: qwen2_5_vl (window attention), qwen3_vl (DeepStack,
# interpolated positions, interleaved M-RoPE) and qwen3_vl_moe (the same with
# fused experts). `generate --image PNG --prompt-ids IDS -n 16 --temp 0
# --ignore-eos --logits-out F --output-format json` gives Hugging Face's prompt
# logits, step logits (1e-4 * max(1, max|ref|)) and greedy ids, whole prompt
# and --prefill-chunk 1; -p with the processor's prompt text gives the same
# ids; older tensor names load; a chat template with an image part gives the
# fixture's prompt, and chat's /image and the server's image parts give
# generate's reply. Then bad configs refused in one line.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok vision_qwen/$1"; }
fail() { echo "FAIL vision_qwen/$1: $2"; }

C=tests/lib/vlm_check.py # the parity checks (vision_tiles.sh uses it too)
ids_of() { python3 $C ids "$1"; }
run_check() { # name, fixture, logits file or -, generate arguments...
  local n=$1 F=$2 L=$3; shift 3
  if "$M" generate -m $F --image $F/inputs/image.png -n 16 --temp 0 --ignore-eos --output-format json "$@" >"$tmp/out" 2>"$tmp/err"; then
    if msg=$(if [ "$L" = - ]; then python3 $C ids_match $F/reference.safetensors "$tmp/out"; else python3 $C parity $F/reference.safetensors "$L" "$tmp/out"; fi 2>&1); then ok "$n"; else fail "$n" "$(head -c 400 <<<"$msg")"; fi
  else fail "$n" "$(head -c 300 "$tmp/err")"; fi
}

for fx in qwen2_5_vl qwen3_vl qwen3_vl_moe; do
  F=tests/fixtures/$fx
  ids=$(ids_of $F/reference.safetensors)
  for chunk in 512 1; do
    run_check "$fx/chunk$chunk parity" $F "$tmp/l.st" --prompt-ids "$ids" --prefill-chunk $chunk --logits-out "$tmp/l.st"
  done
  # -p TEXT (here -f FILE, to keep the final newline): the placeholder expanded by the engine
  python3 -c "import json, sys; sys.stdout.write(json.load(open('$F/reference.json'))['prompt_text'])" >"$tmp/prompt.txt"
  run_check "$fx/-p expands to the reference ids" $F - -f "$tmp/prompt.txt"
done

# the older tensor names released Qwen2.5-VL checkpoints use (visual.*, model.*),
# and the newer ones on a Qwen3-VL (model.visual.*, model.language_model.*)
# written the old way too: the same parity
for fx in qwen2_5_vl qwen3_vl; do
  F=tests/fixtures/$fx
  rm -rf "$tmp/old" && mkdir "$tmp/old" && for f in $F/*; do ln -s "$PWD/$f" "$tmp/old/"; done && rm "$tmp/old/model.safetensors"
  python3 - $F/model.safetensors "$tmp/old/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
def old(k):
    if k.startswith("model.visual."): return k[len("model."):]
    if k.startswith("model.language_model."): return "model." + k[len("model.language_model."):]
    return k
h = {old(k): v for k, v in h.items()}
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
  ids=$(ids_of $F/reference.safetensors)
  run_check "$fx/older tensor names (visual.*, model.*) parity" "$tmp/old" "$tmp/l.st" --prompt-ids "$ids" --logits-out "$tmp/l.st"
done

# a chat template with an image part renders the fixture's prompt (no system
# turn in qwen3_vl's); chat's /image reply is generate's
F=tests/fixtures/qwen3_vl; T=tests/server/qwen_vl_template.jinja
run_check "qwen3_vl/template image part = reference ids" $F - --chat-template-file $T -p "Describe this image."
want=$(python3 -c "import json, sys; sys.stdout.write(json.load(open('$tmp/out'))['text'])" 2>/dev/null)
printf '/image %s\nDescribe this image.\n/exit\n' $F/inputs/image.png |
  "$M" chat -m $F --chat-template-file $T -n 16 --temp 0 -t 1 >"$tmp/chat" 2>"$tmp/err"
if [ $? -eq 0 ] && [ -n "$want" ] && [ "$(cat "$tmp/chat")" = "$want" ]; then ok "qwen3_vl/chat /image reply = generate --image"
else fail "qwen3_vl/chat /image reply = generate --image" "$(head -c 200 "$tmp/chat") vs $want: $(head -c 300 "$tmp/err")"; fi

# the server's scheduler (its own way of feeding image rows, DeepStack parts
# included): a chat request with an image part, twice (the second reuses the
# cached prefix and the cached rows), gives generate's reply
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}
"$M" serve -m $F --port $port --parallel 2 --ctx-size 256 -t 2 --chat-template-file $T 2>"$tmp/server.log" & pid=$!
if got=$(python3 - $port $F/inputs/image.png <<'PY'
import base64, json, sys, time, urllib.request
port, img = sys.argv[1], base64.b64encode(open(sys.argv[2], "rb").read()).decode()
for _ in range(100):
    try: urllib.request.urlopen("http://127.0.0.1:%s/health" % port); break
    except Exception: time.sleep(0.2)
body = {"max_tokens": 16, "temperature": 0, "messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + img}}, {"type": "text", "text": "Describe this image."}]}]}
outs = []
for _ in range(2):
    req = urllib.request.Request("http://127.0.0.1:%s/v1/chat/completions" % port, json.dumps(body).encode(), {"Content-Type": "application/json"})
    outs.append(json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["message"]["content"])
sys.stdout.write(outs[0] if outs[0] == outs[1] else "replies differ: %r %r" % tuple(outs))
PY
) && [ -n "$want" ] && [ "$got" = "$want" ]; then ok "qwen3_vl/server image part reply = generate --image"
else fail "qwen3_vl/server image part reply = generate --image" "$(head -c 200 <<<"$got") vs $want: $(tail -c 300 "$tmp/server.log")"; fi
kill $pid; wait $pid 2>/dev/null

# edited configs refused in one line naming the key
check_err() { # name, fixture, expected substring, python edit of config c
  local n=$1 F=$2 want=$3 edit=$4
  rm -rf "$tmp/m" && mkdir "$tmp/m" && for f in $F/*; do ln -s "$PWD/$f" "$tmp/m/"; done && rm "$tmp/m/config.json"
  python3 -c "import json; c = json.load(open('$F/config.json')); $edit; json.dump(c, open('$tmp/m/config.json', 'w'))"
  if "$M" generate -m "$tmp/m" --image $F/inputs/image.png -p hi -n 1 >/dev/null 2>"$tmp/err"; then fail "$n" "succeeded"
  elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$want" "$tmp/err"; then ok "$n"
  else fail "$n" "$(head -c 300 "$tmp/err")"; fi
}
check_err "deepstack layer past the depth refused" tests/fixtures/qwen3_vl deepstack_visual_indexes "c['vision_config']['deepstack_visual_indexes'] = [0, 7]"
check_err "fullatt index past the depth refused" tests/fixtures/qwen2_5_vl fullatt_block_indexes "c['vision_config']['fullatt_block_indexes'] = [1, 9]"
check_err "window below one merged unit refused" tests/fixtures/qwen2_5_vl window_size "c['vision_config']['window_size'] = 20"
check_err "interleaved flag not a boolean refused" tests/fixtures/qwen3_vl mrope_interleaved "c['text_config']['rope_scaling']['mrope_interleaved'] = 3"
