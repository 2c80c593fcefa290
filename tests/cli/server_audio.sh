#!/usr/bin/env bash
# Speech-to-text servers (the whisper fixture, and a copy given timestamp
# tokens) driven by the official openai npm client (tests/server/test_audio.mjs),
# then SIGTERM must stop them cleanly. Prints ok/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
. tests/lib/npm_client.sh
need_npm server_audio openai 4
tmp=$(mktemp -d)
pid= pid2=
trap 'kill $pid $pid2 2>/dev/null; rm -rf "$tmp"' EXIT
F=tests/fixtures/whisper
python3 tests/cli/whisper_ts_model.py $F $tmp/ts $F/inputs/speech.wav $tmp/long.wav
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}; port2=$((port + 1))
"$MLXCEL" serve -m $F --port $port -t 2 2>"$tmp/server.log" & pid=$!
"$MLXCEL" serve -m $tmp/ts --port $port2 -t 2 2>"$tmp/server2.log" & pid2=$!
up=0
for i in $(seq 1 100); do
  if node -e "Promise.all([$port,$port2].map(p=>fetch('http://127.0.0.1:'+p+'/health'))).then(rs=>process.exit(rs.every(r=>r.status===200)?0:1)).catch(()=>process.exit(1))" 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
if [ $up = 1 ]; then echo "ok server_audio/health_ready"; else echo "FAIL server_audio/health_ready: no 200 from /health"; cat "$tmp"/server*.log; exit 1; fi
cp tests/server/test_audio.mjs "$node_dir/"
timeout 300 node "$node_dir/test_audio.mjs" $port $port2 "$(realpath $F/inputs/speech.wav)" "$tmp/long.wav"
kill -TERM $pid $pid2
rcs=""
for p in $pid $pid2; do wait $p; rcs="$rcs $?"; done
pid= pid2=
if [ "$rcs" = " 0 0" ]; then echo "ok server_audio/sigterm_clean_exit"; else echo "FAIL server_audio/sigterm_clean_exit: status$rcs"; tail -5 "$tmp/server.log"; fi
