#!/usr/bin/env bash
# Runs every benchmark program twice (these machines are noisy: read the two runs side by side)
# and the tour, and writes one dated markdown file of their tables with the machine they ran on,
# so that BENCHMARKS.md's numbers can be refreshed from a single run instead of by hand.
#   tools/benchmarks.sh [output.md]     default bench-results/<date>.md (git-ignored)
# Programs that need what the machine lacks are noted and skipped: gpu_report without a GPU,
# distributed_report without mpirun, libtorch_peer without libtorch-dev (and it is run with the
# OpenMP OpenBLAS only when update-alternatives points there: see ../shared/BENCHMARKING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench-results/$(date -u +%Y-%m-%d).md}"
mkdir -p "$(dirname "$out")"
cmake --preset bench > /dev/null
cmake --build --preset bench -j "$(nproc)" > /dev/null
cmake --build --preset release -j "$(nproc)" --target ember_tour train_mnist > /dev/null
bench=build/bench/bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run() {  # title, command...
  local title="$1"
  shift
  for round in 1 2; do
    echo "### $title (run $round)"
    echo
    echo '```'
    echo "\$ $*"
    "$@" 2>&1 || echo "(exit status $?)"
    echo '```'
    echo
  done
}

{
  echo "# ember benchmark run, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "- BLAS for the peer: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo none)"
  echo "- GPU: $(command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name --format=csv,noheader || echo none)"
  echo
  run "cpu_report" "$bench/cpu_report" 2
  run "optim_report" "$bench/optim_report" 2
  run "autograd_report" "$bench/autograd_report" 2
  if [ -d ../shared/data/mnist ]; then run "loader_report" "$bench/loader_report" ../shared/data/mnist; else run "loader_report" "$bench/loader_report"; fi
  run "amp_report" "$bench/amp_report" 2
  if [ -x "$bench/libtorch_peer" ]; then run "libtorch_peer" "$bench/libtorch_peer" 2; else echo "libtorch_peer: not built (no libtorch-dev)"; fi
  if [ -x "$bench/distributed_report" ] && command -v mpirun > /dev/null; then
    run "distributed_report, 2 ranks" mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1 "$bench/distributed_report"
  else
    echo "distributed_report: skipped (needs MPI)"
  fi
  if [ -x "$bench/gpu_report" ] && command -v nvidia-smi > /dev/null; then run "gpu_report" "$bench/gpu_report"; else echo "gpu_report: skipped (no GPU)"; fi
  run "ember_tour" ./build/release/examples/ember_tour --report "$(dirname "$out")/tour-report.html"
} > "$out"
echo "$out"
