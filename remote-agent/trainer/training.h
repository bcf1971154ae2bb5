// One rank's training run: configuration and entry point. Torch-free header.
#pragma once

#include <cstdint>
#include <string>

namespace scalelab::trainer {

class EventWriter;

struct TrainingConfig {
    std::string dataDir;
    int batchSize = 64; // per worker; the global batch is batchSize x worldSize
    int epochs = 1;
    double learningRate = 0.05; // at the reference batch (baseBatch) when lrScaling = "linear"
    double momentum = 0.9;
    double weightDecay = 5e-4;
    std::string lrScaling = "none"; // "none": lr as given; "linear": lr x global batch / baseBatch
    int baseBatch = 64;
    std::string schedule = "cosine"; // "cosine" (after warm-up) or "constant"
    double warmupEpochs = 0; // linear warm-up from lr/10, in epochs (fractions allowed)
    double labelSmoothing = 0;
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
    bool resume = false; // continue from the newest valid checkpoint in checkpointDir
};

// Returns an empty string when the configuration is usable, else what is wrong.
std::string validate(const TrainingConfig &config);

// Trains and evaluates, writing "started", "step", "epoch", "checkpoint", "finished" or
// "error" events. Returns the process exit code (0 on success).
int runTraining(const TrainingConfig &config, EventWriter &events);

} // namespace scalelab::trainer

namespace scalelab::trainer {

// Correctness check of the data-parallel path: every rank computes gradients of the seed
// model (eval mode, so the loss is a plain mean over images) on its slice of the first
// batchSize x worldSize training images and lets c10d average them; rank 0 also computes
// the gradient of one replica on the whole concatenated batch and emits
// {"type":"gradient_check","max_abs_diff":..,"max_abs_grad":..,"tensors":..}.
int runGradientCheck(const TrainingConfig &config, EventWriter &events);

} // namespace scalelab::trainer

namespace scalelab::trainer {

// Throughput of the training step alone (no data loading, no orchestration): a fixed
// random batch per rank, `warmupSteps` untimed then `steps` timed; emits
// {"type":"bench","images_per_second":<global, from the median step>,...} on rank 0.
int runBench(const TrainingConfig &config, int warmupSteps, int steps, EventWriter &events);

} // namespace scalelab::trainer
