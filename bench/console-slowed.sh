#!/usr/bin/env bash
# The console frame benchmark on a machine made slower: the bench runs in a cgroup whose CPU
# quota is CPUS cores' worth of time per PERIOD_US (both cores together), so that a fast
# development machine can stand in for a slower one. Root; cgroup v1 (cpu controller) or v2.
#
#   bench/console-slowed.sh [CPUS [PERIOD_US]] [-- BENCH ARGS]
#
# CPUS (default 0.7) and PERIOD_US (default 2000: short periods, so a frame is slowed
# evenly rather than stopped for most of a long period). BENCH ARGS default to issue 56's
# command: --runs 8 --live-runs 1,4,8 --peer-sizes 0 --append-peer-points 0.
#
# How to choose CPUS: run an older build whose figures on the slower machine are known under
# several quotas, and take the quota that reproduces them (docs/benchmarks.md did this for
# the 2-vCPU AMD EPYC Zen 3 of issue 56). It is a stand-in, not that machine: a quota slows
# the threads of the bench together (a second busy thread takes from the GUI thread's
# share), where a slower CPU slows each core on its own.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_CONSOLE:-$root/build/bin/scalelab-bench-console}
cpus=0.7
period=2000
if [[ $# -gt 0 && $1 != -- ]]; then cpus=$1; shift; fi
if [[ $# -gt 0 && $1 != -- ]]; then period=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
args=("$@")
[[ ${#args[@]} -eq 0 ]] && args=(--runs 8 --live-runs 1,4,8 --peer-sizes 0 --append-peer-points 0)

die() { echo "console-slowed.sh: $*" >&2; exit 2; }
[[ $EUID -eq 0 ]] || die "needs root (it creates a cgroup); run it with sudo"
[[ -x $bench ]] || die "no benchmark at $bench: build it (cmake --build build --target scalelab-bench-console) or set BENCH_CONSOLE"
quota=$(awk -v c="$cpus" -v p="$period" 'BEGIN { q = int(c * p + 0.5); if (c <= 0 || q < 1000) exit 1; print q }') \
  || die "CPUS × PERIOD_US must be at least 1000 µs (the kernel's smallest quota): got $cpus × $period"

name=scalelab-slowed-$$
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then # v2
  cg=/sys/fs/cgroup/$name
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control \
    || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control \
    || die "cannot enable the cpu controller in /sys/fs/cgroup"
  mkdir "$cg"
  echo "$quota $period" > "$cg/cpu.max"
elif [[ -d /sys/fs/cgroup/cpu ]]; then # v1
  cg=/sys/fs/cgroup/cpu/$name
  mkdir "$cg"
  echo "$period" > "$cg/cpu.cfs_period_us"
  echo "$quota" > "$cg/cpu.cfs_quota_us"
else
  die "no cgroup cpu controller under /sys/fs/cgroup"
fi
cleanup() { rmdir "$cg" 2> /dev/null || true; }
trap cleanup EXIT

echo "console-slowed.sh: $cpus CPU ($quota µs every $period µs) for $bench ${args[*]}"
# The child joins the cgroup, then becomes the benchmark; the cgroup goes when it has ended.
bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" \
  env QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}" "$bench" "${args[@]}"
