#!/usr/bin/env bash
# Set up, build and run the whole Qt Test suite with ctest.
#   ./scripts/test.sh [ctest options, e.g. -L unit]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
scalelab_install_dependencies "${SCALELAB_PACKAGES[@]}" "${SCALELAB_TEST_PACKAGES[@]}"
scalelab_build -DSCALELAB_BUILD_TESTS=ON
cd "$SCALELAB_BUILD"
exec ctest --output-on-failure --timeout 600 "$@"
