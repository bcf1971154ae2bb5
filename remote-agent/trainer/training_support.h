// What the training loop (training.cpp) and the worker's other modes (training_tools.cpp:
// gradient check, bench, lr range test) share: process-group set-up, thread pools,
// memory format, autocast, and the build facts a run reports. libtorch; no Qt.
#pragma once

#include "data_parallel.h"
#include "model_zoo.h"
#include "seed_model.h"
#include "torch_compat.h"
#include "training.h"

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>

namespace scalelab::trainer {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// OpenBLAS keeps its own pool; size it like torch's so ranks never oversubscribe.
void setBlasThreads(int threads);

// Gradients are dropped, not zeroed (PyTorch's zero_grad(set_to_none=True)).
void dropGradients(torch::optim::Optimizer &optimizer);

// The process group for a data-parallel config, or null for a single rank. Throws (with
// what to pass) when this rank has no address the others can reach.
std::unique_ptr<DataParallel> connectRanks(const TrainingConfig &config);

// The 4-d parameters in `format` (channels-last), when it is not the default.
void toMemoryFormat(torch::nn::Module &net, at::MemoryFormat format);

// --channels-last as a memory format for parameters and inputs.
inline at::MemoryFormat memoryFormatOf(const TrainingConfig &config)
{
    return config.channelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

// The config's model (config.model) with these dropout rates, on `device`, in the config's
// memory format, in training mode. Weights are drawn on the CPU, so a seed gives the same
// initial model on every device.
// buildModel(config.model, ...) with config.initialWeights copied in (the note on stderr).
TrainableModel buildConfiguredModel(const TrainingConfig &config, double blockDropout, double denseDropout);

TrainableModel trainingModel(
    const TrainingConfig &config, const torch::Device &device, double blockDropout, double denseDropout);

// Fine-tuning's head (TrainingConfig::head): its name and its parameters. `head` names a
// module ("fc", "classifier.1"); its parameters and those of the modules inside it are the
// head's. Empty: the classifier, the module of the last weight with one row per class
// ([10, ...]; registration order, not forward order, decides "last"). A name that matches no
// parameter fails, listing the modules it could be.
struct FinetuneHead {
    std::string name;
    std::vector<torch::Tensor> parameters;
};
common::Result<FinetuneHead> finetuneHead(torch::nn::Module &net, const std::string &head);

// Freezes every parameter but the head's (phase 1: requires_grad off, so backward neither
// computes nor all-reduces their gradients), or unfreezes all (phase 2). Returns the ones
// that train.
std::vector<torch::Tensor> trainOnly(torch::nn::Module &net, const FinetuneHead *head);

// The BLAS library libtorch's linear layers end up in (OpenBLAS, or the slow reference).
std::string blasInUse();
std::string compilerName();

// Autocast to bf16 on `device` for the scope, when asked. CPU and CUDA autocast are
// separate switches in libtorch.
class AutocastScope {
public:
    AutocastScope(bool enabled, const torch::Device &device)
        : m_enabled(enabled)
        , m_device(device.type())
    {
        if (m_enabled)
            setAutocast(m_device, true, at::kBFloat16);
    }
    ~AutocastScope()
    {
        if (!m_enabled)
            return;
        setAutocast(m_device, false);
        at::autocast::clear_cache();
    }

private:
    bool m_enabled;
    c10::DeviceType m_device;
};

struct CheckpointPosition;

// Ranks on other nodes hold no copy of the checkpoint that rank 0 resumed from: they take
// rank 0's position (AdaScale's progress and the noise scale's averages too) and SGD
// momentum, so every rank continues one run. Every rank calls it, after attach().
void adoptRankZeroProgress(
    DataParallel &parallel, torch::optim::SGD &optimizer, CheckpointPosition *position);

} // namespace scalelab::trainer
