#!/usr/bin/env bash
# Getting models by hub id: mlxcel download against tests/hub/fakehub.py (an
# imitation of the hub's file API started here), the cache layout read back
# as huggingface_hub writes it, -m ORG/NAME offline and online, list, inspect,
# detect, rm, and the errors (401 without a token, 404, a checksum mismatch,
# not cached while offline, GGUF, no such directory).
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
M=$(realpath "$M")
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
ok() { echo "ok hub/$1"; }
fail() { echo "FAIL hub/$1: $2"; }
check() { # name, condition-command...
  local n=$1; shift
  if "$@"; then ok "$n"; else fail "$n" "$(tail -c 400 "$tmp/err" 2>/dev/null | tr '\n' ' ')"; fi
}
COMMIT=0123456789abcdef0123456789abcdef01234567

# repositories: the demo model (tokenizer + ChatML template) with a nested file
R="$tmp/repos"
mkdir -p "$R/org/tiny/docs"
cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$R/org/tiny/"
echo "notes" >"$R/org/tiny/docs/notes.txt"
cp -r "$R/org/tiny" "$R/org/private"
cp -r "$R/org/tiny" "$R/org/corrupt"
mkdir -p "$R/org/gguf" && echo '{}' >"$R/org/gguf/params.json" && : >"$R/org/gguf/model-Q4_K_M.gguf"

port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}
python3 tests/hub/fakehub.py "$R" $port "$tmp/log" >"$tmp/hub.out" 2>"$tmp/hub.err" & pid=$!
for _ in $(seq 100); do grep -q ready "$tmp/hub.out" 2>/dev/null && break; sleep 0.05; done
export HF_ENDPOINT=http://127.0.0.1:$port
unset HF_TOKEN HF_HUB_OFFLINE HF_HUB_CACHE HUGGINGFACE_HUB_CACHE TRANSFORMERS_OFFLINE
export HF_HOME="$tmp/hf"
C="$HF_HOME/hub/models--org--tiny"

# 1. download: the file list and commit from the API, each file by HEAD + GET;
#    the first CDN transfer of model.safetensors breaks halfway and is resumed
HF_TOKEN=tok "$M" download org/tiny >"$tmp/out" 2>"$tmp/err"
check download_ok test $? -eq 0
check download_prints_snapshot grep -qx "$C/snapshots/$COMMIT" "$tmp/out"
check download_resumed python3 - "$tmp/log" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
cdn = [l for l in L if l["path"].startswith("/cdn/org/tiny/model.safetensors")]
assert len(cdn) >= 2 and cdn[0]["range"] is None and cdn[-1]["range"].startswith("bytes=") and cdn[-1]["status"] == 206, cdn
PY
# the token goes to the hub, never to the CDN's other origin
check token_not_sent_to_cdn python3 - "$tmp/log" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
assert all(l["auth"] is None for l in L if l["path"].startswith("/cdn/")), L
assert all(l["auth"] == "Bearer tok" for l in L if not l["path"].startswith("/cdn/")), L
PY
# the layout huggingface_hub writes: refs/main, blobs named by ETag, relative links
python3 - "$C" "$R/org/tiny" $COMMIT >"$tmp/err" 2>&1 <<'PY'
import hashlib, os, sys
c, src, commit = sys.argv[1:]
assert open(os.path.join(c, "refs", "main")).read() == commit
snap = os.path.join(c, "snapshots", commit)
names = sorted(os.path.relpath(os.path.join(d, f), snap) for d, _, fs in os.walk(snap) for f in fs)
want = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
assert names == want, (names, want)
for n in names:
    p = os.path.join(snap, n)
    assert os.path.islink(p), n
    t = os.readlink(p)
    data = open(os.path.join(src, n), "rb").read()
    if n.endswith(".safetensors"):
        etag = hashlib.sha256(data).hexdigest()
    else:
        etag = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert t == "../" * (2 + n.count("/")) + "blobs/" + etag, (n, t)
    assert open(p, "rb").read() == data, n
assert not [b for b in os.listdir(os.path.join(c, "blobs")) if b.endswith(".incomplete")]
assert os.path.isdir(os.path.join(os.path.dirname(c), ".locks", "models--org--tiny"))
print("ok")
PY
check cache_layout grep -q '^ok' "$tmp/err"

