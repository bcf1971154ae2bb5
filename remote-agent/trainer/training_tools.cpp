// The worker's modes besides training: the gradient check (data-parallel gradients
// against one replica's), the throughput bench, the network probe and the learning-rate
// range test.
#include "training.h"

#include "checkpoint.h"
#include "cifar10.h"
#include "data_loader.h"
#include "data_shard.h"
#include "device.h"
#include "event_writer.h"
#include "fused_ops.h"
#include "lr_range_test.h"
#include "model_zoo.h"
#include "noise_meter.h"
#include "seed_model.h"
#include "training_support.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

namespace scalelab::trainer {

int runGradientCheck(const TrainingConfig &config, EventWriter &events)
{
    if (const common::Status valid = validate(config); !valid) {
        events.error(valid.error());
        return worker::kExitFailed;
    }
    torch::set_num_threads(config.threads > 0 ? config.threads : 1);
    torch::manual_seed(config.seed);
    const auto total = std::int64_t(config.batchSize) * config.worldSize;
    auto images = cifar::readSplit(config.dataDir, cifar::Split::Train, std::size_t(total));
    if (!images || std::int64_t(images->size()) < total) {
        events.error(images ? "need " + std::to_string(total) + " training images" : images.error());
        return worker::kExitFailed;
    }
    const torch::Device device = torchDevice(config.device);
    const auto x = normalise(torch::from_blob(images->pixels.data(), { total, 3, 32, 32 }, torch::kUInt8),
        normalizationFor(config, *images))
                       .to(device);
    const auto y
        = torch::from_blob(images->labels.data(), { total }, torch::kUInt8).to(torch::kLong).to(device);

    TrainableModel net = buildConfiguredModel(config, kDefaultBlockDropout, kDefaultDenseDropout);
    if (device.is_cuda())
        net->to(device);
    net->eval(); // no dropout, BatchNorm on running statistics: per-image loss terms
    std::unique_ptr<DataParallel> parallel = connectRanks(config);
    if (parallel)
        parallel->attach(*net);
    // The reference replica: rank 0's weights, the whole batch, no communication.
    TrainableModel reference = buildConfiguredModel(config, kDefaultBlockDropout, kDefaultDenseDropout);
    if (device.is_cuda())
        reference->to(device);
    reference->eval();
    {
        torch::NoGradGuard noGrad;
        auto from = net->parameters();
        auto to = reference->parameters();
        for (std::size_t i = 0; i < from.size(); ++i)
            to[i].copy_(from[i]);
        auto fromBuffers = net->buffers();
        auto toBuffers = reference->buffers();
        for (std::size_t i = 0; i < fromBuffers.size(); ++i)
            toBuffers[i].copy_(fromBuffers[i]);
    }

    const auto begin = std::int64_t(config.rank) * config.batchSize;
    if (parallel)
        parallel->beforeForward();
    const auto loss
        = torch::nn::functional::cross_entropy(net.forward(x.slice(0, begin, begin + config.batchSize)),
            y.slice(0, begin, begin + config.batchSize));
    if (parallel)
        parallel->beforeBackward();
    loss.backward();
    if (config.rank == 0) {
        torch::nn::functional::cross_entropy(reference.forward(x), y).backward();
        double maxDiff = 0, maxGrad = 0;
        const auto averaged = net->parameters();
        const auto whole = reference->parameters();
        for (std::size_t i = 0; i < averaged.size(); ++i) {
            maxDiff = std::max(maxDiff, (averaged[i].grad() - whole[i].grad()).abs().max().item<double>());
            maxGrad = std::max(maxGrad, whole[i].grad().abs().max().item<double>());
        }
        events.gradientCheck(maxDiff, maxGrad, int(averaged.size()), config.worldSize);
    }
    if (parallel)
        parallel->barrier();
    return worker::kExitFinished;
}

} // namespace scalelab::trainer

