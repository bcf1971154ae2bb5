#!/usr/bin/env bash
# On a GPU node: the headless agent serves the node's GPU to a study, end to end. Starts
# scalelab-agent with a CUDA scalelab-worker (scripts/gpu-check.sh builds one), then, over
# gRPC on loopback, has scalelab-cli describe the node and run a small study on a
# SYNTHETIC set: a one-GPU baseline and two workers sharing the GPU (gpusPerWorker 0.5,
# which the agent runs over Gloo with CUDA tensors), then `study show --json`. Checks that
# the agent saw the GPU, that each run trained on it, and that each run has its gradient
# noise scale; prints PASS/FAIL lines and exits with the number of failures.
#   scripts/gpu-agent-check.sh WORKER [OUT_DIR]
# scalelab-agent and scalelab-cli come from SCALELAB_AGENT_BIN and SCALELAB_CLI_BIN, else
# from build/bin. On a node without Qt or gRPC, carry them with their libraries (ldd) and
# put those on LD_LIBRARY_PATH. Not part of the test suite: CI has no GPU.
# SCALELAB_GPU_AGENT_DRY=1 runs the same on the CPU, smaller, to check this script itself.
set -uo pipefail
cd "$(dirname "$0")/.."
worker="$(realpath "${1:?usage: $0 WORKER [OUT_DIR]}")"
out="$(mkdir -p "${2:-gpu-agent-check-out}" && realpath "${2:-gpu-agent-check-out}")"
agent="${SCALELAB_AGENT_BIN:-build/bin/scalelab-agent}"
cli="${SCALELAB_CLI_BIN:-build/bin/scalelab-cli}"
work="$(mktemp -d)"
port="${SCALELAB_GPU_AGENT_PORT:-7461}"
metrics=$((port + 1))
agent_pid=""
cleanup()
{
    if [ -n "$agent_pid" ]; then
        kill "$agent_pid" 2>/dev/null
        wait "$agent_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
check()
{ # check NAME OK DETAIL
    if [ "$2" = 1 ]; then echo "PASS  $1: $3"; else echo "FAIL  $1: $3"; failures=$((failures + 1)); fi
}

mkdir -p "$work/data"
"$agent" --port "$port" --metrics-port "$metrics" --worker "$worker" --data-dir "$work/data" \
    --state-dir "$work/agent-state" --log-file "$out/agent.log" &
agent_pid=$!
for _ in $(seq 100); do
    kill -0 "$agent_pid" 2>/dev/null || break
    "$cli" describe --agent "127.0.0.1:$port" >"$out/describe.txt" 2>&1 && break
    sleep 0.2
done
gpus="$(grep -oE '[0-9]+ GPU\(s\)' "$out/describe.txt" | head -1 | cut -d' ' -f1)"
check "the agent sees the GPU" "$([ "${gpus:-0}" -gt 0 ] && echo 1 || echo 0)" \
    "$(grep -iE 'GPU|nvidia' "$out/describe.txt" | head -4 | tr '\n' ' ')"

if [ "${SCALELAB_GPU_AGENT_DRY:-0}" = 1 ]; then
    base_gpus=0 grid_gpus=0 train=1000 test=500 epochs=1
else
    base_gpus=1 grid_gpus=0.5 train=8000 test=2000 epochs=3
fi
cat >"$work/plan.json" <<EOF
{
 "name": "gpu-agent-check",
 "dataset": "synthetic",
 "training": { "maxTrainImages": "$train", "maxTestImages": "$test" },
 "baseline": { "batchSize": 128, "gpusPerWorker": $base_gpus },
 "grid": { "workers": [2], "batchSize": [64], "epochs": [$epochs], "gpusPerWorker": [$grid_gpus] },
 "repeats": 1,
 "maxFailures": 1,
 "targetAccuracy": 0.5
}
EOF
sampler=""
if command -v nvidia-smi >/dev/null; then # the GPU's use while the study runs, every 0.5 s
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
        >"$out/gpu-samples.csv" 2>&1 &
    sampler=$!
fi
start=$(date +%s)
timeout "${SCALELAB_GPU_AGENT_STUDY_S:-150}" "$cli" study run "$work/plan.json" --agent "127.0.0.1:$port" --state-dir "$work/state" \
    --synthetic --synthetic-train "$train" --synthetic-test "$test" >"$out/study-run.txt" 2>&1
rc=$?
check "study run on the GPU node" "$([ $rc = 0 ] && echo 1 || echo 0)" \
    "rc $rc in $(($(date +%s) - start)) s; $(tail -2 "$out/study-run.txt" | tr '\n' ' ')"
if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    busiest="$(sort -t, -k1,1n "$out/gpu-samples.csv" | tail -1)"
    check "the study's workers used the GPU" \
        "$(awk -F, '$1 > 0 && $2 > 200 { found = 1 } END { print found + 0 }' "$out/gpu-samples.csv")" \
        "$(wc -l <"$out/gpu-samples.csv") samples; busiest: ${busiest%%,*} % busy,${busiest#*,} MiB in use"
fi
study="$(grep -oE 'study st-[0-9a-z-]+' "$out/study-run.txt" | head -1 | cut -d' ' -f2)"
"$cli" study show "$study" --state-dir "$work/state" >"$out/study-show.txt" 2>&1
"$cli" study show "$study" --state-dir "$work/state" --json >"$out/study-show.json" 2>&1
"$cli" runs --agent "127.0.0.1:$port" >"$out/runs.txt" 2>&1
python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
    "http://127.0.0.1:$metrics/metrics" >"$out/metrics.txt" 2>/dev/null || true
python3 - "$out/study-show.json" "$out/metrics.txt" <<'EOF'
import json, sys
try:
    show = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL  study show --json: {e}")
    sys.exit(1)
runs = show.get("runs", [])
bad = 0
for r in runs:
    noise = r.get("gradientNoiseScale") or {}
    ok = r.get("state") == "SUCCEEDED"
    b = noise.get("bSimple") or 0
    print(f"{'PASS' if ok and b > 0 else 'FAIL'}  run {r.get('key')}: {r.get('state')}, final test accuracy "
          f"{r.get('finalTestAccuracy')}, {r.get('imagesPerSecond')} img/s, wall {r.get('wallSeconds')} s, "
          f"noise scale {json.dumps(noise)[:240]}")
    bad += not (ok and b > 0)
gpu_lines = [l for l in open(sys.argv[2]) if l.startswith("scalelab_gpu_")] if sys.argv[2] else []
print(f"{'PASS' if gpu_lines else 'FAIL'}  /metrics has the GPU's gauges: {len(gpu_lines)} lines, e.g. "
      f"{gpu_lines[0].strip() if gpu_lines else None}")
bad += not gpu_lines
bad += not runs
sys.exit(bad)
EOF
failures=$((failures + $?))
echo "$failures failure(s)"
exit "$failures"
