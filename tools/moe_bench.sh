#!/bin/bash
cd /work/main
B=build/mlxcel
for r in 1 2; do
for m in mixtral dense; do for mode in "" --no-mmap; do
  echo "# $m ${mode:-mmap} $(date +%T) $(uptime | sed 's/.*load/load/')"
  $B bench -m /tmp/moeb-$m -p 64 -n 64 -r 3 -t 2 --json $mode
done; done; done
echo "# end $(date +%T) $(uptime | sed 's/.*load/load/')"
