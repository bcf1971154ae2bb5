// One rank's training run: configuration and entry point. Torch-free header.
#pragma once

#include "seed_model.h"
#include "status.h"
#include "worker_contract.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scalelab::trainer {

class EventWriter;

struct TrainingConfig {
    std::string dataDir;
    std::string model = "seed-cnn"; // one of model_names.h's, or file:PATH (TorchScript)
    std::string initialWeights; // a TorchScript archive to copy matching weights from; empty: none
    int batchSize = 64; // per micro-batch; the global batch is batchSize x batchesPerStepOf
    // Gradient accumulation: the micro-batches a rank adds up before a step's one
    // all-reduce, and the micro-batches a step averages over all ranks (K; 0: worldSize x
    // accumulationSteps). Rank r takes micro-batches r, r + worldSize, ... < K, each of
    // them its own data shard (data_shard.h), augmentation and dropout draws, so that a
    // step is the same computation on any world size that divides the work differently.
    int accumulationSteps = 1;
    int batchesPerStep = 0;
    int epochs = 1;
    // Defaults: docs/results.md ("The evidence") gives the evidence; proto/rules/spec_rules.h
    // holds the same values for runs the agent starts (tst_trainer_recipe checks they agree).
    double learningRate = 0.02; // at the reference batch (baseBatch) when lrScaling scales it
    double momentum = 0.9;
    double weightDecay = 5e-4;
    // "none": lr as given; "linear": lr x global batch / baseBatch; "sqrt": lr x its square
    // root; "adascale": lr x AdaScale's gain at every step (lr_rules.h)
    std::string lrScaling = "none";
    int baseBatch = worker::kLinearRuleBaseBatch;
    std::string schedule = "cosine"; // "cosine" (after warm-up) or "constant"
    // Linear warm-up from lr/10, in epochs (fractions allowed). Negative: the default, one
    // epoch, or half the run when it is shorter than two (see defaultWarmupEpochs).
    double warmupEpochs = -1;
    double labelSmoothing = 0;
    // The seed CNN's dropout probabilities (seed_model.h), each in [0, 1); 0 turns it off.
    double blockDropout = kDefaultBlockDropout;
    double denseDropout = kDefaultDenseDropout;
    // Per-channel mean and standard deviation of pixels in [0, 1], three values each (the
    // agent passes the ones it measured on the whole data set). Empty: measured on the
    // training images this rank loads.
    std::vector<double> normalizeMean;
    std::vector<double> normalizeStd;
    // Divergence: a non-finite loss, or a loss above divergenceFactor x its reference (the
    // first step's loss, at least ln 10 = that of a uniform guess over the 10 classes) for
    // divergenceSteps steps in a row, ends the run with worker::kExitDiverged.
    double divergenceFactor = 4.0;
    int divergenceSteps = 20;
    bool augment = true; // random crop (4-pixel padding) and horizontal flip
    std::string precision = "fp32"; // "fp32" or "bf16" (autocast)
    std::string device = "cpu"; // "cpu" or "cuda" (cuda:0, the GPU the agent made visible)
    // Collectives between ranks: "gloo" or "nccl"; empty = NCCL on cuda, Gloo on cpu.
    std::string backend;
    bool channelsLast = false;
    std::uint64_t seed = 1;
    int threads = 0; // intra-op threads; 0 = cores / ranks on this node
    std::int64_t maxTrainImages = 0; // 0 = whole split
    std::int64_t maxTestImages = 0;
    // Data parallelism (c10d): rank, world size and the TCPStore rendezvous.
    int rank = 0;
    int worldSize = 1;
    std::string rendezvous; // HOST:PORT, required when worldSize > 1
    // This rank's address for its collectives (and, on rank 0, the store): numeric, as the
    // agent advertises it. Empty: the address on the route to the rendezvous host.
    std::string bindAddress;
    // Interfaces for Gloo, comma-separated (GLOO_SOCKET_IFNAME's format; that variable is
    // read when this is empty). Wins over bindAddress for Gloo's pairs.
    std::string interfaces;
    int bucketMb = 4;
    int collectiveTimeoutSeconds = 120;
    // Checkpoints: every K epochs and at the end, into checkpointDir (rank 0 writes).
    std::string checkpointDir;
    int checkpointEvery = 1;
    int keepCheckpoints = 2; // the newest K committed checkpoints are kept
    bool resume = false; // continue from the newest valid checkpoint in checkpointDir
    // Stop after this epoch of the `epochs`-long schedule, with a checkpoint, and finish
    // successfully (a later run with resume continues from it as if never stopped). 0 =
    // train to `epochs`.
    int stopAfterEpoch = 0;
    // Fine-tuning (agent.proto's Finetune): epochs 1..headEpochs train only `head` (a
    // module's name; empty: the classifier) at headLr (unset: learningRate), constant; the
    // epochs after, the whole model at learningRate and the schedule.
    // Measure the all-reduce times of the run's process group before training (world size
    // > 1), for RunStarted.network.
    bool networkProbe = true;
    int headEpochs = 0;
    std::optional<double> headLr;
    std::string head;
};

// Whether the configuration is usable, and if not what is wrong.
common::Status validate(const TrainingConfig &config);

