#!/usr/bin/env bash
# Shakes out races before a submission: the whole suite (or the tests named by ctest options)
# on a machine made slower on purpose, as the slowest machine CI may run on (a 2-vCPU AMD EPYC
# without AVX-512 trains at less than half the speed of the fastest kind) with other tests beside.
#   ./scripts/test-under-load.sh [--hogs N] [--slots N] [--repeat N] [ctest options]
#     --hogs N    busy loops beside the suite, at its priority (default: one per core, which
#                 leaves the suite about half of each core)
#     --slots N   ctest's slots (default: twice test.sh's three per core)
#     --repeat N  run each test up to N times until it fails (ctest --repeat until-fail:N)
# e.g. ./scripts/test-under-load.sh --repeat 3 -R 'tst_agent_runs\.|tst_prometheus'
# Every test must pass like this: a test that fails only under load waits on the clock for
# something it should wait on by condition (docs/testing.md, "Under load").
set -euo pipefail
cores=$(nproc)
hogs=$cores
slots=$((6 * cores))
repeat=1
while (($#)); do
  case "$1" in
    --hogs) hogs=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) break ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
scalelab_install_dependencies "${SCALELAB_PACKAGES[@]}" "${SCALELAB_TEST_PACKAGES[@]}" "${SCALELAB_FUZZ_PACKAGES[@]}"
scalelab_build -DSCALELAB_BUILD_TESTS=ON

pids=()
stop_hogs() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; ++i)); do
  (while :; do :; done) &
  pids+=($!)
done
echo "test-under-load: ${hogs} busy loop(s) beside the suite, ${slots} ctest slots, up to ${repeat} run(s) a test"
cd "$SCALELAB_BUILD"
ctest --output-on-failure --timeout 600 -j "$slots" --repeat "until-fail:${repeat}" "$@"
