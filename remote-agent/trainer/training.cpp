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

// The dropout draws of micro-batch `slot` at optimizer step `step` (splitmix64 of the
// three): a function of the step's work, not of the rank that does it, so that a step
// on K ranks, or on fewer ranks accumulating, draws the same masks, and so that ranks
// draw different ones (each rank seeded alike would drop the same units everywhere).
std::uint64_t microBatchSeed(std::uint64_t seed, std::int64_t step, int slot)
{
    std::uint64_t z
        = seed + 0x9E3779B97F4A7C15ULL * (std::uint64_t(step) * 1'000'003ULL + std::uint64_t(slot) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (z ^ (z >> 31)) >> 1; // torch's seeds are non-negative int64
}

// One epoch's sums on this rank: the train loss and hits on the model's device (NCCL reduces
// CUDA tensors only), the images, and where the step time went.
struct EpochTally {
    torch::Tensor lossSum;
    torch::Tensor correct;
    std::int64_t seen = 0;
    RankAnatomy anatomy;
};

// One step's parts in seconds (as bench's breakdown), summed over its micro-batches.
struct StepTimes {
    double data = 0;
    double forward = 0;
    double backward = 0; // backward's compute
    double exposed = 0; // the all-reduce time backward's compute did not hide
    double optimizer = 0;
};

// What the test split says after an epoch, summed over the ranks.
struct Evaluation {
    double trainLoss = 0, trainAccuracy = 0, testLoss = 0, testAccuracy = 0;
    std::int64_t testImages = 0;
    double imagesTrained = 0;
    double seconds = 0;
    std::vector<RankAnatomy> ranks; // rank 0 only
};

// One rank's run from its checkpoint (or the start) to its last epoch, in the order
// run() calls its parts: prepare (data, model, process group, checkpoint, schedule),
// then per epoch train (steps of K micro-batches), evaluate, commit (checkpoint).
class TrainingRun {
public:
    TrainingRun(const TrainingConfig &config, EventWriter &events)
        : m_config(config)
        , m_events(events)
        , m_reports(config.rank == 0) // one voice per run: rank 0 reports metrics
        , m_batchesPerStep(batchesPerStepOf(config))
        , m_divergence(config.divergenceFactor, config.divergenceSteps)
    {
        for (int slot = config.rank; slot < m_batchesPerStep; slot += config.worldSize)
            m_slots.push_back(slot);
        // The loss of each micro-batch, scaled so that the reducer's mean over the ranks
        // of their sums is the mean over the step's K micro-batches.
        m_lossScale = double(config.worldSize) / double(m_batchesPerStep);
    }

    int run();

private:
    int fail(const std::string &message)
    {
        m_events.error(message);
        return worker::kExitFailed;
    }
    int failNoSpace(const std::string &message, std::uint64_t needed) // the disk failed, not the run
    {
        m_events.noSpace(message, std::int64_t(needed));
        std::cerr << "scalelab-worker: " << message << std::endl;
        return worker::kExitNoSpace;
    }

    std::optional<int> loadData();
    std::optional<int> prepareModel();
    NetworkProbeReport probeNetwork();
    std::optional<int> planSchedule();
    void reportStarted(NetworkProbeReport network);
    void watchGradients();
    void enterPhase(int epoch);
    std::optional<int> trainEpoch(int epoch, EpochTally &tally);
    std::optional<int> trainStep(
        int epoch, const std::vector<Batch> &micro, StepTimes times, EpochTally &tally);
    double forwardBackward(
        const std::vector<Batch> &micro, StepTimes &times, EpochTally &tally, std::int64_t *imagesPerBatch);
    Evaluation evaluate(int epoch, const EpochTally &tally);
    std::optional<int> commit(int epoch, int lastEpoch);
    double learningRateAt(std::int64_t step) const;

    const TrainingConfig &m_config;
    EventWriter &m_events;
    const bool m_reports;
    const int m_batchesPerStep; // K
    std::vector<int> m_slots; // this rank's micro-batches of each step
    double m_lossScale = 1;

    // prepare: the data
    int m_threads = 1;
    bool m_synthetic = false;
    std::optional<cifar::Images> m_train, m_test;
    Normalization m_normalization {};
    torch::Tensor m_testPixels, m_testLabels;
    // prepare: the model and the process group
    torch::Device m_device { torch::kCPU };
    TrainableModel m_net;
    at::MemoryFormat m_memoryFormat = at::MemoryFormat::Contiguous;
    std::unique_ptr<DataParallel> m_parallel;
    std::unique_ptr<torch::optim::SGD> m_optimizer;
    CheckpointPosition m_position;
    std::string m_resumedFrom;
    // prepare: the schedule
    std::int64_t m_globalBatch = 0;
    double m_peakLr = 0;
    std::int64_t m_stepsPerEpoch = 0;
    std::int64_t m_headSteps = 0;
    double m_headLr = 0;
    std::optional<FinetuneHead> m_head;
    LrSchedule m_schedule {};
    double m_warmupEpochs = 0;
    bool m_adaScale = false;
    double m_scale = 1; // global batch / base batch
    std::optional<AdaScaleProgress> m_progress;
    double m_gain = 1.0; // the next step's r; 1 for the other rules and until the meter has samples
    std::unique_ptr<NoiseMeter> m_noise;
    // training
    DivergenceWatch m_divergence;
    Clock::time_point m_runStart;
    std::atomic<Clock::rep> m_lastGradient { 0 };
    std::int64_t m_step = 0;
    std::int64_t m_imagesSeen = 0;
    double m_trainSeconds = 0;
    double m_bestAccuracy = 0, m_lastAccuracy = 0;
    bool m_headOnly = false;
};

int TrainingRun::run()
{
    if (const common::Status valid = validate(m_config); !valid)
        return fail(valid.error());
    for (auto part : { &TrainingRun::loadData, &TrainingRun::prepareModel, &TrainingRun::planSchedule })
        if (const std::optional<int> exit = (this->*part)())
            return *exit;
    reportStarted(m_parallel && m_config.networkProbe ? probeNetwork() : NetworkProbeReport {});
    watchGradients();
    m_runStart = Clock::now();
    m_step = m_position.step;
    // A run told to stop early trains its schedule's first epochs only; one resumed at or
    // past that point has nothing left to train and finishes at once.
    const int lastEpoch = lastEpochOf(m_config);
    for (int epoch = m_position.epoch + 1; epoch <= lastEpoch; ++epoch) {
        enterPhase(epoch);
        const auto epochStart = Clock::now();
        EpochTally tally;
        if (const std::optional<int> exit = trainEpoch(epoch, tally))
            return *exit;
        const double epochTrainSeconds = secondsSince(epochStart);
        m_trainSeconds += epochTrainSeconds;
        Evaluation e = evaluate(epoch, tally);
        m_lastAccuracy = e.testAccuracy;
        m_bestAccuracy = std::max(m_bestAccuracy, e.testAccuracy);
        if (m_reports)
            m_events.epoch({ .epoch = epoch,
                .trainLoss = e.trainLoss,
                .trainAccuracy = e.trainAccuracy,
                .testLoss = e.testLoss,
                .testAccuracy = e.testAccuracy,
                .testImages = e.testImages,
                .epochSeconds = secondsSince(epochStart),
                .imagesPerSecond = e.imagesTrained / epochTrainSeconds,
                .elapsedSeconds = secondsSince(m_runStart),
                .trainSeconds = epochTrainSeconds,
                .evaluationSeconds = e.seconds,
                .ranks = std::move(e.ranks),
                .noise = m_noise->report() });
        if (const std::optional<int> exit = commit(epoch, lastEpoch))
            return *exit;
    }
    m_events.finished({ .finalTestAccuracy = m_lastAccuracy,
        .bestTestAccuracy = m_bestAccuracy,
        .wallSeconds = secondsSince(m_runStart),
        .imagesPerSecond = m_trainSeconds > 0 ? double(m_imagesSeen) / m_trainSeconds : 0.0,
        .epochsCompleted = std::max(m_position.epoch, lastEpoch),
        .weightsSha256 = weightsDigest(*m_net) });
    return worker::kExitFinished;
}

// Threads, the training and test splits and their normalisation.
std::optional<int> TrainingRun::loadData()
{
    // A loopback rendezvous means every rank shares this node's cores.
    const std::string rendezvousHost = m_config.rendezvous.substr(0, m_config.rendezvous.rfind(':'));
    const bool allRanksHere
        = m_config.worldSize == 1 || rendezvousHost.rfind("127.", 0) == 0 || rendezvousHost == "localhost";
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    m_threads = m_config.threads > 0 ? m_config.threads
                                     : std::max(1, cores / (allRanksHere ? m_config.worldSize : 1));
    torch::set_num_threads(m_threads);
    setBlasThreads(m_threads);
    torch::manual_seed(m_config.seed);

    const auto summary = cifar::inspectDataset(m_config.dataDir);
    if (!summary)
        return fail(summary.error());
    m_synthetic = summary->synthetic;
    auto train
        = cifar::readSplit(m_config.dataDir, cifar::Split::Train, std::size_t(m_config.maxTrainImages));
    if (!train)
        return fail(train.error());
    auto test = cifar::readSplit(m_config.dataDir, cifar::Split::Test, std::size_t(m_config.maxTestImages));
    if (!test)
        return fail(test.error());
    m_train = std::move(*train);
    m_test = std::move(*test);
    m_normalization = normalizationFor(m_config, *m_train);
    const auto testCount = std::int64_t(m_test->size());
    m_testPixels = torch::from_blob(m_test->pixels.data(), { testCount, 3, 32, 32 }, torch::kUInt8);
    m_testLabels = torch::from_blob(m_test->labels.data(), { testCount }, torch::kUInt8).to(torch::kLong);
    return std::nullopt;
}

// The model, the process group, the optimizer and the checkpoint resumed from; every rank
// then holds rank 0's state.
std::optional<int> TrainingRun::prepareModel()
{
    m_device = torchDevice(m_config.device);
    m_net = trainingModel(m_config, m_device, m_config.blockDropout, m_config.denseDropout);
    m_memoryFormat = memoryFormatOf(m_config);
    m_parallel = connectRanks(m_config);

    m_globalBatch = std::int64_t(m_config.batchSize) * m_batchesPerStep;
    m_peakLr
        = scheduledLearningRate(m_config.lrScaling, m_config.learningRate, m_config.baseBatch, m_globalBatch);
    m_optimizer = std::make_unique<torch::optim::SGD>(m_net->parameters(),
        torch::optim::SGDOptions(m_peakLr).momentum(m_config.momentum).weight_decay(m_config.weightDecay));
    if (m_config.resume) {
        auto loaded = loadLatestCheckpoint(
            m_config.checkpointDir, m_device, *m_net, *m_optimizer,
            [&](const std::string &warning) { m_events.warning(warning); }, &m_resumedFrom);
        if (loaded)
            m_position = *loaded;
    }
    // A checkpoint that cannot fit fails the run now, not after an epoch of training.
    if (!m_config.checkpointDir.empty() && m_config.rank == 0) {
        const std::uint64_t needed = estimateCheckpointBytes(*m_net);
        if (const auto available = freeBytes(m_config.checkpointDir); available && *available < needed)
            return failNoSpace(noSpaceMessage(needed, m_config.checkpointDir, *available), needed);
    }
    // After loading: every rank starts from rank 0's state (weights and buffers).
    if (m_parallel) {
        m_parallel->attach(*m_net);
        adoptRankZeroProgress(*m_parallel, *m_optimizer, &m_position);
    }
    return std::nullopt;
}

// The network between the ranks, before training shares it (RunStarted.network).
NetworkProbeReport TrainingRun::probeNetwork()
{
    NetworkProbeReport network;
    network.worldSize = m_config.worldSize;
    network.backend = m_parallel->backend();
    network.hosts = m_parallel->hosts();
    std::int64_t gradientBytes = 0; // what a step all-reduces
    for (const auto &p : m_net->parameters())
        if (p.requires_grad())
            gradientBytes += p.numel() * std::int64_t(p.element_size());
    for (auto &sample : m_parallel->probeAllReduce(gradientBytes))
        network.samples.emplace_back(sample.bytes, std::move(sample.seconds));
    return network;
}

// Steps per epoch, fine-tuning's head, the learning-rate schedule and rule, and the noise
// meter (with the averages a resumed run goes on from).
std::optional<int> TrainingRun::planSchedule()
{
    // Every micro-batch's shard is as long (data_shard.h pads the epoch to a multiple of K).
    const std::int64_t perSlot = (std::int64_t(m_train->size()) + m_batchesPerStep - 1) / m_batchesPerStep;
    m_stepsPerEpoch = (perSlot + m_config.batchSize - 1) / m_config.batchSize;
    // Fine-tuning: the head alone at a constant rate for headEpochs, then the schedule over
    // the whole-model epochs after them.
    m_headSteps = m_stepsPerEpoch * m_config.headEpochs;
    m_headLr = !m_config.headLr
        ? m_peakLr
        : scheduledLearningRate(m_config.lrScaling, *m_config.headLr, m_config.baseBatch, m_globalBatch);
    if (m_config.headEpochs > 0) {
        auto found = finetuneHead(*m_net, m_config.head);
        if (!found)
            return fail(found.error());
        m_head = std::move(*found);
    }
    const std::int64_t totalSteps = m_stepsPerEpoch * m_config.epochs - m_headSteps;
    m_warmupEpochs = warmupEpochsOf(m_config);
    m_schedule = { .peak = m_peakLr,
        .warmupSteps = std::int64_t(std::llround(m_warmupEpochs * double(m_stepsPerEpoch))),
        .totalSteps = std::max<std::int64_t>(1, totalSteps),
        .constant = m_config.schedule == "constant" };
    // AdaScale (lr_rules.h): each step's rate is the schedule's at the run's progress P
    // times the gain r, the head's times r too. P counts the schedule's steps only; a
    // checkpoint older than it resumes with the steps taken worth the linear rule's, S each.
    // A resumed run's meter takes the checkpoint's averages, and r goes on from them.
    m_adaScale = m_config.lrScaling == "adascale";
    m_scale = double(m_globalBatch) / double(m_config.baseBatch);
    m_progress.emplace(m_scale,
        m_position.progress.value_or(
            double(std::max<std::int64_t>(0, m_position.step - m_headSteps)) * m_scale));
    // The gradient noise scale (noise_meter.h): AdaScale's gain sets every rank's rate, so
    // every rank keeps the same averages.
    m_noise = std::make_unique<NoiseMeter>(m_batchesPerStep, 0.99, m_adaScale);
    if (m_position.noiseAverages) {
        m_noise->restoreAverages(*m_position.noiseAverages);
        if (m_adaScale) {
            const NoiseReport measured = m_noise->report();
            m_gain = adaScaleGain(
                measured.gradSquared, measured.traceSigma, measured.samples, m_config.baseBatch, m_scale);
        }
    }
    return std::nullopt;
}

double TrainingRun::learningRateAt(std::int64_t step) const
{
    if (m_adaScale)
        return step < m_headSteps ? m_headLr * m_gain : m_progress->learningRate(m_schedule, m_gain);
    return step < m_headSteps ? m_headLr : m_schedule.at(step - m_headSteps);
}

void TrainingRun::reportStarted(NetworkProbeReport network)
{
    // Whether ranks share cores, for the scaling model (every rank takes part).
    const DataParallel::CoreShare share
        = m_parallel ? m_parallel->coreShare(m_threads) : DataParallel::coreShareAlone(m_threads);
    if (!m_reports)
        return;
    // Counted on the live model: building another one would draw from the generator a
    // checkpoint just restored, and a resumed run would no longer match.
    std::int64_t parameterCount = 0;
    for (const auto &p : m_net->parameters())
        parameterCount += p.numel();
    const ModelCost cost = measureModelCost(m_net, m_device);
    const Normalization &n = m_normalization;
    m_events.started(m_config,
        { .synthetic = m_synthetic,
            .trainImages = std::int64_t(m_train->size()),
            .testImages = std::int64_t(m_test->size()),
            .parameters = parameterCount,
            .gradientBytes = cost.gradientBytes,
            .forwardFlopsPerImage = cost.forwardFlopsPerImage,
            .threads = m_threads,
            .device = m_device.str(),
            .stepsPerEpoch = m_stepsPerEpoch,
            .globalBatch = m_globalBatch,
            .batchesPerStep = m_batchesPerStep,
            .peakLr = m_peakLr,
            .resumedEpoch = m_position.epoch,
            .resumedFrom = m_resumedFrom,
            .warmupEpochs = m_warmupEpochs,
            .warmupSteps = m_schedule.warmupSteps,
            .normalizeMean = { n.mean[0], n.mean[1], n.mean[2] },
            .normalizeStd = { n.std[0], n.std[1], n.std[2] },
            .normalizeMeasured = n.measured,
            .torchVersion = TORCH_VERSION,
            .blas = blasInUse(),
            .compiler = compilerName(),
            .finetuneHead = m_head ? m_head->name : std::string(),
            .network = std::move(network),
            .machines = share.machines,
            .busiestMachineThreads = share.threads,
            .busiestMachineCores = share.cores });
}

// Where rank 0's step time goes (as bench's breakdown): the all-reduce time backward's
// compute did not hide is from the last gradient produced to backward's return. Every rank
// times its steps (the epoch's anatomy compares them), so every rank hooks. The noise meter
// takes each micro-batch's own gradient from the same hooks, before the time is taken, so
// that its cost counts as backward's compute.
void TrainingRun::watchGradients()
{
    if (!m_parallel && m_batchesPerStep == 1)
        return; // one rank, one batch: the meter's differenced estimator reads the step's gradient
    for (auto &p : m_net->parameters())
        p.register_hook([this](const at::TensorBase &gradient) {
            m_noise->addLocal(gradient);
            const Clock::rep now = Clock::now().time_since_epoch().count();
            Clock::rep seen = m_lastGradient.load();
            while (seen < now && !m_lastGradient.compare_exchange_weak(seen, now)) { }
        });
}

// A phase begins (or a resumed run continues in one): the parameters that train change, and
// the reducer follows them on every rank.
void TrainingRun::enterPhase(int epoch)
{
    if (!m_head || (epoch != m_position.epoch + 1 && (epoch <= m_config.headEpochs) == m_headOnly))
        return;
    m_headOnly = epoch <= m_config.headEpochs;
    const auto training = trainOnly(*m_net, m_headOnly ? &*m_head : nullptr);
    if (m_parallel)
        m_parallel->reduceGradientsOf(training);
    if (m_reports)
        std::cerr << "scalelab-worker: epoch " << epoch << ": "
                  << (m_headOnly ? "fine-tuning phase 1, the head (" + m_head->name + ") alone"
                                 : std::string("fine-tuning phase 2, the whole model"))
                  << std::endl;
}

std::optional<int> TrainingRun::trainEpoch(int epoch, EpochTally &tally)
{
    // One producer per micro-batch of a step, each its own shard of the epoch and its own
    // augmentation stream (by its slot, not by the rank that runs it).
    std::vector<std::unique_ptr<BatchProducer>> producers;
    for (const int slot : m_slots)
        producers.push_back(std::make_unique<BatchProducer>(*m_train, m_normalization,
            shardForEpoch(std::int64_t(m_train->size()), m_config.seed, epoch, slot, m_batchesPerStep),
            m_config.batchSize, m_config.augment,
            m_config.seed ^ (std::uint64_t(epoch) << 32) ^ (std::uint64_t(slot) << 48), m_device.is_cuda()));
    tally.lossSum = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(m_device));
    tally.correct = torch::zeros({}, torch::TensorOptions(torch::kLong).device(m_device));
    tally.anatomy.rank = m_config.rank;
    for (;;) {
        const auto dataStart = Clock::now();
        std::vector<Batch> micro;
        for (auto &producer : producers)
            micro.push_back(producer->next());
        if (!micro.front().images.defined())
            return std::nullopt; // every shard is as long: all end together
        const StepTimes times { .data = secondsSince(dataStart) };
        if (const std::optional<int> exit = trainStep(epoch, micro, times, tally))
            return exit;
    }
}

