#include "training.h"

#include "cifar10.h"
#include "event_writer.h"
#include "seed_model.h"
#include "seed_model_impl.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

namespace scalelab::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// Per-channel statistics of the CIFAR-10 training set.
const std::array<float, 3> kMean = { 0.4914f, 0.4822f, 0.4465f };
const std::array<float, 3> kStd = { 0.2470f, 0.2435f, 0.2616f };
constexpr std::int64_t kEvalBatch = 500;

double secondsSince(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Keeps the split as uint8 and converts one batch at a time: 1/4 of the memory of a
// float copy, and the conversion is cheap next to the convolutions.
struct SplitTensors {
    torch::Tensor pixels; // uint8 [N, 3, 32, 32]
    torch::Tensor labels; // int64 [N]
    std::int64_t size() const { return labels.size(0); }
};

SplitTensors toTensors(cifar::Images &&images)
{
    const auto n = static_cast<std::int64_t>(images.size());
    auto pixels = torch::from_blob(images.pixels.data(), { n, 3, 32, 32 }, torch::kUInt8).clone();
    auto labels = torch::from_blob(images.labels.data(), { n }, torch::kUInt8).to(torch::kLong);
    return { pixels, labels };
}

torch::Tensor normalise(const torch::Tensor &pixels)
{
    static const auto mean = torch::tensor({ kMean[0], kMean[1], kMean[2] }).view({ 1, 3, 1, 1 });
    static const auto std = torch::tensor({ kStd[0], kStd[1], kStd[2] }).view({ 1, 3, 1, 1 });
    return (pixels.to(torch::kFloat).div_(255.0f) - mean) / std;
}

struct EvalResult {
    double loss = 0;
    double accuracy = 0;
};

EvalResult evaluate(SeedNet &net, const SplitTensors &split)
{
    torch::NoGradGuard noGrad;
    net->eval();
    double lossSum = 0;
    std::int64_t correct = 0;
    for (std::int64_t begin = 0; begin < split.size(); begin += kEvalBatch) {
        const auto end = std::min(begin + kEvalBatch, split.size());
        const auto x = normalise(split.pixels.slice(0, begin, end));
        const auto y = split.labels.slice(0, begin, end);
        const auto out = net->forward(x);
        lossSum += torch::nn::functional::cross_entropy(
            out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
        correct += out.argmax(1).eq(y).sum().item<std::int64_t>();
    }
    net->train();
    const auto n = static_cast<double>(std::max<std::int64_t>(split.size(), 1));
    return { lossSum / n, static_cast<double>(correct) / n };
}

} // namespace

std::string validate(const TrainingConfig &c)
{
    if (c.dataDir.empty())
        return "--data-dir is required: the folder with the CIFAR-10 .bin files";
    if (c.batchSize <= 0)
        return "--batch-size must be at least 1 (got " + std::to_string(c.batchSize) + ")";
    if (c.epochs <= 0)
        return "--epochs must be at least 1 (got " + std::to_string(c.epochs) + ")";
    if (!(c.learningRate > 0))
        return "--lr must be greater than 0";
    if (c.momentum < 0 || c.momentum >= 1)
        return "--momentum must be in [0, 1)";
    if (c.weightDecay < 0)
        return "--weight-decay must not be negative";
    if (c.threads < 0)
        return "--threads must be 0 (all cores) or more";
    if (c.worldSize < 1 || c.rank < 0 || c.rank >= c.worldSize)
        return "--rank must be in [0, --world-size)";
    if (c.worldSize > 1)
        return "--world-size > 1 needs the data-parallel engine, which this worker build "
               "does not have yet; run with --world-size 1";
    return {};
}

int runTraining(const TrainingConfig &config, EventWriter &events)
{
    const auto fail = [&](const std::string &message) {
        events.emit("error", { { "message", message } });
        return 1;
    };
    if (auto problem = validate(config); !problem.empty())
        return fail(problem);

    const int threads = config.threads > 0
        ? config.threads
        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    torch::set_num_threads(threads);
    torch::manual_seed(config.seed);

    std::string error;
    const auto summary = cifar::inspectDataset(config.dataDir, &error);
    if (!summary)
        return fail(error);
    auto trainImages = cifar::readSplit(
        config.dataDir, cifar::Split::Train, static_cast<std::size_t>(config.maxTrainImages), &error);
    if (!trainImages)
        return fail(error);
    auto testImages = cifar::readSplit(
        config.dataDir, cifar::Split::Test, static_cast<std::size_t>(config.maxTestImages), &error);
    if (!testImages)
        return fail(error);
    const SplitTensors train = toTensors(std::move(*trainImages));
    const SplitTensors test = toTensors(std::move(*testImages));

    SeedNet net;
    net->train();
    torch::optim::SGD optimizer(net->parameters(),
        torch::optim::SGDOptions(config.learningRate)
            .momentum(config.momentum)
            .weight_decay(config.weightDecay));
    const std::int64_t stepsPerEpoch = (train.size() + config.batchSize - 1) / config.batchSize;
    events.emit("started",
        { { "dataset_dir", summary->directory }, { "synthetic", summary->synthetic },
            { "train_images", train.size() }, { "test_images", test.size() },
            { "parameters", seedModelParameterCount() }, { "threads", std::int64_t { threads } },
            { "device", std::string("cpu") }, { "steps_per_epoch", stepsPerEpoch } });

    std::mt19937_64 shuffleRng(config.seed);
    std::vector<std::int64_t> order(static_cast<std::size_t>(train.size()));
    const auto runStart = Clock::now();
    std::int64_t step = 0;
    std::int64_t imagesSeen = 0;
    double trainSeconds = 0;
    double bestAccuracy = 0, lastAccuracy = 0;
    for (int epoch = 1; epoch <= config.epochs; ++epoch) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), shuffleRng);
        const auto epochStart = Clock::now();
        double lossSum = 0;
        std::int64_t correct = 0;
        for (std::int64_t begin = 0; begin < train.size(); begin += config.batchSize) {
            const auto stepStart = Clock::now();
            const auto end = std::min<std::int64_t>(begin + config.batchSize, train.size());
            const auto index = torch::from_blob(order.data() + begin, { end - begin }, torch::kLong);
            const auto x = normalise(train.pixels.index_select(0, index));
            const auto y = train.labels.index_select(0, index);
            optimizer.zero_grad();
            const auto out = net->forward(x);
            const auto loss = torch::nn::functional::cross_entropy(out, y);
            loss.backward();
            optimizer.step();
            const double lossValue = loss.item<double>();
            lossSum += lossValue * static_cast<double>(end - begin);
            correct += out.argmax(1).eq(y).sum().item<std::int64_t>();
            ++step;
            imagesSeen += end - begin;
            const double stepSeconds = secondsSince(stepStart);
            events.emit("step",
                { { "epoch", std::int64_t { epoch } }, { "step", step }, { "loss", lossValue },
                    { "lr", config.learningRate }, { "images_per_second", double(end - begin) / stepSeconds },
                    { "elapsed_seconds", secondsSince(runStart) } });
        }
        const double epochTrainSeconds = secondsSince(epochStart);
        trainSeconds += epochTrainSeconds;
        const auto eval = evaluate(net, test);
        lastAccuracy = eval.accuracy;
        bestAccuracy = std::max(bestAccuracy, eval.accuracy);
        const auto n = static_cast<double>(train.size());
        events.emit("epoch",
            { { "epoch", std::int64_t { epoch } }, { "train_loss", lossSum / n },
                { "train_accuracy", static_cast<double>(correct) / n }, { "test_loss", eval.loss },
                { "test_accuracy", eval.accuracy }, { "epoch_seconds", secondsSince(epochStart) },
                { "images_per_second", n / epochTrainSeconds },
                { "elapsed_seconds", secondsSince(runStart) } });
    }
    events.emit("finished",
        { { "final_test_accuracy", lastAccuracy }, { "best_test_accuracy", bestAccuracy },
            { "wall_seconds", secondsSince(runStart) },
            { "images_per_second", static_cast<double>(imagesSeen) / trainSeconds },
            { "epochs_completed", std::int64_t { config.epochs } } });
    return 0;
}

} // namespace scalelab::trainer
