#include "model_zoo.h"

#include "seed_model_impl.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <stdexcept>
#include <vector>

namespace scalelab::trainer {

namespace {

namespace nn = torch::nn;

nn::Conv2d conv(
    std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t groups = 1)
{
    return nn::Conv2d(
        nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).groups(groups).bias(false));
}

// torchvision's initialisation of both networks: He (fan-out) for convolutions, BatchNorm at
// identity; ResNet keeps nn::Linear's default, MobileNetV2 draws it from N(0, 0.01).
void initialise(nn::Module &module, bool smallLinear)
{
    torch::NoGradGuard noGrad;
    for (auto &m : module.modules(/*include_self=*/false)) {
        if (auto *c = m->as<nn::Conv2d>()) {
            nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
        } else if (auto *b = m->as<nn::BatchNorm2d>()) {
            nn::init::ones_(b->weight);
            nn::init::zeros_(b->bias);
        } else if (auto *l = m->as<nn::Linear>(); l && smallLinear) {
            nn::init::normal_(l->weight, 0, 0.01);
            nn::init::zeros_(l->bias);
        }
    }
}

// ResNet's basic block: two 3x3 convolutions, and a 1x1 projection where the shape changes.
struct BasicBlockImpl : nn::Module {
    BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride)
        : conv1(register_module("conv1", conv(in, out, 3, stride)))
        , bn1(register_module("bn1", nn::BatchNorm2d(out)))
        , conv2(register_module("conv2", conv(out, out, 3, 1)))
        , bn2(register_module("bn2", nn::BatchNorm2d(out)))
    {
        if (stride != 1 || in != out)
            downsample = register_module(
                "downsample", nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out)));
    }
    torch::Tensor forward(const torch::Tensor &x)
    {
        auto y = torch::relu(bn1(conv1(x)));
        y = bn2(conv2(y));
        return torch::relu(y + (downsample.is_empty() ? x : downsample->forward(x)));
    }
    nn::Conv2d conv1;
    nn::BatchNorm2d bn1;
    nn::Conv2d conv2;
    nn::BatchNorm2d bn2;
    nn::Sequential downsample { nullptr };
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : nn::Module {
    ResNet18Impl()
        : conv1(register_module("conv1", conv(3, 64, 3, 1)))
        , bn1(register_module("bn1", nn::BatchNorm2d(64)))
        , fc(register_module("fc", nn::Linear(512, 10)))
    {
        std::int64_t in = 64;
        const std::int64_t widths[] = { 64, 128, 256, 512 };
        for (int i = 0; i < 4; ++i) {
            nn::Sequential layer;
            for (int b = 0; b < 2; ++b) {
                layer->push_back(BasicBlock(in, widths[i], b == 0 && i > 0 ? 2 : 1));
                in = widths[i];
            }
            layers.push_back(register_module("layer" + std::to_string(i + 1), layer));
        }
        initialise(*this, false);
    }
    torch::Tensor forward(const torch::Tensor &x)
    {
        auto y = torch::relu(bn1(conv1(x)));
        for (auto &layer : layers)
            y = layer->forward(y);
        y = torch::adaptive_avg_pool2d(y, { 1, 1 }).flatten(1);
        return fc(y);
    }
    nn::Conv2d conv1;
    nn::BatchNorm2d bn1;
    std::vector<nn::Sequential> layers;
    nn::Linear fc;
};
TORCH_MODULE(ResNet18);

// Convolution, BatchNorm, ReLU6 (torchvision's Conv2dNormActivation); `relu` false for the
// linear bottleneck. A module of its own: a Sequential cannot hold a Sequential.
struct ConvBnActImpl : nn::Module {
    ConvBnActImpl(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
        std::int64_t groups = 1, bool relu = true)
        : conv(register_module("0", trainer::conv(in, out, kernel, stride, groups)))
        , bn(register_module("1", nn::BatchNorm2d(out)))
        , relu(relu)
    { }
    torch::Tensor forward(const torch::Tensor &x)
    {
        auto y = bn(conv(x));
        return relu ? torch::clamp(y, 0, 6) : y;
    }
    nn::Conv2d conv;
    nn::BatchNorm2d bn;
    bool relu;
};
TORCH_MODULE(ConvBnAct);

