#include "worker_options.h"

#include "model_names.h"
#include "worker_channel.h"

#include <set>

namespace scalelab::trainer {

namespace {

using Launch = v1::WorkerLaunch;

// The options each command takes, by field number of WorkerLaunch.
const std::set<int> &optionsOf(const std::string &command)
{
    static const std::set<int> common = { Launch::kBatchSizeFieldNumber, Launch::kSeedFieldNumber,
        Launch::kPrecisionFieldNumber, Launch::kDeviceFieldNumber, Launch::kBackendFieldNumber,
        Launch::kChannelsLastFieldNumber, Launch::kThreadsFieldNumber, Launch::kRankFieldNumber,
        Launch::kWorldSizeFieldNumber, Launch::kRendezvousFieldNumber, Launch::kBindAddressFieldNumber,
        Launch::kIfaceFieldNumber, Launch::kBucketMbFieldNumber, Launch::kCollectiveTimeoutSFieldNumber,
        Launch::kEventFdFieldNumber, Launch::kModelFieldNumber };
    const auto with = [&](std::initializer_list<int> more) {
        std::set<int> all = common;
        all.insert(more);
        return all;
    };
    // What a model learns from: the data and the optimizer.
    const std::initializer_list<int> recipe = { Launch::kDataDirFieldNumber, Launch::kMomentumFieldNumber,
        Launch::kWeightDecayFieldNumber, Launch::kLabelSmoothingFieldNumber,
        Launch::kNormalizeMeanFieldNumber, Launch::kNormalizeStdFieldNumber, Launch::kAugmentFieldNumber,
        Launch::kMaxTrainImagesFieldNumber, Launch::kInitialWeightsFieldNumber };
    // The model's dropout: what the commands that train take (gradient-check compares in
    // eval mode, where dropout does nothing).
    const std::initializer_list<int> dropout
        = { Launch::kBlockDropoutFieldNumber, Launch::kDenseDropoutFieldNumber };
    static const std::set<int> train = [&] {
        auto all = with(recipe);
        all.insert({ Launch::kEpochsFieldNumber, Launch::kLrFieldNumber, Launch::kLrScalingFieldNumber,
            Launch::kBaseBatchFieldNumber, Launch::kScheduleFieldNumber, Launch::kWarmupEpochsFieldNumber,
            Launch::kDivergenceFactorFieldNumber, Launch::kDivergenceStepsFieldNumber,
            Launch::kMaxTestImagesFieldNumber, Launch::kCheckpointDirFieldNumber,
            Launch::kCheckpointEveryFieldNumber, Launch::kKeepCheckpointsFieldNumber,
            Launch::kResumeFieldNumber, Launch::kStopAfterEpochFieldNumber, Launch::kHeadEpochsFieldNumber,
            Launch::kHeadLrFieldNumber, Launch::kHeadFieldNumber, Launch::kNetworkProbeFieldNumber,
            Launch::kAccumulationStepsFieldNumber, Launch::kBatchesPerStepFieldNumber });
        all.insert(dropout.begin(), dropout.end());
        return all;
    }();
    static const std::set<int> gradientCheck = [&] {
        auto all = with(recipe);
        all.insert(Launch::kLrFieldNumber);
        return all;
    }();
    static const std::set<int> lrFind = [&] {
        auto all = with(recipe);
        all.insert({ Launch::kMinLrFieldNumber, Launch::kMaxLrFieldNumber, Launch::kStepsFieldNumber });
        all.insert(dropout.begin(), dropout.end());
        return all;
    }();
    static const std::set<int> bench = with(
        { Launch::kStepsFieldNumber, Launch::kWarmupStepsFieldNumber, Launch::kNoiseScaleFieldNumber });
    static const std::set<int> noiseCheck = with({ Launch::kStepsFieldNumber });
    // The network alone: no data, no model, no batch.
    static const std::set<int> probe = { Launch::kSeedFieldNumber, Launch::kDeviceFieldNumber,
        Launch::kBackendFieldNumber, Launch::kThreadsFieldNumber, Launch::kRankFieldNumber,
        Launch::kWorldSizeFieldNumber, Launch::kRendezvousFieldNumber, Launch::kBindAddressFieldNumber,
        Launch::kIfaceFieldNumber, Launch::kCollectiveTimeoutSFieldNumber, Launch::kEventFdFieldNumber };
    static const std::set<int> none;
    if (command == "probe")
        return probe;
    if (command == "train")
        return train;
    if (command == "gradient-check")
        return gradientCheck;
    if (command == "lr-find")
        return lrFind;
    if (command == "bench")
        return bench;
    if (command == "noise-check")
        return noiseCheck;
    return none;
}

} // namespace

bool isRunCommand(const std::string &command)
{
    return !optionsOf(command).empty();
}

namespace {

// The options given against the command, and the few values checked before they are read.
common::Status checkLaunch(const Launch &l)
{
    const auto &allowed = optionsOf(l.command());
    if (allowed.empty()) {
        return common::Status::failure("unknown command '" + l.command() + "'");
    }
    // Every option given must be one this command takes: a misplaced one is a mistake.
    std::vector<const google::protobuf::FieldDescriptor *> given;
    l.GetReflection()->ListFields(l, &given);
    for (const auto *field : given)
        if (field->number() != Launch::kCommandFieldNumber && !allowed.count(field->number())) {
            return common::Status::failure(
                "option " + worker::optionName(field->name()) + " does not apply to " + l.command());
        }
    for (const auto *field : { Launch::descriptor()->FindFieldByNumber(Launch::kNormalizeMeanFieldNumber),
             Launch::descriptor()->FindFieldByNumber(Launch::kNormalizeStdFieldNumber) })
        if (const int n = l.GetReflection()->FieldSize(l, field); n != 0 && n != 3) {
            return common::Status::failure(worker::optionName(field->name())
                + " expects three comma-separated numbers (red,green,blue), got " + std::to_string(n));
        }
    if (l.has_model() && !isModelName(l.model()) && !worker::isModelFile(l.model()))
        return common::Status::failure("--model must be one of " + worker::modelNamesText()
            + ", or file:PATH of a TorchScript module (got '" + l.model() + "')");
    if (l.has_warmup_epochs() && !(l.warmup_epochs() >= 0)) {
        return common::Status::failure("--warmup-epochs must be 0 (no warm-up) or more");
    }
    return common::Status::success();
}

// What the model learns from: the model, its data and how the data is prepared.
void readModelAndData(const Launch &l, TrainingConfig &c)
{
    if (l.command() == "bench")
        c.dataDir = "(synthetic)";
    if (l.command() == "probe")
        c.dataDir = "(none: the network alone)";
    if (l.command() == "noise-check")
        c.dataDir = "(generated: linear regression of a known noise)";
    if (l.has_data_dir())
        c.dataDir = l.data_dir();
    if (l.has_model())
        c.model = l.model();
    if (l.has_initial_weights())
        c.initialWeights = l.initial_weights();
    if (l.has_head_epochs())
        c.headEpochs = l.head_epochs();
    if (l.has_head_lr())
        c.headLr = l.head_lr();
    if (l.has_head())
        c.head = l.head();
    if (l.has_max_train_images())
        c.maxTrainImages = l.max_train_images();
    if (l.has_max_test_images())
        c.maxTestImages = l.max_test_images();
    if (l.has_augment())
        c.augment = l.augment();
    if (l.has_label_smoothing())
        c.labelSmoothing = l.label_smoothing();
    if (l.has_block_dropout())
        c.blockDropout = l.block_dropout();
    if (l.has_dense_dropout())
        c.denseDropout = l.dense_dropout();
    c.normalizeMean.assign(l.normalize_mean().begin(), l.normalize_mean().end());
    c.normalizeStd.assign(l.normalize_std().begin(), l.normalize_std().end());
}

// The batch, the optimizer and its schedule, and when training has diverged.
void readOptimizer(const Launch &l, TrainingConfig &c)
{
    if (l.has_batch_size())
        c.batchSize = l.batch_size();
    if (l.has_accumulation_steps())
        c.accumulationSteps = l.accumulation_steps();
    if (l.has_batches_per_step())
        c.batchesPerStep = l.batches_per_step();
    if (l.has_epochs())
        c.epochs = l.epochs();
    if (l.has_lr())
        c.learningRate = l.lr();
    if (l.has_momentum())
        c.momentum = l.momentum();
    if (l.has_weight_decay())
        c.weightDecay = l.weight_decay();
    if (l.has_seed())
        c.seed = l.seed();
    if (l.has_lr_scaling())
        c.lrScaling = l.lr_scaling();
    if (l.has_base_batch())
        c.baseBatch = l.base_batch();
    if (l.has_schedule())
        c.schedule = l.schedule();
    if (l.has_warmup_epochs())
        c.warmupEpochs = l.warmup_epochs();
    if (l.has_divergence_factor())
        c.divergenceFactor = l.divergence_factor();
    if (l.has_divergence_steps())
        c.divergenceSteps = l.divergence_steps();
}

// Where the rank runs and how it reaches the others.
void readDeviceAndRanks(const Launch &l, TrainingConfig &c)
{
    if (l.has_precision())
        c.precision = l.precision();
    if (l.has_device())
        c.device = l.device();
    if (l.has_backend())
        c.backend = l.backend();
    if (l.has_channels_last())
        c.channelsLast = l.channels_last();
    if (l.has_threads())
        c.threads = l.threads();
    if (l.has_rank())
        c.rank = l.rank();
    if (l.has_world_size())
        c.worldSize = l.world_size();
    if (l.has_rendezvous())
        c.rendezvous = l.rendezvous();
    if (l.has_bind_address())
        c.bindAddress = l.bind_address();
    if (l.has_iface())
        c.interfaces = l.iface();
    if (l.has_bucket_mb())
        c.bucketMb = l.bucket_mb();
    if (l.has_collective_timeout_s())
        c.collectiveTimeoutSeconds = l.collective_timeout_s();
    if (l.has_network_probe())
        c.networkProbe = l.network_probe();
}

void readCheckpoints(const Launch &l, TrainingConfig &c)
{
    if (l.has_checkpoint_dir())
        c.checkpointDir = l.checkpoint_dir();
    if (l.has_checkpoint_every())
        c.checkpointEvery = l.checkpoint_every();
    if (l.has_keep_checkpoints())
        c.keepCheckpoints = l.keep_checkpoints();
    if (l.has_resume())
        c.resume = l.resume();
    if (l.has_stop_after_epoch())
        c.stopAfterEpoch = l.stop_after_epoch();
}

} // namespace

common::Result<WorkerOptions> parseWorkerOptions(const std::vector<std::string> &arguments)
{
    const auto parsed = worker::parseLaunchArguments(arguments);
    if (!parsed)
        return common::Status::failure(parsed.error());
    const Launch &l = *parsed;
    if (const common::Status checked = checkLaunch(l); !checked)
        return checked;

    WorkerOptions options;
    options.command = l.command();
    readModelAndData(l, options.config);
    readOptimizer(l, options.config);
    readDeviceAndRanks(l, options.config);
    readCheckpoints(l, options.config);
    if (l.has_event_fd())
        options.eventFd = l.event_fd();
    if (l.has_min_lr())
        options.lrFind.minLr = l.min_lr();
    if (l.has_max_lr())
        options.lrFind.maxLr = l.max_lr();
    if (l.has_steps()) {
        options.lrFind.steps = l.steps();
        options.benchSteps = l.steps();
    }
    if (l.has_warmup_steps())
        options.benchWarmupSteps = l.warmup_steps();
    if (l.has_noise_scale())
        options.benchNoiseScale = l.noise_scale();
    return options;
}

} // namespace scalelab::trainer