namespace scalelab::trainer {

namespace {

// The norm of all of `parameters`' gradients: one multi-tensor norm, as training takes it.
torch::Tensor gradientNorm(const std::vector<torch::Tensor> &parameters)
{
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> grads;
    for (const auto &p : parameters)
        if (p.grad().defined())
            grads.push_back(p.grad().detach().to(torch::kFloat));
    return torch::stack(at::_foreach_norm(grads)).norm();
}

// Each measured step's time, and its parts (see runBench).
struct BenchTimes {
    std::vector<double> seconds, forward, backward, gradientWait, optimizerStep;
};

// The median as Python's statistics.median takes it (the peer's): the mean of the middle two
// of an even count.
double medianOf(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    const std::size_t middle = values.size() / 2;
    return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2.0;
}

BenchReport benchReport(const TrainingConfig &config, const BenchTimes &times, int threads,
    const torch::Device &device, int steps)
{
    const double step = medianOf(times.seconds);
    BenchReport report { .imagesPerSecond = double(config.batchSize) * config.worldSize / step,
        .medianStepSeconds = step,
        .batchSize = config.batchSize,
        .threads = threads,
        .worldSize = config.worldSize,
        .precision = config.precision,
        .channelsLast = config.channelsLast,
        .device = device.str(),
        .steps = steps,
        .medianForwardSeconds = std::nullopt,
        .medianBackwardSeconds = std::nullopt,
        .medianGradientWaitSeconds = std::nullopt,
        .medianOptimizerSeconds = std::nullopt };
    // Host-side times: on a GPU the work is queued, so only the whole step is meaningful.
    if (!device.is_cuda()) {
        report.medianForwardSeconds = medianOf(times.forward);
        report.medianBackwardSeconds = medianOf(times.backward);
        report.medianGradientWaitSeconds = medianOf(times.gradientWait);
        report.medianOptimizerSeconds = medianOf(times.optimizerStep);
    }
    return report;
}

} // namespace

int runBench(const TrainingConfig &config, int warmupSteps, int steps, bool noiseScale, EventWriter &events)
{
    const int threads = config.threads > 0 ? config.threads : 1;
    torch::set_num_threads(threads);
    setBlasThreads(threads);
    torch::manual_seed(config.seed);
    const torch::Device device = torchDevice(config.device);
    // The seed CNN's own dropout: throughput, not a run's configuration.
    TrainableModel net = trainingModel(config, device, kDefaultBlockDropout, kDefaultDenseDropout);
    const auto memoryFormat = memoryFormatOf(config);
    std::unique_ptr<DataParallel> parallel = connectRanks(config);
    if (parallel)
        parallel->attach(*net);
    torch::optim::SGD optimizer(
        net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
    // Synthetic input: random pixels and labels, generated once (throughput only).
    auto x = torch::randn({ config.batchSize, 3, 32, 32 }).to(device).contiguous(memoryFormat);
    const auto y = torch::randint(0, 10, { config.batchSize }, torch::kLong).to(device);
    const bool bf16 = config.precision == "bf16";
    // Where a step's time goes, so a scaling efficiency below 1 can be explained: the
    // forward pass; backward until it has produced its last gradient; from then until
    // backward returns (with several ranks: the all-reduces that backward's compute did not
    // hide, the last bucket's at least, and the reducer's copy back); the optimizer step.
    // Host-side times: on a GPU the work is queued, so only the whole step is meaningful.
    std::atomic<Clock::rep> lastGradient { 0 };
    NoiseMeter noise(config.worldSize);
    for (auto &p : net->parameters())
        p.register_hook([&lastGradient, &noise, noiseScale, &parallel](const at::TensorBase &gradient) {
            if (noiseScale && parallel)
                noise.addLocal(gradient);
            const Clock::rep now = Clock::now().time_since_epoch().count();
            Clock::rep seen = lastGradient.load();
            while (seen < now && !lastGradient.compare_exchange_weak(seen, now)) { }
        });
    BenchTimes times;
    for (int i = 0; i < warmupSteps + steps; ++i) {
        if (parallel)
            parallel->barrier(); // time the same step on every rank
        const auto start = Clock::now();
        dropGradients(optimizer);
        if (parallel)
            parallel->beforeForward();
        torch::Tensor loss;
        {
            AutocastScope autocast(bf16, device);
            loss = torch::nn::functional::cross_entropy(net.forward(x).to(torch::kFloat), y);
        }
        const auto forwardEnd = Clock::now();
        if (parallel)
            parallel->beforeBackward();
        loss.backward();
        const auto backwardEnd = Clock::now();
        // The noise scale as training measures it. With several ranks it takes the averaged
        // gradient's norm rank 0 takes (training takes it for its report anyway: counted here,
        // so this is an upper bound on what the noise scale adds to a training step); one
        // rank's estimator does not use it.
        if (noiseScale)
            noise.endStep(parallel.get(), net->parameters(), config.batchSize,
                config.rank == 0 && config.worldSize > 1 ? gradientNorm(net->parameters()) : torch::Tensor(),
                config.rank == 0);
        sgdStep(optimizer);
        loss.item<float>();
        synchronize(device); // a GPU may still be running the optimizer step
        if (i < warmupSteps)
            continue;
        const auto end = Clock::now();
        const auto lastGradientAt = Clock::time_point(Clock::duration(lastGradient.load()));
        times.seconds.push_back(std::chrono::duration<double>(end - start).count());
        times.forward.push_back(std::chrono::duration<double>(forwardEnd - start).count());
        times.backward.push_back(std::chrono::duration<double>(lastGradientAt - forwardEnd).count());
        times.gradientWait.push_back(std::chrono::duration<double>(backwardEnd - lastGradientAt).count());
        times.optimizerStep.push_back(std::chrono::duration<double>(end - backwardEnd).count());
    }
    if (config.rank == 0)
        events.bench(benchReport(config, times, threads, device, steps));
    return worker::kExitFinished;
}

} // namespace scalelab::trainer

namespace scalelab::trainer {

int runNetworkProbe(const TrainingConfig &config, EventWriter &events)
{
    const auto start = Clock::now();
    const int threads = config.threads > 0 ? config.threads : 1;
    torch::set_num_threads(threads);
    std::unique_ptr<DataParallel> parallel = connectRanks(config);
    NetworkProbeReport network;
    network.worldSize = config.worldSize;
    network.backend = parallel->backend();
    network.hosts = parallel->hosts();
    // No model here: up to 16 MB, past the seed CNN's 13 MB of gradients.
    for (auto &sample : parallel->probeAllReduce(16 << 20))
        network.samples.emplace_back(sample.bytes, std::move(sample.seconds));
    if (config.rank == 0) {
        StartedReport started;
        started.threads = threads;
        started.device = config.device;
        started.torchVersion = TORCH_VERSION;
        started.blas = blasInUse();
        started.compiler = compilerName();
        started.network = std::move(network);
        events.started(config, started);
    }
    // No rank leaves before the others are done with the group.
    parallel->barrier();
    // Every rank says it finished (the agent takes a silent exit for a failure).
    FinishedReport finished;
    finished.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    events.finished(finished);
    return worker::kExitFinished;
}

common::Status validate(const LrFindOptions &o)
{
    if (!(o.minLr > 0) || !std::isfinite(o.minLr) || !(o.maxLr > o.minLr) || !std::isfinite(o.maxLr)
        || o.maxLr > 1e3)
        return common::Status::failure("--min-lr and --max-lr must be finite, 0 < min < max <= 1000");
    if (o.steps < 10 || o.steps > 100000)
        return common::Status::failure("--steps must be between 10 and 100000");
    return common::Status::success();
}

namespace {

// A range test's sweep: each lr tried and the smoothed loss after it.
struct LrSweep {
    std::vector<double> lrs, smoothed;
    double bestSmoothed = std::numeric_limits<double>::infinity();
    double bestLr = 0;
    bool stoppedEarly = false;
    int step = 0;
};

// The suggestion a sweep makes, and whether it can make one (lr_range_test.h).
void reportLrFound(const LrSweep &sweep, int batchSize, EventWriter &events)
{
    const LrRangeVerdict verdict = judgeLrSweep(sweep.lrs, sweep.smoothed);
    events.lrFound({ .suggestedLr = verdict.suggestedLr,
        .minLossLr = verdict.minLossLr,
        .minSmoothedLoss = verdict.minSmoothedLoss,
        .steepestLr = verdict.steepestLr,
        .steps = int(sweep.step),
        .stoppedEarly = sweep.stoppedEarly,
        .conclusive = verdict.conclusive,
        .note = verdict.note,
        .batchSize = batchSize,
        .rule = "the lr at the lowest smoothed loss, after the average's first tenth, / 10 (Smith 2017; "
                "fast.ai)" });
}

} // namespace

int runLrFind(const TrainingConfig &config, const LrFindOptions &options, EventWriter &events)
{
    const auto fail = [&](const std::string &message) {
        events.error(message);
        return worker::kExitFailed;
    };
    if (const common::Status valid = validate(config); !valid)
        return fail(valid.error());
    if (const common::Status valid = validate(options); !valid)
        return fail(valid.error());
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = config.threads > 0 ? config.threads : cores;
    torch::set_num_threads(threads);
    setBlasThreads(threads);
    torch::manual_seed(config.seed);
    auto train = cifar::readSplit(config.dataDir, cifar::Split::Train, std::size_t(config.maxTrainImages));
    if (!train)
        return fail(train.error());
    if (train->size() == 0)
        return fail("the training split is empty");
    const Normalization normalization = normalizationFor(config, *train);
    const torch::Device device = torchDevice(config.device);
    TrainableModel net = buildConfiguredModel(config, config.blockDropout, config.denseDropout);
    if (device.is_cuda())
        net->to(device);
    net->train();
    torch::optim::SGD optimizer(net->parameters(),
        torch::optim::SGDOptions(options.minLr).momentum(config.momentum).weight_decay(config.weightDecay));
    const bool bf16 = config.precision == "bf16";

    constexpr double kBeta = 0.98; // smoothing of the loss, with bias correction
    double average = 0;
    LrSweep sweep;
    sweep.bestLr = options.minLr;
    auto &[lrs, smoothed, bestSmoothed, bestLr, stoppedEarly, step] = sweep;
    for (int epoch = 1; step < options.steps && !stoppedEarly; ++epoch) {
        BatchProducer batches(*train, normalization,
            shardForEpoch(std::int64_t(train->size()), config.seed, epoch, 0, 1), config.batchSize,
            config.augment, config.seed ^ (std::uint64_t(epoch) << 32), device.is_cuda());
        for (Batch batch = batches.next(); batch.images.defined() && step < options.steps;
             batch = batches.next()) {
            const double lr = options.minLr
                * std::pow(
                    options.maxLr / options.minLr, double(step) / double(std::max(1, options.steps - 1)));
            for (auto &group : optimizer.param_groups())
                static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
            dropGradients(optimizer);
            torch::Tensor loss;
            {
                AutocastScope autocast(bf16, device);
                const auto out = net.forward(batch.images.to(device));
                loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), batch.labels.to(device),
                    torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(config.labelSmoothing));
            }
            const double value = loss.item<double>();
            ++step;
            if (!std::isfinite(value)) {
                events.lrPoint(step, lr, value, value);
                stoppedEarly = true;
                break;
            }
            loss.backward();
            sgdStep(optimizer);
            average = kBeta * average + (1 - kBeta) * value;
            const double s = average / (1 - std::pow(kBeta, step));
            lrs.push_back(lr);
            smoothed.push_back(s);
            events.lrPoint(step, lr, value, s);
            if (s < bestSmoothed) {
                bestSmoothed = s;
                bestLr = lr;
            }
            if (step > 10 && s > 4 * bestSmoothed) {
                stoppedEarly = true;
                break;
            }
        }
    }
    if (lrs.size() < 5)
        return fail("the range test diverged within " + std::to_string(step)
            + " steps: lower --min-lr (the loss was not finite already at "
            + EventWriter::number(options.minLr) + ")");
    reportLrFound(sweep, config.batchSize, events);
    return worker::kExitFinished;
}

} // namespace scalelab::trainer

