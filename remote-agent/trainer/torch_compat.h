// The libtorch API differences the trainer meets, in one place. ScaleLab builds against
// Debian's libtorch 1.13 (CPU only; built, tested and run by CI) and against the CUDA
// libtorch of a GPU node, such as the one inside PyTorch's 2.x wheels: the 2.11 side is
// compiled (scripts/check-cuda-compile.sh with TORCH_INCLUDE) but has not yet been linked
// or run; versions between the two are untested. Where the difference is a type, it is
// detected from the type itself; where it is an API, from TORCH_VERSION_*.
// Trainer-only (libtorch).
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/autocast_mode.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#ifndef TORCH_VERSION_MINOR
#error "torch/version.h did not define TORCH_VERSION_MAJOR/MINOR"
#endif
#define SCALELAB_TORCH_AT_LEAST(major, minor)                                                                \
    (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace scalelab::trainer {

// The key of an optimizer's per-parameter state: the address of the parameter's
// TensorImpl, printed as a string by libtorch 1.x and kept as a pointer by 2.x.
using OptimizerStateKey =
    typename std::remove_cvref_t<decltype(std::declval<torch::optim::Optimizer &>().state())>::key_type;

template <class Key = OptimizerStateKey> // a template, so the branch not taken is not compiled
Key optimizerStateKey(const torch::Tensor &parameter)
{
    if constexpr (std::is_same_v<Key, std::string>) {
        std::ostringstream key; // as libtorch 1.x's c10::guts::to_string
        key << parameter.unsafeGetTensorImpl();
        return key.str();
    } else {
        return parameter.unsafeGetTensorImpl();
    }
}

// Turns autocast for `device` (kCPU or kCUDA) on with `dtype`, or off.
inline void setAutocast(c10::DeviceType device, bool enabled, at::ScalarType dtype = at::kBFloat16)
{
#if SCALELAB_TORCH_AT_LEAST(2, 4)
    if (enabled)
        at::autocast::set_autocast_dtype(device, dtype);
    at::autocast::set_autocast_enabled(device, enabled);
#else
    if (device == c10::DeviceType::CUDA) {
        if (enabled)
            at::autocast::set_autocast_gpu_dtype(dtype);
        at::autocast::set_enabled(enabled);
    } else {
        if (enabled)
            at::autocast::set_autocast_cpu_dtype(dtype);
        at::autocast::set_cpu_enabled(enabled);
    }
#endif
}

} // namespace scalelab::trainer
