// The training loop: a run from its checkpoint (or the start) to its last epoch, with
// evaluation, checkpoints and events. The data loader is data_loader.h, a rank's share of
// an epoch data_shard.h, the schedule lr_schedule.h and the learning-rate rules lr_rules.h,
// divergence divergence_watch.h; the worker's other modes are in training_tools.cpp.
#include "training.h"

#include "checkpoint.h"
#include "cifar10.h"
#include "data_loader.h"
#include "data_parallel.h"
#include "data_shard.h"
#include "device.h"
#include "divergence_watch.h"
#include "event_writer.h"
#include "fused_ops.h"
#include "lr_rules.h"
#include "lr_schedule.h"
#include "model_zoo.h"
#include "noise_meter.h"
#include "seed_model.h"
#include "training_support.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace scalelab::trainer {
namespace {

constexpr std::int64_t kEvalBatch = 500;

// Ranks on other nodes hold no copy of the checkpoint that rank 0 resumed from: they
// take rank 0's position (AdaScale's progress too) and SGD momentum, so every rank
// continues one run.
void adoptRankZeroProgress(DataParallel &parallel, torch::optim::SGD &optimizer, CheckpointPosition *position)
{
    const auto &params = optimizer.param_groups().at(0).params();
    auto momentumOf = [&](const torch::Tensor &p) -> torch::optim::SGDParamState * {
        const auto it = optimizer.state().find(optimizerStateKey(p));
        return it == optimizer.state().end() ? nullptr
                                             : static_cast<torch::optim::SGDParamState *>(it->second.get());
    };
    std::vector<torch::Tensor> header { torch::tensor(
        { std::int64_t(position->epoch), position->step, std::int64_t(momentumOf(params.at(0)) != nullptr) })
                                            .to(params.at(0).device()) };
    const std::array<double, 4> noise = position->noiseAverages.value_or(std::array<double, 4> {});
    header.push_back(
        torch::tensor({ position->progress ? 1.0 : 0.0, position->progress.value_or(0.0),
                          position->noiseAverages ? 1.0 : 0.0, noise[0], noise[1], noise[2], noise[3] },
            torch::TensorOptions(torch::kDouble).device(params.at(0).device())));
    parallel.broadcastFromRankZero(header);
    position->epoch = int(header[0][0].item<std::int64_t>());
    position->step = header[0][1].item<std::int64_t>();
    const torch::Tensor received = header[1].to(torch::kCPU).contiguous();
    const double *h = received.data_ptr<double>();
    position->progress = h[0] != 0 ? std::optional(h[1]) : std::nullopt;
    position->noiseAverages
        = h[2] != 0 ? std::optional(std::array<double, 4> { h[3], h[4], h[5], h[6] }) : std::nullopt;
    if (header[0][2].item<std::int64_t>() == 0)
        return; // rank 0 has no momentum yet: a fresh start everywhere
    std::vector<torch::Tensor> momenta;
    for (const auto &p : params) {
        auto *state = momentumOf(p);
        if (!state) {
            auto created = std::make_unique<torch::optim::SGDParamState>();
            created->momentum_buffer(torch::zeros_like(p));
            state = created.get();
            optimizer.state()[optimizerStateKey(p)] = std::move(created);
        }
        momenta.push_back(state->momentum_buffer());
    }
    parallel.broadcastFromRankZero(momenta);
}

} // namespace

