#!/bin/bash
# The issue-4 table: Llama-3.2-1B-shaped checkpoints (see BENCHMARKS.md for how
# they are made), every format mapped and copied (--no-mmap), interleaved.
cd "$(dirname "$0")/.." || exit 1
B=build/mlxcel
REPS=${REPS:-2}
for f in bf16 q8 q4 mxfp4; do for mode in "" --no-mmap; do
  echo "# $f ${mode:-mmap} $(date +%T) $(uptime | sed 's/.*load/load/')"
  $B bench -m /tmp/llama1b-$f -p 512 -n 128 -r $REPS -t 2 --json $mode
done; done
echo "# end $(date +%T) $(uptime | sed 's/.*load/load/')"
