#!/usr/bin/env bash
# Base models (no chat template): a tokenizer.json folder whose
# tokenizer_config.json has no template, and a folder with only
# tokenizer.model, through every command that takes a model. Raw text works
# for generate and /v1/completions; chat and /v1/chat/completions fall back
# to the plain "User: / Assistant:" format with a warning, or use
# --chat-template NAME / --chat-template-file F.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
ok() { echo "ok basemodel/$1"; }
fail() { echo "FAIL basemodel/$1: $2"; }
check() { # name, condition-command...
  local n=$1; shift
  if "$@"; then ok "$n"; else fail "$n" "$(tail -c 300 "$tmp/err" 2>/dev/null | tr '\n' ' ')"; fi
}

# A: tokenizer.json + tokenizer_config.json without chat_template
A="$tmp/tokjson"; mkdir -p "$A"
cp tests/server/tinymodel/config.json tests/server/tinymodel/generation_config.json tests/server/tinymodel/tokenizer.json "$A/"
cp tests/fixtures/llama/model.safetensors "$A/"
python3 - tests/server/tinymodel/tokenizer_config.json "$A/tokenizer_config.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d.pop("chat_template", None)
json.dump(d, open(sys.argv[2], "w"))
PY
# B: tokenizer.model only
B="$tmp/spm"
build/mkmodel --config tests/basemodel/config.json -o "$B" --seed 3 >/dev/null 2>"$tmp/err" || { fail mkmodel "$(cat "$tmp/err")"; exit 1; }
cp tests/tokenizers/llama2/tokenizer.model "$B/"
rm -f "$B/tokenizer.json" "$B/tokenizer_config.json"

for d in "$A" "$B"; do
  n=${d##*/}
  "$M" generate -m "$d" -p "Once upon a time" -n 8 --output-format json >"$tmp/out" 2>"$tmp/err"
  check "$n/generate_raw" grep -q '"generated_ids":\[[0-9]' "$tmp/out"
  # raw text: the prompt ids are the tokenizer's plain encoding (with its BOS)
  "$M" tokenize -m "$d" -p "Once upon a time" >"$tmp/tok" 2>"$tmp/err"
  python3 - "$tmp/out" "$tmp/tok" <<'PY' >"$tmp/err" 2>&1
import json, sys
g = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
t = json.loads(open(sys.argv[2]).read().strip().splitlines()[0])
ids = t["ids"]
assert g["prompt_ids"][-len(ids):] == ids, (g["prompt_ids"], ids)
PY
  check "$n/generate_raw_ids" test $? -eq 0
  "$M" generate -m "$d" -p "Once upon a time" -n 4 --no-chat-template >"$tmp/out" 2>"$tmp/err"
  check "$n/generate_no_chat_template" test $? -eq 0
  "$M" generate -m "$d" -p "hi" --system "be brief" -n 4 >"$tmp/out" 2>"$tmp/err"
  check "$n/generate_system_needs_template" bash -c "grep -q -- '--chat-template' '$tmp/err'"
  "$M" generate -m "$d" -p "hi" --system "be brief" -n 4 --chat-template chatml --output-format json >"$tmp/out" 2>"$tmp/err"
  check "$n/generate_builtin_template" grep -q '"generated_ids"' "$tmp/out"
  printf '{%% for m in messages %%}[{{ m.role }}] {{ m.content }}\n{%% endfor %%}[assistant]' >"$tmp/t.jinja"
  "$M" generate -m "$d" -p "hi" -n 2 --chat-template-file "$tmp/t.jinja" --output-format json >"$tmp/out" 2>"$tmp/err"
  check "$n/generate_template_file" grep -q '"generated_ids"' "$tmp/out"
  "$M" generate -m "$d" -p "hi" -n 2 --chat-template nosuch >"$tmp/out" 2>"$tmp/err"
  check "$n/unknown_template_named" bash -c "grep -q \"unknown template 'nosuch'.*chatml\" '$tmp/err'"
  printf 'hello there\n/exit\n' | "$M" chat -m "$d" -n 6 --seed 1 >"$tmp/out" 2>"$tmp/err"
  check "$n/chat_plain" bash -c "grep -q 'no chat template' '$tmp/err' && ! grep -q 'mlxcel chat: .*error' '$tmp/err'"
  printf 'hello there\n/exit\n' | "$M" chat -m "$d" -n 6 --chat-template chatml >"$tmp/out" 2>"$tmp/err"
  check "$n/chat_builtin" bash -c "! grep -q 'no chat template' '$tmp/err'"
  echo '{"messages":[{"role":"user","content":"x"}]}' >"$tmp/ctx.json"
  "$M" template -m "$d" --context "$tmp/ctx.json" >"$tmp/out" 2>"$tmp/err"
  check "$n/template_says_none" bash -c "grep -q 'no chat template' '$tmp/err'"
  "$M" bench -m "$d" -p 8 -n 4 -r 1 --bw-mb 16 >"$tmp/out" 2>"$tmp/err"
  check "$n/bench" test $? -eq 0
done

# the plain format as rendered and tokenized: "User: ...\nAssistant:" with the tokenizer's BOS
"$M" generate -m "$B" -p "hi" -n 1 --chat-template plain --output-format json >"$tmp/out" 2>"$tmp/err"
"$M" tokenize -m "$B" -p "User: hi
Assistant:" >"$tmp/tok" 2>>"$tmp/err"
python3 - "$tmp/out" "$tmp/tok" <<'PY' >>"$tmp/err" 2>&1
import json, sys
g = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
t = json.loads(open(sys.argv[2]).read().strip().splitlines()[0])
assert t["ids"][0] == 1 and g["prompt_ids"] == t["ids"], (g["prompt_ids"], t["ids"])
PY
check spm/plain_format_ids test $? -eq 0

# serve: /v1/completions on raw text, /v1/chat/completions in the plain format (stops at "\nUser:")
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}
"$M" serve -m "$A" --port $port --parallel 2 --ctx-size 256 -t 1 2>"$tmp/serve.log" & pid=$!
python3 - $port <<'PY' >"$tmp/err" 2>&1
import json, sys, time, urllib.request
port = sys.argv[1]
base = "http://127.0.0.1:%s" % port
for _ in range(200):
    try:
        if urllib.request.urlopen(base + "/health").status == 200: break
    except Exception: time.sleep(0.05)
def post(path, body):
    r = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(r).read())
c = post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0})
assert c["choices"][0]["text"] is not None and c["usage"]["completion_tokens"] >= 1, c
ch = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 40, "temperature": 0})
t = ch["choices"][0]["message"]["content"]
assert "\nUser:" not in t, t
assert ch["usage"]["prompt_tokens"] > 3, ch
print("ok")
PY
check "tokjson/serve_completions_and_chat" grep -q '^ok' "$tmp/err"
check "tokjson/serve_warns" grep -q 'no chat template' "$tmp/serve.log"
kill $pid; wait $pid 2>/dev/null; pid=""
