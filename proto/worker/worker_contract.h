// The agent <-> worker contract beyond worker.proto's messages: what a worker's exit code
// means, the learning-rate rules and the reference batch they scale from. The worker returns the
// codes (remote-agent/trainer); the agent reads them (run_supervisor.cpp,
// lr_find_session.cpp); core scales learning rates by the same rule (study_plan.cpp).
//
//   return worker::kExitDiverged;                                     // the worker
//   if (code == worker::kExitDiverged && error says "diverged") ...   // the agent
//   lr = worker::linearRuleLearningRate(lr, batch, worker::kLinearRuleBaseBatch);
//   if (!worker::isLrRule(spec.lr_scaling())) refuse(worker::lrRulesText());
//
// An exit code alone proves nothing (a crash may exit with any number): the agent believes
// kExitDiverged and kExitNoSpace only together with the worker's matching error event.
//
// Header-only and std-only: the worker's libtorch files include it, and they may include
// no protobuf header (libtorch bundles its own protobuf; see event_writer.h).
// Thread: any (constants only).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace scalelab::worker {

// The run finished (or stopped, with a checkpoint, after --stop-after-epoch).
inline constexpr int kExitFinished = 0;
// The run failed; its error event (WorkerError) says why.
inline constexpr int kExitFailed = 1;
// The command line or its options were refused before anything ran; stderr says why.
inline constexpr int kExitUsage = 2;
// The loss diverged (WorkerError.diverged): the recipe, not the machine, failed, so a retry
// from a checkpoint would only diverge again.
inline constexpr int kExitDiverged = 3;
// A checkpoint did not fit on its disk (WorkerError "no space left on device: ...", with
// bytes_needed): the node, not the recipe, failed, and a retry can work once space is freed.
inline constexpr int kExitNoSpace = 4;

// The reference batch of the linear scaling rule (Goyal et al., "Accurate, Large Minibatch
// SGD", 2017): a learning rate given for a global batch of this many images is scaled by
// global batch / kLinearRuleBaseBatch. It is the worker's --base-batch default (the agent
// leaves WorkerLaunch.base_batch unset), so RunSpec.learning_rate with lr_scaling "linear",
// "sqrt" or "adascale" is the rate at this batch (kLrRules below).
inline constexpr int kLinearRuleBaseBatch = 64;

// The models a worker builds in (remote-agent/trainer/model_zoo.h), by RunSpec.model and
// --model; the first is the default.
inline constexpr std::array<std::string_view, 4> kModelNames
    = { "seed-cnn", "resnet18", "mobilenet_v2", "mini-cnn" };
inline constexpr std::string_view kDefaultModel = kModelNames[0];

inline bool isModelName(std::string_view name)
{
    for (const auto known : kModelNames)
        if (known == name)
            return true;
    return false;
}

// A TorchScript module instead of a built-in: the worker's --model file:PATH (an archive
// written by torch.jit.script(m).save(), PyTorch 1.13 or libtorch), the RunSpec's
// model sha256:HEX (the content's SHA-256, stored on the agent by UploadModel).
inline constexpr std::string_view kModelFilePrefix = "file:";
inline constexpr std::string_view kModelSha256Prefix = "sha256:";
// The largest module a worker loads and an agent stores (ResNet-50's weights are ~100 MB).
inline constexpr std::int64_t kMaxModelFileBytes = std::int64_t(512) << 20;

inline bool isModelFile(std::string_view model)
{
    return model.size() > kModelFilePrefix.size()
        && model.substr(0, kModelFilePrefix.size()) == kModelFilePrefix;
}

// "sha256:" and 64 lower-case hexadecimal digits.
inline bool isModelSha256(std::string_view model)
{
    if (model.size() != kModelSha256Prefix.size() + 64
        || model.substr(0, kModelSha256Prefix.size()) != kModelSha256Prefix)
        return false;
    for (const char c : model.substr(kModelSha256Prefix.size()))
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    return true;
}

// "seed-cnn, resnet18, mobilenet_v2, mini-cnn", for messages.
inline std::string modelNamesText()
{
    std::string text;
    for (const auto name : kModelNames)
        text += (text.empty() ? "" : ", ") + std::string(name);
    return text;
}

// The learning rate for a global batch of `toBatch` images when `learningRate` suits one of
// `fromBatch` (> 0), by the linear rule: learningRate x toBatch / fromBatch.
constexpr double linearRuleLearningRate(double learningRate, std::int64_t fromBatch, std::int64_t toBatch)
{
    return learningRate * double(toBatch) / double(fromBatch);
}

// The same by the square-root rule, learningRate x sqrt(toBatch / fromBatch): the step's
// gradient noise falls as 1/sqrt(batch), so the rate that keeps the update's noise the same
// grows with its square root (Krizhevsky 2014, "One weird trick for parallelizing
// convolutional neural networks"; Hoffer et al. 2017, "Train longer, generalize better").
inline double sqrtRuleLearningRate(double learningRate, std::int64_t fromBatch, std::int64_t toBatch)
{
    return learningRate * std::sqrt(double(toBatch) / double(fromBatch));
}

// The learning-rate rules a run may name (RunSpec.lr_scaling, grid.lrRule, --lr-scaling):
//   none      the rate as given, whatever the global batch;
//   linear    linearRuleLearningRate from kLinearRuleBaseBatch (or --base-batch);
//   sqrt      sqrtRuleLearningRate from the same batch;
//   adascale  AdaScale SGD (Johnson et al., ICML 2020): the rate x a gain in [1, global
//             batch / base batch] measured from the gradients' noise at every step, with the
//             schedule following the progress the gains add up to
//             (remote-agent/trainer/lr_rules.h).
inline constexpr std::array<std::string_view, 4> kLrRules = { "none", "linear", "sqrt", "adascale" };

inline bool isLrRule(std::string_view rule)
{
    for (const auto known : kLrRules)
        if (known == rule)
            return true;
    return false;
}

// "none, linear, sqrt or adascale", for messages.
inline std::string lrRulesText()
{
    std::string text;
    for (std::size_t i = 0; i < kLrRules.size(); ++i)
        text += (i == 0 ? "" : i + 1 == kLrRules.size() ? " or " : ", ") + std::string(kLrRules[i]);
    return text;
}

} // namespace scalelab::worker
