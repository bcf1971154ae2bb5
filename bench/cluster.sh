#!/usr/bin/env bash
# Data-parallel scaling across two "hosts" under network limits: ScaleLab's worker vs
# PyTorch DDP (bench/pytorch_peer.py), side by side, interleaved A/B, in one run.
#
#   bench/cluster.sh [REPEATS]          (default 3; root, after the worker is built)
#
# The hosts are network namespaces on a bridge (tests/cluster/netns-cluster.sh), one rank
# per host, batch 64 per rank, 1 thread per rank, OpenBLAS held to 1 thread on both sides.
# Each rate in CLUSTER_RATES is applied with tbf on every host's link ("none": unshaped
# veth). Every round measures, per side, the single-rank reference (world size 1 on host 1)
# and then, for every rate, 2 ranks (ScaleLab and PyTorch back to back, order alternating by
# round). Rounds are the outer loop so that a slow spell of this shared machine (2 cores)
# spreads over all rates instead of landing on one, and each 2-rank run has a reference
# from its own round. Scaling efficiency = 2-rank images/s / (2 x 1-rank images/s).
#
# Environment: CLUSTER_RATES (default "none 10gbit 1gbit 100mbit"), CLUSTER_DELAY (one-way
# delay, default none; needs tc netem), STEPS (timed steps, default 12), WARMUP (default 3),
# MEASURE_TIMEOUT (seconds per measurement, default 60 + 10 x (STEPS + WARMUP)).
# Exit 77 (skip) when it cannot run here. A benchmark: it reports, it asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

harness=tests/cluster/netns-cluster.sh
repeats=${1:-3}
read -r -a rates <<<"${CLUSTER_RATES:-none 10gbit 1gbit 100mbit}"
delay=${CLUSTER_DELAY:-none}
steps=${STEPS:-12}
warmup=${WARMUP:-3}
measure_timeout=${MEASURE_TIMEOUT:-$((60 + 10 * (steps + warmup)))}
python=/usr/bin/python3   # Debian's interpreter: python3-torch is there, not in pyenv's