# 2. offline, from the cache by its hub id
HF_HUB_OFFLINE=1 "$M" generate -m org/tiny -p "Hello" -n 4 --output-format json >"$tmp/out" 2>"$tmp/err"
check offline_generate grep -q '"generated_ids":\[' "$tmp/out"
HF_HUB_OFFLINE=1 "$M" generate -m org/tiny:$COMMIT -p "Hello" -n 2 >"$tmp/out" 2>"$tmp/err"
check offline_generate_commit test $? -eq 0
HF_HUB_OFFLINE=1 "$M" generate -m org/other -p "Hello" -n 2 >"$tmp/out" 2>"$tmp/err"
check offline_not_cached bash -c "grep -q 'looks like a hub id and it is not cached' '$tmp/err' && grep -q 'run mlxcel download org/other' '$tmp/err'"
HF_HUB_OFFLINE=1 "$M" download org/tiny >"$tmp/out" 2>"$tmp/err"
check offline_download_refused bash -c "grep -q 'HF_HUB_OFFLINE' '$tmp/err'"

# serve by hub id: the id is the model's; the CLI's sampling options are the
# requests' defaults; request fields have the CLI's ranges (one table)
sport=$((${MX_PORT_BASE:-$((20000 + RANDOM % 12000))} + 25))
HF_HUB_OFFLINE=1 "$M" serve -m org/tiny --port $sport --temp 0 -t 1 --ctx-size 256 2>"$tmp/serve.log" & spid=$!
python3 - $sport >"$tmp/err" 2>&1 <<'PY'
import json, sys, time, urllib.request, urllib.error
base = "http://127.0.0.1:%s" % sys.argv[1]
for _ in range(200):
    try:
        if urllib.request.urlopen(base + "/health").status == 200: break
    except Exception: time.sleep(0.05)
