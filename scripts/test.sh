#!/usr/bin/env bash
# Set up, build and run the whole Qt Test suite with ctest.
#   ./scripts/test.sh [ctest options]       e.g. -L 'unit|gui' (the quick loop), -R tst_study
# Tests run side by side: ctest gets three slots per core and each test says how many it takes
# (PROCESSORS in tests/CMakeLists.txt), so those that mostly wait run beside those that
# compute. SCALELAB_TEST_JOBS sets the slots (1: one test at a time).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
scalelab_install_dependencies "${SCALELAB_PACKAGES[@]}" "${SCALELAB_TEST_PACKAGES[@]}" "${SCALELAB_FUZZ_PACKAGES[@]}"
scalelab_build -DSCALELAB_BUILD_TESTS=ON
cd "$SCALELAB_BUILD"
exec ctest --output-on-failure --timeout 600 -j "${SCALELAB_TEST_JOBS:-$((3 * $(nproc)))}" "$@"