// The warm-up a run of `epochs` gets when none is given: min(1, epochs / 2).
inline double defaultWarmupEpochs(int epochs)
{
    return epochs >= 2 ? 1.0 : epochs / 2.0;
}

// The warm-up of `config`: as given, or the default; in fine-tuning's second phase, whose
// epochs it counts from the first whole-model epoch.
inline double warmupEpochsOf(const TrainingConfig &config)
{
    return config.warmupEpochs < 0 ? defaultWarmupEpochs(config.epochs - config.headEpochs)
                                   : config.warmupEpochs;
}

// The last epoch `config` trains to: stopAfterEpoch, or the schedule's end.
inline int lastEpochOf(const TrainingConfig &config)
{
    return config.stopAfterEpoch > 0 ? config.stopAfterEpoch : config.epochs;
}

// K, the micro-batches of batchSize images one step averages.
inline int batchesPerStepOf(const TrainingConfig &config)
{
    return config.batchesPerStep > 0 ? config.batchesPerStep : config.worldSize * config.accumulationSteps;
}

// Trains and evaluates, writing started, step, progress, epoch, checkpoint, finished or
// error events (worker.proto's WorkerEvent). Returns the process exit code (worker_contract.h).
int runTraining(const TrainingConfig &config, EventWriter &events);

} // namespace scalelab::trainer

namespace scalelab::trainer {

// Correctness check of the data-parallel path: every rank computes gradients of the seed
// model (eval mode, so the loss is a plain mean over images) on its slice of the first
// batchSize x worldSize training images and lets c10d average them; rank 0 also computes
// the gradient of one replica on the whole concatenated batch and emits
// a gradient_check event (max_abs_diff, max_abs_grad, tensors).
int runGradientCheck(const TrainingConfig &config, EventWriter &events);

// The known-noise check of the gradient noise scale (noise_meter.h), through the same c10d
// reducer and meter as training: linear regression, x ~ N(0, I_d), y = w*ᵀx + ε with
// ε ~ N(0, σ²), the loss ½(wᵀx − y)² with the weights frozen at w* + Δ, so that G = Δ,
// Σ = (|Δ|² + σ²)I + ΔΔᵀ and B_simple = (d(|Δ|² + σ²) + |Δ|²)/|Δ|², exactly 201 with
// d = 100 and |Δ|² = σ² = 1. Each rank draws its own batches of batchSize; after `steps`
// steps (averaged alike: the meter's smoothing as good as a plain mean) rank 0 prints one
// JSON line on stdout: the measured and the exact B_simple, K and the estimator used.
int runNoiseCheck(const TrainingConfig &config, int steps);

} // namespace scalelab::trainer

namespace scalelab::trainer {

// Throughput of the training step alone (no data loading, no orchestration): a fixed
// random batch per rank, `warmupSteps` untimed then `steps` timed; emits
// a bench event on rank 0 (images_per_second: all ranks', from the median step).
// With `noiseScale`, the step also takes the gradient norm and measures the gradient noise
// scale as training's does (noise_meter.h); the two together show what that costs.
int runBench(const TrainingConfig &config, int warmupSteps, int steps, bool noiseScale, EventWriter &events);

// The network between the ranks and nothing else: they join their process group, time its
// all-reduces of 4 KB up to 64 MB (DataParallel::probeAllReduce, as a run does before
// training) and rank 0 reports them as a started event's network, then finished.
int runNetworkProbe(const TrainingConfig &config, EventWriter &events);

// What the commands `parameters` and `check-model` print for `model` (a built-in's name or
// file:PATH of a TorchScript module): the parameter count, or with `json` its cost as one
// JSON object ({"parameters":…,"gradient_bytes":…,"forward_flops_per_image":…}); for a
// TorchScript module that cannot be trained, the problem in words (`problem`, not empty).
struct ModelInfo {
    std::string text;
    std::string problem;
};
ModelInfo describeModel(const std::string &model, bool json);

// `compare-weights`: the newest valid checkpoints of two runs of `model` (checkpoint folders
// `a` and `b`) side by side, as one JSON line: the parameters' largest absolute difference
// and largest absolute value, the same for the buffers (BatchNorm's statistics), the count
// of tensors, and each checkpoint's epoch and step. How the accumulation and elastic tests
// check that two ways of computing a run end with the same weights.
common::Result<std::string> compareWeights(
    const std::string &model, const std::string &a, const std::string &b);

} // namespace scalelab::trainer

namespace scalelab::trainer {

// The learning-rate range test (L. Smith, "Cyclical Learning Rates for Training Neural
// Networks", 2017; as fast.ai's lr_find): trains a fresh seed model from `config` (one
// process, batch config.batchSize) for up to `steps` steps with the learning rate rising
// exponentially from minLr to maxLr, and stops early once the smoothed loss exceeds 4x its
// lowest value or is not finite. Emits an lr_point event per step and then lr_found: the
// suggestion is the lr at the lowest smoothed loss (once the average has settled) divided
// by 10, the rule of thumb of Smith and fast.ai, and whether the test can make one
// (lr_range_test.h).
struct LrFindOptions {
    double minLr = 1e-5;
    double maxLr = 10.0;
    int steps = 200;
};
common::Status validate(const LrFindOptions &options);
int runLrFind(const TrainingConfig &config, const LrFindOptions &options, EventWriter &events);

} // namespace scalelab::trainer
