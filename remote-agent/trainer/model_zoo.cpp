#include "model_zoo.h"

#include "seed_model_impl.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/script.h>

#include <filesystem>
#include <map>
#include <sstream>
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
    // The ReLUs in place, as torchvision's (ReLU(inplace=True)): the same values without a
    // new activation-sized tensor for each. BatchNorm's backward needs its input, not its
    // output, so its output may be overwritten. The residual sum stays out of place:
    // libtorch's profiler counts the FLOPs of add, not of add_ (ModelCost).
    torch::Tensor forward(const torch::Tensor &x)
    {
        auto y = bn1(conv1(x)).relu_();
        y = bn2(conv2(y));
        return (y + (downsample.is_empty() ? x : downsample->forward(x))).relu_();
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
        auto y = bn1(conv1(x)).relu_();
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
        if (!relu)
            return y;
        // ReLU6 as torchvision's: hardtanh in place on BatchNorm's output, whose backward is
        // one fused kernel (a clamp's is several passes of masks: 1.9x slower backward). But
        // libtorch 1.13 has no bf16 backward for hardtanh on the CPU ("hardshrink_backward_cpu"
        // not implemented for 'BFloat16': PyTorch cannot train torchvision's MobileNetV2
        // under bf16 autocast there), so a bf16 activation on the CPU takes the clamp. CUDA
        // has the bf16 kernel: the clamp there cost MobileNetV2's bf16 step a quarter of its
        // speed against PyTorch's (H200, scripts/gpu-check.sh, docs/training-engine.md).
        const bool cpuBf16 = y.scalar_type() == torch::kBFloat16 && y.device().is_cpu();
        return cpuBf16 ? torch::clamp(y, 0, 6) : torch::hardtanh_(y, 0, 6);
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

// A CNN small enough that its compute is a rounding error beside a process's start: two 3x3
// convolutions (16 and 32 channels, biased, ReLU, 2x2 max-pool each) and a linear layer over
// the 8x8x32 map, 25,578 parameters and 3.3 MFLOPs a forward (the seed CNN: 3.25 M and
// 310 MFLOPs). For trying a cluster's plumbing in seconds: placement, the network, checkpoints,
// retries. It learns the generated sets; on CIFAR-10 it is no benchmark of anything.
struct MiniCnnImpl : nn::Module {
    MiniCnnImpl()
        : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1))))
        , conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1))))
        , fc(register_module("fc", nn::Linear(32 * 8 * 8, 10)))
    { }
    torch::Tensor forward(const torch::Tensor &x)
    {
        auto y = torch::max_pool2d(torch::relu(conv1(x)), 2);
        y = torch::max_pool2d(torch::relu(conv2(y)), 2);
        return fc(y.flatten(1));
    }
    nn::Conv2d conv1;
    nn::Conv2d conv2;
    nn::Linear fc;
};
TORCH_MODULE(MiniCnn);

// The first line of an exception's message (libtorch's carry a C++ backtrace after it);
// for the TorchScript interpreter's, which open with where it failed, the line that says why.
std::string firstLine(const std::string &message)
{
    if (const auto why = message.rfind("RuntimeError: "); why != std::string::npos) {
        const auto end = message.find('\n', why);
        return message.substr(why + 14, end == std::string::npos ? std::string::npos : end - why - 14);
    }
    const auto end = message.find('\n');
    return end == std::string::npos ? message : message.substr(0, end);
}

std::string shapeText(const torch::IntArrayRef sizes)
{
    std::ostringstream text;
    text << '[';
    for (std::size_t i = 0; i < sizes.size(); ++i)
        text << (i ? ", " : "") << sizes[i];
    text << ']';
    return text.str();
}

