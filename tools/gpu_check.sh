#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, configure and build the CUDA build with all
# cores, run the CUDA tests (and the whole suite, whose CUDA cases run there instead of being
# skipped), then the GPU benchmarks next to PyTorch's when it is installed, and print a short
# summary. Logs go to the folder given (default: gpu-logs). Budget: under 8 minutes on an
# H200 with 16 cores.
#   tools/gpu_check.sh [log-folder]          CUDA_ARCH=90 by default (H100/H200)
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${1:-gpu-logs}"
mkdir -p "$logs"
jobs=$(nproc)
start=$(date +%s)
step() { printf '== %s (%ds)\n' "$1" $(( $(date +%s) - start )); }

step "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$logs/device.txt" || true

step "configure + build (logs: $logs/build.log)"
if ! { cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DEMBER_BUILD_BENCH=ON \
         -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" &&
       cmake --build build/gpu -j "$jobs"; } > "$logs/build.log" 2>&1; then
  tail -n 40 "$logs/build.log"
  echo "BUILD FAILED"
  exit 1
fi

step "tests (logs: $logs/tests.log)"
(cd build/gpu && ctest -j "$jobs" --timeout 120 --output-on-failure) > "$logs/tests.log" 2>&1
tests_rc=$?
grep -E "tests passed|tests failed" "$logs/tests.log"
grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception" "$logs/tests.log" | head -n 40

step "training on the GPU (logs: $logs/train.log)"
{ ./build/gpu/examples/train_mnist --device cuda --model cnn --epochs 1 --workers 2 --pin-memory --expect-accuracy 0.9 &&
  ./build/gpu/examples/train_charlm --device cuda --epochs 6 --sample 200 --expect-below 0.8; } > "$logs/train.log" 2>&1
train_rc=$?
grep -E "^epoch [0-9]+:|test accuracy|below" "$logs/train.log"
[ $train_rc -eq 0 ] || echo "TRAINING FAILED (status $train_rc)"

step "ember's GPU report"
timeout 180 ./build/gpu/bench/gpu_report | tee "$logs/gpu_report.md"

if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  step "PyTorch on the same device"
  timeout 120 python3 bench/gpu_peer.py | tee "$logs/pytorch_report.md"
else
  echo "(no PyTorch with CUDA here: no side-by-side column)"
fi

step "done"
echo "tests: $([ $tests_rc -eq 0 ] && echo passed || echo FAILED); training: $([ $train_rc -eq 0 ] && echo passed || echo FAILED); logs in $logs/"
[ $tests_rc -eq 0 ] && [ $train_rc -eq 0 ]
