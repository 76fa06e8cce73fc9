#!/usr/bin/env bash
# Command 1 of 2: install what is missing, build ember in Release and run the main job: a
# short training run of examples/train_mnist on the built-in synthetic digits (seconds; no
# files needed), the tensor tour, then ember_tour: every technique off and on, its table and
# tour/report.html. MNIST itself: see README, "Data".
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/deps.sh
ember_ensure_deps
cmake --preset release
cmake --build --preset release -j "$(nproc)"
./build/release/examples/train_mnist --epochs 2 --workers 2
./build/release/examples/tensor_tour
./build/release/examples/ember_tour
