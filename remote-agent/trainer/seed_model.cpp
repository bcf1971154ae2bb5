#include "seed_model.h"
#include "seed_model_impl.h"

#include "fused_ops.h"

namespace scalelab::trainer {

namespace {
constexpr std::int64_t kDenseWidth = 512;
} // namespace

ConvBlockImpl::ConvBlockImpl(std::int64_t in, std::int64_t out, double dropout)
    : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1))))
    , conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1))))
    , bn1(register_module("bn1", torch::nn::BatchNorm2d(out)))
    , bn2(register_module("bn2", torch::nn::BatchNorm2d(out)))
    , dropout(dropout)
{ }

torch::Tensor ConvBlockImpl::forward(torch::Tensor x)
{
    x = torch::relu(bn1(conv1(x)));
    // relu, 2x2 max-pool and dropout in one pass (fused_ops.h).
    return maxPoolReluDropout(bn2(conv2(x)), dropout, is_training());
}

SeedNetImpl::SeedNetImpl(double blockDropout, double denseDropout)
    : block1(register_module("block1", ConvBlock(3, 64, blockDropout)))
    , block2(register_module("block2", ConvBlock(64, 128, blockDropout)))
    , block3(register_module("block3", ConvBlock(128, 256, blockDropout)))
    , fc1(register_module("fc1", torch::nn::Linear(256 * 4 * 4, kDenseWidth)))
    , fc2(register_module("fc2", torch::nn::Linear(kDenseWidth, 10)))
    , drop(register_module("drop", torch::nn::Dropout(denseDropout)))
{ }

torch::Tensor SeedNetImpl::forward(torch::Tensor x)
{
    x = block3(block2(block1(x)));
    x = drop(torch::relu(fc1(x.flatten(1))));
    return fc2(x);
}

std::int64_t seedModelParameterCount()
{
    SeedNet net;
    std::int64_t count = 0;
    for (const auto &p : net->parameters())
        if (p.requires_grad())
            count += p.numel();
    return count;
}

std::pair<std::int64_t, std::int64_t> seedModelOutputShape(std::int64_t batch)
{
    torch::NoGradGuard noGrad;
    SeedNet net;
    net->eval();
    const auto out = net->forward(torch::zeros({ batch, 3, 32, 32 }));
    return { out.size(0), out.size(1) };
}

} // namespace scalelab::trainer
