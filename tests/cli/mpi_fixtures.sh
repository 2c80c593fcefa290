#!/usr/bin/env bash
# Issue 27's self-parity over every causal fixture: build/tests/dist_fixtures
# writes each fixture's single-process logits (whole-prompt prefill, then the
# greedy decode one token at a time), then runs the same under
# `mpirun -np 2 --pp 2` (every fixture must load), `--tp 2` (a family the
# split refuses by name is a skip line) and `-np 4 --tp 2 --pp 2`: logits
# within 1e-4 * max(1, max|single|), the same argmax at every position.
# Exact activations (MLXCEL_INT8=0): see tests/unit/dist_fixtures.c. Then TP=2 x PP=2 again with the
# ASan/UBSan build (leak checks off: Open MPI keeps its own allocations to the end).
set -u
cd "$(dirname "$0")/../.."
B=${DIST_FIXTURES:-build/tests/dist_fixtures}
if ! command -v mpirun >/dev/null; then echo "FAIL mpi_fixtures/setup: mpirun is missing (make deps installs openmpi-bin)"; exit 0; fi
if [ ! -x "$B" ]; then echo "FAIL mpi_fixtures/setup: $B is missing (make unit)"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_mtl=^ofi
export MLXCEL_INT8=0
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
"$B" --write "$D" | sed 's|^ok |ok mpi_fixtures/|; s|^FAIL |FAIL mpi_fixtures/|'
mpirun -np 2 --oversubscribe "$B" --check "$D" --pp 2 2>"$D/err.pp" | sed 's|^ok |ok mpi_fixtures/|; s|^FAIL |FAIL mpi_fixtures/|' ||
  echo "FAIL mpi_fixtures/pp2: mpirun: $(tail -3 "$D/err.pp" | tr '\n' ' ')"
mpirun -np 2 --oversubscribe "$B" --check "$D" --tp 2 2>"$D/err.tp" | sed 's|^ok |ok mpi_fixtures/|; s|^FAIL |FAIL mpi_fixtures/|' ||
  echo "FAIL mpi_fixtures/tp2: mpirun: $(tail -3 "$D/err.tp" | tr '\n' ' ')"
mpirun -np 4 --oversubscribe "$B" --check "$D" --tp 2 --pp 2 2>"$D/err.tppp" | sed 's|^ok |ok mpi_fixtures/|; s|^FAIL |FAIL mpi_fixtures/|' ||
  echo "FAIL mpi_fixtures/tp2pp2: mpirun: $(tail -3 "$D/err.tppp" | tr '\n' ' ')"
A=build/asan/tests/dist_fixtures
if [ -x "$A" ] && [ -z "${DIST_FIXTURES:-}" ]; then
  ASAN_OPTIONS=detect_leaks=0 mpirun -np 4 --oversubscribe -x ASAN_OPTIONS "$A" --check "$D" --tp 2 --pp 2 2>"$D/err.asan" |
    sed 's|^ok \([^ ]*\)|ok mpi_fixtures/asan/\1|; s|^FAIL |FAIL mpi_fixtures/asan/|' ||
    echo "FAIL mpi_fixtures/asan_tp2pp2: mpirun: $(grep -m3 -E 'ERROR|runtime error|Abort' "$D/err.asan" | tr '\n' ' ')"
fi