skip() { echo "bench/cluster.sh: skipped: $*"; exit 77; }
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "REPEATS '$repeats': a positive integer" >&2; exit 2; }
((${#rates[@]} > 0)) || { echo "CLUSTER_RATES is empty" >&2; exit 2; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
[[ -x $harness ]] || skip "$harness missing"
why=$("$harness" check 2>&1) || skip "$why"
[[ -x build/bin/scalelab-worker ]] || skip "build/bin/scalelab-worker missing (build first)"
"$python" -c 'import torch' 2>/dev/null || skip "$python has no torch (apt-get install python3-torch)"

# Everything lives in one temp folder; the trap stops what we started and takes the
# cluster down whatever happens (error, Ctrl-C), so that nothing is left behind.
work=$(mktemp -d /tmp/slbench-cluster.XXXXXX)
cluster=$work/cluster
live=()   # PIDs of the measurement processes running now
cleanup() {
    local rc=$? p
    trap - EXIT INT TERM
    for p in "${live[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${live[@]}"; do wait "$p" 2>/dev/null || true; done
    if [[ -d $cluster ]]; then "$harness" down "$cluster" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private copy of the worker: the build folder may be rebuilt while this runs, and every
# measurement should use the same binary (retry: a copy taken mid-link does not run).
worker=$work/scalelab-worker
params=""
for _ in $(seq 30); do
    cp build/bin/scalelab-worker "$worker" 2>/dev/null \
        && params=$("$worker" parameters 2>/dev/null) && [[ $params =~ ^[0-9]+$ ]] && break
    params=""; sleep 2
done
[[ -n $params ]] || { echo "build/bin/scalelab-worker does not run ('parameters' failed)" >&2; exit 1; }

calc() { awk "BEGIN { print $1 }"; }
median() {  # numbers on stdin (blank lines ignored) -> their median, nothing if none
    { grep -E '^[0-9.e+-]+$' || true; } | sort -g | awk '{ a[NR] = $1 }
        END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
to_bps() {  # tc rate (100mbit, 1gbit, 500kbit, 10mbps) -> bits per second
    awk -v r="$1" 'BEGIN {
        n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
        m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
        m["bps"] = 8; m["kbps"] = 8e3; m["mbps"] = 8e6; m["gbps"] = 8e9
        if (!(u in m)) exit 1
        printf "%.0f\n", n * m[u] }'
}
field() {  # field NAME < bench JSON line -> its number (nothing, and success, if absent)
    { grep -oE "\"$1\": ?[0-9.e+-]+" || true; } | head -1 | sed 's/.*: *//'
}

# --------------------------------------------------------------------------------------
# Header: where and what.
started=$SECONDS
netem_note=""
if ! netem_note=$("$harness" check-netem 2>&1); then
    netem_note=${netem_note:-tc netem unavailable}
    if [[ $delay != none ]]; then
        echo "note: CLUSTER_DELAY=$delay ignored: latency cannot be emulated here"
        delay=none
    fi
else
    netem_note=""
fi
torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
libtorch=$(ldd "$worker" | grep -oE '/[^ ]*libtorch_cpu\.so[^ ]*' | head -1 || true)
git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# (no optional locks: someone may be using this checkout's git meanwhile)
[[ -z $(GIT_OPTIONAL_LOCKS=0 git status --porcelain --untracked-files=no 2>/dev/null) ]] \
    || git_rev+=" + local changes"

echo "== ScaleLab vs PyTorch DDP: 2 hosts (network namespaces), data-parallel scaling =="
echo "date:     $(date -Is)"
echo "machine:  $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
    "kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "worker:   build/bin/scalelab-worker (copied at start; sha256" \
    "$(sha256sum "$worker" | cut -c1-12), built $(date -r build/bin/scalelab-worker '+%F %T')," \
    "git $git_rev), libtorch ${libtorch:-?}"
echo "pytorch:  $torch_version ($python bench/pytorch_peer.py, DDP over Gloo, GLOO_SOCKET_IFNAME=eth0)"
echo "settings: batch 64 per rank, 1 thread per rank, fp32, $warmup warm-up + $steps timed steps" \
    "(median step), $repeats rounds, OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 on both sides"
echo "          rank 0 on h1, rank 1 on h2; ScaleLab ranks --bind-address their host's eth0"
echo "rates:    ${rates[*]} (tbf on each host's eth0 and its bridge port; none = unshaped veth)"
if [[ -n $netem_note ]]; then
    echo "latency:  NOT EMULATED. $netem_note."
    echo "          The delay column is therefore not measured: every row ran with no added delay."
else
    echo "latency:  tc netem works here; one-way host-to-host delay $delay on every row"
fi

# Bytes all-reduced per step, and what moving them takes at each rate: the gradient is
# every parameter in fp32; a ring all-reduce over n ranks sends 2(n-1)/n of it per rank
# (reduce-scatter, then all-gather), and receives as much, on a full-duplex link.
grad_bytes=$((params * 4))
ring_bytes=$(calc "2 * (2 - 1) / 2 * $grad_bytes")
echo
echo "gradient: $params parameters x 4 bytes = $grad_bytes bytes ($(calc "$grad_bytes / 1e6") MB) all-reduced per step"
echo "ring all-reduce, 2 ranks: 2(n-1)/n x size = $(calc "$ring_bytes / 1e6") MB sent (and received) per rank per step"
declare -A bound_ms
for rate in "${rates[@]}"; do
    if [[ $rate == none ]]; then
        bound_ms[$rate]="-"
        echo "  at none:    no bound (unshaped veth: memory-copy speed)"
    elif bps=$(to_bps "$rate"); then
        bound_ms[$rate]=$(calc "$ring_bytes * 8 / $bps * 1000")
        printf '  at %-8s %9.1f ms per step, at least (wire time only: no latency, no framing)\n' \
            "$rate:" "${bound_ms[$rate]}"
    else
        echo "bad rate '$rate' (e.g. 100mbit, 1gbit, none)" >&2; exit 2
    fi
done

echo
echo "bringing the cluster up in $cluster"
CLUSTER_AGENTS=0 "$harness" up "$cluster" 2 >/dev/null
# shellcheck disable=SC1091
source "$cluster/cluster.env"
ip1=$CLUSTER_IP_1
ip2=$CLUSTER_IP_2
h1_sent=/sys/class/net/$CLUSTER_VETH_1/statistics/rx_bytes   # bridge side of h1's link

# --------------------------------------------------------------------------------------
# One measurement.

port=29500   # each host is its own namespace, so ports only need to be fresh per run
log=$work/bench.log   # "tag<TAB>bench JSON line" per successful run, for the breakdown

child_cpu() {  # child_cpu VAR: VAR = CPU seconds used by this shell's finished children
    # bash's `times`, run in this shell with a redirect: in $(...) it would be a subshell's,
    # which has no children.
    times >"$work/times"
    printf -v "$1" '%s' "$(sed -n 2p "$work/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) {
        split($i, t, /[ms]/); s += t[1] * 60 + t[2] }; print s }')"
}
cpu_busy() {  # CPU seconds all processes spent in user + system mode since boot
    awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4) / hz }' /proc/stat
}

