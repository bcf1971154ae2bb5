// The models a run can train, built with libtorch's C++ modules. Only trainer sources
// include this header (it includes libtorch); model_names.h is the torch-free list.
//
//   seed-cnn      the seed CNN (seed_model_impl.h), the default; its numerics unchanged
//   resnet18      ResNet-18 in its usual CIFAR form: a 3x3 stride-1 stem and no max-pool
//                 (He et al. 2016; torchvision's resnet18 with conv1 3x3/1 and maxpool removed),
//                 11.2 M parameters
//   mobilenet_v2  MobileNetV2 in its usual CIFAR form: torchvision's layers with stride 1 in
//                 the stem and in the second stage (ImageNet's strides would leave a 1x1 map
//                 of a 32x32 image), 2.2 M parameters (Sandler et al. 2018)
//   mini-cnn      two 3x3 convolutions and a linear layer, 25.6 k parameters: a cluster's
//                 plumbing (placement, network, checkpoints, retries) tried in seconds
#pragma once

#include "model_names.h"

#include <torch/torch.h>

#include <memory>
#include <string>

namespace scalelab::trainer {

// A model whatever its type: its module (parameters, buffers, train/eval, to()) and its
// forward pass, [N, 3, 32, 32] float to [N, 10] logits.
class TrainableModel {
public:
    TrainableModel() = default;
    template <typename Holder>
    explicit TrainableModel(Holder holder)
        : m_forward(holder)
        , m_module(holder.ptr())
    { }

    torch::nn::Module *operator->() const { return m_module.get(); }
    torch::nn::Module &operator*() const { return *m_module; }
    torch::Tensor forward(const torch::Tensor &x) { return m_forward.forward(x); }

private:
    torch::nn::AnyModule m_forward;
    std::shared_ptr<torch::nn::Module> m_module;
};

// A new model of that name (one of modelNames()), its weights drawn from torch's generator
// (torch::manual_seed first for reproducible weights). The dropouts are the seed CNN's
// (ResNet-18 has none; MobileNetV2 keeps its own 0.2 before the classifier).
// "file:PATH" loads a TorchScript module with the weights it was saved with (checked as
// checkTorchScriptModel does; std::invalid_argument with its words when it is not fit).
TrainableModel buildModel(const std::string &name, double blockDropout, double denseDropout);

// Whether the TorchScript archive at `path` can be trained as a CIFAR-10 model, in words
// that say what to change; empty when it can. Checked in this order: the file's size
// (worker::kMaxModelFileBytes), that it is a TorchScript archive (not empty, not truncated,
// not torch.save of a plain module), that it has trainable parameters, that forward takes
// a [2, 3, 32, 32] float batch and returns [2, 10] logits, and that backward reaches the
// parameters.
std::string checkTorchScriptModel(const std::string &path);

// Copies into `net` every parameter and buffer of the TorchScript archive at `path` that
// has the same name (PyTorch's state_dict names: "layer1.0.conv1.weight") and shape; the
// rest of `net` keeps its values. Returns what was copied and what was not, in words;
// std::invalid_argument when the file cannot be read or nothing matches.
std::string copyInitialWeights(TrainableModel &net, const std::string &path);

// What a model costs per step, for reports and the scaling model: the gradient bytes a rank
// all-reduces (every trainable parameter's gradient, in its dtype) and the forward FLOPs of
// one 32x32 image, counted by libtorch's profiler (2 per multiply-add of convolutions and
// matrix products, 1 per element of additions and multiplications; normalisation and
// activations not counted). A training step costs about 3x the forward (backward: ~2x).
struct ModelCost {
    std::int64_t parameters = 0; // trainable elements
    std::int64_t gradientBytes = 0;
    std::int64_t forwardFlopsPerImage = 0;
};
// The model is put in eval mode for the count and back; no weight, buffer or random
// generator changes. `device` is where the model is.
ModelCost measureModelCost(TrainableModel &net, const torch::Device &device);

} // namespace scalelab::trainer
