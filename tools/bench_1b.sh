#!/bin/bash
# The issue-4 table: Llama-3.2-1B-shaped checkpoints (see BENCHMARKS.md for how
# they are made), every format mapped and copied (--no-mmap), interleaved.
# Each file is first dropped from the page cache and read back by one mapped
# warm-up run: pages a mapping faults in land in 2 MiB folios (Linux >= 6.x
# with large-folio file systems), which a mapped decode then streams without
# a TLB miss per 4 KiB; a file left in the cache by the write that made it
# sits in small folios (bf16 decode a quarter slower). TTFT below is then
# measured with the file in the page cache. EXTRA formats (default: the
# 6-bit, 3-bit and mxfp8 checkpoints, where present) run mapped only; bf16
# also runs with MLXCEL_BF16_DOT=1.
# tools/bench_table.py turns the saved output of runs into BENCHMARKS.md rows.
cd "$(dirname "$0")/.." || exit 1
B=build/mlxcel
REPS=${REPS:-2}
EXTRA=${EXTRA-q6 q3 mxfp8}
for f in bf16 q8 q4 mxfp4 $EXTRA; do
  [ -d /tmp/llama1b-$f ] || continue
  for st in /tmp/llama1b-$f/*.safetensors; do dd if="$st" iflag=nocache count=0 status=none; done
  $B bench -m /tmp/llama1b-$f -p 8 -n 1 -r 1 -t 2 > /dev/null
done
for f in bf16 q8 q4 mxfp4; do for mode in "" --no-mmap; do
  echo "# $f ${mode:-mmap} $(date +%T) $(uptime | sed 's/.*load/load/')"
  $B bench -m /tmp/llama1b-$f -p 512 -n 128 -r $REPS -t 2 --json $mode
done
  if [ $f = bf16 ]; then # the opt-in bf16 activations (prompt only; decode is the same)
    echo "# $f MLXCEL_BF16_DOT=1 $(date +%T) $(uptime | sed 's/.*load/load/')"
    MLXCEL_BF16_DOT=1 $B bench -m /tmp/llama1b-$f -p 512 -n 128 -r $REPS -t 2 --json
  fi
done
for f in $EXTRA; do
  [ -d /tmp/llama1b-$f ] || continue
  echo "# $f mmap $(date +%T) $(uptime | sed 's/.*load/load/')"
  $B bench -m /tmp/llama1b-$f -p 512 -n 128 -r $REPS -t 2 --json
done
echo "# end $(date +%T) $(uptime | sed 's/.*load/load/')"
