#!/usr/bin/env bash
# Where the test suite's CPU goes, by program: perf samples every CPU (49 Hz) while ctest runs
# the suite as scripts/test.sh does, then prints the CPU-seconds of each program (agents,
# workers, compilers, dpkg, daemons: everything the machine ran, whichever test started it),
# and for scalelab-worker how many processes there were, how their CPU is spread, and which
# libraries it went to (start-up: ld-linux and the kernel's page faults; training: libtorch,
# oneDNN's JIT code, OpenBLAS). bench/test_cpu.sh gives the same CPU by test instead.
#   bench/suite_profile.sh [BUILD] [ctest args]    e.g. bench/suite_profile.sh build -L process
# Needs perf (Debian: linux-perf) and root (or kernel.perf_event_paranoid <= 0). Nothing else
# should run meanwhile: every CPU is sampled. Leaves BUILD/suite-profile/perf.data.
set -euo pipefail
build="${1:-build}"
[ $# -gt 0 ] && shift
command -v perf >/dev/null || { echo "suite_profile.sh: perf missing (apt-get install linux-perf)" >&2; exit 1; }
[ -f "$build/CTestTestfile.cmake" ] || { echo "suite_profile.sh: no tests in $build (build with -DSCALELAB_BUILD_TESTS=ON)" >&2; exit 1; }
out="$build/suite-profile"
mkdir -p "$out"
hz=49
start=$(date +%s)
rc=0
perf record -q -a -F "$hz" -o "$out/perf.data" -- \
    ctest --test-dir "$build" --timeout 600 -j "$((3 * $(nproc)))" "$@" >"$out/ctest.log" 2>&1 || rc=$?
wall=$(($(date +%s) - start))
tail -n 3 "$out/ctest.log"
echo
echo "== CPU by program ($wall s of wall clock, $(nproc) CPUs; idle is 'swapper')"
perf script -i "$out/perf.data" -F comm 2>/dev/null | sort | uniq -c | sort -rn | head -25 |
    awk -v hz="$hz" '{ n = $1; $1 = ""; printf "%9.1f CPU-s  %s\n", n / hz, $0 }'
echo
echo "== scalelab-worker: processes by their CPU-seconds"
perf script -i "$out/perf.data" --comms scalelab-worker -F pid 2>/dev/null | sort | uniq -c |
    awk -v hz="$hz" '{ s = $1 / hz; t += s; n++
        if (s < 1) a++; else if (s < 3) b++; else if (s < 10) c++; else d++ }
        END { printf "%d processes, %.1f CPU-s: %d under 1 s, %d 1-3 s, %d 3-10 s, %d over 10 s\n", n, t, a, b, c, d }'
echo
echo "== scalelab-worker: CPU by library (oneDNN's generated kernels summed as [JIT])"
perf script -i "$out/perf.data" --comms scalelab-worker -F ip,dso 2>/dev/null |
    sed -E 's/.*\[JIT\].*/[JIT]/; s/^ *[0-9a-f]+ \((.*)\)$/\1/; s|.*/||; s/^perf-[0-9]+\.map$/[JIT]/' | sort | uniq -c | sort -rn | head -12 |
    awk -v hz="$hz" '{ printf "%9.1f CPU-s  %s\n", $1 / hz, $2 }'
exit "$rc"
