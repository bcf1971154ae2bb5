#!/usr/bin/env bash
# What measuring the gradient noise scale costs a training step (issue 54; docs/scaling.md,
# "The gradient noise scale"): the worker's bench step without it (--noise-scale false, the
# step bench/compare.sh holds against PyTorch's) and with it (--noise-scale true: the noise
# meter as training runs it, plus the gradient norm rank 0 takes for its reports anyway, so
# the cost shown is an upper bound), interleaved A/B, median step of REPEATS runs per row.
#   bench/noise_scale_cost.sh [REPEATS]     (after ./scripts/test.sh or run.sh has built)
#   MODEL=resnet18 BATCH=32 bench/noise_scale_cost.sh 5
# Rows: one rank with every core (the differenced estimator: a copy of the gradients a
# step), and two ranks of one thread each over Gloo on loopback (the ranks' squared norms in
# the gradient hooks, one scalar all-reduce). Prints the median step in ms each way and the
# cost in % of the step. Not a test: numbers vary; compare within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
[ -n "${SCALELAB_WORKER:-}" ] || [ -x build/bin/scalelab-worker ] || scalelab_build
repeats="${1:-5}"
model="${MODEL:-seed-cnn}"
batch="${BATCH:-64}"
cores="$(nproc)"
worker="${SCALELAB_WORKER:-build/bin/scalelab-worker}" # another build: SCALELAB_WORKER=PATH
export OMP_WAIT_POLICY=PASSIVE

step_ms() { grep -oE '"median_step_seconds": ?[0-9.e+-]+' | head -1 | sed 's/.*: *//' | awk '{ printf "%.3f\n", $1 * 1000 }'; }
# One measurement; prints rank 0's median step in ms.
measure() {  # noise(true|false) ranks threads
    local noise=$1 ranks=$2 threads=$3 port r
    if [ "$ranks" = 1 ]; then
        "$worker" bench --model "$model" --batch-size "$batch" --threads "$threads" --steps 20 --warmup-steps 3 \
            --noise-scale "$noise" 2>/dev/null | step_ms
        return
    fi
    port=$((20000 + RANDOM % 20000))
    for ((r = 1; r < ranks; r++)); do
        "$worker" bench --model "$model" --batch-size "$batch" --threads "$threads" --steps 20 --warmup-steps 3 \
            --noise-scale "$noise" --rank "$r" --world-size "$ranks" --rendezvous "127.0.0.1:$port" >/dev/null 2>&1 &
    done
    "$worker" bench --model "$model" --batch-size "$batch" --threads "$threads" --steps 20 --warmup-steps 3 \
        --noise-scale "$noise" --rank 0 --world-size "$ranks" --rendezvous "127.0.0.1:$port" 2>/dev/null | step_ms
    wait
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-36s %12s %12s %8s\n' "row ($model, batch $batch per rank)" "without" "with" "cost"
for row in "1 $cores" "2 1"; do
    read -r ranks threads <<<"$row"
    off=() on=()
    for ((i = 0; i < repeats; i++)); do
        off+=("$(measure false "$ranks" "$threads")")
        on+=("$(measure true "$ranks" "$threads")")
    done
    a="$(printf '%s\n' "${off[@]}" | median)"
    b="$(printf '%s\n' "${on[@]}" | median)"
    printf '%-36s %12s %12s %8s\n' "$ranks rank(s) x $threads thread(s)" "$a ms" "$b ms" \
        "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.2f%%", (b / a - 1) * 100 }')"
done
