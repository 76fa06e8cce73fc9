#!/usr/bin/env bash
# Command 2 of 2: build and run the whole test suite (what CI runs).
#   tools/test.sh            Release build (with the CUDA code compiled when nvcc exists),
#                            the GoogleTest suite, and an outside project built against an
#                            installed ember through find_package(ember).
#   EMBER_ASAN=1 tools/test.sh   also builds and runs the suite under ASan + UBSan.
#   EMBER_TSAN=1 tools/test.sh   also runs the threading tests under ThreadSanitizer.
#   EMBER_FUZZ_SECONDS=N tools/test.sh   also fuzzes the file parsers for N seconds each.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/deps.sh
ember_ensure_deps
jobs=$(nproc)
# Let ccache share results between clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD"

cmake --preset release
cmake --build --preset release -j "$jobs"
echo "== layers =="
tools/check_layers.sh build/release
tools/check_layers.sh --self-test
ctest --preset release -j "$jobs"

echo "== install + find_package(ember) from an outside project =="
rm -rf build/install build/consumer
cmake --install build/release --prefix build/install >/dev/null
cmake -S tests/consumer -B build/consumer -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer -j "$jobs" >/dev/null
./build/consumer/consumer

if [ "${EMBER_TSAN:-0}" = "1" ]; then
  echo "== ThreadSanitizer (threading and autograd tests) =="
  cmake --preset tsan
  cmake --build --preset tsan -j "$jobs"
  TSAN_OPTIONS="halt_on_error=1" ./build/tsan/tests/ember_tests --gtest_filter='*Thread*:Autograd.*:Memory.*:Dispatch.*:Autocast.*:Profiler.*:LibTorchPort.*:ConcurrentBackward.*:LoaderWorkers.*:DataLoaderState.*:*ExactResume*'
fi

if [ "${EMBER_ASAN:-0}" = "1" ]; then
  echo "== ASan + UBSan =="
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi

if [ -n "${EMBER_FUZZ_SECONDS:-}" ]; then
  echo "== libFuzzer: file parsers, ${EMBER_FUZZ_SECONDS}s each =="
  tools/fuzz.sh "$EMBER_FUZZ_SECONDS"
fi
