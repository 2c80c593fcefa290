#!/bin/bash
# BENCHMARKS.md "Tensor and pipeline parallelism over MPI": TP=1 / TP=2 / PP=2
# on the Llama-3.2-1B-shaped 4-bit checkpoint (made as in the Llama-3.2-1B
# section: build/mkmodel + mlxcel convert -q --q-bits 4 --q-group-size 64),
# interleaved, twice; -v prints each rank's passes, messages, bytes and time
# in MPI. MODEL (default /tmp/llama1b-q4), PROMPT (ids, default 32), NEW (16).
cd "$(dirname "$0")/.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
M=build/mlxcel; D=${MODEL:-/tmp/llama1b-q4}
P=$(seq -s, 1000 $((999 + ${PROMPT:-32})))
G="generate -m $D --prompt-ids $P -n ${NEW:-16} --temp 0 --ignore-eos --output-format json -v"
for rep in 1 2; do
  echo "# tp1 -t 2 $(date +%T) $(uptime | sed 's/.*load/load/')"; $M $G -t 2 2>&1 | grep -v "^timings"
  echo "# tp2 -t 1 $(date +%T) $(uptime | sed 's/.*load/load/')"; mpirun -np 2 --oversubscribe $M $G -t 1 --tp 2 2>&1 | grep -v "^timings"
  echo "# pp2 -t 1 $(date +%T) $(uptime | sed 's/.*load/load/')"; mpirun -np 2 --oversubscribe $M $G -t 1 --pp 2 2>&1 | grep -v "^timings"
done
