#!/usr/bin/env bash
# Time to accuracy predicted from small global batches, checked against runs at larger ones
# (issue 54 item 6; docs/scaling.md, "Time to accuracy"). Two studies on one local agent:
#   fit:      1 worker x 64 (the baseline, M0 = 64) and 2 workers x 32, SEEDS seeds each;
#   held out: 2 workers x 128 and x 256 (global batches 4x and 8x M0: a larger batch per
#             worker, since the workers cannot be had here), the adascale lr rule (LR_RULE=linear or
#             sqrt for another), SEEDS seeds each.
# `study predict --target --json` on the fit study alone predicts epochs and time to TARGET
# at the held-out shapes; the held-out study measures them. Prints a table of predicted
# against measured (the median over seeds after dropping the fastest and slowest run when
# there are 5 or more, as MLPerf's rules score time to train; the range over all of them)
# and the errors. On the generated SYNTHETIC "shapes" set by default; real CIFAR-10 with
# DATA_DIR=a folder holding cifar-10-batches-bin (DATASET=cifar-10).
#   bench/goodput.sh [SEEDS]        (default 5; the README's setup has built the tree)
#   MODEL=seed-cnn TARGET=0.7 EPOCHS_HELD=30 bench/goodput.sh 3
# Not a test: it took ~6 min on 2 cores (AMD EPYC Zen 4) with the defaults. Numbers vary between seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
[ -x build/bin/scalelab-cli ] || scalelab_build
seeds="${1:-5}"
model="${MODEL:-mini-cnn}"
target="${TARGET:-0.8}"
train="${TRAIN:-4000}"
test_images="${TEST:-1000}"
epochs_fit="${EPOCHS_FIT:-10}"
epochs_held="${EPOCHS_HELD:-24}"
dataset="${DATASET:-synthetic}"
lr_rule="${LR_RULE:-adascale}" # the held-out runs' learning-rate rule: the model assumes one suited to each batch
cli=build/bin/scalelab-cli
work="$(mktemp -d)"
out="${OUT:-bench/out/goodput-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT
# A data folder of its own: the local agents' default one may hold another set of that name.
data_args=(--data-dir "$work/data" --synthetic --synthetic-kind shapes --synthetic-train "$train"
    --synthetic-test "$test_images")
[ -n "${DATA_DIR:-}" ] && data_args=(--data-dir "$DATA_DIR")
mkdir -p "$work/data"

plan() { # NAME BASELINE GRID EPOCHS
    cat <<EOF
{ "name": "$1", "dataset": "$dataset",
  "training": { "model": "$model", "maxTrainImages": "$train", "maxTestImages": "$test_images" },
  "baseline": $2, "grid": $3, "repeats": $seeds, "repeatSeeds": "vary", "targetAccuracy": $target }
EOF
}
plan goodput-fit "{ \"batchSize\": 64, \"epochs\": $epochs_fit }" \
    "{ \"workers\": [2], \"batchSize\": [32], \"epochs\": [$epochs_fit] }" >"$work/fit.json"
plan goodput-held '{ "skip": true }' \
    "{ \"workers\": [2], \"batchSize\": [128, 256], \"epochs\": [$epochs_held], \"lrRule\": [\"$lr_rule\"] }" \
    >"$work/held.json"
# The baseline trains the grid's epochs unless told: the fit study's all train epochs_fit.
run_study() { # PLAN LOG
    "$cli" study run "$1" --state-dir "$work/state" "${data_args[@]}" >"$2" 2>&1 \
        || { tail -5 "$2" >&2; echo "goodput: study $1 failed, log in $2" >&2; exit 1; }
    grep -oE 'study st-[0-9a-z-]+ created' "$2" | head -1 | cut -d' ' -f2
}
echo "goodput: fit study ($seeds seeds), then the held-out one; logs in $out" >&2
fit="$(run_study "$work/fit.json" "$out/fit.log")"
held="$(run_study "$work/held.json" "$out/held.log")"
"$cli" study predict "$fit" --state-dir "$work/state" --json --target "$target" --workers 2 --batch-size 128 \
    >"$out/predict-128.json"
"$cli" study predict "$fit" --state-dir "$work/state" --json --target "$target" --workers 2 --batch-size 256 \
    >"$out/predict-256.json"
"$cli" report "$held" --state-dir "$work/state" --format json -o "$out/held.json" >/dev/null
"$cli" report "$fit" --state-dir "$work/state" --format json -o "$out/fit.json" >/dev/null
cp -r "$work/state/journal.sqlite" "$out/" 2>/dev/null || true
/usr/bin/python3 - "$out" "$target" <<'EOF'
import json, os, statistics, sys
out, target = sys.argv[1], float(sys.argv[2])

