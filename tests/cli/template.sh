#!/usr/bin/env bash
# mlxcel template: renders goldens byte for byte (from --template and from a
# model directory's tokenizer_config.json) and fails cleanly on bad input.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
T=tests/templates
export SOURCE_DATE_EPOCH=1721952000 # the goldens pin strftime_now to 2024-07-26
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, expected file, command...
  local name=$1 want=$2; shift 2
  if "$@" >"$tmp/out" 2>"$tmp/err" && cmp -s "$tmp/out" "$want"; then echo "ok $name"
  else echo "FAIL $name: $(cmp "$tmp/out" "$want" 2>&1 | head -1) $(head -c 300 "$tmp/err")"; fi
}
for ctx in "$T"/cli/*__*.json; do
  base=$(basename "$ctx" .json)
  tmpl=${base%%__*}
  check "template --template $base" "$T/expected/$base.txt" "$MLXCEL" template --template "$T/$tmpl.jinja" --context "$ctx"
done
# -m DIR: template list ("default" chosen without tools) and special tokens from tokenizer_config.json
check "template -m gemma3 non_ascii" "$T/expected/tokenizer_config-gemma3__non_ascii.txt" \
  "$MLXCEL" template -m "$T/cli/model-gemma3" --context "$T/cli/non_ascii_nospecial.json"

# errors: raise_exception message, syntax error naming the line, missing files
printf '{"messages": [{"role": "system", "content": "x"}]}' >"$tmp/ctx.json"
printf '{%% if x %%}\n{%% endfor %%}\n' >"$tmp/bad.jinja"
printf '{{ raise_exception("no system role") }}' >"$tmp/raise.jinja"
if "$MLXCEL" template --template "$tmp/bad.jinja" --context "$tmp/ctx.json" >/dev/null 2>"$tmp/err"; then echo "FAIL template syntax error: rendered"
elif grep -q "bad.jinja:2: unexpected 'endfor'" "$tmp/err"; then echo "ok template syntax error names the line"
else echo "FAIL template syntax error: $(cat "$tmp/err")"; fi
if "$MLXCEL" template --template "$tmp/raise.jinja" --context "$tmp/ctx.json" >/dev/null 2>"$tmp/err"; then echo "FAIL template raise_exception: rendered"
elif grep -q "raise.jinja:1: no system role" "$tmp/err"; then echo "ok template raise_exception"
else echo "FAIL template raise_exception: $(cat "$tmp/err")"; fi
if "$MLXCEL" template --template "$tmp/missing.jinja" --context "$tmp/ctx.json" >/dev/null 2>&1; then echo "FAIL template missing file: rendered"
else echo "ok template missing file"; fi
if "$MLXCEL" template --context "$tmp/ctx.json" >/dev/null 2>&1; then echo "FAIL template usage: accepted"
else echo "ok template usage error"; fi
# a real tokenizer_config.json whose model_max_length (1e30) is past int64
printf '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}' >"$tmp/ctx2.json"
if out=$("$MLXCEL" template -m tests/tokenizers/llama3 --context "$tmp/ctx2.json" 2>"$tmp/err") &&
   printf '%s' "$out" | grep -q '<|start_header_id|>assistant<|end_header_id|>'; then echo "ok template from a config with a huge integer"
else echo "FAIL template huge integer config: $(cat "$tmp/err")"; fi
