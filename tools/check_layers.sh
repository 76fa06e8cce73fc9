#!/usr/bin/env bash
# The layer check: ember's layers only point down (README, "Layout"):
#
#   4  ember/io                       checkpoints of modules and optimizers
#   3  ember/nn  ember/optim  ember/data   (peers: none includes another)
#   2  ember/autograd  ember/distributed   the tape, the public ops, the dispatch point; process
#                                          groups (peers)
#   1  ember/tensor/cpu  ember/cuda   the back ends: kernels only (peers)
#   0  ember/tensor                   Tensor, the kernel interface, the native ops
#
# 1. Includes: a file may include its own unit's headers and those of lower layers only.
# 2. Symbols (given a build folder): the object files of layers 0 and 1 (native ops and
#    kernels) may not use a function that layers 2 and up define. This is what keeps native
#    code off Tensor's op methods and the public ops, which record the tape (Note [Native ops]);
#    an include check cannot see it, since tensor.h declares those methods.
#
#   tools/check_layers.sh [build-folder]   e.g. build/release; without one, includes only
#   tools/check_layers.sh --self-test      plants a wrong-way include in a copy and expects a failure
set -euo pipefail
cd "$(dirname "$0")/.."
root="${EMBER_LAYER_ROOT:-ember}"

unit_of() {  # path below ember/ -> its unit
  case "$1" in
    tensor/cpu/*) echo tensor/cpu ;;
    tensor/*) echo tensor ;;
    */*) echo "${1%%/*}" ;;
    *) echo umbrella ;;  # ember/ember.h may include anything
  esac
}
layer_of() {
  case "$1" in
    tensor) echo 0 ;;
    tensor/cpu | cuda) echo 1 ;;
    autograd | distributed) echo 2 ;;
    nn | optim | data) echo 3 ;;
    io) echo 4 ;;
    umbrella) echo 9 ;;
    *) echo "unknown unit $1" >&2 && exit 2 ;;
  esac
}

if [ "${1:-}" = "--self-test" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cp -r "$root" "$scratch/ember"
  sed -i '1a #include "ember/autograd/engine.h"' "$scratch/ember/tensor/shape.h"
  if EMBER_LAYER_ROOT="$scratch/ember" "$0" > "$scratch/out" 2>&1; then
    echo "check_layers self-test: a planted include of autograd/ in tensor/shape.h was NOT caught" >&2
    exit 1
  fi
  grep -q 'tensor/shape.h' "$scratch/out" || { cat "$scratch/out" >&2; exit 1; }
  echo "check_layers self-test: the planted wrong-way include was caught"
  exit 0
fi

violations=0
while IFS= read -r file; do
  rel="${file#"$root"/}"
  from=$(unit_of "$rel")
  from_layer=$(layer_of "$from")
  while IFS=: read -r line target; do
    to=$(unit_of "$target")
    [ "$to" = "$from" ] && continue
    to_layer=$(layer_of "$to")
    if [ "$to_layer" -ge "$from_layer" ]; then
      echo "$root/$rel:$line: includes ember/$target: $from (layer $from_layer) may not include $to (layer $to_layer)"
      violations=$((violations + 1))
    fi
  done < <(grep -no '^#include "ember/[^"]*"' "$file" | sed -E 's@^([0-9]+):#include "ember/([^"]*)"@\1:\2@')
done < <(find "$root" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)

if [ -n "${1:-}" ]; then
  objects="$1/CMakeFiles/ember.dir/ember"
  [ -d "$objects" ] || { echo "check_layers: no object files under $objects (build first)" >&2; exit 2; }
  upper=$(mktemp)
  trap 'rm -f "$upper"' EXIT
  # Functions defined by layers 2 and up (T: text, W: weak, e.g. inline or template instances
  # emitted there; those of the standard library and nlohmann-json are not ember's).
  find "$objects/autograd" "$objects/distributed" "$objects/nn" "$objects/optim" "$objects/data" "$objects/io" -name '*.o' -print0 |
    xargs -0 nm -C --defined-only | awk '$2 == "T" || $2 == "W"' | cut -d' ' -f3- |
    grep -v '^std::\|^nlohmann::\|^__gnu_cxx::' | sort -u > "$upper"
  while IFS= read -r object; do
    used=$(nm -C -u "$object" | sed 's/^ *U //' | sort -u | comm -12 "$upper" - || true)
    if [ -n "$used" ]; then
      echo "${object#"$objects"/}: native code uses functions of an upper layer (use the native ops):"
      echo "$used" | sed 's/^/    /'
      violations=$((violations + 1))
    fi
  done < <(find "$objects/tensor" "$objects/cuda" -name '*.o' | sort)
fi

if [ "$violations" -gt 0 ]; then
  echo "check_layers: $violations violation(s)"
  exit 1
fi
echo "check_layers: layers point down$([ -n "${1:-}" ] && echo ", and native code calls only native functions")"
