#!/usr/bin/env bash
# mlxcel chat in a real terminal (tmux): the banner, /help, Ctrl-C stopping
# a long reply while the chat goes on, /system, /clear, /exit; and, piped,
# a context too small for the conversation dropping the oldest turns.
set -u
cd "$(dirname "$0")/../.."
M=$(realpath "${MLXCEL:-build/mlxcel}")
tmp=$(mktemp -d)
sock="mlxcel-chat-test-$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
ok() { echo "ok chat/$1"; }
fail() { echo "FAIL chat/$1: $2"; }
# the demo model with no EOS at all, so a greedy reply runs until stopped
D="$tmp/m"
mkdir -p "$D" && cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors "$D/"
python3 - "$D" <<'PY'
import json, sys
d = sys.argv[1]
for f, k in (("generation_config.json", "eos_token_id"), ("config.json", "eos_token_id"), ("tokenizer_config.json", "eos_token")):
    j = json.load(open(f"{d}/{f}")); j.pop(k, None); json.dump(j, open(f"{d}/{f}", "w"))
PY

if ! command -v tmux >/dev/null; then fail tmux "tmux is not installed (make test-deps)"; exit 0; fi
screen() { tmux -L "$sock" capture-pane -p -S -200 -t t; }
wait_for() { # pattern, seconds
  local i
  for i in $(seq $(($2 * 10))); do screen | grep -q -- "$1" && return 0; sleep 0.1; done
  return 1
}
tmux -L "$sock" new-session -d -s t -x 160 -y 50 "$M chat -m $D --temp 0 -n 1000000 -c 100000 -t 1; echo CHAT-EXITED \$?; sleep 30"
if wait_for "Ctrl-C stops a reply" 20; then ok banner; else fail banner "$(screen | tail -5)"; fi
screen | grep -q "mlxcel chat: .*(llama, 2 layers), context 100000 tokens" && ok banner_model || fail banner_model "$(screen | head -3)"
tmux -L "$sock" send-keys -t t "/help" Enter
if wait_for "/clear" 5 && screen | grep -q "/system \[TEXT\]"; then ok help; else fail help "$(screen | tail -8)"; fi
tmux -L "$sock" send-keys -t t "tell me a long story" Enter
sleep 1.5
tmux -L "$sock" send-keys -t t C-c
if wait_for "\[stopped\]" 10; then ok ctrl_c_stops_reply; else fail ctrl_c_stops_reply "$(screen | tail -5)"; fi
sleep 0.3
screen | grep -q "CHAT-EXITED" && fail still_running "the chat exited" || ok still_running
back=0
for _ in $(seq 50); do screen | grep -v '^ *$' | tail -1 | grep -q "^> *$" && { back=1; break; }; sleep 0.1; done
[ $back = 1 ] && ok prompt_back || fail prompt_back "$(screen | tail -3)"
tmux -L "$sock" send-keys -t t "/system be brief" Enter
wait_for "system prompt set" 5 && ok system || fail system "$(screen | tail -3)"
tmux -L "$sock" send-keys -t t "/system" Enter
wait_for "\[system prompt: be brief\]" 5 && ok system_show || fail system_show "$(screen | tail -3)"
tmux -L "$sock" send-keys -t t "second turn" Enter
sleep 0.5
tmux -L "$sock" send-keys -t t C-c
wait_for "\[stopped\].*" 10 && [ "$(screen | grep -c '\[stopped\]')" -ge 2 ] && ok second_reply || fail second_reply "$(screen | tail -5)"
tmux -L "$sock" send-keys -t t "/clear" Enter
wait_for "conversation cleared" 5 && ok clear || fail clear "$(screen | tail -3)"
tmux -L "$sock" send-keys -t t "/exit" Enter
wait_for "CHAT-EXITED 0" 10 && ok exit || fail exit "$(screen | tail -3)"

# piped: a context too small for three turns drops the oldest, the chat goes on
printf 'first question here\nsecond question here\nthird question here\nfourth\n/exit\n' |
  "$M" chat -m "$D" -n 24 -c 120 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "dropped the oldest turn" "$tmp/err" && [ "$(wc -l <"$tmp/out")" -eq 4 ]; then ok context_full_drops_oldest
else fail context_full_drops_oldest "rc $rc, $(wc -l <"$tmp/out") replies: $(tail -c 300 "$tmp/err")"; fi
# piped, speculating (prompt lookup; the model as its own draft; a recurrent target): the replies of the chat
# without drafts, the statistics line under -v
printf 'first question here\nsecond one\n/exit\n' | "$M" chat -m "$D" -n 24 --temp 0 -t 1 >"$tmp/plain" 2>/dev/null
for a in "--lookup-ngram 2" "--draft-model $D"; do
  printf 'first question here\nsecond one\n/exit\n' | "$M" chat -m "$D" -n 24 --temp 0 -t 1 -v $a >"$tmp/out" 2>"$tmp/err"
  n=${a%% *}; n=${n#--}
  cmp -s "$tmp/plain" "$tmp/out" && [ -s "$tmp/out" ] && grep -q "speculative: .* drafted tokens accepted" "$tmp/err" && ok "speculative/$n" ||
    fail "speculative/$n" "$(head -c 200 "$tmp/out") / $(tail -1 "$tmp/err")"
done
R="$tmp/rec"; mkdir -p "$R"; cp tests/server/tinymodel/*.json "$R/"; cp tests/fixtures/qwen3_next/config.json tests/fixtures/qwen3_next/model.safetensors "$R/"
printf 'first question here\nsecond one\n/exit\n' | "$M" chat -m "$R" -n 24 --temp 0 -t 1 >"$tmp/plain" 2>/dev/null
printf 'first question here\nsecond one\n/exit\n' | "$M" chat -m "$R" -n 24 --temp 0 -t 1 --lookup-ngram 2 >"$tmp/out" 2>"$tmp/err"
cmp -s "$tmp/plain" "$tmp/out" && [ -s "$tmp/out" ] && ok speculative/recurrent || fail speculative/recurrent "$(tail -1 "$tmp/err")"
echo '{"type":"object"}' >"$tmp/s.json"
printf 'hi\n/exit\n' | "$M" chat -m "$D" -n 4 -t 1 --json-schema "$tmp/s.json" --lookup-ngram 2 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "with a drafter" "$tmp/err" && ok speculative/grammar_refused || fail speculative/grammar_refused "rc $rc: $(cat "$tmp/err")"
long=$(python3 -c 'print("word " * 200)')
printf '%s\nshort\n/exit\n' "$long" | "$M" chat -m "$D" -n 8 -c 64 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "too long for the context" "$tmp/err" && [ "$(wc -l <"$tmp/out")" -eq 1 ]; then ok message_too_long
else fail message_too_long "rc $rc: $(tail -c 300 "$tmp/err")"; fi
