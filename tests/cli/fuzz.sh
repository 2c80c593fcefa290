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
run_target() { # name: one short run, then its ok/FAIL line
  local name=$1 bin=build/fuzz/$1 args rc runs
  args=$(seeds "$name")
  if [ -z "$args" ]; then echo "FAIL fuzz/$name: no seeds listed in tests/cli/fuzz.sh"; return; fi
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
}
# targets are single-threaded: MX_TEST_JOBS (2) at a time, reported in order
names=()
for src in fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  if [ ! -x "build/fuzz/$name" ]; then echo "FAIL fuzz/$name: build/fuzz/$name is missing (make fuzz)"; continue; fi
  while [ "$(jobs -rp | wc -l)" -ge "${MX_TEST_JOBS:-2}" ]; do wait -n; done
  run_target "$name" >"$tmp/$name.result" 2>&1 &
  names+=("$name")
done
wait
for name in "${names[@]}"; do cat "$tmp/$name.result"; done
[ ${#names[@]} -gt 0 ] || echo "FAIL fuzz: no targets"