// Mirrors a TorchScript module's parameters, buffers and submodules as torch::nn modules of
// the same names ("layer1.0.conv1.weight", as PyTorch's state_dict has them). The tensors
// are shared, not copied: what the optimizer, the all-reduce, a checkpoint or to() does to
// them, the scripted forward sees.
void mirror(nn::Module &into, const torch::jit::Module &from)
{
    for (const auto &p : from.named_parameters(/*recurse=*/false))
        into.register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto &b : from.named_buffers(/*recurse=*/false))
        into.register_buffer(b.name, b.value);
    for (const auto &child : from.named_children()) {
        auto module = std::make_shared<nn::Module>(child.name);
        mirror(*module, child.value);
        into.register_module(child.name, module);
    }
}

// A TorchScript module as a torch::nn module: forward runs the scripted code.
struct TorchScriptNetImpl : nn::Module {
    explicit TorchScriptNetImpl(torch::jit::Module module)
        : nn::Module("TorchScriptNet")
        , scripted(std::move(module))
    {
        mirror(*this, scripted);
        scripted.train(is_training());
    }
    void train(bool on = true) override
    {
        nn::Module::train(on);
        scripted.train(on);
    }
    torch::Tensor forward(const torch::Tensor &x)
    {
        const c10::IValue out = scripted.forward({ x });
        if (!out.isTensor())
            throw std::invalid_argument(
                "model output is a " + out.tagKind() + ", expected a [N, 10] tensor of logits");
        return out.toTensor();
    }
    torch::jit::Module scripted;
};
TORCH_MODULE(TorchScriptNet);

// The archive at `path`, or std::invalid_argument in words.
torch::jit::Module loadArchive(const std::string &path)
{
    namespace fs = std::filesystem;
    std::error_code error;
    const auto bytes = fs::file_size(path, error);
    if (error)
        throw std::invalid_argument("cannot read the model file " + path + ": " + error.message());
    if (bytes == 0)
        throw std::invalid_argument(
            "the model file " + path + " is empty: save the module with torch.jit.script(model).save(path)");
    if (std::int64_t(bytes) > worker::kMaxModelFileBytes)
        throw std::invalid_argument("the model file " + path + " has " + std::to_string(bytes)
            + " bytes, over the " + std::to_string(worker::kMaxModelFileBytes >> 20)
            + " MiB a model may have");
    try {
        return torch::jit::load(path, torch::kCPU);
    } catch (const std::exception &e) {
        const std::string why = firstLine(e.what());
        if (why.find("constants.pkl") != std::string::npos || why.find("code/") != std::string::npos)
            throw std::invalid_argument("the model file " + path
                + " is a PyTorch archive but not a TorchScript module (torch.save of an nn.Module?): save it "
                  "with "
                  "torch.jit.script(model).save(path)");
        throw std::invalid_argument("the model file " + path
            + " is not a TorchScript archive (not a zip archive, or truncated): save it with "
              "torch.jit.script(model).save(path) (libtorch said: "
            + why + ")");
    }
}

// Why `net` cannot be trained on CIFAR-10 batches; empty when it can. Leaves no gradient.
std::string checkTrainable(TorchScriptNet &net)
{
    std::int64_t trainable = 0;
    for (const auto &p : net->parameters())
        if (p.requires_grad())
            trainable += p.numel();
    if (trainable == 0)
        return "the model has no trainable parameters (every parameter has requires_grad False, or it has "
               "none)";
    const bool training = net->is_training();
    net->train();
    std::string problem;
    try {
        torch::Tensor out;
        try {
            out = net->forward(torch::zeros({ 2, 3, 32, 32 }));
        } catch (const std::invalid_argument &) {
            throw;
        } catch (const std::exception &e) {
            throw std::invalid_argument(
                "the model's forward failed on a [2, 3, 32, 32] float batch: " + firstLine(e.what()));
        }
        if (out.sizes() != torch::IntArrayRef { 2, 10 })
            throw std::invalid_argument("model output has shape " + shapeText(out.sizes())
                + ", expected [2, 10]: the last layer must have 10 outputs");
        try {
            torch::nn::functional::cross_entropy(out.to(torch::kFloat), torch::zeros({ 2 }, torch::kLong))
                .backward();
        } catch (const std::exception &e) {
            throw std::invalid_argument(
                "no gradient flows back through the model's forward (is its output detached?): "
                + firstLine(e.what()));
        }
        bool reached = false;
        for (auto &p : net->parameters()) {
            reached = reached || (p.grad().defined() && p.requires_grad());
            p.mutable_grad() = torch::Tensor();
        }
        if (!reached)
            throw std::invalid_argument(
                "no gradient reaches the model's parameters (is its output detached?)");
    } catch (const std::invalid_argument &e) {
        problem = e.what();
    }
    net->train(training);
    return problem;
}

