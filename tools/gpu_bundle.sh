#!/usr/bin/env bash
# Builds, on a machine without a GPU, the programs that tools/gpu_check.sh runs, and packs them
# for a GPU machine that cannot build ember itself (one with CUDA and PyTorch but no Eigen,
# GoogleTest or CLI11, and no network to fetch them). Building here also saves the GPU machine's
# time: it then only runs.
#   tools/gpu_bundle.sh [bundle]     default .gpu-bundle/ember-gpu.tar.xz (git-ignored)
# Then, on the GPU machine, from a copy of this working tree:
#   tools/gpu_check.sh --prebuilt .gpu-bundle/ember-gpu.tar.xz [log-folder]
set -euo pipefail
cd "$(dirname "$0")/.."
bundle="${1:-.gpu-bundle/ember-gpu.tar.xz}"
build="${BUILD_DIR:-build/gpu-bundle}"
source tools/deps.sh
ember_ensure_deps

# Without MPI: its shared libraries and plugins cannot travel in a bundle (a lone process still
# gets an NCCL group, which needs no MPI to start).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DEMBER_MPI=OFF -DEMBER_BUILD_BENCH=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > /dev/null
cmake --build "$build" -j "$(nproc)" --target ember_tests train_mnist train_charlm gpu_report

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
for program in tests/ember_tests examples/train_mnist examples/train_charlm bench/gpu_report; do
  strip -o "$stage/$(basename "$program")" "$build/$program"
done
# This machine's runtime libraries, for a GPU machine that lacks one (gpu_check.sh puts them last
# on the library path, so the GPU machine's own are preferred).
for lib in libgomp.so.1 libz.so.1 libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$stage/lib/"
done
{
  echo "bundle: commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')," \
       "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), sm_${CUDA_ARCH:-90}"
} > "$stage/BUILD_INFO"
mkdir -p "$(dirname "$bundle")"
tar -C "$stage" -cf - . | xz -T0 -6 > "$bundle"
echo "$bundle: $(du -h "$bundle" | cut -f1) ($(cat "$stage/BUILD_INFO"))"
