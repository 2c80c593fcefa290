#!/usr/bin/env bash
# The public C API through the shared library: build/libmlxcel.so exports
# exactly the mlxcel_* functions include/mlxcel.h declares, and a program
# compiled against the header and the .so alone (tests/capi/capi_client.c)
# gets what the CLI gets on the same model: `mlxcel generate`'s prompt ids,
# greedy ids, text and prompt logits (byte for byte), `mlxcel embed`'s
# vectors; its refusals are status codes with a message, and the library
# prints nothing.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
LIBDIR=$(cd "$(dirname "$M")" && pwd)
SO=$LIBDIR/libmlxcel.so
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok capi/$1"; }
fail() { echo "FAIL capi/$1: $2"; }

[ -f "$SO" ] || { fail build "$SO missing (make builds it)"; exit 0; }

# exported: only mlxcel_*, and every function the header marks MLXCEL_API
nm -D --defined-only "$SO" | awk '{print $NF}' | sort > "$tmp/exported"
grep -v '^mlxcel_' "$tmp/exported" > "$tmp/other"
if [ -s "$tmp/other" ]; then fail exports "not mlxcel_*: $(head -5 "$tmp/other" | tr '\n' ' ')"; else ok exports; fi
grep -o '^MLXCEL_API [^(]*(' include/mlxcel.h | sed 's/($//; s/.*[ *]//' | sort > "$tmp/declared"
if [ -s "$tmp/declared" ] && cmp -s "$tmp/declared" "$tmp/exported"; then ok exports_match_header
else fail exports_match_header "$(diff "$tmp/declared" "$tmp/exported" | head -5 | tr '\n' ' ')"; fi

# the client: the public header and the .so only (no src/ on the include path)
if $CC -std=c17 -Wall -Wextra -Wpedantic -Werror -Iinclude -o "$tmp/client" tests/capi/capi_client.c -L"$LIBDIR" -lmlxcel \
     -Wl,-rpath,"$LIBDIR" 2> "$tmp/cc.err"; then ok compile
else fail compile "$(head -5 "$tmp/cc.err")"; exit 0; fi

# the header is C++-clean too (extern "C"), where a C++ compiler is installed
if command -v c++ >/dev/null 2>&1; then
  printf '#include <mlxcel.h>\nint main() { return mlxcel_api_version() == MLXCEL_API_VERSION ? 0 : 1; }\n' > "$tmp/h.cpp"
  if c++ -Wall -Wextra -Wpedantic -Werror -Iinclude -fsyntax-only "$tmp/h.cpp" 2> "$tmp/cxx.err"; then ok header_cxx
  else fail header_cxx "$(head -3 "$tmp/cxx.err")"; fi
fi

# generation on the repo's chat model (llama fixture weights, test tokenizer and ChatML template)
d=$tmp/model; mkdir -p "$d"
cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$d/"
N=12
if ! "$M" generate -m "$d" -p "Hello, who are you?" -n $N --temp 0 -t 2 --output-format json --logits-out "$tmp/cli.safetensors" \
     > "$tmp/cli.json" 2> "$tmp/cli.err"; then
  fail cli_generate "$(tail -2 "$tmp/cli.err")"; exit 0
fi
"$tmp/client" gen "$d" "Hello, who are you?" $N "$tmp/api.logits" "$tmp/api.txt" > "$tmp/api.out" 2> "$tmp/api.err"
rc=$?
grep -E '^(ok|FAIL) ' "$tmp/api.out"
[ $rc -eq 0 ] || fail gen_exit "status $rc"
if [ -s "$tmp/api.err" ]; then fail gen_silent "the library wrote to stderr: $(head -2 "$tmp/api.err")"; else ok gen_silent; fi
python3 - "$tmp" <<'PY'
import json, struct, sys
t = sys.argv[1]
cli = json.load(open(f"{t}/cli.json"))
api = {}
for line in open(f"{t}/api.out"):
    k, _, v = line.strip().partition(" ")
    if k in ("prompt_ids", "generated_ids"): api[k] = [int(x) for x in v.split(",")] if v else []
def check(name, cond, why):
    print(f"ok capi/{name}" if cond else f"FAIL capi/{name}: {why}")
for k in ("prompt_ids", "generated_ids"):
    check(k, api.get(k) == cli[k], f"api {api.get(k)} vs cli {cli[k]}")
text = open(f"{t}/api.txt", "rb").read().decode("utf-8")
check("text", text == cli["text"], f"api {text!r} vs cli {cli['text']!r}")
b = open(f"{t}/cli.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])["logits"]
s, e = h["data_offsets"]
ref = b[8 + n + s:8 + n + e]
got = open(f"{t}/api.logits", "rb").read()
check("logits", len(ref) > 0 and got == ref, f"{len(got)} bytes vs the CLI's {len(ref)}, equal: {got == ref}")
PY

# a recurrent cache (mamba2) and sliding-window layers (gemma3_text), from token ids, against the CLI
for fx in mamba2 gemma3_text; do
  cli=$("$M" generate -m tests/fixtures/$fx --prompt-ids 1,5,9,12,3 -n 8 --temp 0 --ignore-eos --output-format json 2>&1 |
        python3 -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["generated_ids"])))' 2>&1)
  out=$("$tmp/client" ids tests/fixtures/$fx 1,5,9,12,3 8 2>&1)
  echo "$out" | grep -E '^(ok|FAIL) '
  api=$(echo "$out" | sed -n 's/^generated_ids //p')
  if [ -n "$api" ] && [ "$api" = "$cli" ]; then ok ids_$fx; else fail ids_$fx "api '$api' vs cli '$cli'"; fi
done

# embeddings: the bert-embed fixture against `mlxcel embed`
E=tests/fixtures/bert-embed
if ! "$M" embed -m $E --prompt-ids 2,5,6,3 --prompt-ids 2,7,8,15,3 -t 2 --output-format json > "$tmp/emb.json" 2> "$tmp/emb.err"; then
  fail cli_embed "$(tail -2 "$tmp/emb.err")"
else
  "$tmp/client" embed $E 2,5,6,3 2,7,8,15,3 > "$tmp/emb.out" 2> "$tmp/emb.api.err"
  rc=$?
  grep -E '^(ok|FAIL) ' "$tmp/emb.out"
  [ $rc -eq 0 ] || fail embed_exit "status $rc: $(tail -2 "$tmp/emb.api.err")"
  python3 - "$tmp" <<'PY'
import json, re, sys
t = sys.argv[1]
raw = open(f"{t}/emb.json").read()
# the CLI's numbers as printed (%.9g), compared as text: exact to the bit
m = re.search(r'"embeddings":\[(.*)\]\}', raw, re.S)
cli = re.findall(r'\[([^\[\]]*)\]', m.group(1)) if m else []
api = [l.split(" ", 1)[1].strip() for l in open(f"{t}/emb.out") if l.startswith("embedding ")]
ok = len(cli) == 2 and cli == api
print("ok capi/embed" if ok else f"FAIL capi/embed: {len(api)} vectors vs {len(cli)}; first differ: {api[:1]!r:.120} vs {cli[:1]!r:.120}")
PY
fi

# refusals: codes and messages, nothing printed
"$tmp/client" errors "$d" > "$tmp/err.out" 2> "$tmp/err.err"
rc=$?
grep -E '^(ok|FAIL) ' "$tmp/err.out"
[ $rc -eq 0 ] || fail errors_exit "status $rc"
if [ -s "$tmp/err.err" ]; then fail errors_silent "the library wrote to stderr: $(head -2 "$tmp/err.err")"; else ok errors_silent; fi