# measure SIDE WORLD TAG: one run of SIDE (scalelab | pytorch) with WORLD ranks (1 or 2).
# Prints one progress line; sets m_ips (images/second, empty if the run failed) and
# m_other (cores that other processes kept busy meanwhile).
measure() {
    local side=$1 world=$2 tag=$3
    local -a base cmd0 cmd1 common=(--batch-size 64 --threads 1 --steps "$steps" --warmup-steps "$warmup")
    if [[ $side == scalelab ]]; then
        base=("$worker" bench)
    else
        base=(env GLOO_SOCKET_IFNAME=eth0 "$python" bench/pytorch_peer.py)
    fi
    cmd0=("${base[@]}" "${common[@]}")
    if ((world == 2)); then
        port=$((port + 1))
        cmd1=("${cmd0[@]}" --rank 1 --world-size 2 --rendezvous "$ip1:$port")
        cmd0+=(--rank 0 --world-size 2 --rendezvous "$ip1:$port")
        if [[ $side == scalelab ]]; then
            cmd0+=(--bind-address "$ip1"); cmd1+=(--bind-address "$ip2")
        fi
    fi
    local out=$work/rank0.out err0=$work/rank0.err err1=$work/rank1.err
    : >"$out"; : >"$err0"; : >"$err1"
    local sent0 cpu0 cpu1 busy0 t0
    sent0=$(cat "$h1_sent"); child_cpu cpu0; busy0=$(cpu_busy); t0=$(date +%s.%N)

    # Both ranks in the background, each under a timeout. When one rank fails, its peer is
    # stopped at once instead of waiting for its rendezvous or collective timeout.
    local p0 p1="" first="" rc=0 rc_other=0
    timeout -k 10 "$measure_timeout" "$harness" exec "$cluster" 1 "${cmd0[@]}" >"$out" 2>"$err0" &
    p0=$!; live=("$p0")
    if ((world == 2)); then
        timeout -k 10 "$measure_timeout" "$harness" exec "$cluster" 2 "${cmd1[@]}" >/dev/null 2>"$err1" &
        p1=$!; live+=("$p1")
        wait -n -p first "$p0" "$p1" || rc=$?
        local other=$p1; [[ $first == "$p1" ]] && other=$p0
        if ((rc != 0)); then kill -TERM "$other" 2>/dev/null || true; fi
        wait "$other" || rc_other=$?
        ((rc != 0)) || rc=$rc_other
    else
        wait "$p0" || rc=$?
    fi
    live=()

    local wall cpu other mb line
    wall=$(calc "$(date +%s.%N) - $t0")
    # CPU that other processes used meanwhile (anything not ours: a build, another test),
    # in cores: on a 2-core machine even 0.2 shows in the numbers.
    child_cpu cpu1
    cpu=$(calc "$cpu1 - $cpu0")
    other=$(calc "(($(cpu_busy) - $busy0) - $cpu) / $wall")
    other=$(calc "($other < 0) ? 0 : $other")
    m_other=$other
    line=$(grep -m1 '^{"bench": \?{' "$out" || true)
    m_ips=$(field images_per_second <<<"$line")
    local label
    label=$(printf '%-8s %-9s %s' "$tag" "$side" "${world}r")
    if [[ $rc != 0 || -z $m_ips ]]; then
        m_ips=""
        local why="exit $rc"; ((rc == 124 || rc == 137)) && why="timed out after ${measure_timeout}s"
        printf '  %s  FAILED (%s, %.0f s)\n' "$label" "$why" "$wall"
        local f
        for f in "$err0" "$err1"; do
            [[ -s $f ]] && tail -n 5 "$f" | sed "s|^|      $(basename "$f" .err): |"
        done
        return 0
    fi
    printf '%s\t%s\n' "$tag $side ${world}r" "$line" >>"$log"
    local step wait_s
    step=$(field median_step_seconds <<<"$line")
    wait_s=$(field median_gradient_wait_seconds <<<"$line")
    printf '  %s %7.1f img/s  step %5.0f ms  wait %5.0f ms' "$label" "$m_ips" \
        "$(calc "$step * 1000")" "$(calc "${wait_s:-0} * 1000")"
    if ((world == 2)); then
        # What h1 put on its link, per step (whole run: includes the start-up broadcast).
        mb=$(calc "($(cat "$h1_sent") - $sent0) / ($steps + $warmup) / 1e6")
        printf '  h1 sent %5.1f MB/step' "$mb"
    else
        printf '  %23s' ""
    fi
    printf '  other CPU %.2f cores  (%.0f s)\n' "$other" "$wall"
}