namespace scalelab::trainer {

ModelInfo describeModel(const std::string &model, bool json)
{
    ModelInfo info;
    if (worker::isModelFile(model)) {
        info.problem = checkTorchScriptModel(model.substr(worker::kModelFilePrefix.size()));
        if (!info.problem.empty())
            return info;
    }
    TrainableModel net = buildModel(model, 0, 0);
    const ModelCost cost = measureModelCost(net, torch::kCPU);
    info.text = json ? "{\"parameters\":" + std::to_string(cost.parameters)
            + ",\"gradient_bytes\":" + std::to_string(cost.gradientBytes)
            + ",\"forward_flops_per_image\":" + std::to_string(cost.forwardFlopsPerImage) + "}\n"
                     : std::to_string(cost.parameters) + "\n";
    return info;
}

common::Result<std::string> compareWeights(
    const std::string &model, const std::string &a, const std::string &b)
{
    struct Loaded {
        TrainableModel net;
        CheckpointPosition position;
    };
    auto load = [&](const std::string &dir) -> common::Result<Loaded> {
        Loaded l { buildModel(model, kDefaultBlockDropout, kDefaultDenseDropout), {} };
        torch::optim::SGD optimizer(l.net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
        std::string from, warnings;
        const auto position = loadLatestCheckpoint(
            dir, torch::kCPU, *l.net, optimizer, [&](const std::string &w) { warnings += "; " + w; }, &from);
        if (!position)
            return common::Result<Loaded>::failure("no valid checkpoint in " + dir + warnings);
        l.position = *position;
        return l;
    };
    auto first = load(a);
    if (!first)
        return common::Result<std::string>::failure(first.error());
    auto second = load(b);
    if (!second)
        return common::Result<std::string>::failure(second.error());
    double paramDiff = 0, paramMax = 0, bufferDiff = 0, bufferMax = 0;
    auto compare = [](const std::vector<torch::Tensor> &x, const std::vector<torch::Tensor> &y, double &diff,
                       double &largest) {
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            const auto u = x[i].to(torch::kDouble), v = y[i].to(torch::kDouble);
            diff = std::max(diff, (u - v).abs().max().item<double>());
            largest = std::max(largest, u.abs().max().item<double>());
        }
    };
    torch::NoGradGuard noGrad;
    const auto params = first->net->parameters(), otherParams = second->net->parameters();
    const auto buffers = first->net->buffers(), otherBuffers = second->net->buffers();
    compare(params, otherParams, paramDiff, paramMax);
    compare(buffers, otherBuffers, bufferDiff, bufferMax);
    std::ostringstream json;
    json.precision(9);
    json << "{\"tensors\":" << params.size() << ",\"max_abs_diff\":" << paramDiff
         << ",\"max_abs_weight\":" << paramMax << ",\"buffers_max_abs_diff\":" << bufferDiff
         << ",\"buffers_max_abs\":" << bufferMax << ",\"epoch_a\":" << first->position.epoch
         << ",\"step_a\":" << first->position.step << ",\"epoch_b\":" << second->position.epoch
         << ",\"step_b\":" << second->position.step << "}\n";
    return json.str();
}

} // namespace scalelab::trainer