common::Status validate(const TrainingConfig &c)
{
    using common::Status;
    if (c.dataDir.empty())
        return Status::failure("--data-dir is required: the folder with the CIFAR-10 .bin files");
    if (c.batchSize <= 0)
        return Status::failure("--batch-size must be at least 1 (got " + std::to_string(c.batchSize) + ")");
    if (c.epochs <= 0)
        return Status::failure("--epochs must be at least 1 (got " + std::to_string(c.epochs) + ")");
    if (!(c.learningRate > 0) || !std::isfinite(c.learningRate))
        return Status::failure("--lr must be a finite number greater than 0");
    if (!(c.momentum >= 0 && c.momentum < 1))
        return Status::failure("--momentum must be in [0, 1)");
    if (!(c.weightDecay >= 0) || !std::isfinite(c.weightDecay))
        return Status::failure("--weight-decay must be a finite number, 0 or more");
    if (!worker::isLrRule(c.lrScaling))
        return Status::failure(
            "--lr-scaling must be " + worker::lrRulesText() + " (got '" + c.lrScaling + "')");
    if (c.baseBatch <= 0)
        return Status::failure("--base-batch must be at least 1");
    if (c.schedule != "cosine" && c.schedule != "constant")
        return Status::failure("--schedule must be 'cosine' or 'constant'");
    if (c.headEpochs < 0 || c.headEpochs > c.epochs)
        return Status::failure("--head-epochs must be between 0 (no fine-tuning phases) and --epochs (got "
            + std::to_string(c.headEpochs) + ")");
    if (c.headLr && !(*c.headLr > 0 && *c.headLr <= 10))
        return Status::failure("--head-lr must be a number greater than 0, at most 10");
    if ((c.headLr || !c.head.empty()) && c.headEpochs == 0)
        return Status::failure(
            "--head-lr and --head need --head-epochs K: the epochs that train the head alone");
    if (!(c.warmupEpochs < 0 || c.warmupEpochs <= c.epochs - c.headEpochs) || std::isnan(c.warmupEpochs))
        return Status::failure(c.headEpochs > 0 ? "--warmup-epochs must be between 0 and --epochs minus "
                                                  "--head-epochs (the whole-model epochs)"
                                                : "--warmup-epochs must be between 0 and --epochs");
    if (!(c.labelSmoothing >= 0 && c.labelSmoothing < 1))
        return Status::failure("--label-smoothing must be in [0, 1)");
    if (!(c.blockDropout >= 0 && c.blockDropout < 1))
        return Status::failure("--block-dropout must be in [0, 1)");
    if (!(c.denseDropout >= 0 && c.denseDropout < 1))
        return Status::failure("--dense-dropout must be in [0, 1)");
    if (c.normalizeMean.size() != c.normalizeStd.size()
        || (!c.normalizeMean.empty() && c.normalizeMean.size() != 3))
        return Status::failure(
            "--normalize-mean and --normalize-std take three comma-separated values each (red, green, blue)");
    for (std::size_t i = 0; i < c.normalizeMean.size(); ++i)
        if (!(c.normalizeMean[i] >= 0 && c.normalizeMean[i] <= 1) || !(c.normalizeStd[i] > 0 && c.normalizeStd[i] <= 1))
            return Status::failure(
                "--normalize-mean values must be in [0, 1] and --normalize-std values in (0, 1]");
    if (!(c.divergenceFactor > 1) || !std::isfinite(c.divergenceFactor))
        return Status::failure("--divergence-factor must be a number greater than 1");
    if (c.divergenceSteps < 1)
        return Status::failure("--divergence-steps must be at least 1");
    if (c.precision != "fp32" && c.precision != "bf16")
        return Status::failure("--precision must be 'fp32' or 'bf16'");
    if (const Status device = checkDevice(c.device); !device)
        return device;
    if (!c.backend.empty() && c.backend != "gloo" && c.backend != "nccl")
        return Status::failure("--backend must be 'gloo' or 'nccl'");
    if (c.backend == "nccl" && c.device != "cuda")
        return Status::failure("--backend nccl needs --device cuda (NCCL runs collectives on GPUs)");
    if (c.precision == "bf16")
        if (const Status bf16 = checkBf16(c.device); !bf16)
            return bf16;
    if (c.threads < 0)
        return Status::failure("--threads must be 0 (automatic) or more");
    if (c.worldSize < 1 || c.rank < 0 || c.rank >= c.worldSize)
        return Status::failure("--rank must be in [0, --world-size)");
    if (c.worldSize > 1 && c.rendezvous.find(':') == std::string::npos)
        return Status::failure(
            "--rendezvous HOST:PORT is required when --world-size > 1 (rank 0 hosts the TCPStore there)");
    if (c.bucketMb < 1)
        return Status::failure("--bucket-mb must be at least 1");
    if (c.collectiveTimeoutSeconds < 1)
        return Status::failure("--collective-timeout-s must be at least 1");
    if (c.checkpointEvery < 1)
        return Status::failure("--checkpoint-every must be at least 1");
    if (c.keepCheckpoints < 1 || c.keepCheckpoints > 1000)
        return Status::failure("--keep-checkpoints must be between 1 and 1000");
    if (c.resume && c.checkpointDir.empty())
        return Status::failure("--resume needs --checkpoint-dir");
    if (c.stopAfterEpoch < 0 || c.stopAfterEpoch > c.epochs)
        return Status::failure("--stop-after-epoch must be 0 (train every epoch) or between 1 and --epochs");
    return Status::success();
}

