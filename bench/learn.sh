#!/usr/bin/env bash
# Each built-in model learns (issue 36 item 5): the test accuracy per epoch of seed-cnn,
# resnet18 and mobilenet_v2 with the default recipe on a generated "shapes" set (SYNTHETIC,
# but one a linear model on pixels cannot separate: see `scalelab-worker generate-synthetic
# --help`). Not a test: it takes minutes per model on two cores.
#
#   bench/learn.sh [OUT_DIR]     (env: WORKER, TRAIN, TEST, EPOCHS, THREADS, BATCH, MODELS)
#
# One process per model, one after another, every core to it. Prints a Markdown table (the
# chance level is 10 %) and keeps every run's events in OUT_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
worker=${WORKER:-$here/build/bin/scalelab-worker}
[ -x "$worker" ] || { echo "no $worker: build first (./scripts/test.sh or ./scripts/run.sh)" >&2; exit 2; }
out=${1:-/tmp/scalelab-learn}
train=${TRAIN:-4000}
test=${TEST:-1000}
epochs=${EPOCHS:-4}
threads=${THREADS:-$(nproc)}
batch=${BATCH:-64}
models=${MODELS:-"seed-cnn resnet18 mobilenet_v2"}
mkdir -p "$out"
data=$out/shapes-$train
[ -f "$data/test_batch.bin" ] || "$worker" generate-synthetic --kind shapes --out "$data" --train "$train" \
    --test "$test" --seed 21 >/dev/null
echo "SYNTHETIC data: $train training and $test test images of the generated 'shapes' set (10 classes)"
echo "$worker train --data-dir $data --epochs $epochs --batch-size $batch --threads $threads --model MODEL"
echo
echo "| model | parameters | test accuracy per epoch (%) | train loss, last epoch | images/s | wall |"
echo "|---|---|---|---|---|---|"
for model in $models; do
    log=$out/$model.jsonl
    start=$(date +%s)
    "$worker" train --data-dir "$data" --epochs "$epochs" --batch-size "$batch" --threads "$threads" \
        --model "$model" >"$log" 2>"$out/$model.err" || { echo "| $model | failed: $(tail -1 "$out/$model.err") |"; continue; }
    wall=$(( $(date +%s) - start ))
    /usr/bin/env python3 - "$log" "$model" "$wall" <<'PY'
import json, sys
log, model, wall = sys.argv[1], sys.argv[2], int(sys.argv[3])
events = [json.loads(line) for line in open(log) if line.startswith("{")]
started = next(e["started"] for e in events if "started" in e)
epochs = [e["epoch"] for e in events if "epoch" in e]
finished = next(e["finished"] for e in events if "finished" in e)
accs = ", ".join("%.1f" % (100 * e["test_accuracy"]) for e in epochs)
print("| %s | %s | %s | %.3f | %.1f | %d min %02d s |" % (model, f'{int(started["parameters"]):,}', accs,
      epochs[-1]["train_loss"], finished["images_per_second"], wall // 60, wall % 60))
PY
done