// One optimizer step: forward and backward of this rank's micro-batches (the reducer waits
// for the last, whose backward all-reduces the summed gradients), the noise scale, the
// update, and rank 0's step event.
std::optional<int> TrainingRun::trainStep(
    int epoch, const std::vector<Batch> &micro, StepTimes times, EpochTally &tally)
{
    const auto stepStart = Clock::now()
        - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(times.data));
    const double lr = learningRateAt(m_step);
    for (auto &group : m_optimizer->param_groups())
        static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
    dropGradients(*m_optimizer);
    std::int64_t n = 0; // images of one micro-batch
    const double lossValue = forwardBackward(micro, times, tally, &n);
    const auto backwardEnd = Clock::now();
    // The gradients' norm is queued before the optimizer step changes nothing it reads, and
    // read with the loss: one wait for the device per step. One multi-tensor norm: on a GPU
    // a few kernels, not one per parameter.
    torch::Tensor gradNorm;
    if (m_reports) {
        torch::NoGradGuard noGrad;
        std::vector<torch::Tensor> grads;
        for (const auto &p : m_net->parameters())
            if (p.grad().defined())
                grads.push_back(p.grad().detach().to(torch::kFloat));
        if (!grads.empty())
            gradNorm = torch::stack(at::_foreach_norm(grads)).norm();
    }
    m_noise->endStep(m_parallel.get(), m_net->parameters(), n, gradNorm, m_reports);
    sgdStep(*m_optimizer);
    // The loss rank 0 watches is its own micro-batches' mean (the step's, on one rank).
    if (const common::Status healthy = m_divergence.observe(m_step + 1, lossValue); !healthy) {
        m_events.diverged(healthy.error(), m_step + 1);
        std::cerr << "scalelab-worker: " << healthy.error() << std::endl;
        return worker::kExitDiverged;
    }
    ++m_step;
    m_imagesSeen += n * m_batchesPerStep;
    const auto stepEnd = Clock::now();
    times.optimizer = std::chrono::duration<double>(stepEnd - backwardEnd).count();
    const double stepSeconds = std::chrono::duration<double>(stepEnd - stepStart).count();
    RankAnatomy &a = tally.anatomy;
    a.steps += 1;
    a.dataSeconds += times.data;
    a.forwardSeconds += times.forward;
    a.backwardSeconds += times.backward;
    a.exposedAllReduceSeconds += times.exposed;
    a.optimizerSeconds += times.optimizer;
    if (m_reports)
        m_events.step({ .epoch = epoch,
            .step = m_step,
            .loss = lossValue,
            .lr = lr,
            .imagesPerSecond = double(n * m_batchesPerStep) / stepSeconds,
            .elapsedSeconds = secondsSince(m_runStart),
            .gradNorm = gradNorm.defined() ? gradNorm.item<double>() : 0.0,
            .stepSeconds = stepSeconds,
            .exposedAllReduceSeconds = times.exposed,
            .dataSeconds = times.data,
            .forwardSeconds = times.forward,
            .backwardSeconds = times.backward,
            .optimizerSeconds = times.optimizer,
            .noise = m_noise->report(),
            .lrGain = m_gain });
    if (m_step > m_headSteps)
        m_progress->advance(m_adaScale ? m_gain : m_scale);
    // The next step's gain, from the averages up to this step: one step late (AdaScale
    // proper takes a step's gain from its own gradient), because the host reads the
    // averages here, where it has waited for the device already (loss.item()), and not
    // before the update, where a GPU would idle.
    if (m_adaScale) {
        const NoiseReport measured = m_noise->report();
        m_gain = adaScaleGain(
            measured.gradSquared, measured.traceSigma, measured.samples, m_config.baseBatch, m_scale);
    }
    return std::nullopt;
}

