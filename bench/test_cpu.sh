#!/usr/bin/env bash
# Each test's CPU, counted in a cgroup of its own: agents, workers, Slurm daemons and
# chroots a test starts are counted even when they leave its process tree (which
# /usr/bin/time misses). Runs ctest in an existing build with the given arguments (default:
# the whole suite as CI runs it) and prints core-seconds per test, largest first, with
# the machine's total over the same time.
#   bench/test_cpu.sh [BUILD_DIR] [ctest arguments...]
#   bench/test_cpu.sh build -L unit
# Needs root and a writable cgroup hierarchy: cgroup v1's cpuacct or cgroup v2.
set -euo pipefail
build="$(cd "${1:-build}" && pwd)"
shift || true
[ $# -gt 0 ] || set -- --timeout 600 -j 6
testfile="$build/tests/CTestTestfile.cmake"
[ -f "$testfile" ] || { echo "test_cpu: no $testfile: build with -DSCALELAB_BUILD_TESTS=ON first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "test_cpu: needs root (it makes cgroups)" >&2; exit 2; }
if [ -w /sys/fs/cgroup/cpuacct ]; then
    parent=/sys/fs/cgroup/cpuacct
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -w /sys/fs/cgroup ]; then
    parent=/sys/fs/cgroup
else
    echo "test_cpu: no writable cgroup hierarchy (cgroup v1 cpuacct or v2) here" >&2
    exit 2
fi

out="$(mktemp -d)"
wrapper="$out/wrap.sh"
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
# wrap.sh NAME COMMAND...: COMMAND in cgroup NAME; its CPU goes to $out/NAME.cpu.
name="\$1"; shift
cg="$parent/scalelab-test-\$\$"
mkdir "\$cg" && echo \$\$ >"\$cg/cgroup.procs"
"\$@"; rc=\$?
sleep 1 # what the test killed has gone
if [ -f "\$cg/cpuacct.usage" ]; then ns=\$(cat "\$cg/cpuacct.usage")
else ns=\$((\$(sed -n 's/^usage_usec //p' "\$cg/cpu.stat") * 1000)); fi
echo "\$name \$ns" >"$out/\$name.cpu"
echo \$\$ >"$parent/cgroup.procs"
rmdir "\$cg" 2>/dev/null || true # a process left behind keeps it
exit \$rc
EOF
chmod +x "$wrapper"
restore() { mv "$out/CTestTestfile.cmake" "$testfile"; rm -rf "$out"; }
cp "$testfile" "$out/CTestTestfile.cmake"
trap restore EXIT
sed -i -E "s#^add_test\(\[=\[([^]]+)\]=\] #add_test([=[\1]=] \"$wrapper\" \"\1\" #" "$testfile"

machine() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; } # user nice system irq softirq, in ticks
ticks=$(getconf CLK_TCK)
before=$(machine); start=$(date +%s)
rc=0
(cd "$build" && ctest "$@") || rc=$?
after=$(machine); end=$(date +%s)
echo
echo "core-seconds per test (cgroup), largest first:"
cat "$out"/*.cpu 2>/dev/null | awk '{ printf "%9.1f  %s\n", $2 / 1e9, $1 }' | sort -rn
cat "$out"/*.cpu 2>/dev/null | awk '{ sum += $2 } END { printf "%9.1f  all %d tests\n", sum / 1e9, NR }'
awk -v a="$after" -v b="$before" -v t="$ticks" -v s="$((end - start))" \
    'BEGIN { printf "%9.1f  the machine, over %d s (%.2f cores busy)\n", (a - b) / t, s, (a - b) / t / s }'
exit $rc
