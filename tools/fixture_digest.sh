#!/usr/bin/env bash
# Prints one line per causal-lm fixture in tests/fixtures and mode (whole
# prefill, --prefill-chunk 1, and MLXCEL_INT8=0 where it differs): the sha256
# of the logits file `mlxcel generate --logits-out` writes for the fixture's
# prompt and 16 greedy steps. Refactors that must not change numerics compare
# this output before and after, byte for byte:
#   tools/fixture_digest.sh [MLXCEL] > before.txt ... > after.txt; diff before.txt after.txt
set -u
cd "$(dirname "$0")/.."
bin=${1:-build/mlxcel}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for d in tests/fixtures/*/; do
  d=${d%/}; name=${d##*/}
  [ -f "$d/reference.safetensors" ] || continue
  ids=$(python3 - "$d" <<'PY'
import json, struct, sys
d = sys.argv[1]
ref = json.load(open(d + "/reference.json"))
if ref.get("task", "causal-lm") != "causal-lm": sys.exit(0)
f = open(d + "/reference.safetensors", "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n))
t = h.get("input_ids")
if not t: sys.exit(0)
a, b = t["data_offsets"]
f.seek(8 + n + a)
raw = f.read(b - a)
fmt = {"I64": "q", "I32": "i"}[t["dtype"]]
k = struct.calcsize(fmt)
print(",".join(str(v) for v in struct.unpack("<%d%s" % (len(raw) // k, fmt), raw)))
PY
)
  [ -n "$ids" ] || continue
  for mode in whole chunk1; do
    extra=(); [ $mode = chunk1 ] && extra=(--prefill-chunk 1)
    out="$tmp/$name.$mode.safetensors"
    if "$bin" generate -m "$d" --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos --no-chat-template \
        --logits-out "$out" --output-format json -t 2 "${extra[@]}" >/dev/null 2>"$tmp/err"; then
      echo "$name $mode $(sha256sum "$out" | cut -c1-16)"
    else
      echo "$name $mode ERROR $(head -1 "$tmp/err")"
    fi
    MLXCEL_INT8=0 "$bin" generate -m "$d" --prompt-ids "$ids" -n 16 --temp 0 --ignore-eos --no-chat-template \
        --logits-out "$out.x" --output-format json -t 2 "${extra[@]}" >/dev/null 2>&1 &&
      ! cmp -s "$out" "$out.x" && echo "$name $mode/int8=0 $(sha256sum "$out.x" | cut -c1-16)"
  done
done
