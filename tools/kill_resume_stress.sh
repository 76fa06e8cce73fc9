#!/usr/bin/env bash
# Kills training runs at random instants and checks every resume (Note [Training checkpoints]).
#
#   tools/kill_resume_stress.sh [TRIALS] [BUILD]    e.g. 200 build/release (defaults 20, build/release)
#
# Each trial picks a configuration (train_mnist with 0 or 2 loader workers, with or without
# gradient accumulation, SGD or AdamW + cosine schedule; train_charlm with dropout), trains it
# once uninterrupted, then again under `timeout -s KILL` at random instants -- often in the
# middle of a checkpoint save -- resuming from the checkpoint after each kill until the run
# completes. The final checkpoint (weights, optimizer moments, scaler, loader position, random
# state) must be byte-identical to the uninterrupted run's. Prints the counts; exits 1 on any
# mismatch or on a resume that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-20}
build=${2:-build/release}
bin="$build/examples"
[ -x "$bin/train_mnist" ] && [ -x "$bin/train_charlm" ] || { echo "build $build first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

configs=(
  "train_mnist --epochs 3 --train-size 3000 --test-size 200 --save-every 5 --workers 0"
  "train_mnist --epochs 3 --train-size 3000 --test-size 200 --save-every 3 --workers 2"
  "train_mnist --epochs 3 --train-size 3000 --test-size 200 --save-every 2 --accumulate 3 --workers 2"
  "train_mnist --epochs 3 --train-size 3000 --test-size 200 --save-every 4 --optimizer adamw --schedule cosine"
  "train_charlm --epochs 3 --save-every 4 --sample 0 --workers 1"
)
# Uninterrupted runs, one per configuration, and how long each takes (the kill window).
declare -a reference_ms
for i in "${!configs[@]}"; do
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  "$bin"/${configs[$i]} --save "$work/ref$i.ckpt" > "$work/ref$i.log" 2>&1
  reference_ms[$i]=$(( ($(date +%s%N) - start) / 1000000 ))
done

kills=0 resumes=0 mismatches=0 failures=0 saves_cut=0
for trial in $(seq 1 "$trials"); do
  i=$(( RANDOM % ${#configs[@]} ))
  ckpt="$work/trial.ckpt"
  rm -f "$ckpt" "$ckpt.tmp"
  done_=0 legs=0
  while [ "$done_" = 0 ]; do
    legs=$((legs + 1))
    resume=()
    [ -f "$ckpt" ] && resume=(--resume "$ckpt") && resumes=$((resumes + 1))
    # A kill somewhere in the run (the first ~50 ms are process start-up); after 12 legs, none.
    ms=$(( 20 + RANDOM % (reference_ms[$i] + 40) ))
    [ "$legs" -gt 12 ] && ms=600000
    set +e
    # shellcheck disable=SC2086
    ( timeout -s KILL "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))" "$bin"/${configs[$i]} --save "$ckpt" \
      "${resume[@]}" > "$work/leg.log" 2>&1; exit $? ) 2> /dev/null  # the subshell says "Killed", to /dev/null
    rc=$?
    set -e
    if [ "$rc" = 137 ]; then
      kills=$((kills + 1))
      [ -f "$ckpt.tmp" ] && saves_cut=$((saves_cut + 1))  # killed in the middle of a save
    elif [ "$rc" = 0 ]; then
      done_=1
    else
      failures=$((failures + 1))
      echo "trial $trial (${configs[$i]}): a leg failed with status $rc:" >&2
      tail -3 "$work/leg.log" >&2
      done_=1
    fi
  done
  if [ "$rc" = 0 ] && ! cmp -s "$ckpt" "$work/ref$i.ckpt"; then
    mismatches=$((mismatches + 1))
    echo "trial $trial (${configs[$i]}): the resumed run's checkpoint differs from the uninterrupted one" >&2
  fi
done
echo "kill_resume_stress: $trials trials, $kills kills ($saves_cut during a save), $resumes resumes," \
  "$mismatches mismatches, $failures failed resumes"
[ "$mismatches" = 0 ] && [ "$failures" = 0 ]
