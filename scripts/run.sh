#!/usr/bin/env bash
# The main job: set up, build, then start the ScaleLab console. Without a display it
# runs a headless demo instead: a baseline run on a local agent, printed live.
#   ./scripts/run.sh [console or scalelab-cli run options]
# The demo uses real CIFAR-10 when the local agent's data folder has it
# (~/.local/share/scalelab/data/cifar-10), else a SYNTHETIC CIFAR-format set, and says so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
scalelab_install_dependencies
scalelab_build

bin="$SCALELAB_BUILD/bin"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ "${SCALELAB_HEADLESS:-0}" != 1 ]; then
  exec "$bin/scalelab" "$@"
fi

echo "run: no display; running the headless demo (scalelab-cli run). Set DISPLAY for the console."
data="${XDG_DATA_HOME:-$HOME/.local/share}/scalelab/data"
if [ $# -gt 0 ]; then
  exec "$bin/scalelab-cli" run "$@"
elif "$bin/scalelab-worker" inspect --data-dir "$data/cifar-10" >/dev/null 2>&1; then
  exec "$bin/scalelab-cli" run --dataset cifar-10 --epochs 1 --batch-size 64
else
  echo "run: no CIFAR-10 under $data/cifar-10; using a SYNTHETIC CIFAR-format data set."
  exec "$bin/scalelab-cli" run --synthetic --epochs 2 --batch-size 64
fi