// Forward and backward of this rank's micro-batches, the reducer prepared for the last only
// (DDP's no_sync() before it), so that its backward all-reduces the summed gradients. Adds
// their times to `times` and their loss and hits to `tally`; returns their mean loss, and the
// images of one in `imagesPerBatch`.
double TrainingRun::forwardBackward(
    const std::vector<Batch> &micro, StepTimes &times, EpochTally &tally, std::int64_t *imagesPerBatch)
{
    const bool bf16 = m_config.precision == "bf16";
    double lossValue = 0;
    for (std::size_t i = 0; i < micro.size(); ++i) {
        const bool last = i + 1 == micro.size();
        const auto forwardStart = Clock::now();
        // The same tensors on the CPU; asynchronous copies from pinned memory on a GPU.
        const auto images = micro[i].images.to(m_device, /*non_blocking=*/true);
        const auto labels = micro[i].labels.to(m_device, /*non_blocking=*/true);
        const auto x = m_config.channelsLast ? images.contiguous(m_memoryFormat) : images;
        torch::manual_seed(microBatchSeed(m_config.seed, m_step, m_slots[i]));
        // Only the last micro-batch's backward all-reduces (DDP's no_sync before it).
        if (m_parallel && last)
            m_parallel->beforeForward();
        torch::Tensor out, loss;
        {
            AutocastScope autocast(bf16, m_device);
            out = m_net.forward(x);
            loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), labels,
                torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(m_config.labelSmoothing));
        }
        const auto forwardEnd = Clock::now();
        if (m_parallel && last)
            m_parallel->beforeBackward();
        (m_lossScale == 1.0 ? loss : loss * m_lossScale).backward();
        const auto backwardEnd = Clock::now();
        // Backward's compute ends with its last gradient; the rest is all-reduce it did not hide.
        const auto lastGradientAt = Clock::time_point(Clock::duration(m_lastGradient.load()));
        const bool overlapped
            = m_parallel && last && lastGradientAt > forwardEnd && lastGradientAt <= backwardEnd;
        const double exposed
            = overlapped ? std::chrono::duration<double>(backwardEnd - lastGradientAt).count() : 0.0;
        times.forward += std::chrono::duration<double>(forwardEnd - forwardStart).count();
        times.backward += std::chrono::duration<double>(backwardEnd - forwardEnd).count() - exposed;
        times.exposed += exposed;
        *imagesPerBatch = images.size(0);
        lossValue += loss.item<double>() / double(micro.size());
        tally.lossSum += loss.detach().to(torch::kDouble) * double(*imagesPerBatch);
        tally.correct += out.argmax(1).eq(labels).sum();
        tally.seen += *imagesPerBatch;
    }
    return lossValue;
}

