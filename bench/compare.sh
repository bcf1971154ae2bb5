#!/usr/bin/env bash
# ScaleLab's worker vs PyTorch's Python front end, side by side, same model, batch,
# threads and precision, interleaved A/B, median of REPEATS runs per side and row.
#   bench/compare.sh [REPEATS] [MODEL]   (after ./scripts/test.sh or run.sh has built)
#   ROWS="1x1 2x1" bench/compare.sh 8 mobilenet_v2   (some rows only, more repeats)
# MODEL: seed-cnn (default), resnet18 or mobilenet_v2; the peer builds the same architecture
# from torchvision. Needs Debian's python3-torch and python3-torchvision (installed here if
# missing). Not a test: numbers vary.
# The worker runs with what the agent adds to a worker's environment for malloc
# (GLIBC_TUNABLES=glibc.malloc.hugetlb=1; it sets its own mallopt thresholds in main). The
# peer runs as a PyTorch user runs it, with glibc's defaults, unless PEER_MALLOC=worker: then
# it gets the worker's malloc settings through the environment (the same thresholds, the same
# tunable), so that a row compares training engines and not allocator settings. glibc's
# defaults hand freed activation memory back to the kernel every step on some machines, which
# slows the peer's one-rank rows more than its DDP rows (docs/benchmarks.md).
# PEER_BROADCAST_BUFFERS=off turns off DDP's broadcast of buffers at every forward (below).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
SCALELAB_PACKAGES+=(python3-torch python3-torchvision)
scalelab_install_dependencies
[ -x build/bin/scalelab-worker ] || scalelab_build
repeats="${1:-3}"
model="${2:-seed-cnn}"
case "$model" in seed-cnn|resnet18|mobilenet_v2) ;; *) echo "usage: $0 [REPEATS] [seed-cnn|resnet18|mobilenet_v2]" >&2; exit 2 ;; esac
worker=build/bin/scalelab-worker
# Training FLOPs per image: three forwards, as the worker counts one (model_zoo.h, ModelCost).
gflop=$("$worker" parameters --model "$model" --json on | /usr/bin/python3 -c 'import json, sys; print(3 * json.load(sys.stdin)["forward_flops_per_image"] / 1e9)')
# The same BLAS kernel on both sides: where OpenBLAS does not know the CPU and falls back to
# its generic kernel, the worker switches to a better one (blas_kernel.h); the peer is given
# that one through OPENBLAS_CORETYPE, as a PyTorch user who knew would set it.
kernel=$("$worker" blas | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["kernel"])')
blas_env="OPENBLAS_CORETYPE=${kernel:-}"
[ -n "$kernel" ] || blas_env="SCALELAB_NO_OPENBLAS=1"
# Debian's interpreter: python3-torch installs there, whatever python3 is first on PATH.
peer="/usr/bin/python3 bench/pytorch_peer.py"
worker_malloc="GLIBC_TUNABLES=glibc.malloc.hugetlb=1"
case "${PEER_MALLOC:-default}" in
    default) peer_malloc="" ;;
    # worker_main.cpp: mallopt(M_MMAP_THRESHOLD, 32 MB), (M_TRIM_THRESHOLD, 1 GB), (M_TOP_PAD, 64 MB).
    worker) peer_malloc="MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=67108864 $worker_malloc" ;;
    *) echo "PEER_MALLOC: default or worker, not '$PEER_MALLOC'" >&2; exit 2 ;;
esac
# PEER_BROADCAST_BUFFERS=off: DDP without its per-forward broadcast of rank 0's buffers, as the
# worker runs (it copies them before evaluation and checkpoints only). Default on: DDP's own.
case "${PEER_BROADCAST_BUFFERS:-on}" in
    on|off) peer_options="--broadcast-buffers ${PEER_BROADCAST_BUFFERS:-on}" ;;
    *) echo "PEER_BROADCAST_BUFFERS: on or off, not '$PEER_BROADCAST_BUFFERS'" >&2; exit 2 ;;
esac
# run_side runs in a $(...) subshell: the last rendezvous port lives in a file, so that each
# 2-rank run takes a port of its own (one that a run before it may leave in TIME_WAIT is not
# reused).
port_file="$(mktemp)"
echo 29700 >"$port_file"
next_port() { local p=$(($(cat "$port_file") + 1)); echo "$p" >"$port_file"; echo "$p"; }

