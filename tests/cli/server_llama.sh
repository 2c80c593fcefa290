#!/usr/bin/env bash
# llama-server compatibility: its routes (/completion, /infill, /props, /slots,
# /apply-template), its flags (--alias, -ngl, -fa, --jinja, --host localhost)
# and LLAMA_ARG_* variables, on two small servers driven by
# tests/server/test_llama.py (python3 stdlib). Prints ok/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
tmp=$(mktemp -d)
pid=; pid2=
trap 'kill $pid $pid2 2>/dev/null; rm -rf "$tmp"' EXIT
for m in plain fim; do
  mkdir -p "$tmp/$m"
  cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$tmp/$m/"
done
# the same tokenizer with Qwen2.5-Coder's FIM tokens (ids 314-318: free rows of the 320-row vocabulary)
python3 - "$tmp/fim/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for i, c in enumerate(["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"]):
    t["added_tokens"].append({"id": 314 + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True})
json.dump(t, open(sys.argv[1], "w"))
PY
# a bad variable is refused before anything loads
LLAMA_ARG_PORT=eighty "$MLXCEL" serve -m "$tmp/plain" >/dev/null 2>"$tmp/env.err"; rc=$?
if [ $rc = 2 ] && grep -q "LLAMA_ARG_PORT: 'eighty' is not an integer" "$tmp/env.err"; then echo "ok llama/env_bad_value"
else echo "FAIL llama/env_bad_value: status $rc: $(cat "$tmp/env.err")"; fi
LLAMA_ARG_JINJA=maybe "$MLXCEL" serve -m "$tmp/plain" >/dev/null 2>"$tmp/env2.err"; rc=$?
if [ $rc = 2 ] && grep -q "LLAMA_ARG_JINJA='maybe'" "$tmp/env2.err"; then echo "ok llama/env_bad_flag"; else echo "FAIL llama/env_bad_flag: status $rc: $(cat "$tmp/env2.err")"; fi
# -fa takes a value only when one of on|off|auto follows
"$MLXCEL" serve -fa -m "$tmp/nonexistent" >/dev/null 2>"$tmp/fa.err"; rc=$?
if [ $rc != 0 ] && grep -q -- "-fa is ignored" "$tmp/fa.err" && grep -q "nonexistent" "$tmp/fa.err"; then echo "ok llama/flag_optional_value"
else echo "FAIL llama/flag_optional_value: status $rc: $(cat "$tmp/fa.err")"; fi
if "$MLXCEL" serve --help | tr -s " \n" "  " | grep -q "(env LLAMA_ARG_CTX_SIZE)"; then echo "ok llama/help_names_env"; else echo "FAIL llama/help_names_env"; fi
port=${MX_PORT_BASE:-$((20000 + RANDOM % 12000))}; port2=$((port + 1))
# env gives the slots, the alias and a context size the command line overrides
LLAMA_ARG_N_PARALLEL=2 LLAMA_ARG_ALIAS=envname LLAMA_ARG_CTX_SIZE=64 LLAMA_ARG_PORT=$port LLAMA_ARG_MLOCK=1 LLAMA_ARG_API_KEY=k3y \
  "$MLXCEL" serve -m "$tmp/fim" -c 4096 -t 1 -ngl 99 -fa on --jinja --host localhost 2>"$tmp/fim.log" & pid=$!
"$MLXCEL" serve -m "$tmp/plain" --port $port2 -c 512 -np 2 -t 1 --alias gpt-x,other -a third 2>"$tmp/plain.log" & pid2=$!
timeout 120 python3 tests/server/test_llama.py $port $port2 || cat "$tmp"/*.log
n=$(grep -c "is ignored" "$tmp/fim.log")
if [ "$n" = 3 ] && grep -q -- "-ngl 99 is ignored" "$tmp/fim.log" && grep -q -- "-fa on is ignored" "$tmp/fim.log" && grep -q "LLAMA_ARG_MLOCK" "$tmp/fim.log"
then echo "ok llama/gpu_flags_warned"; else echo "FAIL llama/gpu_flags_warned: $(cat "$tmp/fim.log")"; fi
if grep -q "per slot here: 2 slots x 512" "$tmp/plain.log"; then echo "ok llama/ctx_note"; else echo "FAIL llama/ctx_note: $(cat "$tmp/plain.log")"; fi
kill -TERM $pid $pid2
wait $pid; r1=$?; wait $pid2; r2=$?
pid=; pid2=
if [ "$r1 $r2" = "0 0" ]; then echo "ok llama/sigterm_clean_exit"; else echo "FAIL llama/sigterm_clean_exit: status $r1 $r2"; fi