int runTraining(const TrainingConfig &config, EventWriter &events)
{
    const auto fail = [&](const std::string &message) {
        events.error(message);
        return worker::kExitFailed;
    };
    const auto failNoSpace = [&](const std::string &message, std::uint64_t needed) { // the disk failed, not the run
        events.noSpace(message, std::int64_t(needed));
        std::cerr << "scalelab-worker: " << message << std::endl;
        return worker::kExitNoSpace;
    };
    if (const common::Status valid = validate(config); !valid)
        return fail(valid.error());
    const bool reports = config.rank == 0; // one voice per run: rank 0 reports metrics

    // A loopback rendezvous means every rank shares this node's cores.
    const std::string rendezvousHost = config.rendezvous.substr(0, config.rendezvous.rfind(':'));
    const bool allRanksHere
        = config.worldSize == 1 || rendezvousHost.rfind("127.", 0) == 0 || rendezvousHost == "localhost";
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads
        = config.threads > 0 ? config.threads : std::max(1, cores / (allRanksHere ? config.worldSize : 1));
    torch::set_num_threads(threads);
    setBlasThreads(threads);
    torch::manual_seed(config.seed);

    const auto summary = cifar::inspectDataset(config.dataDir);
    if (!summary)
        return fail(summary.error());
    auto train = cifar::readSplit(config.dataDir, cifar::Split::Train, std::size_t(config.maxTrainImages));
    if (!train)
        return fail(train.error());
    auto test = cifar::readSplit(config.dataDir, cifar::Split::Test, std::size_t(config.maxTestImages));
    if (!test)
        return fail(test.error());
    const Normalization normalization = normalizationFor(config, *train);
    const auto testCount = std::int64_t(test->size());
    const auto testPixels = torch::from_blob(test->pixels.data(), { testCount, 3, 32, 32 }, torch::kUInt8);
    const auto testLabels
        = torch::from_blob(test->labels.data(), { testCount }, torch::kUInt8).to(torch::kLong);

    const torch::Device device = torchDevice(config.device);
    TrainableModel net = trainingModel(config, device, config.blockDropout, config.denseDropout);
    const auto memoryFormat = memoryFormatOf(config);

    std::unique_ptr<DataParallel> parallel = connectRanks(config);

    const std::int64_t globalBatch = std::int64_t(config.batchSize) * config.worldSize;
    const double peakLr
        = scheduledLearningRate(config.lrScaling, config.learningRate, config.baseBatch, globalBatch);
    torch::optim::SGD optimizer(net->parameters(),
        torch::optim::SGDOptions(peakLr).momentum(config.momentum).weight_decay(config.weightDecay));

    CheckpointPosition position;
    std::string resumedFrom;
    if (config.resume) {
        auto loaded = loadLatestCheckpoint(
            config.checkpointDir, device, *net, optimizer,
            [&](const std::string &warning) {
                events.warning(warning);
            },
            &resumedFrom);
        if (loaded)
            position = *loaded;
    }
    // A checkpoint that cannot fit fails the run now, not after an epoch of training.
    if (!config.checkpointDir.empty() && config.rank == 0) {
        const std::uint64_t needed = estimateCheckpointBytes(*net);
        if (const auto available = freeBytes(config.checkpointDir); available && *available < needed)
            return failNoSpace(noSpaceMessage(needed, config.checkpointDir, *available), needed);
    }
    // After loading: every rank starts from rank 0's state (weights and buffers).
    if (parallel) {
        parallel->attach(*net);
        adoptRankZeroProgress(*parallel, optimizer, &position);
    }
    // The network between the ranks, before training shares it (RunStarted.network).
    NetworkProbeReport network;
    if (parallel && config.networkProbe) {
        network.worldSize = config.worldSize;
        network.backend = parallel->backend();
        network.hosts = parallel->hosts();
        std::int64_t gradientBytes = 0; // what a step all-reduces
        for (const auto &p : net->parameters())
            if (p.requires_grad())
                gradientBytes += p.numel() * std::int64_t(p.element_size());
        for (auto &sample : parallel->probeAllReduce(gradientBytes))
            network.samples.emplace_back(sample.bytes, std::move(sample.seconds));
    }

    // Whether ranks share cores, for the scaling model (every rank takes part).
    const DataParallel::CoreShare share
        = parallel ? parallel->coreShare(threads) : DataParallel::coreShareAlone(threads);

    const std::int64_t perRank = (std::int64_t(train->size()) + config.worldSize - 1) / config.worldSize;
    const std::int64_t stepsPerEpoch = (perRank + config.batchSize - 1) / config.batchSize;
    // Fine-tuning: the head alone at a constant rate for headEpochs, then the schedule over
    // the whole-model epochs after them.
    const std::int64_t headSteps = stepsPerEpoch * config.headEpochs;
    const double headLr = !config.headLr
        ? peakLr
        : scheduledLearningRate(config.lrScaling, *config.headLr, config.baseBatch, globalBatch);
    std::optional<FinetuneHead> head;
    if (config.headEpochs > 0) {
        auto found = finetuneHead(*net, config.head);
        if (!found)
            return fail(found.error());
        head = std::move(*found);
    }
    const std::int64_t totalSteps = stepsPerEpoch * config.epochs - headSteps;
    const double warmupEpochs = warmupEpochsOf(config);
    const auto warmupSteps = std::int64_t(std::llround(warmupEpochs * double(stepsPerEpoch)));
    const LrSchedule schedule { .peak = peakLr,
        .warmupSteps = warmupSteps,
        .totalSteps = std::max<std::int64_t>(1, totalSteps),
        .constant = config.schedule == "constant" };
    // AdaScale (lr_rules.h): each step's rate is the schedule's at the run's progress P
    // times the gain r, the head's times r too. P counts the schedule's steps only; a
    // checkpoint older than it resumes with the steps taken worth the linear rule's, S each.
    // A resumed run's meter takes the checkpoint's averages, and r goes on from them.
    const bool adaScale = config.lrScaling == "adascale";
    const double scale = double(globalBatch) / double(config.baseBatch);
    AdaScaleProgress progress(scale,
        position.progress.value_or(double(std::max<std::int64_t>(0, position.step - headSteps)) * scale));
    double gain = 1.0; // the next step's r; 1 for the other rules and until the meter has samples
    const auto learningRateAt = [&](std::int64_t step) {
        if (adaScale)
            return step < headSteps ? headLr * gain : progress.learningRate(schedule, gain);
        return step < headSteps ? headLr : schedule.at(step - headSteps);
    };

    // Counted on the live model: building another one would draw from the generator a
    // checkpoint just restored, and a resumed run would no longer match.
    std::int64_t parameterCount = 0;
    for (const auto &p : net->parameters())
        parameterCount += p.numel();
    const ModelCost cost = reports ? measureModelCost(net, device) : ModelCost {};
    if (reports)
        events.started(config,
            { .synthetic = summary->synthetic,
                .trainImages = std::int64_t(train->size()),
                .testImages = testCount,
                .parameters = parameterCount,
                .gradientBytes = cost.gradientBytes,
                .forwardFlopsPerImage = cost.forwardFlopsPerImage,
                .threads = threads,
                .device = device.str(),
                .stepsPerEpoch = stepsPerEpoch,
                .globalBatch = globalBatch,
                .peakLr = peakLr,
                .resumedEpoch = position.epoch,
                .resumedFrom = resumedFrom,
                .warmupEpochs = warmupEpochs,
                .warmupSteps = warmupSteps,
                .normalizeMean = { normalization.mean[0], normalization.mean[1], normalization.mean[2] },
                .normalizeStd = { normalization.std[0], normalization.std[1], normalization.std[2] },
                .normalizeMeasured = normalization.measured,
                .torchVersion = TORCH_VERSION,
                .blas = blasInUse(),
                .compiler = compilerName(),
                .finetuneHead = head ? head->name : std::string(),
                .network = std::move(network),
                .machines = share.machines,
                .busiestMachineThreads = share.threads,
                .busiestMachineCores = share.cores });

    DivergenceWatch divergence(config.divergenceFactor, config.divergenceSteps);
    const auto runStart = Clock::now();
    std::int64_t step = position.step;
    std::int64_t imagesSeen = 0;
    double trainSeconds = 0;
    double bestAccuracy = 0, lastAccuracy = 0;
    const bool bf16 = config.precision == "bf16";
    // Where rank 0's step time goes (as bench's breakdown): the all-reduce time backward's
    // compute did not hide is from the last gradient produced to backward's return.
    // Every rank times its steps (the epoch's anatomy compares them), so every rank hooks.
    std::atomic<Clock::rep> lastGradient { 0 };
    // The gradient noise scale (noise_meter.h): each rank's own gradient from the same hooks,
    // before the time is taken, so that its cost counts as backward's compute.
    // AdaScale's gain sets every rank's rate: every rank keeps the same averages.
    NoiseMeter noise(config.worldSize, 0.99, adaScale);
    // A resumed run continues its averages (and AdaScale its gain) where the checkpoint left them.
    if (position.noiseAverages) {
        noise.restoreAverages(*position.noiseAverages);
        if (adaScale) {
            const NoiseReport measured = noise.report();
            gain = adaScaleGain(
                measured.gradSquared, measured.traceSigma, measured.samples, config.baseBatch, scale);
        }
    }
    if (parallel)
        for (auto &p : net->parameters())
            p.register_hook([&lastGradient, &noise](const at::TensorBase &gradient) {
                noise.addLocal(gradient);
                const Clock::rep now = Clock::now().time_since_epoch().count();
                Clock::rep seen = lastGradient.load();
                while (seen < now && !lastGradient.compare_exchange_weak(seen, now)) { }
            });
    // A run told to stop early trains its schedule's first epochs only; one resumed at or
    // past that point has nothing left to train and finishes at once.
    const int lastEpoch = lastEpochOf(config);
    bool headOnly = false;
    for (int epoch = position.epoch + 1; epoch <= lastEpoch; ++epoch) {
        if (head && (epoch == position.epoch + 1 || (epoch <= config.headEpochs) != headOnly)) {
            // A phase begins (or a resumed run continues in one): the parameters that train
            // change, and the reducer follows them on every rank.
            headOnly = epoch <= config.headEpochs;
            const auto training = trainOnly(*net, headOnly ? &*head : nullptr);
            if (parallel)
                parallel->reduceGradientsOf(training);
            if (reports)
                std::cerr << "scalelab-worker: epoch " << epoch << ": "
                          << (headOnly ? "fine-tuning phase 1, the head (" + head->name + ") alone"
                                       : std::string("fine-tuning phase 2, the whole model"))
                          << std::endl;
        }
        const auto epochStart = Clock::now();
        BatchProducer batches(*train, normalization,
            shardForEpoch(std::int64_t(train->size()), config.seed, epoch, config.rank, config.worldSize),
            config.batchSize, config.augment,
            config.seed ^ (std::uint64_t(epoch) << 32) ^ (std::uint64_t(config.rank) << 48),
            device.is_cuda());
        // Statistics stay on the model's device: NCCL reduces CUDA tensors only.
        torch::Tensor lossSum = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
        torch::Tensor correct = torch::zeros({}, torch::TensorOptions(torch::kLong).device(device));
        std::int64_t seen = 0;
        RankAnatomy anatomy { .rank = config.rank };
        auto dataStart = Clock::now();
        for (Batch batch = batches.next(); batch.images.defined(); batch = batches.next()) {
            const auto stepStart = Clock::now();
            const double dataSeconds = std::chrono::duration<double>(stepStart - dataStart).count();
            const double lr = learningRateAt(step);
            for (auto &group : optimizer.param_groups())
                static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
            // The same tensors on the CPU; asynchronous copies from pinned memory on a GPU.
            const auto images = batch.images.to(device, /*non_blocking=*/true);
            const auto labels = batch.labels.to(device, /*non_blocking=*/true);
            const auto x = config.channelsLast ? images.contiguous(memoryFormat) : images;
            dropGradients(optimizer);
            if (parallel)
                parallel->beforeForward();
            torch::Tensor out, loss;
            {
                AutocastScope autocast(bf16, device);
                out = net.forward(x);
                loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), labels,
                    torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(config.labelSmoothing));
            }
            const auto forwardEnd = Clock::now();
            if (parallel)
                parallel->beforeBackward();
            loss.backward();
            const auto backwardEnd = Clock::now();
            // Backward's compute ends with its last gradient; the rest is all-reduce it did not hide.
            const auto lastGradientAt = Clock::time_point(Clock::duration(lastGradient.load()));
            const bool overlapped = parallel && lastGradientAt > forwardEnd && lastGradientAt <= backwardEnd;
            const double exposedSeconds
                = overlapped ? std::chrono::duration<double>(backwardEnd - lastGradientAt).count() : 0.0;
            const double backwardSeconds
                = std::chrono::duration<double>(backwardEnd - forwardEnd).count() - exposedSeconds;
            // The gradients' norm is queued before the optimizer step changes nothing it reads,
            // and read with the loss: one wait for the device per step, as before. One
            // multi-tensor norm: on a GPU a few kernels, not one per parameter.
            torch::Tensor gradNorm;
            if (reports) {
                torch::NoGradGuard noGrad;
                std::vector<torch::Tensor> grads;
                for (const auto &p : net->parameters())
                    if (p.grad().defined())
                        grads.push_back(p.grad().detach().to(torch::kFloat));
                if (!grads.empty())
                    gradNorm = torch::stack(at::_foreach_norm(grads)).norm();
            }
            noise.endStep(parallel.get(), net->parameters(), images.size(0), gradNorm, reports);
            sgdStep(optimizer);
            const auto n = images.size(0);
            const double lossValue = loss.item<double>();
            if (const common::Status healthy = divergence.observe(step + 1, lossValue); !healthy) {
                events.diverged(healthy.error(), step + 1);
                std::cerr << "scalelab-worker: " << healthy.error() << std::endl;
                return worker::kExitDiverged;
            }
            lossSum += lossValue * double(n);
            correct += out.argmax(1).eq(labels).sum();
            seen += n;
            ++step;
            imagesSeen += n * config.worldSize;
            const auto stepEnd = Clock::now();
            const double stepSeconds = std::chrono::duration<double>(stepEnd - stepStart).count();
            const double forwardSeconds = std::chrono::duration<double>(forwardEnd - stepStart).count();
            const double optimizerSeconds = std::chrono::duration<double>(stepEnd - backwardEnd).count();
            anatomy.steps += 1;
            anatomy.dataSeconds += dataSeconds;
            anatomy.forwardSeconds += forwardSeconds;
            anatomy.backwardSeconds += backwardSeconds;
            anatomy.exposedAllReduceSeconds += exposedSeconds;
            anatomy.optimizerSeconds += optimizerSeconds;
            if (reports) {
                events.step({ .epoch = epoch,
                    .step = step,
                    .loss = lossValue,
                    .lr = lr,
                    .imagesPerSecond = double(n * config.worldSize) / stepSeconds,
                    .elapsedSeconds = secondsSince(runStart),
                    .gradNorm = gradNorm.defined() ? gradNorm.item<double>() : 0.0,
                    .stepSeconds = stepSeconds,
                    .exposedAllReduceSeconds = exposedSeconds,
                    .dataSeconds = dataSeconds,
                    .forwardSeconds = forwardSeconds,
                    .backwardSeconds = backwardSeconds,
                    .optimizerSeconds = optimizerSeconds,
                    .noise = noise.report(),
                    .lrGain = gain });
            }
            if (step > headSteps)
                progress.advance(adaScale ? gain : scale);
            // The next step's gain, from the averages up to this step: one step late
            // (AdaScale proper takes a step's gain from its own gradient), because the host
            // reads the averages here, where it has waited for the device already
            // (loss.item()), and not before the update, where a GPU would idle.
            if (adaScale) {
                const NoiseReport measured = noise.report();
                gain = adaScaleGain(
                    measured.gradSquared, measured.traceSigma, measured.samples, config.baseBatch, scale);
            }
            dataStart = Clock::now();
        }
        const double epochTrainSeconds = secondsSince(epochStart);
        trainSeconds += epochTrainSeconds;

        // Train statistics over all ranks, then the test split, each image exactly once.
        const auto statsOptions = torch::TensorOptions(torch::kDouble).device(device);
        torch::Tensor trainStats = torch::stack(
            { lossSum, correct.to(torch::kDouble), torch::tensor(double(seen), statsOptions) });
        torch::Tensor testStats = torch::zeros({ 3 }, statsOptions);
        // Every rank's anatomy, one row each, summed: rank 0 sees all of them.
        torch::Tensor anatomies = torch::zeros({ config.worldSize, 6 }, torch::kDouble);
        for (const auto &[column, value] : { std::pair { 0, double(anatomy.steps) },
                 { 1, anatomy.dataSeconds }, { 2, anatomy.forwardSeconds }, { 3, anatomy.backwardSeconds },
                 { 4, anatomy.exposedAllReduceSeconds }, { 5, anatomy.optimizerSeconds } })
            anatomies[config.rank][column] = value;
        anatomies = anatomies.to(device);
        const auto evaluationStart = Clock::now();
        if (parallel)
            parallel->syncBuffers();
        {
            torch::NoGradGuard noGrad;
            net->eval();
            // Rank 0 says it is alive while it evaluates: the agent takes a run with no
            // event for a while as stalled.
            auto lastProgress = Clock::now();
            for (std::int64_t begin = config.rank * kEvalBatch; begin < testCount;
                 begin += kEvalBatch * config.worldSize) {
                if (reports && secondsSince(lastProgress) >= 2.0) {
                    lastProgress = Clock::now();
                    events.evaluating(epoch, begin / config.worldSize, testCount / config.worldSize);
                }
                const auto end = std::min(begin + kEvalBatch, testCount);
                auto xs = normalise(testPixels.slice(0, begin, end), normalization).to(device);
                if (config.channelsLast)
                    xs = xs.contiguous(memoryFormat);
                const auto ys = testLabels.slice(0, begin, end).to(device);
                AutocastScope autocast(bf16, device);
                const auto logits = net.forward(xs).to(torch::kFloat);
                testStats[0] += torch::nn::functional::cross_entropy(
                    logits, ys, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                                    .item<double>();
                testStats[1] += logits.argmax(1).eq(ys).sum().item<std::int64_t>();
                testStats[2] += double(end - begin);
            }
            net->train();
        }
        const double evaluationSeconds = secondsSince(evaluationStart);
        if (parallel) {
            parallel->allReduceSum(trainStats);
            parallel->allReduceSum(testStats);
            parallel->allReduceSum(anatomies);
        }
        std::vector<RankAnatomy> ranks;
        if (reports) {
            const auto rows = anatomies.to(torch::kCPU);
            for (int r = 0; r < config.worldSize; ++r)
                ranks.push_back({ .rank = r,
                    .steps = std::int64_t(rows[r][0].item<double>()),
                    .dataSeconds = rows[r][1].item<double>(),
                    .forwardSeconds = rows[r][2].item<double>(),
                    .backwardSeconds = rows[r][3].item<double>(),
                    .exposedAllReduceSeconds = rows[r][4].item<double>(),
                    .optimizerSeconds = rows[r][5].item<double>() });
        }
        const double trainN = std::max(1.0, trainStats[2].item<double>());
        const double testN = std::max(1.0, testStats[2].item<double>());
        lastAccuracy = testStats[1].item<double>() / testN;
        bestAccuracy = std::max(bestAccuracy, lastAccuracy);
        if (reports)
            events.epoch({ .epoch = epoch,
                .trainLoss = trainStats[0].item<double>() / trainN,
                .trainAccuracy = trainStats[1].item<double>() / trainN,
                .testLoss = testStats[0].item<double>() / testN,
                .testAccuracy = lastAccuracy,
                .testImages = std::int64_t(testN),
                .epochSeconds = secondsSince(epochStart),
                .imagesPerSecond = trainN / epochTrainSeconds,
                .elapsedSeconds = secondsSince(runStart),
                .trainSeconds = epochTrainSeconds,
                .evaluationSeconds = evaluationSeconds,
                .ranks = std::move(ranks),
                .noise = noise.report() });

        // The last epoch always leaves a checkpoint: where a stopped run is resumed from.
        const bool checkpointNow = !config.checkpointDir.empty()
            && (epoch % config.checkpointEvery == 0 || epoch == lastEpoch);
        if (checkpointNow && config.rank == 0) {
            const auto checkpointStart = Clock::now();
            const SavedCheckpoint saved
                = saveCheckpoint(config.checkpointDir, { epoch, step, progress.progress(), noise.averages() },
                    device, *net, optimizer, config.keepCheckpoints);
            if (!saved.ok())
                return saved.noSpace ? failNoSpace(saved.error, saved.bytesNeeded) : fail(saved.error);
            events.checkpoint(epoch, step, saved.path, secondsSince(checkpointStart));
        }
        if (checkpointNow && parallel)
            parallel->barrier(); // nobody runs ahead of a checkpoint that may be resumed
    }
    events.finished({ .finalTestAccuracy = lastAccuracy,
        .bestTestAccuracy = bestAccuracy,
        .wallSeconds = secondsSince(runStart),
        .imagesPerSecond = trainSeconds > 0 ? double(imagesSeen) / trainSeconds : 0.0,
        .epochsCompleted = std::max(position.epoch, lastEpoch),
        .weightsSha256 = weightsDigest(*net) });
    return worker::kExitFinished;
}

} // namespace scalelab::trainer