ips() { grep -oE '"images_per_second": ?[0-9.e+]+' | head -1 | sed 's/.*: *//'; }
# Every run's bench line, tagged with its row and side, for the breakdown of a step.
log="$(mktemp)"
trap 'rm -f "$log" "$port_file"' EXIT
record() {  # tag: the bench line on stdin goes to the log; prints its images/second
    local line
    line="$(grep -m1 '"bench"' || true)"
    printf '%s\t%s\n' "$1" "$line" >>"$log"
    printf '%s\n' "$line" | ips
}
run_side() {  # side world threads extra...
    local side=$1 world=$2 threads=$3; shift 3
    local tag="$world $threads $side $*"
    local cmd
    # torch.set_num_threads() leaves OpenBLAS (the linear layers) at one thread per core:
    # the peer is held to the row's threads like the worker, which sets both itself.
    if [ "$side" = scalelab ]; then
        cmd="env $worker_malloc $worker bench"
    else
        cmd="env OPENBLAS_NUM_THREADS=$threads $blas_env $peer_malloc $peer $peer_options"
    fi
    if [ "$world" = 2i ]; then
        # Two independent single-rank processes at once, no communication: what the
        # machine gives two busy cores, the ceiling for 2 ranks x 1 thread.
        local first
        first="$(mktemp)"
        $cmd --model "$model" --batch-size 64 --threads "$threads" --steps 20 --warmup-steps 5 "$@" | ips >"$first" &
        local second
        second="$($cmd --model "$model" --batch-size 64 --threads "$threads" --steps 20 --warmup-steps 5 "$@" | record "$tag")"
        wait
        calc "$(cat "$first") + $second"
        rm -f "$first"
    elif [ "$world" -eq 1 ]; then
        $cmd --model "$model" --batch-size 64 --threads "$threads" --steps 20 --warmup-steps 5 "$@" | record "$tag"
    else
        local port
        port=$(next_port)
        for r in $(seq 1 $((world - 1))); do
            $cmd --model "$model" --batch-size 64 --threads "$threads" --steps 20 --warmup-steps 5 --world-size "$world" \
                --rank "$r" --rendezvous "127.0.0.1:$port" "$@" >/dev/null &
        done
        $cmd --model "$model" --batch-size 64 --threads "$threads" --steps 20 --warmup-steps 5 --world-size "$world" \
            --rank 0 --rendezvous "127.0.0.1:$port" "$@" | record "$tag"
        wait
    fi
}
calc() { awk "BEGIN { print $1 }"; }
# The median (of an even count, the mean of the middle two) and the range of a column of numbers.
median() { sort -g | awk '{a[NR]=$1} END { if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2 }'; }
spread() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.1f-%.1f", lo, hi}'; }

rows=("1 1 fp32 off" "1 2 fp32 off" "2 1 fp32 off" "2i 1 fp32 off")
if grep -qE ' (avx512_bf16|amx_bf16)' /proc/cpuinfo; then
    if [ "$model" = mobilenet_v2 ]; then
        # torchvision's ReLU6 is hardtanh, whose CPU backward has no bf16 kernel in PyTorch 1.13.
        echo "no bf16 row: PyTorch 1.13 cannot train torchvision's MobileNetV2 under bf16 autocast on a CPU" >&2
    else
        rows+=("1 2 bf16 on")
    fi
fi
# ROWS="1x1 2x1 ..." runs only those rows (names: 1x1 1x2 2x1 2i bf16), with more repeats
# for the same time; summaries that need a row left out are not printed.
if [ -n "${ROWS:-}" ]; then
    declare -A row_of=([1x1]="1 1 fp32 off" [1x2]="1 2 fp32 off" [2x1]="2 1 fp32 off" [2i]="2i 1 fp32 off" [bf16]="1 2 bf16 on")
    chosen=()
    for name in $ROWS; do
        [ -n "${row_of[$name]:-}" ] || { echo "ROWS: '$name' is not a row; the rows are 1x1 1x2 2x1 2i bf16" >&2; exit 2; }
        for row in "${rows[@]}"; do [ "$row" = "${row_of[$name]}" ] && chosen+=("$row"); done
    done
    [ "${#chosen[@]}" -gt 0 ] || { echo "ROWS: none of '$ROWS' runs for $model on this CPU" >&2; exit 2; }
    rows=("${chosen[@]}")
fi
declare -A result
for row in "${rows[@]}"; do
    read -r world threads precision cl <<<"$row"
    a=(); b=()
    for _ in $(seq "$repeats"); do  # interleaved: A, B, A, B, ...
        a+=("$(run_side scalelab "$world" "$threads" --precision "$precision" --channels-last "$cl")")
        b+=("$(run_side pytorch "$world" "$threads" --precision "$precision" --channels-last "$cl")")
    done
    result["$row,s"]=$(printf '%s\n' "${a[@]}" | median)
    result["$row,p"]=$(printf '%s\n' "${b[@]}" | median)
    result["$row,s,spread"]=$(printf '%s\n' "${a[@]}" | spread)
    result["$row,p,spread"]=$(printf '%s\n' "${b[@]}" | spread)