# --------------------------------------------------------------------------------------
# The runs.

declare -A two ref   # two[round,rate,side], ref[round,side]: images/s, "" = failed
declare -A foreign   # foreign[round,rate]: other processes' CPU (cores) in each run
sides=(scalelab pytorch)
for ((round = 1; round <= repeats; round++)); do
    # Alternate which side goes first, so neither always runs right after the other.
    order=("${sides[@]}"); ((round % 2)) || order=(pytorch scalelab)
    echo
    echo "round $round/$repeats"
    for side in "${order[@]}"; do
        measure "$side" 1 1-rank
        ref[$round,$side]=$m_ips
        foreign[$round,1-rank]+="$m_other "
    done
    for rate in "${rates[@]}"; do
        "$harness" shape "$cluster" "$rate" "$delay" >/dev/null
        for side in "${order[@]}"; do
            measure "$side" 2 "$rate"
            two[$round,$rate,$side]=$m_ips
            foreign[$round,$rate]+="$m_other "
        done
    done
done
"$harness" shape "$cluster" none none >/dev/null

# --------------------------------------------------------------------------------------
# Results: medians over rounds. Efficiency per round against that round's reference
# (its median over rounds if that one failed), then the median; ratio = ScaleLab's median
# 2-rank images/s over PyTorch's.

other_median() {  # other_median RATE|1-rank: median over all its runs, in cores
    local r
    for ((r = 1; r <= repeats; r++)); do echo "${foreign[$r,$1]:-}"; done | tr ' ' '\n' | median \
        | awk '{ printf "%.2f", $1 }'
}
two_values() {  # two_values RATE SIDE: the 2-rank images/s of each round, one a line
    local r
    for ((r = 1; r <= repeats; r++)); do echo "${two[$r,$1,$2]:-}"; done
}
declare -A ref_med
for side in "${sides[@]}"; do
    ref_med[$side]=$(for ((r = 1; r <= repeats; r++)); do echo "${ref[$r,$side]:-}"; done | median)
done

cell() {  # cell VALUE OK_COUNT: value, "*" when some rounds failed, "failed" when all did
    if [[ -z $1 ]]; then printf 'failed'
    elif (($2 < repeats)); then printf '%s*' "$1"
    else printf '%s' "$1"; fi
}

echo
echo "== results: median over $repeats rounds; batch 64 per rank, 1 thread per rank =="
printf '1 rank on h1 (reference): ScaleLab %s img/s, PyTorch %s img/s, ratio %s, other CPU %s\n' \
    "$([[ -n ${ref_med[scalelab]} ]] && printf '%.1f' "${ref_med[scalelab]}" || echo failed)" \
    "$([[ -n ${ref_med[pytorch]} ]] && printf '%.1f' "${ref_med[pytorch]}" || echo failed)" \
    "$([[ -n ${ref_med[scalelab]} && -n ${ref_med[pytorch]} ]] \
        && printf '%.3f' "$(calc "${ref_med[scalelab]} / ${ref_med[pytorch]}")" || echo -)" \
    "$(other_median 1-rank)"
