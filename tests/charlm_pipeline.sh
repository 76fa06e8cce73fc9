#!/usr/bin/env bash
# train_charlm --pipeline-stages 2 under mpirun trains the very model one process trains: the
# same training and validation losses epoch by epoch (the micro-batches only reorder float sums),
# under both schedules, and under fp16 with the loss scale; and a stage count other than the
# number of processes is refused.
#   tests/charlm_pipeline.sh BIN_DIR MPIEXEC [MPIEXEC flags...]
set -euo pipefail
bin=$1
shift
mpirun=("$@")
args=(--threads 1 --epochs 2 --stride 32 --sample 40)
losses() { sed -n 's/^epoch \([0-9]*\): train loss \([0-9.]*\) .* val loss \([0-9.]*\) .*/\1 \2 \3/p'; }
single=$("$bin/train_charlm" "${args[@]}" | losses)
[ "$(wc -l <<< "$single")" = 2 ] || { echo "FAIL: no losses from the single-process run" >&2; exit 1; }
for schedule in gpipe 1f1b; do
  piped=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 2 --schedule "$schedule" --chunks 4 "${args[@]}" |
    losses)
  if ! paste -d' ' <(echo "$single") <(echo "$piped") |
    awk 'NF != 6 { exit 1 } { for (i = 2; i <= 3; ++i) if ((d = $i - $(i + 3)) > 2e-4 || d < -2e-4) exit 1 }'; then
    printf 'FAIL: %s pipeline losses differ from one process\n  one process: %s\n  pipeline:    %s\n' \
      "$schedule" "$single" "$piped" >&2
    exit 1
  fi
  echo "$schedule: $(tr '\n' ';' <<< "$piped") (one process: $(tr '\n' ';' <<< "$single"))"
done
# fp16 with the GradScaler, whose overflow checks the stages agree on: the one-process losses
# to fp16's rounding (the micro-batches round their partial sums apart).
single=$("$bin/train_charlm" "${args[@]}" --amp fp16 | losses)
piped=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 2 --chunks 4 "${args[@]}" --amp fp16 | losses)
if ! paste -d' ' <(echo "$single") <(echo "$piped") |
  awk 'NF != 6 { exit 1 } { for (i = 2; i <= 3; ++i) if ((d = $i - $(i + 3)) > 1e-3 || d < -1e-3) exit 1 }'; then
  printf 'FAIL: fp16 pipeline losses differ from one process\n  one process: %s\n  pipeline:    %s\n' \
    "$single" "$piped" >&2
  exit 1
fi
echo "fp16 1f1b: $(tr '\n' ';' <<< "$piped") (one process: $(tr '\n' ';' <<< "$single"))"
if out=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 3 --epochs 1 2>&1); then
  echo "FAIL: --pipeline-stages 3 on 2 processes ran" >&2
  exit 1
fi
grep -qF 'run it under `mpirun -np 3` (one rank per stage); this run has 2 process(es)' <<< "$out" ||
  { echo "FAIL: --pipeline-stages 3 on 2 processes said: $out" >&2; exit 1; }
echo "charlm_pipeline: OK"