def post(body):
    r = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        return 200, json.loads(urllib.request.urlopen(r).read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
m = json.loads(urllib.request.urlopen(base + "/v1/models").read())
assert m["data"][0]["id"] == "org/tiny", m
a = post({"prompt": "Once upon", "max_tokens": 12})
b = post({"prompt": "Once upon", "max_tokens": 12, "temperature": 0})
assert a[0] == 200 and a[1]["choices"][0]["text"] == b[1]["choices"][0]["text"], (a, b)
c = post({"prompt": "Once upon", "max_tokens": 4, "presence_penalty": 3})
assert c[0] == 400 and "'presence_penalty' must be a number in [-2, 2]" in c[1]["error"]["message"], c
d = post({"prompt": "Once upon", "max_tokens": 4, "repeat_last_n": 8, "repetition_penalty": 1.3, "seed": 2**40})
assert d[0] == 200, d
print("ok")
PY
check serve_hub_id_and_defaults grep -q '^ok' "$tmp/err"
kill $spid; wait $spid 2>/dev/null

# 3. list / inspect / detect
"$M" list >"$tmp/out" 2>"$tmp/err"
check list grep -Eq '^org/tiny +[0-9.]+ [kKMG]?B +llama +0123456789ab' "$tmp/out"
HF_HUB_OFFLINE=1 "$M" inspect org/tiny -c 1024 >"$tmp/out" 2>"$tmp/err"
check inspect bash -c "grep -q '^family *llama' '$tmp/out' && grep -q '^parameters' '$tmp/out' && grep -q '^memory .* at 1024 tokens' '$tmp/out'"
"$M" detect "$C/snapshots/$COMMIT" >"$tmp/out" 2>"$tmp/err"
check detect bash -c "grep -q '^family *llama' '$tmp/out' && grep -q 'tokenizer.json' '$tmp/out'"

# 4. errors: a checksum mismatch is refused (no blob kept), 401 without a token, 404
"$M" download org/corrupt >"$tmp/out" 2>"$tmp/err"
rc=$?; check checksum_refused bash -c "[ $rc -ne 0 ] && grep -q 'checksum mismatch' '$tmp/err' && ! ls '$HF_HOME/hub/models--org--corrupt/blobs' | grep -E '^[0-9a-f]{64}'"
"$M" download org/private >"$tmp/out" 2>"$tmp/err"
check private_401 bash -c "grep -q '401' '$tmp/err' && grep -q 'HF_TOKEN' '$tmp/err'"
HF_TOKEN=secret "$M" download org/private >"$tmp/out" 2>"$tmp/err"
check private_with_token test $? -eq 0
HF_TOKEN=wrong "$M" download org/private >"$tmp/out" 2>"$tmp/err"
# cached files are kept, but the revision is asked again: a wrong token is refused
check private_wrong_token grep -q 'was refused' "$tmp/err"
"$M" download org/nosuch >"$tmp/out" 2>"$tmp/err"
check not_found_404 grep -q '404' "$tmp/err"
"$M" download org/tiny:nobranch >"$tmp/out" 2>"$tmp/err"
check revision_404 bash -c "grep -q '404' '$tmp/err' && grep -q 'nobranch' '$tmp/err'"
"$M" download org/tiny --include '*.nothing' >"$tmp/out" 2>"$tmp/err"
check include_matches_nothing grep -q 'no file' "$tmp/err"

# 5. --include, and resuming a .incomplete blob left by an earlier run
export HF_HOME="$tmp/hf2"
C2="$HF_HOME/hub/models--org--tiny"
"$M" download org/tiny --include '*.json' --include 'docs/*' >"$tmp/out" 2>"$tmp/err"
check include bash -c "[ -e '$C2/snapshots/$COMMIT/config.json' ] && [ -e '$C2/snapshots/$COMMIT/docs/notes.txt' ] && [ ! -e '$C2/snapshots/$COMMIT/model.safetensors' ]"
sha=$(sha256sum tests/fixtures/llama/model.safetensors | cut -d' ' -f1)
head -c 1000 tests/fixtures/llama/model.safetensors >"$C2/blobs/$sha.incomplete"
: >"$tmp/log"
"$M" download org/tiny --include '*.safetensors' >"$tmp/out" 2>"$tmp/err"
check resume_incomplete bash -c "grep -q '\"range\": \"bytes=1000-\"' '$tmp/log' && cmp -s '$C2/blobs/$sha' tests/fixtures/llama/model.safetensors"

# 6. -m ORG/NAME online: fetched on first use, then read from the cache
export HF_HOME="$tmp/hf3"
"$M" generate -m org/tiny -p "Hello" -n 2 >"$tmp/out" 2>"$tmp/err"
check auto_download bash -c "grep -q 'downloading it from' '$tmp/err' && [ -e '$HF_HOME/hub/models--org--tiny/snapshots/$COMMIT/model.safetensors' ]"
: >"$tmp/log"
"$M" generate -m org/tiny -p "Hello" -n 2 >"$tmp/out" 2>"$tmp/err"
check cached_no_network bash -c "[ ! -s '$tmp/log' ]"

"$M" generate -m org/gguf -p "Hello" -n 2 >"$tmp/out" 2>"$tmp/err"
check gguf_repo bash -c "grep -q 'has no config.json' '$tmp/err' && grep -q 'GGUF files are not supported' '$tmp/err' && [ ! -e '$HF_HOME/hub/models--org--gguf/snapshots/$COMMIT/model-Q4_K_M.gguf' ]"

# 7. rm
"$M" rm org/tiny >"$tmp/out" 2>"$tmp/err"
check rm bash -c "grep -q 'removed org/tiny' '$tmp/err' && [ ! -e '$HF_HOME/hub/models--org--tiny' ]"
"$M" rm org/tiny >"$tmp/out" 2>"$tmp/err"
check rm_missing grep -q 'not in the cache' "$tmp/err"

# 8. what -m says about other things
mkdir -p "$tmp/gg" && : >"$tmp/gg/model-q4.gguf"
"$M" generate -m "$tmp/gg" -p x >"$tmp/out" 2>"$tmp/err"
check gguf_folder grep -q 'GGUF files are not supported' "$tmp/err"
"$M" generate -m "$tmp/gg/model-q4.gguf" -p x >"$tmp/out" 2>"$tmp/err"
check gguf_file grep -q 'GGUF files are not supported' "$tmp/err"
"$M" generate -m ./no/such/dir -p x >"$tmp/out" 2>"$tmp/err"
check no_such_directory grep -q 'no such directory' "$tmp/err"
kill $pid; wait $pid 2>/dev/null; pid=""
