#!/usr/bin/env bash
# Why the agent starts its workers with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (remote-agent/
# agent/worker_command.h, workerMallocTunables): the CPU and the page faults of a worker's
# start (`scalelab-worker parameters`: libtorch loaded, the seed CNN built) and of a short run
# (2 epochs of 192 SYNTHETIC images, batch 16, one thread: what most runs of a test suite or
# a first try of a cluster are), with glibc's default malloc and with transparent huge pages
# for it, interleaved A/B, median of REPEATS per row.
#   bench/worker_start.sh [REPEATS]     (after ./scripts/test.sh or run.sh has built)
# Both sides get what the agent gives a one-thread worker otherwise (OMP_NUM_THREADS=1,
# OPENBLAS_NUM_THREADS=1, OMP_WAIT_POLICY=PASSIVE). CPU is user + system seconds (GNU time).
# Where transparent huge pages are off (/sys/kernel/mm/transparent_hugepage/enabled: never)
# the two columns are the same. Not a test: numbers vary.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
[ -x build/bin/scalelab-worker ] || scalelab_build
command -v /usr/bin/time >/dev/null || scalelab_install_dependencies time
repeats="${1:-5}"
worker="$PWD/build/bin/scalelab-worker"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$worker" generate-synthetic --out "$work/data" --train 192 --test 64 >/dev/null

# One measurement: prints "CPU-seconds page-faults".
measure() {  # tunables command...
    local tunables=$1
    shift
    env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE GLIBC_TUNABLES="$tunables" \
        /usr/bin/time -f '%U %S %R' -o "$work/time" "$worker" "$@" >/dev/null 2>&1
    awk '{ printf "%.3f %d\n", $1 + $2, $3 }' "$work/time"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)"
printf '%-28s %20s %20s %8s\n' "row (median of $repeats)" "default: CPU s, faults" "hugetlb=1: CPU s, faults" "CPU ratio"
row() {  # name command...
    local name=$1 r
    shift
    : >"$work/a"
    : >"$work/b"
    for ((r = 0; r < repeats; r++)); do
        measure "" "$@" >>"$work/a"
        measure glibc.malloc.hugetlb=1 "$@" >>"$work/b"
    done
    local ca fa cb fb
    ca=$(cut -d' ' -f1 "$work/a" | median) fa=$(cut -d' ' -f2 "$work/a" | median)
    cb=$(cut -d' ' -f1 "$work/b" | median) fb=$(cut -d' ' -f2 "$work/b" | median)
    printf '%-28s %12.3f %7.0f %12.3f %7.0f %8.3f\n' "$name" "$ca" "$fa" "$cb" "$fb" \
        "$(awk -v a="$ca" -v b="$cb" 'BEGIN { print b / a }')"
}
row "start (parameters)" parameters
row "short run (2 epochs, 192)" train --data-dir "$work/data" --batch-size 16 --epochs 2 --threads 1
