#!/usr/bin/env bash
# Makes docs/images/console-study.png, the README's picture of the console: a real mini
# scale-up study (scripts/demo-study.sh: a baseline and a 2-worker run, SYNTHETIC data unless
# CIFAR-10 is there) opened in the real console under Qt's offscreen platform. Run it again
# whenever the console's look changes, and commit the picture.
#   scripts/screenshot.sh [--state-dir DIR]   reuse the last demo study in DIR's journal
#                                             (default: run a new one in a temporary folder)
# Needs a build (./scripts/run.sh or ./scripts/test.sh makes one).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${SCALELAB_BUILD:-$root/build}/bin"
out="$root/docs/images/console-study.png"
state=""
case "${1:-}" in
  --state-dir) state="${2:?usage: $0 [--state-dir DIR]}" ;;
  "") ;;
  *) echo "usage: $0 [--state-dir DIR]" >&2; exit 2 ;;
esac
for b in scalelab scalelab-cli; do
  [ -x "$bin/$b" ] || { echo "$0: $bin/$b is not built; run ./scripts/run.sh or ./scripts/test.sh first" >&2; exit 2; }
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/scalelab-screenshot.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if [ -z "$state" ]; then
  state="$tmp/state"
  "$root/scripts/demo-study.sh" --state-dir "$state" --data-dir "${SCALELAB_DATA_DIR:-$state/data}"
fi
study="$("$bin/scalelab-cli" study list --state-dir "$state" --json \
  | python3 -c 'import json, sys
studies = sorted((s for s in json.load(sys.stdin) if s.get("name") == "demo-scaleup"),
                 key=lambda s: s.get("createdUnixMs", 0))
print(studies[-1]["studyId"] if studies else "")')"
if [ -z "$study" ]; then
  echo "$0: no demo-scaleup study in $state's journal" >&2
  exit 1
fi

# The console's own settings (window size, theme) in a folder of this run, not the user's.
mkdir -p "$(dirname "$out")"
XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp" QT_QPA_PLATFORM=offscreen \
  "$bin/scalelab" --state-dir "$state" --data-dir "${SCALELAB_DATA_DIR:-$state/data}" --no-reopen --open-study "$study" \
  --theme light --screenshot "$out" --screenshot-after-ms 4000 "$state/plans/demo-scaleup.json"
echo "screenshot: $out (study $study)"
