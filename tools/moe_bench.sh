#!/bin/bash
# MoE vs same-active dense decode, weights mapped and copied (--no-mmap),
# interleaved (docs/moe-bench.md section 5). Checkpoints:
#   build/mkmodel --config tools/configs/mixtral-scaled.json -o /tmp/moeb-mixtral --dtype bf16
#   build/mkmodel --config tools/configs/dense-same-active.json -o /tmp/moeb-dense --dtype bf16
cd "$(dirname "$0")/.." || exit 1
B=build/mlxcel
for r in 1 2; do
for m in mixtral dense; do for mode in "" --no-mmap; do
  echo "# $m ${mode:-mmap} $(date +%T) $(uptime | sed 's/.*load/load/')"
  $B bench -m /tmp/moeb-$m -p 64 -n 64 -r 3 -t 2 --json $mode
done; done; done
echo "# end $(date +%T) $(uptime | sed 's/.*load/load/')"
