// The seed CNN as a libtorch module. Only trainer sources include this header.
#pragma once

#include "seed_model.h"

#include <torch/torch.h>

namespace scalelab::trainer {

struct ConvBlockImpl : torch::nn::Module {
    // `dropout`: the probability of zeroing an output of the block while training.
    ConvBlockImpl(std::int64_t in, std::int64_t out, double dropout);
    torch::Tensor forward(torch::Tensor x);

    torch::nn::Conv2d conv1 { nullptr }, conv2 { nullptr };
    torch::nn::BatchNorm2d bn1 { nullptr }, bn2 { nullptr };
    double dropout;
};
TORCH_MODULE(ConvBlock);

struct SeedNetImpl : torch::nn::Module {
    // Dropout probabilities in [0, 1): after each conv block, and before the last dense
    // layer; 0 turns one off. Dropout holds no parameters: a seed gives the same initial
    // weights whatever the rates.
    explicit SeedNetImpl(
        double blockDropout = kDefaultBlockDropout, double denseDropout = kDefaultDenseDropout);
    torch::Tensor forward(torch::Tensor x);

    ConvBlock block1 { nullptr }, block2 { nullptr }, block3 { nullptr };
    torch::nn::Linear fc1 { nullptr }, fc2 { nullptr };
    torch::nn::Dropout drop { nullptr };
};
TORCH_MODULE(SeedNet);

} // namespace scalelab::trainer
