#!/usr/bin/env bash
# The main job: set up, build, then start the ScaleLab console. Without a display it runs
# a mini scale-up study instead (scripts/demo-study.sh): a baseline and a 2-worker run on a
# local agent, printed live, then the comparison and the path of its HTML report.
#   ./scripts/run.sh [console options]      with a display (DISPLAY or WAYLAND_DISPLAY)
#   ./scripts/run.sh [demo options]         without one, or with SCALELAB_HEADLESS=1
# The demo trains on real CIFAR-10 when the data folder has it
# (~/.local/share/scalelab/data/cifar-10), else on a SYNTHETIC CIFAR-format set, and says so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
scalelab_install_dependencies
scalelab_build

if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ "${SCALELAB_HEADLESS:-0}" != 1 ]; then
  exec "$SCALELAB_BUILD/bin/scalelab" "$@"
fi

echo "run: no display; running a mini scale-up study headless. Set DISPLAY for the console."
exec "$SCALELAB_ROOT/scripts/demo-study.sh" "$@"