TrainableModel loadTorchScript(const std::string &path)
{
    TorchScriptNet net(loadArchive(path));
    if (const std::string problem = checkTrainable(net); !problem.empty())
        throw std::invalid_argument(problem);
    return TrainableModel(net);
}

} // namespace

TrainableModel buildModel(const std::string &name, double blockDropout, double denseDropout)
{
    if (name == "seed-cnn")
        return TrainableModel(SeedNet(blockDropout, denseDropout));
    if (name == "resnet18")
        return TrainableModel(ResNet18());
    if (name == "mobilenet_v2")
        return TrainableModel(MobileNetV2());
    if (name == "mini-cnn")
        return TrainableModel(MiniCnn());
    if (worker::isModelFile(name))
        return loadTorchScript(name.substr(worker::kModelFilePrefix.size()));
    throw std::invalid_argument("unknown model '" + name + "'");
}

std::string copyInitialWeights(TrainableModel &net, const std::string &path)
{
    const torch::jit::Module source = loadArchive(path);
    std::map<std::string, torch::Tensor> tensors;
    for (const auto &p : source.named_parameters())
        tensors[p.name] = p.value;
    for (const auto &b : source.named_buffers())
        tensors[b.name] = b.value;
    int copied = 0, total = 0;
    std::vector<std::string> missing, reshaped;
    torch::NoGradGuard noGrad;
    const auto copy = [&](const std::string &name, torch::Tensor &into) {
        ++total;
        const auto found = tensors.find(name);
        if (found == tensors.end())
            missing.push_back(name);
        else if (found->second.sizes() != into.sizes())
            reshaped.push_back(
                name + " " + shapeText(into.sizes()) + " (file: " + shapeText(found->second.sizes()) + ")");
        else {
            into.copy_(found->second);
            ++copied;
        }
    };
    for (auto &p : net->named_parameters())
        copy(p.key(), p.value());
    for (auto &b : net->named_buffers())
        copy(b.key(), b.value());
    const auto list = [](const std::vector<std::string> &names) {
        std::string text;
        for (std::size_t i = 0; i < names.size() && i < 4; ++i)
            text += (i ? ", " : "") + names[i];
        return names.size() > 4 ? text + ", …" : text;
    };
    if (copied == 0)
        throw std::invalid_argument("no weight of " + path
            + " matches the model by name and shape (the model has "
            + (missing.empty() ? list(reshaped) : list(missing)) + "): is it the same architecture?");
    std::string note = "initial weights from " + path + ": " + std::to_string(copied) + " of "
        + std::to_string(total) + " tensors copied";
    if (!reshaped.empty())
        note += "; other shape, kept fresh: " + list(reshaped);
    if (!missing.empty())
        note += "; not in the file, kept fresh: " + list(missing);
    return note;
}

std::string checkTorchScriptModel(const std::string &path)
{
    try {
        TorchScriptNet net(loadArchive(path));
        return checkTrainable(net);
    } catch (const std::invalid_argument &e) {
        return e.what();
    } catch (const std::exception &e) {
        return "the model file " + path + " cannot be used: " + firstLine(e.what());
    }
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
