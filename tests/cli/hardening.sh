#!/usr/bin/env bash
# Fault injection against the server (tests/server/test_hardening.mjs): slowloris,
# oversized and over-long requests, per-client limits, hostile templates and model
# folders, SIGTERM while loading and with requests in flight. Loopback only.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
command -v node >/dev/null || { echo "FAIL hardening/setup: node is missing (make test-deps)"; exit 1; }
# each slow connection is a descriptor, here and in the server (which raises its own soft limit)
ulimit -n "$(ulimit -Hn)" 2>/dev/null
fds=$(ulimit -n)
if [ "$fds" != unlimited ] && [ "$fds" -lt 1800 ]; then export SLOWLORIS_CONNS=$((fds - 300)); echo "note: descriptor limit $fds: $SLOWLORIS_CONNS slow connections"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chat() { mkdir -p "$tmp/$1" && cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$tmp/$1/"; }
chat tinychat
chat nested
printf '{%% for a in range(5000) %%}{%% for b in range(5000) %%}{%% endfor %%}{%% endfor %%}' > "$tmp/nested/chat_template.jinja"
chat sets
python3 -c "
import sys
sets = ''.join('{%% set v%d = %d %%}' % (i, i) for i in range(int(sys.argv[1])))
print(sets + \"{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}<|im_start|>assistant\\n\", end='')
" 40000 > "$tmp/sets/chat_template.jinja"
# a template that takes a while to parse: the window for SIGTERM during loading
chat slowload
python3 -c "import sys; print(''.join('{%% set v%d = %d %%}' % (i, i) for i in range(int(sys.argv[1]))), end='')" 400000 > "$tmp/slowload/chat_template.jinja"
chat fifo
rm "$tmp/fifo/config.json" && mkfifo "$tmp/fifo/config.json"
chat emptytensors
python3 - "$tmp/emptytensors/model.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({'t%d' % i: {'dtype': 'F32', 'shape': [0], 'data_offsets': [0, 0]} for i in range(5000)}).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h)
PY
# its servers take port, port + 1, ...: all under Linux's ephemeral range (32768 and up), where the
# slowloris phase's ~1500 client sockets hold ports and a later server's port could be one of them
port=${MX_PORT_BASE:-$((21000 + RANDOM % 10000))}
timeout 240 node tests/server/test_hardening.mjs "$(realpath "$MLXCEL")" "$tmp" "$port"
