#!/usr/bin/env bash
# Command 1 of 2: install what is missing, build ember in Release and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/deps.sh
ember_ensure_deps
cmake --preset release
cmake --build --preset release -j "$(nproc)"
./build/release/examples/tensor_tour