// Train statistics over all ranks, then the test split, each image exactly once, and every
// rank's anatomy (one row each, summed: rank 0 sees all of them).
Evaluation TrainingRun::evaluate(int epoch, const EpochTally &tally)
{
    const auto statsOptions = torch::TensorOptions(torch::kDouble).device(m_device);
    torch::Tensor trainStats = torch::stack(
        { tally.lossSum, tally.correct.to(torch::kDouble), torch::tensor(double(tally.seen), statsOptions) });
    torch::Tensor testStats = torch::zeros({ 3 }, statsOptions);
    const RankAnatomy &a = tally.anatomy;
    torch::Tensor anatomies = torch::zeros({ m_config.worldSize, 6 }, torch::kDouble);
    for (const auto &[column, value] :
        { std::pair { 0, double(a.steps) }, { 1, a.dataSeconds }, { 2, a.forwardSeconds },
            { 3, a.backwardSeconds }, { 4, a.exposedAllReduceSeconds }, { 5, a.optimizerSeconds } })
        anatomies[m_config.rank][column] = value;
    anatomies = anatomies.to(m_device);
    const auto evaluationStart = Clock::now();
    if (m_parallel)
        m_parallel->syncBuffers();
    const std::int64_t testCount = m_testPixels.size(0);
    {
        torch::NoGradGuard noGrad;
        m_net->eval();
        // Rank 0 says it is alive while it evaluates: the agent takes a run with no event
        // for a while as stalled.
        auto lastProgress = Clock::now();
        const std::int64_t world = m_config.worldSize;
        for (std::int64_t begin = m_config.rank * kEvalBatch; begin < testCount;
             begin += kEvalBatch * world) {
            if (m_reports && secondsSince(lastProgress) >= 2.0) {
                lastProgress = Clock::now();
                m_events.evaluating(epoch, begin / world, testCount / world);
            }
            const auto end = std::min(begin + kEvalBatch, testCount);
            auto xs = normalise(m_testPixels.slice(0, begin, end), m_normalization).to(m_device);
            if (m_config.channelsLast)
                xs = xs.contiguous(m_memoryFormat);
            const auto ys = m_testLabels.slice(0, begin, end).to(m_device);
            AutocastScope autocast(m_config.precision == "bf16", m_device);
            const auto logits = m_net.forward(xs).to(torch::kFloat);
            testStats[0] += torch::nn::functional::cross_entropy(
                logits, ys, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                                .item<double>();
            testStats[1] += logits.argmax(1).eq(ys).sum().item<std::int64_t>();
            testStats[2] += double(end - begin);
        }
        m_net->train();
    }
    Evaluation e;
    e.seconds = secondsSince(evaluationStart);
    if (m_parallel) {
        m_parallel->allReduceSum(trainStats);
        m_parallel->allReduceSum(testStats);
        m_parallel->allReduceSum(anatomies);
    }
    if (m_reports) {
        const auto rows = anatomies.to(torch::kCPU);
        for (int r = 0; r < m_config.worldSize; ++r)
            e.ranks.push_back({ .rank = r,
                .steps = std::int64_t(rows[r][0].item<double>()),
                .dataSeconds = rows[r][1].item<double>(),
                .forwardSeconds = rows[r][2].item<double>(),
                .backwardSeconds = rows[r][3].item<double>(),
                .exposedAllReduceSeconds = rows[r][4].item<double>(),
                .optimizerSeconds = rows[r][5].item<double>() });
    }
    e.imagesTrained = trainStats[2].item<double>();
    const double trainN = std::max(1.0, e.imagesTrained);
    const double testN = std::max(1.0, testStats[2].item<double>());
    e.trainLoss = trainStats[0].item<double>() / trainN;
    e.trainAccuracy = trainStats[1].item<double>() / trainN;
    e.testLoss = testStats[0].item<double>() / testN;
    e.testAccuracy = testStats[1].item<double>() / testN;
    e.testImages = std::int64_t(testN);
    return e;
}

// The last epoch always leaves a checkpoint: where a stopped run is resumed from.
std::optional<int> TrainingRun::commit(int epoch, int lastEpoch)
{
    const bool checkpointNow
        = !m_config.checkpointDir.empty() && (epoch % m_config.checkpointEvery == 0 || epoch == lastEpoch);
    if (checkpointNow && m_config.rank == 0) {
        const auto checkpointStart = Clock::now();
        const common::Result<CheckpointFiles> files = serializeCheckpoint(
            { epoch, m_step, m_progress->progress(), m_noise->averages() }, m_device, *m_net, *m_optimizer);
        if (!files)
            return fail(files.error());
        const common::Result<std::string> saved
            = commitCheckpoint(m_config.checkpointDir, *files, m_config.keepCheckpoints);
        if (!saved) // a full disk is the disk's failure, not the run's
            return saved.isResourceExhausted() ? failNoSpace(saved.error(), files->bytes)
                                               : fail(saved.error());
        m_events.checkpoint(epoch, m_step, *saved, secondsSince(checkpointStart));
    }
    if (checkpointNow && m_parallel)
        m_parallel->barrier(); // nobody runs ahead of a checkpoint that may be resumed
    return std::nullopt;
}

} // namespace

int runTraining(const TrainingConfig &config, EventWriter &events)
{
    return TrainingRun(config, events).run();
}

} // namespace scalelab::trainer
