// The seed CNN as a libtorch module. Only trainer sources include this header.
#pragma once

#include <torch/torch.h>

namespace scalelab::trainer {

struct ConvBlockImpl : torch::nn::Module {
    ConvBlockImpl(std::int64_t in, std::int64_t out);
    torch::Tensor forward(torch::Tensor x);

    torch::nn::Conv2d conv1 { nullptr }, conv2 { nullptr };
    torch::nn::BatchNorm2d bn1 { nullptr }, bn2 { nullptr };
};
TORCH_MODULE(ConvBlock);

struct SeedNetImpl : torch::nn::Module {
    SeedNetImpl();
    torch::Tensor forward(torch::Tensor x);

    ConvBlock block1 { nullptr }, block2 { nullptr }, block3 { nullptr };
    torch::nn::Linear fc1 { nullptr }, fc2 { nullptr };
    torch::nn::Dropout drop { nullptr };
};
TORCH_MODULE(SeedNet);

} // namespace scalelab::trainer
