// c10d's API differences between libtorch 1.x and 2.x (see torch_compat.h). Only the
// two sources that create process groups include it: c10d's headers are heavy.
// Trainer-only (libtorch).
#pragma once

#include "torch_compat.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <initializer_list>

namespace scalelab::trainer {

// A process group whose collectives `backend` (a ProcessGroupGloo or ProcessGroupNCCL)
// runs for tensors on `devices`. In libtorch 1.x the backend is itself the process group;
// 2.x puts a ProcessGroup in front that routes each collective to the backend of its
// tensors' device, as torch.distributed.new_group does.
template <class Backend>
c10::intrusive_ptr<c10d::ProcessGroup> processGroupOf(c10::intrusive_ptr<Backend> backend,
    [[maybe_unused]] const c10::intrusive_ptr<c10d::Store> &store,
    [[maybe_unused]] std::initializer_list<c10::DeviceType> devices)
{
#if SCALELAB_TORCH_AT_LEAST(2, 0)
    const auto type = c10d::ProcessGroup::strToBackendType(backend->getBackendName());
    auto group = c10::make_intrusive<c10d::ProcessGroup>(store, backend->getRank(), backend->getSize());
    group->setDefaultBackend(type);
    backend->setSequenceNumberForGroup();
    for (const auto device : devices)
        group->setBackend(device, type, backend);
    return group;
#else
    return backend;
#endif
}

} // namespace scalelab::trainer
