#!/usr/bin/env bash
# mlxcel beside llama.cpp and ik_llama.cpp on the same checkpoint shape
# (issues 29 and 30): prompt processing (pp) and generation (tg) t/s at one
# depth, 2 threads, interleaved: each round runs, per format, mlxcel's exact
# default, mlxcel --fast, llama.cpp's llama-bench and ik_llama.cpp's
# llama-bench with run-time repacking (-rtr 1: Q4_0 -> Q4_0_R8, Q8_0 ->
# Q8_0_R8, BF16 -> BF16_R16, its row-interleaved types), one repetition each,
# so a busy machine slows every engine alike. Prints one JSON line per run
# ("RUN {...}") and, at the end, the medians per engine and format and their
# ratios to the peers (tools/peer_table.py).
#
#   LLAMA=PATH/llama-bench IK=PATH/llama-bench tools/peer_bench.sh
# Environment: ROUNDS (3), P (512), N (128), D (0: llama-bench's -d; at a
# depth the peers run with flash attention, -fa 1 (FA=1 asks for it at depth 0
# too), and mlxcel fills its cache by a real prefill too, or with DEPTH_RANDOM=1
# by random values: the time to attend them does not depend on what they hold), FORMATS ("q4:q4_0 q8:q8_0 bf16:bf16": mlxcel's
# /tmp/llama1b-X folder and the GGUF /tmp/gguf/llama1b-Y.gguf), ENGINES
# ("mlxcel mlxcel-fast llama ik"; also mlxcel-kv16: an f16 cache, as llama.cpp's
# default; and ceiling: for bf16, the exact path's ceiling read by
# build/isa_bounds in the same round, so the table gives mlxcel's pp as a
# share of it), MLXCEL (build/mlxcel).
# Making the inputs (BENCHMARKS.md, "Side by side with llama.cpp and
# ik_llama.cpp"): build/mkmodel writes the mlxcel folders, tools/hf_to_gguf.py
# the bf16 GGUF and the peer's llama-quantize --pure the Q4_0 / Q8_0 files.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${MLXCEL:-build/mlxcel}
ROUNDS=${ROUNDS:-3}
P=${P:-512}
N=${N:-128}
D=${D:-0}
FORMATS=${FORMATS:-q4:q4_0 q8:q8_0 bf16:bf16}
ENGINES=${ENGINES:-mlxcel mlxcel-fast llama ik}
peer() { # engine name, binary, gguf, extra flags...
  local name=$1 bin=$2 g=$3; shift 3
  local fa=()
  [ "$D" -gt 0 ] && fa=(-d "$D")
  [ "${FA:-$((D > 0))}" = 1 ] && fa+=(-fa 1)
  "$bin" -m "$g" -p "$P" -n "$N" -r 1 -t 2 "${fa[@]}" "$@" -o json 2>/dev/null |
    python3 -c "
import json, sys
d = json.load(sys.stdin)
pp = [x['avg_ts'] for x in d if x['n_prompt'] > 0]; tg = [x['avg_ts'] for x in d if x['n_gen'] > 0]
print('RUN ' + json.dumps({'engine': '$name', 'format': '$fmt', 'depth': $D, 'pp': pp[0] if pp else None, 'tg': tg[0] if tg else None}))" ||
    echo "# $name $fmt failed"
}
ours() { # engine name, folder, extra flags...
  local name=$1 m=$2; shift 2
  local dep=()
  [ "$D" -gt 0 ] && dep=(-d "$D")
  [ "$D" -gt 0 ] && [ "${DEPTH_RANDOM:-0}" = 1 ] && dep+=(--depth-random)
  "$B" bench -m "$m" -p "$P" -n "$N" -r 1 -t 2 "${dep[@]}" --json "$@" 2>/dev/null |
    python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
print('RUN ' + json.dumps({'engine': '$name', 'format': '$fmt', 'depth': $D, 'pp': d['pp_tps'], 'tg': d['tg_tps'], 'bw_gbs': d['mem_read_gbs'], 'tg_efficiency': d['tg_efficiency']}))" ||
    echo "# $name $fmt failed"
}
ceiling() { # the exact bf16 path's ceiling (issue 29): build/isa_bounds' two-block bf16 form, halved for hi + lo
  [ "$fmt" = bf16 ] || return 0
  "${ISA_BOUNDS:-build/isa_bounds}" 2>/dev/null | awk -v f="$fmt" '/^two blocks: bf16 x/ {
    printf "RUN {\"engine\": \"ceiling\", \"format\": \"%s\", \"depth\": 0, \"pp\": %.1f, \"tg\": null}\n", f, $(NF-4) / 2; ok = 1 }
    END { if (!ok) print "# ceiling " f " failed" }'
}
for r in $(seq "$ROUNDS"); do
  for f in $FORMATS; do
    fmt=${f%%:*}
    m=/tmp/llama1b-$fmt g=/tmp/gguf/llama1b-${f#*:}.gguf
    echo "# round $r $fmt $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
    for e in $ENGINES; do
      case $e in
      mlxcel) ours mlxcel "$m" ;;
      mlxcel-fast) ours mlxcel-fast "$m" --fast ;;
      mlxcel-kv16) ours mlxcel-kv16 "$m" --cache-type-k f16 --cache-type-v f16 ;;
      llama) peer llama "$LLAMA" "$g" ;;
      ik) peer ik "$IK" "$g" -rtr 1 ;;
      ceiling) ceiling ;;
      esac
    done
  done
done
echo "# end $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
