#!/usr/bin/env bash
# Is early stopping worth it? One search space, one seed, one data set, tuned three ways
# by scalelab-cli on local agents: every trial trained to the end (scheduler "none": what
# a grid over the same trials costs), ASHA stopping (Ray's ASHAScheduler) and ASHA
# promotion (Li et al. 2020, Algorithm 2). Prints, for each, the epochs trained, the
# wall-clock and the best trial's metric at its last epoch, and the ratios to the full
# run. Issue 18's goal: at least 3x fewer epochs, best within 1 percentage point.
#   bench/tune.sh [TRAIN_IMAGES] [SAMPLES] [MAX_EPOCHS]   (after ./scripts/test.sh or run.sh has built)
# The data set is a generated SYNTHETIC one (shapes): no real data can be downloaded
# here. Not a test: numbers vary with the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
scalelab_install_dependencies
[ -x build/bin/scalelab-cli ] || scalelab_build
train="${1:-2000}"
samples="${2:-9}"
max_epochs="${3:-9}"
cli="$PWD/build/bin/scalelab-cli"
work="$(mktemp -d)"
# SCALELAB_BENCH_KEEP=1 keeps the journals (and their reports) for a look afterwards.
if [ "${SCALELAB_BENCH_KEEP:-0}" = 1 ]; then echo "keeping $work" >&2; else trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work/data"

# The plan: a space over the learning rate, momentum and the dense layer's dropout,
# trials of one worker; $1 is the scheduler object.
plan() {
    cat <<EOF
{"name":"bench-tune","dataset":"tune-shapes","baseline":{"skip":true},
 "training":{"maxTrainImages":$train,"maxTestImages":500,"batchSize":32,"threadsPerWorker":1},
 "tune":{"space":{"learningRate":{"kind":"loguniform","low":0.003,"high":0.3},
                  "momentum":{"kind":"uniform","low":0.5,"high":0.95},
                  "denseDropout":{"kind":"quniform","low":0.1,"high":0.6,"q":0.05}},
         "samples":$samples,"seed":7,"metric":"test_accuracy","mode":"max",
         "scheduler":$1}}
EOF
}
declare -A schedulers=(
    [full]="{\"kind\":\"none\"}"
    [stopping]="{\"kind\":\"asha\",\"variant\":\"stopping\",\"gracePeriod\":1,\"reductionFactor\":3,\"maxEpochs\":$max_epochs}"
    [promotion]="{\"kind\":\"asha\",\"variant\":\"promotion\",\"gracePeriod\":1,\"reductionFactor\":3,\"maxEpochs\":$max_epochs}"
)
summary() { # the study JSON on stdin: epochs, seconds, best value, best trial
    /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
t = s["tune"]
print(t["epochsSpent"], (s["finishedUnixMs"] - s["createdUnixMs"]) / 1000.0,
      t.get("bestValue") if t.get("bestValue") is not None else "nan", t["bestTrial"].split("-")[-1], t.get("bestEpochs", 0))'
}
declare -A epochs seconds best trial trained
for kind in full stopping promotion; do
    plan "${schedulers[$kind]}" >"$work/$kind.json"
    if [ "$kind" = full ]; then # scheduler none: trials train tune.epochs
        sed -i "s/\"samples\":/\"epochs\":$max_epochs,\"samples\":/" "$work/$kind.json"
    fi
    echo "tuning ($kind)..." >&2
    "$cli" study run "$work/$kind.json" --state-dir "$work/state-$kind" --data-dir "$work/data" \
        --local-agents 1 --synthetic --synthetic-kind shapes --synthetic-train "$train" --synthetic-test 500 \
        --json >"$work/$kind.out"
    read -r epochs[$kind] seconds[$kind] best[$kind] trial[$kind] trained[$kind] < <(summary <"$work/$kind.out")
done

echo
echo "Tune of $samples trials (seed 7), at most $max_epochs epochs each, SYNTHETIC shapes set ($train train / 500 test images), 1 worker per trial, one local agent on $(nproc) cores"
printf '%-10s %8s %10s %12s %14s %16s\n' scheduler epochs wall_s best_acc best_trial "epochs_saved"
for kind in full stopping promotion; do
    printf '%-10s %8d %10.1f %11.1f%% %14s %15.2fx\n' "$kind" "${epochs[$kind]}" "${seconds[$kind]}" \
        "$(awk "BEGIN { print ${best[$kind]} * 100 }")" "${trial[$kind]} (${trained[$kind]} ep)" \
        "$(awk "BEGIN { print ${epochs[full]} / ${epochs[$kind]} }")"
done
# Why ASHA wins or loses: how well a trial's rank at each rung predicts its rank after the
# last epoch, measured on the full run (Spearman's rho over the trials; 1 = the rung
# ranks them as the end does, 0 = no better than chance).
"$cli" report "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["studyId"])' "$work/full.out")" \
    --state-dir "$work/state-full" --format json -o "$work/full-report.json"
/usr/bin/python3 - "$work/full-report.json" "$max_epochs" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
last = int(sys.argv[2])
def acc(run, epoch):
    return next((e["test_accuracy"] for e in run["epochs"] if e["epoch"] == epoch), None)
def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r
def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")
finals = [acc(r, last) for r in runs]
line = []
for epoch in (1, 3):
    pairs = [(acc(r, epoch), f) for r, f in zip(runs, finals) if acc(r, epoch) is not None and f is not None]
    if len(pairs) > 2:
        line.append("epoch %d: rho %.2f" % (epoch, spearman([p[0] for p in pairs], [p[1] for p in pairs])))
print("rank agreement with epoch %d in the full run (how much a rung can know): %s" % (last, ", ".join(line)))
PY
for kind in stopping promotion; do
    awk -v k="$kind" -v e="${epochs[full]}" -v a="${epochs[$kind]}" -v b="${best[$kind]}" -v g="${best[full]}" \
        -v w="${seconds[full]}" -v s="${seconds[$kind]}" 'BEGIN {
        ratio = e / a; gap = (g - b) * 100
        printf "%s: %.2fx fewer epochs, %.2fx less wall-clock, best %.1f points below the full run'"'"'s -> goal (>= 3x, <= 1 point) %s\n",
            k, ratio, w / s, gap, (ratio >= 3 && gap <= 1) ? "met" : "NOT met" }'
done
