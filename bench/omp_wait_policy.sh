#!/usr/bin/env bash
# Why the agent starts its workers with OMP_WAIT_POLICY=PASSIVE (remote-agent/agent/
# worker_command.h): the worker's training step, alone and with the cores shared, under
# libgomp's default policy (idle threads spin before they sleep) and under PASSIVE (they
# sleep at once), interleaved A/B, median of REPEATS runs per row.
#   bench/omp_wait_policy.sh [REPEATS]     (after ./scripts/test.sh or run.sh has built)
# Rows: one rank with every core; and RANKS ranks at once with every core each (the cores
# shared, as when ranks, a data loader or Gloo's threads meet on one node). Prints images/s
# summed over the ranks and the ratio PASSIVE / default. Not a test: numbers vary.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
[ -x build/bin/scalelab-worker ] || scalelab_build
repeats="${1:-3}"
ranks="${RANKS:-2}"
cores="$(nproc)"
worker=build/bin/scalelab-worker

ips() { grep -oE '"images_per_second": ?[0-9.e+]+' | head -1 | sed 's/.*: *//'; }
# One measurement: N processes at once, each with every core; prints their images/s summed.
measure() {  # policy processes
    local policy=$1 processes=$2 out i
    out="$(mktemp -d)"
    for ((i = 0; i < processes; i++)); do
        env ${policy:+OMP_WAIT_POLICY=$policy} "$worker" bench --batch-size 64 --threads "$cores" \
            --steps 15 --warmup-steps 3 | ips >"$out/$i" &
    done
    wait
    cat "$out"/* | awk '{ s += $1 } END { printf "%.1f\n", s }'
    rm -rf "$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-34s %12s %12s %8s\n' "row ($cores cores, batch 64)" "default" "PASSIVE" "ratio"
for processes in 1 "$ranks"; do
    default=() passive=()
    for ((r = 0; r < repeats; r++)); do
        default+=("$(measure "" "$processes")")
        passive+=("$(measure PASSIVE "$processes")")
    done
    d="$(printf '%s\n' "${default[@]}" | median)"
    p="$(printf '%s\n' "${passive[@]}" | median)"
    if [ "$processes" = 1 ]; then row="1 rank x $cores threads"; else row="$processes ranks x $cores threads at once"; fi
    printf '%-34s %12s %12s %8s\n' "$row" "$d img/s" "$p img/s" "$(awk -v a="$p" -v b="$d" 'BEGIN { printf "%.2f", a / b }')"
done