// MobileNetV2's inverted residual: expand (1x1), depthwise 3x3, project (1x1, linear); the
// input added back when the shape is kept.
struct InvertedResidualImpl : nn::Module {
    InvertedResidualImpl(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t expansion)
        : residual(stride == 1 && in == out)
    {
        const std::int64_t hidden = in * expansion;
        nn::Sequential layers;
        if (expansion != 1)
            layers->push_back(ConvBnAct(in, hidden, 1, 1));
        layers->push_back(ConvBnAct(hidden, hidden, 3, stride, hidden));
        layers->push_back(ConvBnAct(hidden, out, 1, 1, 1, /*relu=*/false));
        conv = register_module("conv", layers);
    }
    torch::Tensor forward(const torch::Tensor &x)
    {
        return residual ? x + conv->forward(x) : conv->forward(x);
    }
    bool residual;
    nn::Sequential conv { nullptr };
};
TORCH_MODULE(InvertedResidual);

struct MobileNetV2Impl : nn::Module {
    MobileNetV2Impl()
    {
        // (expansion t, channels c, repeats n, stride s) as in the paper's Table 2; the first
        // convolution and the second stage stride 1 instead of 2 for 32x32 images.
        const std::int64_t settings[][4] = { { 1, 16, 1, 1 }, { 6, 24, 2, 1 }, { 6, 32, 3, 2 },
            { 6, 64, 4, 2 }, { 6, 96, 3, 1 }, { 6, 160, 3, 2 }, { 6, 320, 1, 1 } };
        nn::Sequential layers(ConvBnAct(3, 32, 3, 1));
        std::int64_t in = 32;
        for (const auto &s : settings)
            for (std::int64_t i = 0; i < s[2]; ++i) {
                layers->push_back(InvertedResidual(in, s[1], i == 0 ? s[3] : 1, s[0]));
                in = s[1];
            }
        layers->push_back(ConvBnAct(in, 1280, 1, 1));
        features = register_module("features", layers);
        classifier = register_module("classifier", nn::Sequential(nn::Dropout(0.2), nn::Linear(1280, 10)));
        initialise(*this, true);
    }
    torch::Tensor forward(const torch::Tensor &x)
    {
        auto y = features->forward(x);
        y = torch::adaptive_avg_pool2d(y, { 1, 1 }).flatten(1);
        return classifier->forward(y);
    }
    nn::Sequential features { nullptr }, classifier { nullptr };
};
TORCH_MODULE(MobileNetV2);

} // namespace

TrainableModel buildModel(const std::string &name, double blockDropout, double denseDropout)
{
    if (name == "seed-cnn")
        return TrainableModel(SeedNet(blockDropout, denseDropout));
    if (name == "resnet18")
        return TrainableModel(ResNet18());
    if (name == "mobilenet_v2")
        return TrainableModel(MobileNetV2());
    throw std::invalid_argument("unknown model '" + name + "'");
}

ModelCost measureModelCost(TrainableModel &net, const torch::Device &device)
{
    namespace profiler = torch::autograd::profiler;
    ModelCost cost;
    for (const auto &p : net->parameters())
        if (p.requires_grad()) {
            cost.parameters += p.numel();
            cost.gradientBytes += p.numel() * std::int64_t(p.element_size());
        }
    const bool training = net->is_training();
    net->eval(); // batch norm reads its running statistics and updates nothing; no dropout draw
    {
        torch::NoGradGuard noGrad;
        profiler::enableProfilerLegacy(profiler::ProfilerConfig(profiler::ProfilerState::CPU,
            /*report_input_shapes=*/true, /*profile_memory=*/false, /*with_stack=*/false,
            /*with_flops=*/true));
        try {
            net.forward(torch::zeros({ 1, 3, 32, 32 }, torch::TensorOptions().device(device)));
        } catch (...) {
            profiler::disableProfilerLegacy();
            net->train(training);
            throw;
        }
        for (const auto &thread : profiler::disableProfilerLegacy())
            for (const auto &event : thread)
                if (event.kind() == profiler::EventKind::PushRange)
                    cost.forwardFlopsPerImage
                        += std::int64_t(const_cast<profiler::LegacyEvent &>(event).flops());
    }
    net->train(training);
    return cost;
}

} // namespace scalelab::trainer
