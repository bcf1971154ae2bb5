// Compatibility header: Debian's libtorch-dev 1.13 ships c10d/reducer.hpp but not the
// distributed-autograd headers it includes. reducer.hpp needs two names from here:
// DistAutogradContext::GradCallback (a static_assert against its own typedef) and
// ContextPtr (held in a member). Both are declared exactly as upstream PyTorch 1.13
// declares them (torch/csrc/distributed/autograd/context/context.h), so the Reducer's
// layout seen by our code matches the one compiled into libtorch. Nothing here is
// defined or called; only used when the real header is absent (found via -idirafter).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
public:
    using GradCallback = std::function<bool(at::Tensor &)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
