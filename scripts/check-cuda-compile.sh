#!/usr/bin/env bash
# Compiles the worker's sources as a CUDA build of scalelab-worker compiles them
# (SCALELAB_WITH_CUDA, USE_C10D_NCCL), on a machine without a CUDA libtorch or a GPU.
# device.cpp, the one source with CUDA and NCCL code, is compiled to an object; the
# others are checked for errors and warnings.
#
# Against which libtorch: TORCH_INCLUDE, a folder holding libtorch's torch/, c10/ and
# ATen/ headers. By default Debian's (/usr/include, libtorch 1.13): CPU-only, but it
# ships libtorch's CUDA and c10d/NCCL headers; what it lacks is the one header CMake
# generates for a CUDA build (c10/cuda/impl/cuda_cmake_macros.h), which this script then
# writes to a temporary folder. A CUDA libtorch's own include/ (PyTorch 2.x wheels:
# site-packages/torch/include) needs none, and checks the 2.x side of torch_compat.h.
# CUDA's and NCCL's headers come from CUDA_HOME (default /usr/local/cuda) and NCCL_ROOT
# (default: CUDA_HOME); Gloo's from TORCH_INCLUDE or Debian's libgloo-dev. Nothing is
# linked: that needs libtorch_cuda, and running needs a GPU (scripts/gpu-check.sh does
# both on a GPU node). It prints the CUDA-side symbols device.o takes from libtorch.
#
#   ./scripts/check-cuda-compile.sh
#   TORCH_INCLUDE=/path/to/site-packages/torch/include ./scripts/check-cuda-compile.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
trainer="$root/remote-agent/trainer"
torch_include="${TORCH_INCLUDE:-/usr/include}"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
nccl_root="${NCCL_ROOT:-$cuda_home}"

fail() { echo "check-cuda-compile: $*" >&2; exit 2; }
[[ -f "$cuda_home/include/cuda_runtime_api.h" ]] \
  || fail "no CUDA headers in $cuda_home/include; set CUDA_HOME to a CUDA toolkit (its include/ holds cuda_runtime_api.h)"
[[ -f "$nccl_root/include/nccl.h" ]] \
  || fail "no nccl.h in $nccl_root/include; set NCCL_ROOT to an NCCL install (libnccl-dev, or NVIDIA's nccl wheel)"
[[ -f "$torch_include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp" ]] \
  || fail "no libtorch headers in $torch_include; run ./scripts/setup.sh (it installs libtorch-dev), or set TORCH_INCLUDE"
gloo_include="$torch_include"
[[ -f "$gloo_include/gloo/algorithm.h" ]] || gloo_include=/usr/include
[[ -f "$gloo_include/gloo/algorithm.h" ]] \
  || fail "no Gloo headers (gloo/algorithm.h) beside libtorch's or in /usr/include; install libgloo-dev"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ ! -f "$torch_include/c10/cuda/impl/cuda_cmake_macros.h" ]]; then
  mkdir -p "$work/shim/c10/cuda/impl"
  echo '#define C10_CUDA_BUILD_SHARED_LIBS' >"$work/shim/c10/cuda/impl/cuda_cmake_macros.h"
fi

version="$(printf '#include <torch/version.h>\nTORCH_VERSION_MAJOR.TORCH_VERSION_MINOR.TORCH_VERSION_PATCH\n' \
  | g++ -E -P -x c++ -isystem "$torch_include" -isystem "$torch_include/torch/csrc/api/include" - | tail -1 | tr -d ' ')"
nccl_version="$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END{print v}' "$nccl_root/include/nccl.h")"
echo "libtorch $version headers from $torch_include; CUDA headers from $cuda_home; NCCL $nccl_version from $nccl_root"
# The definitions libtorch's CMake config gives a CUDA build, as the real build gets them.
flags=(-std=c++20 -O2 -Wall -Wextra -Wpedantic -Werror
  -DSCALELAB_WITH_CUDA=1 -DUSE_C10D_NCCL -DUSE_C10D_GLOO -DUSE_DISTRIBUTED -DUSE_RPC -DUSE_TENSORPIPE
  -D_GLIBCXX_USE_CXX11_ABI=1 -DSCALELAB_VERSION='"check"'
  -I"$trainer" -I"$root/remote-agent/shared" -I"$root/proto/worker" -I"$root/common"
  -isystem "$torch_include/torch/csrc/api/include"
  -isystem "$work/shim" -isystem "$cuda_home/include" -isystem "$nccl_root/include"
  -idirafter "$trainer/compat" -idirafter "$gloo_include")
# /usr/include is searched anyway, and naming it with -isystem breaks #include_next.
[[ "$torch_include" == /usr/include ]] || flags+=(-isystem "$torch_include")
failed=()
for source in device.cpp checkpoint.cpp data_loader.cpp data_parallel.cpp fused_ops.cpp model_zoo.cpp seed_model.cpp \
  training.cpp training_support.cpp training_tools.cpp worker_main.cpp; do
  output=(-fsyntax-only)
  [[ "$source" == device.cpp ]] && output=(-c -o "$work/device.o")
  if g++ "${flags[@]}" "${output[@]}" "$trainer/$source"; then
    echo "  $source: ok"
  else
    echo "  $source: FAILED"
    failed+=("$source")
  fi
done
[[ ${#failed[@]} == 0 ]] || { echo "check-cuda-compile: ${failed[*]} failed to compile (errors above)" >&2; exit 1; }
echo "compiled without warnings; symbols device.o needs from a CUDA libtorch:"
nm -C --undefined-only "$work/device.o" | grep -E 'cuda::|NCCL' | sed 's/^ *U /  /'
