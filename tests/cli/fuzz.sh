#!/usr/bin/env bash
# A short run of every libFuzzer target (build/fuzz, `make fuzz`) from its
# committed seeds, so that a change that breaks an invariant the targets check
# fails `make test`. FUZZ_SECONDS (default 5) per target; a crash leaves its
# input in build/fuzz/crashes/. Prints ok/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p build/fuzz/crashes
seeds() { # target -> seed dirs and flags
  case $1 in
    fuzz_json) echo "fuzz/seeds-json -max_len=4096" ;;
    fuzz_tokenizer) echo "fuzz/seeds-tokenizer -max_len=4096" ;;
    fuzz_safetensors) echo "fuzz/seeds-safetensors -max_len=4096" ;;
    fuzz_template) echo "fuzz/seeds-template tests/templates -max_len=4096" ;;
    fuzz_model) echo "fuzz/seeds-model -dict=fuzz/model.dict" ;;
    fuzz_http) echo "fuzz/seeds-http -max_len=8192" ;;
    fuzz_hub) echo "fuzz/seeds-hub -max_len=4096" ;;
    fuzz_grammar) echo "fuzz/seeds-grammar -max_len=4096" ;;
    fuzz_audio) echo "fuzz/seeds-audio -max_len=65536" ;;
    fuzz_image) echo "fuzz/seeds-image -max_len=8192" ;;
    *) echo "" ;;
  esac
}
n=0
for src in fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  bin=build/fuzz/$name
  if [ ! -x "$bin" ]; then echo "FAIL fuzz/$name: $bin is missing (make fuzz)"; continue; fi
  args=$(seeds "$name")
  if [ -z "$args" ]; then echo "FAIL fuzz/$name: no seeds listed in tests/cli/fuzz.sh"; continue; fi
  mkdir -p "$tmp/$name"
  # shellcheck disable=SC2086
  ASAN_OPTIONS=detect_leaks=1 timeout $((secs + 120)) "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 \
    -artifact_prefix=build/fuzz/crashes/"$name"- -print_final_stats=1 "$tmp/$name" $args >"$tmp/$name.log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$tmp/$name.log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ] && [ -n "$runs" ] && [ "$runs" -gt 0 ]; then
    echo "ok fuzz/$name ($runs runs in ${secs} s)"
  else
    echo "FAIL fuzz/$name: status $rc; $(grep -m1 -E 'ERROR|SUMMARY|deadly|Test unit written' "$tmp/$name.log")"
    tail -20 "$tmp/$name.log" | sed 's/^/    /'
  fi
  n=$((n + 1))
done
[ $n -gt 0 ] || echo "FAIL fuzz: no targets"