def epochs_to_target(epochs):
    """As core/studies/goodput_model.cpp: interpolated between the evaluations around it."""
    before = None
    for e in epochs:
        a = e.get("test_accuracy")
        if a is not None and a >= target:
            if e["epoch"] <= 1 or before is None or a <= before:
                return float(max(1, e["epoch"]))
            return e["epoch"] - 1 + (target - before) / (a - before)
        before = a
    return None

def scored(values):
    """MLPerf-style: drop the fastest and slowest when there are 5 or more, then the median."""
    v = sorted(values)
    kept = v[1:-1] if len(v) >= 5 else v
    return statistics.median(kept), v[0], v[-1]

held = json.load(open(os.path.join(out, "held.json")))
rows = []
for batch in (128, 256):
    pred = json.load(open(os.path.join(out, f"predict-{batch}.json")))["models"][0]
    ttt = pred.get("timeToTarget", {})
    if not ttt.get("valid"):
        print(f"no prediction at batch {batch}: {ttt.get('problem')}")
        continue
    p = ttt["timeToTarget"][0]
    runs = [r for r in held["runs"] if r["config"]["batch_size"] == batch and r["state"] == "SUCCEEDED"]
    epochs, times, reached = [], [], 0
    for r in runs:
        e = epochs_to_target(r.get("epochs", []))
        # A run that never reached it counts as slower than every run that did (censored):
        # the median is then known only while most runs reached it.
        reached += e is not None
        epochs.append(e if e is not None else float("inf"))
        # Training time to the target: the run's training images/s over those epochs' images.
        times.append(e * ttt["imagesPerEpoch"] / r["images_per_second"] if e is not None else float("inf"))
    row = {"globalBatch": p["globalBatch"], "predictedEpochs": p["epochsToTarget"],
           "predictedEpochsBand": p["epochsToTargetBand"], "predictedSeconds": p["timeToTargetSeconds"],
           "runs": len(runs), "reached": reached}
    if epochs and scored(epochs)[0] != float("inf"):
        row["measuredEpochs"], row["epochsMin"], row["epochsMax"] = scored(epochs)
        row["measuredSeconds"], row["secondsMin"], row["secondsMax"] = scored(times)
        row["epochsError"] = row["predictedEpochs"] / row["measuredEpochs"] - 1
        row["secondsError"] = row["predictedSeconds"] / row["measuredSeconds"] - 1
    rows.append(row)
    basis = ttt["reference"], ttt["gradientNoiseScale"]
print(f"reference: {basis[0]['workers']} worker(s) x {basis[0]['batchPerWorker']}, "
      f"{basis[0]['epochsToTarget']:.2f} epochs to {100 * target:.0f} % over {basis[0]['runs']} run(s); "
      f"B_noise {basis[1]['bNoise']:.0f} {basis[1]['band']} ({basis[1]['estimator']}, {basis[1]['runs']} runs)")
print(f"{'global':>6} {'epochs pred [band]':>22} {'measured [range]':>22} {'error':>7} "
      f"{'time pred s':>11} {'measured s [range]':>22} {'error':>7} reached")
for r in rows:
    if "measuredEpochs" not in r:
        print(f"{r['globalBatch']:>6} {r['predictedEpochs']:>6.2f} [{r['predictedEpochsBand'][0]:.2f}, "
              f"{r['predictedEpochsBand'][1]:.2f}]  median not reached within the runs' epochs: "
              f"{r['reached']}/{r['runs']} runs reached the target")
        continue
    print(f"{r['globalBatch']:>6} {r['predictedEpochs']:>6.2f} [{r['predictedEpochsBand'][0]:.2f}, "
          f"{r['predictedEpochsBand'][1]:.2f}]  {r['measuredEpochs']:>6.2f} [{r['epochsMin']:.2f}, {r['epochsMax']:.2f}]"
          f"  {100 * r['epochsError']:>+6.1f}% {r['predictedSeconds']:>11.1f} {r['measuredSeconds']:>8.1f} "
          f"[{r['secondsMin']:.1f}, {r['secondsMax']:.1f}]  {100 * r['secondsError']:>+6.1f}% {r['reached']}/{r['runs']}")
errors = [abs(r["epochsError"]) for r in rows if "epochsError" in r]
if len(errors) < len(rows):
    print(f"{len(rows) - len(errors)} row(s) without a measured median: train the held-out runs longer (EPOCHS_HELD)")
if errors:
    print(f"epochs to target: median absolute error {100 * statistics.median(errors):.1f} %, "
          f"largest {100 * max(errors):.1f} % (goal: median <= 15 %, none over 30 %)")
json.dump(rows, open(os.path.join(out, "goodput.json"), "w"), indent=1)
EOF
