#!/usr/bin/env bash
# mlxcel tokenize: -p and --jsonl output against the goldens, and errors.
# Prints ok/FAIL lines; run from the repo root (tests/run.sh sets $MLXCEL).
set -u
M=${MLXCEL:-build/mlxcel}
D=tests/tokenizers
check() { # name, condition-result(0/1), why
  if [ "$2" = 0 ]; then echo "ok $1"; else echo "FAIL $1: $3"; fi
}
out=$("$M" tokenize -m $D/llama2 -p "Hello <s>world" 2>&1)
want='{"ids": [1, 15043, 29871, 1, 3186], "tokens": ["<s>", "▁Hello", "▁", "<s>", "▁world"], "decoded": "<s> Hello <s> world"}'
[ "$out" = "$want" ]; check "cli/tokenize -p llama2" $? "got: $out"
out=$("$M" tokenize -m $D/bert-bge -p "Hello, World!" --no-special 2>&1)
want='{"ids": [7592, 1010, 2088, 999], "tokens": ["hello", ",", "world", "!"], "decoded": "hello, world!"}'
[ "$out" = "$want" ]; check "cli/tokenize --no-special bert" $? "got: $out"
# --jsonl over gpt2's golden inputs: ids equal the golden ids, line by line
tmp=$(mktemp -d)
python3 - "$D/gpt2/golden.jsonl" "$tmp" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
with open(sys.argv[2] + "/in.jsonl", "w", encoding="utf-8") as f:
    for r in rows: f.write(json.dumps({"text": r["text"], "add_special_tokens": r["add_special_tokens"]}) + "\n")
with open(sys.argv[2] + "/want.txt", "w") as f:
    for r in rows: f.write(json.dumps(r["ids"]) + "\t" + json.dumps(r["decoded"]) + "\n")
PY
"$M" tokenize -m $D/gpt2 --jsonl "$tmp/in.jsonl" > "$tmp/out.jsonl" 2> "$tmp/err"
rc=$?
python3 - "$tmp/out.jsonl" "$tmp/got.txt" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for l in open(sys.argv[1], encoding="utf-8"):
        r = json.loads(l); f.write(json.dumps(r["ids"]) + "\t" + json.dumps(r["decoded"]) + "\n")
PY
cmp -s "$tmp/want.txt" "$tmp/got.txt" && [ $rc = 0 ]; check "cli/tokenize --jsonl gpt2 goldens" $? "rc=$rc $(diff "$tmp/want.txt" "$tmp/got.txt" | head -3)"
# errors
out=$("$M" tokenize -m "$tmp" -p x 2>&1); rc=$?
[ $rc = 1 ] && [[ "$out" == *"$tmp: no tokenizer.json, vocab.json + merges.txt or tokenizer.model"* ]]; check "cli/tokenize missing files" $? "rc=$rc $out"
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' > "$tmp/tokenizer.json"
out=$("$M" tokenize -m "$tmp" -p x 2>&1); rc=$?
[ $rc = 1 ] && [[ "$out" == *"$tmp/tokenizer.json: model.merges[0]: \"b\" is not in the vocabulary"* ]]; check "cli/tokenize malformed json" $? "rc=$rc $out"
"$M" tokenize -m $D/gpt2 > /dev/null 2>&1; rc=$?
[ $rc = 2 ]; check "cli/tokenize usage" $? "rc=$rc"
rm -rf "$tmp"
