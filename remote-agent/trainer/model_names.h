// The built-in models by name, torch-free: the worker contract's list (worker_contract.h),
// which the agent's rules check too; model_zoo.h builds them.
#pragma once

#include "worker_contract.h"

namespace scalelab::trainer {

using worker::isModelName;
using worker::kDefaultModel;
using worker::kModelNames;

} // namespace scalelab::trainer
