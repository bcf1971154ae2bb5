#!/usr/bin/env bash
# A mini scale-up study on a local agent, headless: a 1-worker baseline and a 2-worker
# data-parallel run of the same work (same images, same epochs), printed live, then the
# comparison (workers, images/s, speedup, efficiency, accuracy) and an HTML report.
# About two minutes on 2 cores. Needs a build (./scripts/run.sh makes one and calls this).
#   scripts/demo-study.sh [--state-dir DIR] [--data-dir DIR] [--images N] [--epochs N]
# Real CIFAR-10 when DATA_DIR/cifar-10 holds it (the binary version), else a SYNTHETIC
# CIFAR-format set of ten shapes, labelled SYNTHETIC in the output and the report.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${SCALELAB_BUILD:-$root/build}/bin"
state="${SCALELAB_STATE_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/scalelab}"
data=""
images=2000
epochs=2
usage="usage: $0 [--state-dir DIR] [--data-dir DIR] [--images N] [--epochs N]"
while [ $# -gt 0 ]; do
  case "$1" in
    --state-dir) state="${2:?$usage}"; shift 2 ;;
    --data-dir) data="${2:?$usage}"; shift 2 ;;
    --images) images="${2:?$usage}"; shift 2 ;;
    --epochs) epochs="${2:?$usage}"; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "$0: unknown option '$1'; $usage" >&2; exit 2 ;;
  esac
done
for n in "$images" "$epochs"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --images and --epochs take whole numbers of 1 or more (got '$n')" >&2; exit 2; }
done
if [ ! -x "$bin/scalelab-cli" ]; then
  echo "$0: no build at $bin; run ./scripts/run.sh (it builds first)" >&2
  exit 2
fi
data="${data:-$state/data}"
mkdir -p "$state/reports" "$state/plans" "$data"

synthetic=()
if "$bin/scalelab-worker" inspect --data-dir "$data/cifar-10" >/dev/null 2>&1; then
  dataset=cifar-10
  echo "demo: CIFAR-10 from $data/cifar-10 (the first $images training images)"
else
  dataset=synthetic-shapes
  synthetic=(--synthetic --synthetic-kind shapes --synthetic-train "$images" --synthetic-test 500)
  echo "demo: no CIFAR-10 under $data/cifar-10; training on a SYNTHETIC CIFAR-format set of ten shapes"
  echo "demo: (put the CIFAR-10 binary version there for real data: cifar-10/data_batch_1.bin ...)"
fi

# The plan is kept, to open in the console's designer or to run again with `study run`.
plan="$state/plans/demo-scaleup.json"
log="$(mktemp "${TMPDIR:-/tmp}/scalelab-demo-out.XXXXXX")"
trap 'rm -f "$log"' EXIT
# Both runs do the same work, so their wall-clock times compare: speedup is by wall clock.
cat >"$plan" <<EOF
{
  "name": "demo-scaleup",
  "dataset": "$dataset",
  "training": { "maxTrainImages": "$images", "maxTestImages": "500" },
  "baseline": { "batchSize": 64, "epochs": $epochs },
  "grid": { "workers": [2], "batchSize": [64], "epochs": [$epochs] },
  "repeats": 1,
  "maxFailures": 1
}
EOF

set +e
"$bin/scalelab-cli" study run "$plan" --state-dir "$state" --data-dir "$data" "${synthetic[@]}" | tee "$log"
rc=${PIPESTATUS[0]}
set -e
study="$(sed -n 's/^study \([^ ]*\) (demo-scaleup):.*/\1/p' "$log" | tail -n 1)"
if [ -z "$study" ]; then
  echo "demo: the study did not run (scalelab-cli exited $rc); see above" >&2
  exit "$rc"
fi
report="$state/reports/$study.html"
"$bin/scalelab-cli" report "$study" --state-dir "$state" --format html -o "$report" >/dev/null
echo
echo "demo: both runs shared this machine's $(nproc) cores, so the 2-worker run can hardly beat the"
echo "      baseline here; spread the workers over hosts for a real scale-up (docs/multi-host.md)"
echo "report: $report"
echo "again:  $bin/scalelab-cli study show $study --state-dir $state"
echo "plan:   $plan (open it in the console: $bin/scalelab $plan)"
exit "$rc"
