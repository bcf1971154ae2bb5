#!/usr/bin/env bash
# On a GPU node: build scalelab-worker against the node's CUDA libtorch and check its
# CUDA path end to end (scripts/gpu_check.py says what is checked).
#   scripts/gpu-check.sh [OUT_DIR [gpu_check.py's options, e.g. --sections models]]
# Finds libtorch and NCCL through the node's python3 (PyTorch's wheels carry both), or
# takes TORCH_CMAKE_PREFIX (a libtorch's share/cmake) and NCCL_ROOT. Gloo's headers come
# from Debian's libgloo-dev or GLOO_ROOT (PyTorch's wheels ship none). protoc and
# protobuf's headers and library come from the system or PROTOBUF_ROOT, a prefix holding
# bin/protoc, include/google/protobuf and lib/ (on a node without packages, Debian's
# protobuf-compiler, libprotoc32, libprotobuf32 and libprotobuf-dev unpacked with
# `dpkg -x` give one: PROTOBUF_ROOT=<that folder>/usr). Not part of the test suite: CI
# has no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check-out}"
shift || true
build="${SCALELAB_CUDA_BUILD:-build-cuda}"
mkdir -p "$out"

torch_cmake="${TORCH_CMAKE_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)}"
if [ -z "$torch_cmake" ] || [ ! -d "$torch_cmake/Torch" ]; then
    echo "gpu-check: no libtorch found: install PyTorch with CUDA for python3, or set" \
         "TORCH_CMAKE_PREFIX to a CUDA libtorch's share/cmake folder" >&2
    exit 2
fi
# The worker's event lines and options are worker.proto's messages (protobuf, no gRPC).
protobuf_root="${PROTOBUF_ROOT:-/usr}"
protobuf_args=()
if [ -n "${PROTOBUF_ROOT:-}" ]; then
    export PATH="$protobuf_root/bin:$PATH"
    libdir="$(dirname "$(find "$protobuf_root" -name 'libprotobuf.so*' -print -quit)")"
    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    protobuf_args=(-DProtobuf_PROTOC_EXECUTABLE="$protobuf_root/bin/protoc"
        -DProtobuf_INCLUDE_DIR="$protobuf_root/include" -DProtobuf_LIBRARY="$libdir/libprotobuf.so")
fi
if ! command -v protoc >/dev/null || [ ! -e "$protobuf_root/include/google/protobuf/message.h" ]; then
    echo "gpu-check: the worker needs protobuf: apt-get install protobuf-compiler libprotobuf-dev," \
         "or set PROTOBUF_ROOT to a prefix with bin/protoc and include/google/protobuf" >&2
    exit 2
fi
nccl_root="${NCCL_ROOT:-$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)}"

# File by file (no unity build): a node's many cores then compile every file at once.
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=OFF \
    -DSCALELAB_BUILD_APP=OFF -DSCALELAB_BUILD_AGENT=OFF -DSCALELAB_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$torch_cmake;$protobuf_root" ${nccl_root:+-DNCCL_ROOT="$nccl_root"} \
    ${GLOO_ROOT:+-DGLOO_ROOT="$GLOO_ROOT"} "${protobuf_args[@]}" >"$out/configure.log" 2>&1; then
    grep -A3 'Error' "$out/configure.log" >&2 || true
    echo "gpu-check: configure failed, see $out/configure.log" >&2
    exit 1
fi
grep 'scalelab-worker:' "$out/configure.log" || true
if ! cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1; then
    grep -E 'error|FAILED' "$out/build.log" | head -20 >&2
    echo "gpu-check: build failed, see $out/build.log" >&2
    exit 1
fi
# PyTorch's wheels export the std::filesystem they link statically (pytorch/pytorch#133437);
# a worker calling those copies' remove_all crashed (common/file_io.h, removeTree).
torch_cpu="$(dirname "$(dirname "$torch_cmake")")/lib/libtorch_cpu.so"
if [ -e "$torch_cpu" ] && command -v nm >/dev/null; then
    echo "libtorch_cpu.so exports $(nm -D --defined-only "$torch_cpu" | grep -cE ' _ZNK?St10filesystem' || true)" \
         "std::filesystem symbols, which the worker's own calls may reach before libstdc++'s"
fi
grep -q 'devices cpu and cuda' "$out/configure.log" \
    || { echo "gpu-check: this libtorch has no CUDA (see $out/configure.log)" >&2; exit 2; }
exec python3 scripts/gpu_check.py --worker "$build/bin/scalelab-worker" --out "$out" "$@"
