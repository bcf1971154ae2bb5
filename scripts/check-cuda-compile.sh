#!/usr/bin/env bash
# Compiles the worker's CUDA/NCCL code (remote-agent/trainer/device.cpp with
# SCALELAB_WITH_CUDA and USE_C10D_NCCL) on a machine without a CUDA libtorch or a GPU.
#
# Debian's libtorch-dev is CPU-only, but it ships libtorch's CUDA and c10d/NCCL headers;
# what it lacks is the one header its CMake generates for a CUDA build
# (c10/cuda/impl/cuda_cmake_macros.h), which this script writes to a temporary folder.
# CUDA's and NCCL's own headers come from CUDA_HOME (default /usr/local/cuda) and
# NCCL_ROOT (default: CUDA_HOME). The object is compiled, not linked: linking needs
# libtorch_cuda, and running needs a GPU. It prints the CUDA-side symbols the object
# takes from a CUDA libtorch, which such a libtorch must export.
#
#   ./scripts/check-cuda-compile.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
nccl_root="${NCCL_ROOT:-$cuda_home}"

fail() { echo "check-cuda-compile: $*" >&2; exit 2; }
[[ -f "$cuda_home/include/cuda_runtime_api.h" ]] \
  || fail "no CUDA headers in $cuda_home/include; set CUDA_HOME to a CUDA toolkit (its include/ holds cuda_runtime_api.h)"
[[ -f "$nccl_root/include/nccl.h" ]] \
  || fail "no nccl.h in $nccl_root/include; set NCCL_ROOT to an NCCL install (libnccl-dev, or NVIDIA's nccl wheel)"
[[ -f /usr/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp ]] \
  || fail "libtorch's headers are missing; run ./scripts/setup.sh first (it installs libtorch-dev)"

shim="$(mktemp -d)"
trap 'rm -rf "$shim"' EXIT
mkdir -p "$shim/c10/cuda/impl"
echo '#define C10_CUDA_BUILD_SHARED_LIBS' >"$shim/c10/cuda/impl/cuda_cmake_macros.h"

nccl_version="$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END{print v}' "$nccl_root/include/nccl.h")"
echo "compiling device.cpp with CUDA headers from $cuda_home and NCCL $nccl_version headers from $nccl_root"
# The definitions libtorch's CMake config gives a CUDA build, as the real build gets them.
g++ -std=c++20 -O2 -c -o "$shim/device.o" \
  -Wall -Wextra -Wpedantic -Werror \
  -DSCALELAB_WITH_CUDA=1 -DUSE_C10D_NCCL -DUSE_C10D_GLOO -DUSE_DISTRIBUTED -DUSE_RPC -DUSE_TENSORPIPE \
  -D_GLIBCXX_USE_CXX11_ABI=1 -idirafter "$root/remote-agent/trainer/compat" \
  -I"$root/remote-agent/trainer" -isystem /usr/include/torch/csrc/api/include \
  -isystem "$shim" -isystem "$cuda_home/include" -isystem "$nccl_root/include" \
  "$root/remote-agent/trainer/device.cpp"
echo "compiled without warnings; symbols it needs from a CUDA libtorch:"
nm -C --undefined-only "$shim/device.o" | grep -E 'cuda::|NCCL' | sed 's/^ *U /  /'
