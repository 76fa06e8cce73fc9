#!/usr/bin/env bash
# Builds the libFuzzer targets (preset "fuzz": clang + ASan + UBSan) and runs each for a
# bounded time on a scratch copy of its seed corpus.
#   tools/fuzz.sh [seconds per target, default 60]
# A finding is written as crash-*/leak-*/timeout-* in build/fuzz/findings and fails the run;
# reproduce it with: build/fuzz/fuzz/fuzz_safetensors <file>
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target fuzz_safetensors fuzz_idx fuzz_csv fuzz_checkpoint
findings=build/fuzz/findings
mkdir -p "$findings"
for target in safetensors idx csv checkpoint; do
  corpus=build/fuzz/corpus-$target
  mkdir -p "$corpus"
  cp -n fuzz/corpus/$target/* "$corpus"/ 2>/dev/null || true
  echo "== fuzz_$target for ${seconds}s =="
  ./build/fuzz/fuzz/fuzz_$target "$corpus" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -artifact_prefix="$findings/" -print_final_stats=1 2>&1 | tail -n 12
done
