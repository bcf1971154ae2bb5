#!/usr/bin/env bash
# Are the scaling model's predictions right? (docs/scaling.md, "Checked against measurement")
#
#   bench/predict.sh          (root, after the build)
#
# On 4 "hosts" (network namespaces on a bridge, tests/cluster/netns-cluster.sh, one agent
# each, TLS and a token), for each link rate in PREDICT_RATES (tbf on every host's link;
# "none": the unshaped veth) and each batch per worker in PREDICT_BATCHES:
#   1. a study of 1 and 2 workers, one per host (placement spread): what the model is fitted on
#      (their step anatomy, and the 2-worker run's network probe over the shaped link);
#   2. `scalelab-cli study predict` of that study for 3 and 4 workers at that batch;
#   3. a study of 3 and 4 workers: what they measure.
# It prints predicted against measured images/s (the model's definition on both sides:
# workers x batch / rank 0's mean step, from the step anatomy) with the error of each row,
# then the median and the largest absolute error. A benchmark: it reports, it asserts nothing.
#
# Each worker trains with 1 thread, at least PREDICT_STEPS steps per rank (the data set is
# sized for it), 1 epoch, the seed CNN unless PREDICT_MODEL says otherwise. The 4 hosts are
# namespaces of this one machine; so that they do not share its cores, each host runs under
# a CPU quota of a quarter of them (CLUSTER_HOST_CPUS: 0.5 cores on 2), as 4 machines of half
# a core would: the model's domain, every rank on cores of its own. PREDICT_SHARED=1 runs
# them without quotas, sharing the cores, and asks `study predict --machines 1
# --cores-per-machine $(nproc)` (the column "shared": compute threads per core it assumed).
#
# Environment: PREDICT_RATES (default "none 1gbit 100mbit"), PREDICT_BATCHES ("32 128"),
# PREDICT_STEPS (16), PREDICT_MODEL (seed-cnn). Exit 77 (skip) when it cannot run here.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

harness=tests/cluster/netns-cluster.sh
read -r -a rates <<<"${PREDICT_RATES:-none 1gbit 100mbit}"
read -r -a batches <<<"${PREDICT_BATCHES:-32 128}"
steps=${PREDICT_STEPS:-16}
model=${PREDICT_MODEL:-seed-cnn}
shared=${PREDICT_SHARED:-0}
host_cpus=$(awk -v n="$(nproc)" 'BEGIN { printf "%g", n / 4 }')
python=/usr/bin/python3

skip() { echo "bench/predict.sh: skipped: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
why=$("$harness" check 2>&1) || skip "$why"
[[ -x build/bin/scalelab-cli && -x build/bin/scalelab-agent && -x build/bin/scalelab-worker ]] \
    || skip "build/bin/scalelab-{cli,agent,worker} missing (build first)"
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "PREDICT_STEPS '$steps': a positive integer" >&2; exit 2; }

work=$(mktemp -d /tmp/slbench-predict.XXXXXX)
cluster=$work/cluster
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -d $cluster ]]; then "$harness" down "$cluster" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

max_batch=0
for b in "${batches[@]}"; do
    [[ $b =~ ^[1-9][0-9]*$ ]] || { echo "PREDICT_BATCHES: '$b' is not a batch size" >&2; exit 2; }
    ((b > max_batch)) && max_batch=$b
done
# The 4-worker runs of the largest batch train `steps` steps per rank (fewer workers, more).
images=$((steps * max_batch * 4))

echo "== the scaling model's predictions against measurement: 4 hosts (network namespaces) =="
echo "date:     $(date -Is)"
echo "machine:  $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ $shared == 1 ]]; then
    echo "hosts:    4, sharing the $(nproc) cores (no quota; predicted for 1 machine of $(nproc) cores)"
else
    echo "hosts:    4, each under a CPU quota of $host_cpus cores (CLUSTER_HOST_CPUS): cores of their own"
fi
echo "build:    git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "settings: model $model, $steps steps per rank, 1 epoch, 1 thread per worker, one worker per host;"
echo "          fitted on 1 and 2 workers, predicting 3 and 4; rates ${rates[*]}; batches ${batches[*]}"
echo
quota=$host_cpus
[[ $shared == 1 ]] && quota=
CLUSTER_HOST_CPUS=$quota CLUSTER_TRAIN_IMAGES=$((images * 1)) CLUSTER_TEST_IMAGES=256 "$harness" up "$cluster" 4 >/dev/null
# shellcheck disable=SC1091
source "$cluster/cluster.env"
export SCALELAB_TLS_CA=$CLUSTER_CA
agents=(--agent "$CLUSTER_AGENT_1" --agent "$CLUSTER_AGENT_2" --agent "$CLUSTER_AGENT_3" --agent "$CLUSTER_AGENT_4")

