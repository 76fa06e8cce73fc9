#!/usr/bin/env bash
# train_charlm --pipeline-stages 2 under mpirun trains the very model one process trains: the
# same training and validation losses epoch by epoch (the micro-batches only reorder float sums),
# under both schedules, and under fp16 with the loss scale; its checkpoints resume bit for bit and
# are the one-process run's; 2 pipelines of 2 stages train as 2 data-parallel ranks do; and a
# stage count other than the number of processes is refused.
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
# Checkpoints (Note [Model-parallel checkpoints]): a run killed after its first save (mid-epoch:
# 19 steps per epoch, a save every 3) and resumed ends with the uninterrupted run's file, byte for
# byte. That file is the one-process run's, so one process and 3 stages resume it too.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ck=(--threads 1 --stride 32 --sample 0 --chunks 4 --batch-size 8 --epochs 2)
last_losses() { losses | tail -n 1; }
reference=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 2 "${ck[@]}" --save "$work/ref.ckpt" | last_losses)
"${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 2 "${ck[@]}" --save "$work/run.ckpt" --save-every 3 \
  > /dev/null 2>&1 &
run=$!
while [ ! -f "$work/run.ckpt" ] && kill -0 "$run" 2> /dev/null; do sleep 0.02; done
pkill -KILL -P "$run" || true  # the ranks themselves: mpirun would take a second to pass a signal on
wait "$run" 2> /dev/null || true
cp "$work/run.ckpt" "$work/mid.ckpt"
out=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 2 "${ck[@]}" --save "$work/run.ckpt" \
  --resume "$work/run.ckpt")
grep -o 'resumed from .*' <<< "$out" || { echo "FAIL: the killed pipeline run did not resume: $out" >&2; exit 1; }
cmp "$work/run.ckpt" "$work/ref.ckpt" ||
  { echo "FAIL: the resumed pipeline run ends with another checkpoint than the uninterrupted one" >&2; exit 1; }
for layout in one 3; do
  if [ "$layout" = one ]; then
    resumed=$("$bin/train_charlm" "${ck[@]}" --resume "$work/mid.ckpt" | last_losses)
  else
    resumed=$("${mpirun[@]}" -np 3 "$bin/train_charlm" --pipeline-stages 3 "${ck[@]}" --resume "$work/mid.ckpt" |
      last_losses)
  fi
  if ! paste -d' ' <(echo "$reference") <(echo "$resumed") |
    awk 'NF != 6 { exit 1 } { for (i = 2; i <= 3; ++i) if ((d = $i - $(i + 3)) > 2e-4 || d < -2e-4) exit 1 }'; then
    printf 'FAIL: %s resumed the pipeline checkpoint with other losses\n  pipeline: %s\n  resumed:  %s\n' \
      "$layout" "$reference" "$resumed" >&2
    exit 1
  fi
done
echo "checkpoints: resumed bit for bit; one process and 3 stages resume it with $reference"
# 2-D: 2 pipelines of 2 stages (4 processes), each on its shard, give the losses of
# DistributedDataParallel over 2 processes (Note [Pipelines in data parallel]).
ddp=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --distributed "${args[@]}" | losses)
two_d=$("${mpirun[@]}" -np 4 "$bin/train_charlm" --distributed --pipeline-stages 2 --chunks 4 "${args[@]}" | losses)
if ! paste -d' ' <(echo "$ddp") <(echo "$two_d") |
  awk 'NF != 6 { exit 1 } { for (i = 2; i <= 3; ++i) if ((d = $i - $(i + 3)) > 2e-4 || d < -2e-4) exit 1 }'; then
  printf 'FAIL: 2 pipelines of 2 stages differ from DDP over 2 ranks\n  DDP: %s\n  2-D: %s\n' "$ddp" "$two_d" >&2
  exit 1
fi
echo "2-D: $(tr '\n' ';' <<< "$two_d") (DDP over 2 ranks: $(tr '\n' ';' <<< "$ddp"))"
if out=$("${mpirun[@]}" -np 2 "$bin/train_charlm" --pipeline-stages 3 --epochs 1 2>&1); then
  echo "FAIL: --pipeline-stages 3 on 2 processes ran" >&2
  exit 1
fi
grep -qF 'run it under `mpirun -np 3` (one rank per stage); this run has 2 process(es)' <<< "$out" ||
  { echo "FAIL: --pipeline-stages 3 on 2 processes said: $out" >&2; exit 1; }
echo "charlm_pipeline: OK"
