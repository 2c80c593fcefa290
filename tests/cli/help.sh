#!/usr/bin/env bash
# The command line's own surface: every command's --help (and mlxcel help
# CMD) exits 0 on stdout, typos get a suggestion, --version, bad values name
# the option and its range (one table with the server's), and README's
# command reference is what `mlxcel help --markdown` prints.
set -u
cd "$(dirname "$0")/../.."
M=${MLXCEL:-build/mlxcel}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok help/$1"; }
fail() { echo "FAIL help/$1: $2"; }
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n" "$(tail -c 300 "$tmp/err" 2>/dev/null | tr '\n' ' ')"; fi; }

cmds=$("$M" help | sed -n 's/^  \([a-z]\+\)  .*/\1/p' | grep -v '^help$')
[ "$(echo "$cmds" | wc -w)" -ge 15 ] && ok command_list || fail command_list "$cmds"
for c in $cmds run; do
  "$M" $c --help >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "$c/--help" bash -c "[ $rc -eq 0 ] && grep -q '^usage: mlxcel' '$tmp/out' && [ ! -s '$tmp/err' ]"
  "$M" help $c >"$tmp/out2" 2>"$tmp/err"; rc=$?
  check "$c/help_cmd" bash -c "[ $rc -eq 0 ] && cmp -s '$tmp/out' '$tmp/out2'"
done
"$M" --help >"$tmp/out" 2>"$tmp/err"; rc=$?
check top_help bash -c "[ $rc -eq 0 ] && grep -q 'commands:' '$tmp/out'"
"$M" --version >"$tmp/out" 2>"$tmp/err"
check version bash -c "grep -q '^mlxcel [0-9]' '$tmp/out' && grep -q 'commit' '$tmp/out' && grep -q '^built with' '$tmp/out' && grep -q '^CPU:' '$tmp/out'"

# typos
"$M" genrate -m x >"$tmp/out" 2>"$tmp/err"; rc=$?
check typo_command bash -c "[ $rc -eq 2 ] && grep -q \"did you mean 'generate'\" '$tmp/err'"
"$M" generate -m x --max-token 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
check typo_option bash -c "[ $rc -eq 2 ] && grep -q \"unknown option '--max-token'; did you mean '--max-tokens'\" '$tmp/err'"
"$M" chat -m x --tmep 0.5 >"$tmp/out" 2>"$tmp/err"
check typo_sampling grep -q "did you mean '--temp'" "$tmp/err"
"$M" download org/x --includ '*.json' >"$tmp/out" 2>"$tmp/err"
check typo_download grep -q "did you mean '--include'" "$tmp/err"
"$M" generate -m x --zzzzzzzz >"$tmp/out" 2>"$tmp/err"
check no_wild_guess bash -c "grep -q 'unknown option' '$tmp/err' && ! grep -q 'did you mean' '$tmp/err'"

# values: one range for the CLI and the server (presence penalty in [-2, 2])
"$M" generate -m x -p hi --presence-penalty 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
check range_cli bash -c "[ $rc -eq 2 ] && grep -q -- \"--presence-penalty: '3' is not a number in \[-2, 2\]\" '$tmp/err'"
"$M" chat -m x --repeat-penalty 0 >"$tmp/out" 2>"$tmp/err"
check chat_has_penalties grep -q -- "--repeat-penalty: '0' is not a number in \[0.01, 100\]" "$tmp/err"
"$M" generate -m x -p hi -n=abc >"$tmp/out" 2>"$tmp/err"
check int_value bash -c "grep -q \"unknown option '-n=abc'\" '$tmp/err'"
"$M" generate -m x -p hi --max-tokens=abc >"$tmp/out" 2>"$tmp/err"
check eq_syntax grep -q -- "--max-tokens: 'abc' is not an integer in \[0, 16777216\]" "$tmp/err"
"$M" generate -m x -p hi --output-format xml >"$tmp/out" 2>"$tmp/err"
check choice grep -q "is not one of text|json" "$tmp/err"
"$M" generate -m x -p >"$tmp/out" 2>"$tmp/err"
check needs_value grep -q "option -p needs a value" "$tmp/err"
"$M" generate -m x -p hi extra >"$tmp/out" 2>"$tmp/err"
check stray_argument grep -q "unexpected argument 'extra'" "$tmp/err"

# prompts from standard input and files (mlx-lm's spellings)
D=tests/server/tinymodel
mkdir -p "$tmp/m" && cp $D/*.json tests/fixtures/llama/model.safetensors "$tmp/m/"
"$M" generate -m "$tmp/m" -p "Hello there" -n 3 --max-tokens 3 --output-format json >"$tmp/a" 2>"$tmp/err"
echo -n "Hello there" | "$M" generate -m "$tmp/m" -p - -n 3 --output-format json >"$tmp/b" 2>"$tmp/err"
printf 'Hello there' >"$tmp/p.txt"
"$M" generate -m "$tmp/m" -f "$tmp/p.txt" -n 3 --output-format json >"$tmp/c" 2>"$tmp/err"
check prompt_stdin_file python3 - "$tmp/a" "$tmp/b" "$tmp/c" <<'PY'
import json, sys
r = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:]]
assert r[0]["prompt_ids"] == r[1]["prompt_ids"] == r[2]["prompt_ids"] and r[0]["generated_ids"] == r[1]["generated_ids"], r
PY
"$M" generate -m "$tmp/m" -p "Hello" --ignore-chat-template --system-prompt x -n 1 >"$tmp/out" 2>"$tmp/err"
check mlx_lm_spellings grep -q "needs a chat template" "$tmp/err"
"$M" generate -m "$tmp/m" -p "Hello" -n 4 --verbose >"$tmp/out" 2>"$tmp/err"
check verbose_timings bash -c "grep -q '^timings: load .* prefill .* decode' '$tmp/err'"
# the text is flushed before the statistics line when both go to one file
"$M" generate -m "$tmp/m" -p "Hello" -n 4 >"$tmp/both" 2>&1
check flush_order bash -c "tail -1 '$tmp/both' | grep -q '^prompt: .* generation: '"

# README's reference is the tables'
"$M" help --markdown >"$tmp/md"
python3 - README.md "$tmp/md" <<'PY' >"$tmp/err" 2>&1
import sys
s = open(sys.argv[1]).read()
begin = s.index("<!-- commands: generated") ; begin = s.index("-->", begin) + 3
end = s.index("<!-- commands: end -->")
assert s[begin:end].strip() == open(sys.argv[2]).read().strip(), "README.md's command reference differs from `mlxcel help --markdown`: run tools/readme_commands.sh"
PY
check readme_reference test $? -eq 0