echo
printf '%-9s %-6s %18s %6s %17s %6s %6s %25s %10s\n' rate delay "scalelab 2r img/s" eff \
    "pytorch 2r img/s" eff ratio "allreduce-lower-bound ms" "other CPU"
any_partial=0
for rate in "${rates[@]}"; do
    declare -A med=() eff=() ok=()
    for side in "${sides[@]}"; do
        mapfile -t got < <(two_values "$rate" "$side")
        effs=()
        ok[$side]=0
        for ((r = 1; r <= repeats; r++)); do
            v=${got[r - 1]}
            [[ -n $v ]] || continue
            ok[$side]=$((ok[$side] + 1))
            one=${ref[$r,$side]:-${ref_med[$side]}}
            if [[ -n $one ]]; then effs+=("$(calc "$v / (2 * $one)")"); fi
        done
        m=$(printf '%s\n' "${got[@]}" | median)
        med[$side]=${m:+$(printf '%.1f' "$m")}
        e=$(printf '%s\n' "${effs[@]}" | median)
        eff[$side]=${e:+$(printf '%.3f' "$e")}
        if ((ok[$side] > 0 && ok[$side] < repeats)); then any_partial=1; fi
    done
    ratio="-"
    if [[ -n ${med[scalelab]} && -n ${med[pytorch]} ]]; then
        ratio=$(printf '%.3f' "$(calc "${med[scalelab]} / ${med[pytorch]}")")
    fi
    bound=${bound_ms[$rate]}; [[ $bound == - ]] || bound=$(printf '%.1f' "$bound")
    printf '%-9s %-6s %18s %6s %17s %6s %6s %25s %10s\n' "$rate" "$delay" \
        "$(cell "${med[scalelab]}" "${ok[scalelab]}")" "${eff[scalelab]:--}" \
        "$(cell "${med[pytorch]}" "${ok[pytorch]}")" "${eff[pytorch]:--}" "$ratio" "$bound" \
        "$(other_median "$rate")"
    unset med eff ok
done
((any_partial == 0)) || echo "* median of the rounds that did not fail"
echo "eff = 2-rank img/s / (2 x 1-rank img/s), per round, median; ratio = ScaleLab / PyTorch, 2 ranks"
echo "other CPU = cores kept busy by processes not of this benchmark during the row's runs (median);"
echo "  the two hosts share this machine's $(nproc) cores, so anything above ~0.1 lowers that row's numbers"
if [[ -n $netem_note ]]; then
    echo "delay: not measured (no tc netem on this kernel): every row has only the veth's own latency"
fi

# Where a 2-rank step's time goes, per rate (rank 0; per side the median over rounds of
# each run's median step, ms). "wait" runs from the last gradient to the end of backward:
# the all-reduce that backward's compute did not hide.
if [[ -s $log ]]; then
    tags=("1-rank scalelab 1r" "1-rank pytorch 1r")
    for rate in "${rates[@]}"; do tags+=("$rate scalelab 2r" "$rate pytorch 2r"); done
    "$python" - "$log" "${tags[@]}" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tag, _, bench = line.rstrip("\n").partition("\t")
    runs[tag].append(json.loads(bench)["bench"])  # a WorkerEvent line: {"bench": {...}}
phases = ["forward", "backward", "gradient_wait", "optimizer", "step"]
print("\n%-26s %8s %8s %8s %8s %8s" % ("step breakdown, ms", "forward", "backward", "wait", "optim.", "step"))
for tag in sys.argv[2:]:
    got = [r for r in runs.get(tag, []) if "median_forward_seconds" in r]
    if got:
        cells = [1e3 * statistics.median(r[f"median_{p}_seconds"] for r in got) for p in phases]
        print("%-26s %8.1f %8.1f %8.1f %8.1f %8.1f" % (tag, *cells))
PY
fi

echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); total time $((SECONDS - started)) s"