# study NAME WORKERS BATCH -> the study's id (its output in $work/NAME.log)
study() {
    local name=$1 workers=$2 batch=$3
    cat >"$work/$name.json" <<EOF
{ "name": "$name", "dataset": "$CLUSTER_DATASET",
  "training": { "maxTrainImages": "$images", "maxTestImages": "256", "model": "$model" },
  "baseline": { "skip": true },
  "grid": { "workers": [$workers], "batchSize": [$batch], "epochs": [1], "threadsPerWorker": [1] },
  "repeats": 1, "maxFailures": 0, "placement": "spread" }
EOF
    if ! build/bin/scalelab-cli study run "$work/$name.json" --state-dir "$work/state" \
        --token-file "$CLUSTER_TOKEN_FILE" "${agents[@]}" >"$work/$name.log" 2>&1; then
        echo "study $name failed:" >&2
        tail -20 "$work/$name.log" >&2
        return 1
    fi
    sed -n "s/^study \([^ ]*\) ($name):.*/\1/p" "$work/$name.log" | tail -n 1
}

# measured STUDY -> "workers imagesPerSecond" per run (the anatomy's definition)
measured() {
    build/bin/scalelab-cli study show "$1" --json --state-dir "$work/state" | "$python" -c '
import json, sys
for r in json.load(sys.stdin)["runs"]:
    step = r.get("anatomy", {}).get("perStep", {}).get("stepSeconds")
    c = r["config"]
    if step:
        print(c["workers"], c["workers"] * c["batchSize"] / step)'
}

# predicted STUDY BATCH -> "workers imagesPerSecond low high" for 3 and 4 workers
predicted() {
    local placement=()
    [[ $shared == 1 ]] && placement=(--machines 1 --cores-per-machine "$(nproc)")
    build/bin/scalelab-cli study predict "$1" --workers 3,4 --batch-size "$2" "${placement[@]}" --json \
        --state-dir "$work/state" \
        | "$python" -c '
import json, sys
m = json.load(sys.stdin)["models"][0]
if not m["fit"]["valid"]:
    sys.exit("no model: " + m["fit"]["problem"])
bw = m["fit"].get("bandwidthBytesPerSecond") or 0
for p in m["predictions"]:
    print(p["workers"], p["imagesPerSecond"], p["imagesPerSecondLow"], p["imagesPerSecondHigh"], bw,
          p.get("coreShare", 1))'
}

rows=$work/rows
: >"$rows"
printf '%-8s %6s %8s %7s %12s %22s %12s %8s\n' "link" "batch" "workers" "shared" "predicted" "[95 % band]" "measured" "error"
for rate in "${rates[@]}"; do
    if [[ $rate == none ]]; then "$harness" shape "$cluster" none none >/dev/null
    else "$harness" shape "$cluster" "$rate" none >/dev/null; fi
    for batch in "${batches[@]}"; do
        fit=$(study "fit-$rate-b$batch" "1, 2" "$batch") || continue
        if ! predictions=$(predicted "$fit" "$batch" 2>"$work/predict.err"); then
            echo "$rate batch $batch: $(cat "$work/predict.err")"
            continue
        fi
        check=$(study "check-$rate-b$batch" "3, 4" "$batch") || continue
        actual=$(measured "$check")
        link=""
        while read -r w ips low high bw share; do
            link=$bw
            m=$(awk -v w="$w" '$1 == w { print $2 }' <<<"$actual")
            [[ -n $m ]] || { echo "$rate batch $batch: no measured $w-worker run"; continue; }
            err=$(awk -v p="$ips" -v m="$m" 'BEGIN { printf "%+.1f", 100 * (p / m - 1) }')
            printf '%-8s %6s %8s %7.2f %12.1f %22s %12.1f %7s%%\n' "$rate" "$batch" "$w" "$share" "$ips" \
                "$(printf '[%.1f, %.1f]' "$low" "$high")" "$m" "$err"
            echo "$err" >>"$rows"
        done <<<"$predictions"
        printf '%-8s %6s %8s %s\n' "" "" "" "(link fitted from the 2-worker run's probe: $(awk -v b="$link" 'BEGIN { printf "%.0f MB/s", b / 1e6 }'))"
    done
done
echo
if [[ -s $rows ]]; then
    tr -d '+-' <"$rows" | sort -g | awk '{ v[NR] = $1 }
        END { med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "absolute error: median %.1f %%, largest %.1f %% over %d rows (goal: median <= 10 %%, none over 20 %%)\n", med, v[NR], NR }'
else
    echo "no row was measured"
fi
