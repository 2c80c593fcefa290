#!/usr/bin/env bash
# The parity contract of vision-language models through the CLI, on the six
# vision fixtures: `generate --image PNG --prompt-ids IDS -n 16 --temp 0
# --ignore-eos --logits-out F --output-format json` with the fixture's
# input_ids (placeholders expanded) gives Hugging Face's prompt logits [T, V],
# step logits [16, V] (1e-4 * max(1, max|ref|)) and greedy ids, with the whole
# prompt in one pass and with --prefill-chunk 1; -p with the processor's
# prompt text arrives at the same ids; chat's /image gives generate's reply and
# the gemma3 folder chats text-only. Then images refused cleanly:
# a model without a vision side, a corrupt file, a prompt whose image tokens
# do not match the image.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok vision/$1"; }
fail() { echo "FAIL vision/$1: $2"; }

C=tests/lib/vlm_check.py # the parity checks (vision_tiles.sh uses it too)

ids_of() { python3 $C ids "$1"; }

for fx in llava llava_next paligemma idefics3 gemma3 qwen2_vl; do
  F=tests/fixtures/$fx
  ids=$(ids_of $F/reference.safetensors)
  for chunk in 512 1; do
    if "$M" generate -m $F --image $F/inputs/image.png --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos --prefill-chunk $chunk \
         --logits-out "$tmp/l.st" --output-format json >"$tmp/out" 2>"$tmp/err"; then
      if msg=$(python3 $C parity $F/reference.safetensors "$tmp/l.st" "$tmp/out" 2>&1); then ok "$fx/chunk$chunk parity"
      else fail "$fx/chunk$chunk parity" "$msg"; fi
    else fail "$fx/chunk$chunk parity" "$(head -c 300 "$tmp/err")"; fi
  done
done

# -p TEXT (here -f FILE, to keep a final newline): the engine expands the
# image placeholder of the processor's prompt itself and must arrive at the
# fixture's input_ids and greedy ids
for fx in llava llava_next paligemma idefics3 gemma3 qwen2_vl; do
  F=tests/fixtures/$fx
  python3 -c "import json, sys; sys.stdout.write(json.load(open('$F/reference.json'))['prompt_text'])" >"$tmp/prompt.txt"
  if "$M" generate -m $F --image $F/inputs/image.png -f "$tmp/prompt.txt" -n 16 --temp 0 --ignore-eos --output-format json \
       >"$tmp/out" 2>"$tmp/err"; then
    if msg=$(python3 - $F/reference.safetensors "$tmp/out" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
def ids(k):
    t = h[k]; o = 8 + n + t["data_offsets"][0]
    return list(struct.unpack("<%dq" % t["shape"][0], b[o:o + 8 * t["shape"][0]]))
js = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
msgs = []
if js["prompt_ids"] != ids("input_ids"): msgs.append("prompt_ids %s != input_ids %s" % (js["prompt_ids"], ids("input_ids")))
if js["generated_ids"] != ids("greedy_ids"): msgs.append("generated_ids %s != %s" % (js["generated_ids"], ids("greedy_ids")))
print("; ".join(msgs)); sys.exit(1 if msgs else 0)
PY
    ); then ok "$fx/-p expands to the reference ids"
    else fail "$fx/-p expands to the reference ids" "$(head -c 400 <<<"$msg")"; fi
  else fail "$fx/-p expands to the reference ids" "$(head -c 300 "$tmp/err")"; fi
done

# chat: /image attaches the image to the next message, whose reply is generate's
# with the same template; the same folder chats text-only
F=tests/fixtures/gemma3; T=tests/server/vision_template.jinja
want=$("$M" generate -m $F --image $F/inputs/image.png --chat-template-file $T -p "Describe this image." -n 12 --temp 0 \
  --output-format json 2>"$tmp/err" | tail -1 | python3 -c "import json, sys; sys.stdout.write(json.load(sys.stdin)['text'])")
printf '/image %s\nDescribe this image.\n/exit\n' $F/inputs/image.png |
  "$M" chat -m $F --chat-template-file $T -n 12 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && [ -n "$want" ] && [ "$(cat "$tmp/out")" = "$want" ]; then ok "chat /image reply = generate --image"
else fail "chat /image reply = generate --image" "$(head -c 200 "$tmp/out") vs $want: $(head -c 300 "$tmp/err")"; fi
printf 'Hello there\nAnd again\n/exit\n' | "$M" chat -m $F -n 4 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 2 ]; then ok "gemma3 chats text-only"
else fail "gemma3 chats text-only" "$(head -c 300 "$tmp/err")"; fi

# refusals: one line, non-zero exit
check_err() { # name, expected substring, command...
  local n=$1 want=$2; shift 2
  if "$@" >/dev/null 2>"$tmp/err"; then fail "$n" "succeeded"
  elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$want" "$tmp/err"; then ok "$n"
  else fail "$n" "$(head -c 300 "$tmp/err")"; fi
}
F=tests/fixtures/llava; ids=$(ids_of $F/reference.safetensors)
check_err "text model refuses an image" "does not take images" "$M" generate -m tests/fixtures/llama --image $F/inputs/image.png --prompt-ids 1,2,3 -n 1
head -c 2000 $F/inputs/image.png >"$tmp/cut.png"
check_err "truncated image refused" "truncated" "$M" generate -m $F --image "$tmp/cut.png" --prompt-ids "$ids" -n 1
printf 'not an image' >"$tmp/x.png"
check_err "non-image refused" "not a PNG, JPEG or WebP" "$M" generate -m $F --image "$tmp/x.png" --prompt-ids "$ids" -n 1
check_err "image tokens without their image refused" "image tokens" "$M" generate -m $F --image $F/inputs/image.png --prompt-ids 1,2,3 -n 1
check_err "--image with a drafter refused" "image with a drafter" "$M" generate -m $F --image $F/inputs/image.png --prompt-ids "$ids" -n 1 --lookup-ngram 2

# images and a grammar together: the image rows in the prompt, the mask on the output
for fx in gemma3 qwen2_vl; do
  F=tests/fixtures/$fx
  printf 'root ::= [0-9]+\n' >"$tmp/digits.gbnf"
  python3 -c "import json, sys; sys.stdout.write(json.load(open('$F/reference.json'))['prompt_text'])" >"$tmp/prompt.txt"
  if "$M" generate -m $F --image $F/inputs/image.png -f "$tmp/prompt.txt" --grammar "$tmp/digits.gbnf" -n 6 --temp 0 --output-format json \
       >"$tmp/out" 2>"$tmp/err" &&
     tail -1 "$tmp/out" | python3 -c "import json, re, sys; j = json.load(sys.stdin); sys.exit(0 if 1 <= len(j['generated_ids']) <= 6 and re.fullmatch('[0-9]+', j['text']) else 1)"; then
    ok "$fx/--image with --grammar"
  else fail "$fx/--image with --grammar" "$(tail -c 200 "$tmp/out") $(head -c 300 "$tmp/err")"; fi
done
