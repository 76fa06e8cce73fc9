#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, configure and build the CUDA build with all
# cores, run the whole test suite (its CUDA cases run there instead of being skipped), train
# both example models on the GPU, then the GPU benchmarks next to PyTorch's when it is installed,
# and print one side-by-side table. Logs go to the folder given (default: gpu-logs), at most
# eight files. Budget: under 8 minutes on an H200 with 16 cores (about 2 of them without the
# build, with --prebuilt).
#
#   tools/gpu_check.sh [log-folder]                       build here (needs tools/deps.sh's packages)
#   tools/gpu_check.sh --prebuilt BUNDLE [log-folder]     run programs built elsewhere by
#                                                         tools/gpu_bundle.sh (no compiler, Eigen,
#                                                         GoogleTest... needed on the GPU machine)
# CUDA_ARCH=90 by default (H100/H200). cuBLAS and cuDNN are opened at run time: the CUDA
# toolkit's lib64 and the pip packages nvidia-cublas / nvidia-cudnn (PyTorch's) are searched.
set -uo pipefail
cd "$(dirname "$0")/.."
prebuilt=""
if [ "${1:-}" = "--prebuilt" ]; then
  prebuilt="$2"
  shift 2
fi
logs="${1:-gpu-logs}"
mkdir -p "$logs"
jobs=$(nproc)
start=$(date +%s)
step() { printf '== %s (%ds)\n' "$1" $(( $(date +%s) - start )); }

# cuBLAS and cuDNN: the toolkit's, else those of the Python packages PyTorch uses.
pip_libs=$(python3 -c '
import glob, os
try:
    import nvidia  # the namespace package of the nvidia-* wheels (nvidia/cublas/lib, nvidia/cu13/lib, ...)
    for root in nvidia.__path__:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            print(lib)
except Exception:
    pass' 2>/dev/null | paste -sd: -)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${pip_libs:+:$pip_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$logs/device.txt" || true
echo "library path: $LD_LIBRARY_PATH" >> "$logs/device.txt"

if [ -n "$prebuilt" ]; then
  step "unpack $prebuilt"
  bin=build/gpu-prebuilt
  rm -rf "$bin" && mkdir -p "$bin" && tar -C "$bin" -xJf "$prebuilt" || { echo "UNPACK FAILED"; exit 1; }
  # The libraries of the build machine, last: used only where this machine has none.
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/$bin/lib"
  export EMBER_REFERENCE_DIR="$PWD/tests/reference"
  tests_bin=$bin/ember_tests examples=$bin bench=$bin
  cat "$bin/BUILD_INFO" | tee -a "$logs/device.txt"
else
  step "configure + build (logs: $logs/build.log)"
  if ! { cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DEMBER_BUILD_BENCH=ON \
           -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" &&
         cmake --build build/gpu -j "$jobs"; } > "$logs/build.log" 2>&1; then
    tail -n 40 "$logs/build.log"
    echo "BUILD FAILED"
    exit 1
  fi
  tests_bin=build/gpu/tests/ember_tests examples=build/gpu/examples bench=build/gpu/bench
fi

# Each test in its own process, all cores busy: a crash or a sticky CUDA error (an illegal
# address poisons the context) then costs one test, not the rest of the suite.
step "tests (logs: $logs/tests.log)"
run_one() {
  local out rc
  out=$(timeout 120 "$tests_bin" --gtest_filter="$1" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    printf 'FAILED %s (status %d)\n%s\n\n' "$1" "$rc" "$(tail -n 30 <<< "$out")"
  elif grep -q "\[  SKIPPED \]" <<< "$out"; then
    printf 'SKIPPED %s\n' "$1"
  fi
}
export -f run_one
export tests_bin
all_tests=$("$tests_bin" --gtest_list_tests | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}')
# The tests that time copies against kernels (CudaMemory.*) run alone afterwards: processes
# sharing the GPU take turns on it, which would blur the overlap they measure.
grep -v '^CudaMemory\.' <<< "$all_tests" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {} > "$logs/tests.log" 2>&1
grep '^CudaMemory\.' <<< "$all_tests" | xargs -P 1 -I{} bash -c 'run_one "$1"' _ {} >> "$logs/tests.log" 2>&1
total=$(printf '%s\n' "$all_tests" | wc -l)
failed=$(grep -c '^FAILED' "$logs/tests.log")
skipped=$(grep -c '^SKIPPED' "$logs/tests.log")
echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped of $total tests"
grep '^FAILED' "$logs/tests.log" | head -n 40
tests_rc=$([ "$failed" -eq 0 ] && echo 0 || echo 1)
# The first failures again under compute-sanitizer, which names the kernel and the bad access.
if [ "$failed" -gt 0 ] && command -v compute-sanitizer > /dev/null; then
  step "compute-sanitizer on the first failures (logs: $logs/sanitizer.log)"
  grep '^FAILED' "$logs/tests.log" | head -n 6 | awk '{print $2}' |
    xargs -P 6 -I{} sh -c 'timeout 120 compute-sanitizer --tool memcheck "$0" --gtest_filter="$1" 2>&1 | tail -n 40' \
      "$tests_bin" {} > "$logs/sanitizer.log" 2>&1
  grep -E "^=========.*(Invalid|Error|error)" "$logs/sanitizer.log" | sort | uniq -c | head -n 10
fi

step "training on the GPU (logs: $logs/train.log)"
{ timeout 150 "$examples/train_mnist" --device cuda --model cnn --epochs 1 --workers 2 --pin-memory --expect-accuracy 0.9 &&
  timeout 150 "$examples/train_charlm" --device cuda --epochs 6 --sample 200 --expect-below 0.8; } > "$logs/train.log" 2>&1
train_rc=$?
grep -E "^epoch [0-9]+:|test accuracy|below" "$logs/train.log"
[ $train_rc -eq 0 ] || { echo "TRAINING FAILED (status $train_rc)"; tail -n 20 "$logs/train.log"; }

step "ember's GPU report"
timeout 240 "$bench/gpu_report" | tee "$logs/gpu_report.md"

if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  step "PyTorch on the same device"
  timeout 120 python3 bench/gpu_peer.py | tee "$logs/pytorch_report.md"
  step "side by side"
  python3 tools/gpu_side_by_side.py "$logs/gpu_report.md" "$logs/pytorch_report.md" | tee "$logs/side_by_side.md"
else
  echo "(no PyTorch with CUDA here: no side-by-side column)"
fi

step "done"
echo "tests: $([ "$tests_rc" -eq 0 ] && echo passed || echo FAILED); training: $([ $train_rc -eq 0 ] && echo passed || echo FAILED); logs in $logs/"
[ "$tests_rc" -eq 0 ] && [ $train_rc -eq 0 ]
