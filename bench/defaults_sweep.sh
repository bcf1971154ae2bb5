#!/usr/bin/env bash
# The evidence for the default recipe: test accuracy of the seed CNN over a grid of
# learning rate x warm-up x global batch, on a generated "shapes" set (SYNTHETIC, but one a
# linear model on pixels cannot separate: see `scalelab-worker generate-synthetic --help`).
#
#   bench/defaults_sweep.sh [OUT_DIR]        (env: WORKER, TRAIN, TEST, EPOCHS, THREADS,
#                                            LRS, WARMUPS, BATCHES, SEEDS)
#
# One process per point; a global batch of 128 stands for 2 workers x 64 (data-parallel
# SGD with averaged gradients is the same computation). Prints a Markdown table and keeps
# every run's events in OUT_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
worker=${WORKER:-$here/build/bin/scalelab-worker}
out=${1:-/tmp/scalelab-defaults-sweep}
train=${TRAIN:-10000}
test=${TEST:-2000}
epochs=${EPOCHS:-3}
threads=${THREADS:-1}
lrs=${LRS:-"0.01 0.02 0.05 0.1"}
warmups=${WARMUPS:-"0 1"}
batches=${BATCHES:-"64 128"}
seeds=${SEEDS:-"1"}
mkdir -p "$out"
data=$out/shapes-$train
[ -f "$data/test_batch.bin" ] || "$worker" generate-synthetic --kind shapes --out "$data" --train "$train" \
    --test "$test" --seed 11 >/dev/null
echo "| batch | lr | warm-up (epochs) | seed | test accuracy per epoch | outcome |"
echo "|---|---|---|---|---|---|"
for batch in $batches; do
  for lr in $lrs; do
    for warmup in $warmups; do
      for seed in $seeds; do
        log=$out/b$batch-lr$lr-w$warmup-s$seed.jsonl
        if [ ! -s "$log" ] || ! grep -q '^{"\(finished\|error\)":' "$log"; then
          "$worker" train --data-dir "$data" --epochs "$epochs" --batch-size "$batch" --lr "$lr" \
              --warmup-epochs "$warmup" --seed "$seed" --threads "$threads" >"$log" 2>/dev/null || true
        fi
        accs=$(grep '^{"epoch":' "$log" | sed 's/.*"test_accuracy":\([0-9.e-]*\).*/\1/' \
            | awk '{printf "%s%.1f", (NR>1?", ":""), $1*100}')
        outcome=$(grep -o '^{"finished":' "$log" >/dev/null && echo finished \
            || (grep -o '"message":"[^"]*"' "$log" | head -1 | cut -c12-80))
        echo "| $batch | $lr | $warmup | $seed | ${accs:-–} | ${outcome:-killed} |"
      done
    done
  done
done