done
peak=$(env $blas_env /usr/bin/python3 -c '
import time, torch
torch.set_num_threads(2); a = torch.randn(2048, 2048); b = torch.randn(2048, 2048)
for _ in range(3): a @ b
t = time.perf_counter(); n = 20
for _ in range(n): a @ b
print(2 * 2048**3 * n / (time.perf_counter() - t) / 1e9)')
printf '\nmodel %s, %s GFLOP per training image\n' "$model" "$gflop"
printf 'malloc: the worker as the agent starts it; the peer with %s\n' \
    "$([ -n "$peer_malloc" ] && echo "the worker's settings (PEER_MALLOC=worker)" || echo "glibc's defaults")"
printf "DDP's broadcast of buffers at every forward: %s\n" "${PEER_BROADCAST_BUFFERS:-on}"
printf 'BLAS: %s\n' "$("$worker" blas | /usr/bin/python3 -c 'import json, sys; b = json.load(sys.stdin); print(b["library"] + " (" + b["how"] + ")")')"
printf 'images/s: the median of %s runs per side (min-max in brackets), interleaved\n' "$repeats"
printf '%-38s %12s %12s %8s %10s   %s\n' "row (batch 64 per rank)" "ScaleLab" "PyTorch" "ratio" "GFLOP/s" "[ScaleLab] [PyTorch]"
for row in "${rows[@]}"; do
    read -r world threads precision cl <<<"$row"
    s="${result["$row,s"]}"; p="${result["$row,p"]}"
    label="$world rank x $threads thread, $precision, CL $cl"
    [ "$world" = 2i ] && label="2 x (1 rank x 1 thread), independent"
    printf '%-38s %12.1f %12.1f %8.3f %10.1f   [%s] [%s]\n' "$label" "$s" "$p" "$(calc "$s / $p")" "$(calc "$s * $gflop")" \
        "${result["$row,s,spread"]}" "${result["$row,p,spread"]}"
done
s1="${result["1 1 fp32 off,s"]:-}"; s2="${result["2 1 fp32 off,s"]:-}"; si="${result["2i 1 fp32 off,s"]:-}"
p1="${result["1 1 fp32 off,p"]:-}"; p2="${result["2 1 fp32 off,p"]:-}"; pi="${result["2i 1 fp32 off,p"]:-}"
echo
if [ -n "$s1" ] && [ -n "$s2" ]; then
    printf 'scaling efficiency, 2 ranks x 1 thread vs 1 rank x 1 thread: ScaleLab %.3f, PyTorch DDP %.3f\n' \
        "$(calc "$s2 / (2 * $s1)")" "$(calc "$p2 / (2 * $p1)")"
fi
if [ -n "$s1" ] && [ -n "$si" ]; then
    printf 'two independent processes reach %.3f (ScaleLab) and %.3f (PyTorch) of 2 x 1 rank: the cores slow each other\n' \
        "$(calc "$si / (2 * $s1)")" "$(calc "$pi / (2 * $p1)")"
fi
if [ -n "$s2" ] && [ -n "$si" ]; then
    printf '2 ranks x 1 thread vs that ceiling: ScaleLab %.3f, PyTorch DDP %.3f\n' "$(calc "$s2 / $si")" "$(calc "$p2 / $pi")"
fi
if [ -n "${result["1 2 bf16 on,s"]:-}" ] && [ -n "${result["1 2 fp32 off,p"]:-}" ]; then
    printf 'bf16 + channels-last (ScaleLab, 2 threads) / fp32 eager PyTorch (2 threads): %.3f\n' \
        "$(calc "${result["1 2 bf16 on,s"]} / ${result["1 2 fp32 off,p"]}")"
fi
printf 'matmul peak (2048^2 fp32 through BLAS, 2 threads): %.1f GFLOP/s; %s = %s GFLOP per training image\n' "$peak" "$model" "$gflop"
echo "(convolutions run on oneDNN, not BLAS, and can exceed the BLAS matmul figure)"

# Where a step's time goes (CPU fp32 rows; per side the median over its runs of each run's
# median, in ms; rank 0 for 2 ranks, one of the two processes for the ceiling). Backward
# ends when the last gradient is produced; "wait" runs from there to the end of backward:
# the all-reduces that backward's compute did not hide. What 2 ranks add over the ceiling
# in forward and backward is compute slowed by the communication sharing the two cores.
/usr/bin/python3 - "$log" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tag, _, bench = line.rstrip("\n").partition("\t")
    if bench:
        runs[tag].append(json.loads(bench)["bench"])  # a WorkerEvent line: {"bench": {...}}
phases = ["forward", "backward", "gradient_wait", "optimizer", "step"]
print("\n%-46s %8s %8s %8s %8s %8s" % ("step breakdown, ms", "forward", "backward", "wait", "optim.", "step"))
for world, label in (("1", "1 rank x 1 thread"), ("2i", "ceiling: 2 x (1 rank x 1 thread)"), ("2", "2 ranks x 1 thread")):
    for side, name in (("scalelab", "ScaleLab"), ("pytorch", "PyTorch")):
        got = [r for r in runs.get(f"{world} 1 {side} --precision fp32 --channels-last off", [])
               if "median_forward_seconds" in r]
        if got:
            cells = [1e3 * statistics.median(r[f"median_{p}_seconds"] for r in got) for p in phases]
            print("%-46s %8.1f %8.1f %8.1f %8.1f %8.1f" % (f"{label}, {name}", *cells))
PY
