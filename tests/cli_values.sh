#!/usr/bin/env bash
# Every numeric option of the example programs refuses NaN, infinities and out-of-range values
# with a short message naming the option (never a default in its place, never CLI11's 300-digit
# range), and data that cannot make sense is reported as such.   tests/cli_values.sh BIN_DIR
set -uo pipefail
bin=$1
failures=0
expect_refused() {  # program, expected text, arguments...
  local program=$1 text=$2
  shift 2
  local out rc
  out=$("$bin/$program" "$@" 2>&1)
  rc=$?
  if [ "$rc" = 0 ] || ! grep -qF -- "$text" <<< "$out" || [ "$(wc -c <<< "$out")" -gt 300 ]; then
    echo "FAIL: $program $* (status $rc) said: $out" >&2
    failures=$((failures + 1))
  fi
}
for v in nan inf -inf 0 -3 1e999 abc ''; do
  expect_refused train_mnist "--lr: must be a finite number > 0" --lr "$v"
  expect_refused train_charlm "--lr: must be a finite number > 0" --lr "$v"
done
for v in 0 -1 2.5 1e30 nan 99999999999999999999; do
  expect_refused train_mnist "--epochs: must be an integer in [1, 1000000]" --epochs "$v"
  expect_refused train_mnist "--batch-size: must be an integer" --batch-size "$v"
  expect_refused train_charlm "--embd: must be an integer" --embd "$v"
done
expect_refused train_mnist "--workers: must be an integer in [0, 256]" --workers -1
expect_refused train_mnist "--prune: must be a finite number >= 0 and <= 1" --prune nan
expect_refused train_mnist "--expect-accuracy: must be a finite number >= 0 and <= 1" --expect-accuracy 2
expect_refused train_mnist "--seed: must be an integer in [0, 2^64 - 1]" --seed -1
expect_refused train_mnist "--save-every: must be an integer" --save-every -5
expect_refused train_charlm "--dropout: must be a finite number >= 0 and <= 0.99" --dropout 1
expect_refused train_charlm "--temperature: must be a finite number > 0" --temperature inf
expect_refused train_charlm "--pipeline-stages: must be an integer in [1, 1024]" --pipeline-stages 0
expect_refused train_charlm "--pipeline-stages 2: run it under \`mpirun -np 2\` (one rank per stage); this run has 1" \
  --pipeline-stages 2
expect_refused train_charlm "--pipeline-stages 2 --distributed: the processes must make whole pipelines, but this run has 1" \
  --pipeline-stages 2 --distributed
expect_refused train_charlm "--batch-size 30 does not divide into --chunks 4" --pipeline-stages 2 --batch-size 30
expect_refused train_charlm "--schedule: zigzag not in {gpipe,1f1b}" --schedule zigzag
expect_refused train_charlm "--prompt: must not be empty" --prompt ''
expect_refused train_charlm "--top-k: must be an integer in [0, 1000000]" --top-k -1
expect_refused fit_lbfgs "--max-iterations: must be an integer" --max-iterations 0
expect_refused ember_tour "--threads: must be an integer in [1, 1024]" --threads 0
# A destination that cannot be written is found before the first epoch, not after it.
expect_refused train_mnist "--save: the folder '/nonexistent' of '/nonexistent/x.ckpt' does not exist" \
  --save /nonexistent/x.ckpt
# Data that makes no sense: a label of 1e30, a single-column table.
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
mkdir -p "$data/iris"
printf 'a,b,label\n1,2,0\n3,4,1e30\n' > "$data/iris/iris.csv"
expect_refused fit_lbfgs "row 2 has class label 1e+30; labels must be integers in [0, 1000)" --data iris --data-dir "$data"
printf 'label\n1\n0\n' > "$data/iris/iris.csv"
expect_refused fit_lbfgs "has shape [2, 1]; expected rows of features" --data iris --data-dir "$data"
# A resume that is not a training checkpoint, or beyond the run.
expect_refused train_mnist "safetensors '$data/iris/iris.csv': the header length" --resume "$data/iris/iris.csv"
"$bin/train_mnist" --epochs 2 --train-size 200 --test-size 50 --save "$data/run.ckpt" > /dev/null || failures=$((failures + 1))
expect_refused train_mnist "is a checkpoint of --model mlp, not cnn" --model cnn --resume "$data/run.ckpt"
expect_refused train_mnist "has finished 2 epochs, beyond this run's --epochs 1" --epochs 1 --train-size 200 \
  --test-size 50 --resume "$data/run.ckpt"
# A text without a newline samples from its first character (the default prompt, a newline, is
# not in its vocabulary).
printf 'abcabcabcabcabcabcabcabcabcabcabc' > "$data/one_line.txt"
"$bin/train_charlm" --text "$data/one_line.txt" --seq-len 8 --epochs 1 --sample 5 --top-k 2 > /dev/null || {
  echo "FAIL: train_charlm on a text without a newline" >&2
  failures=$((failures + 1))
}
[ "$failures" = 0 ] && echo "cli_values: every bad value was refused with its message"
exit "$failures"
