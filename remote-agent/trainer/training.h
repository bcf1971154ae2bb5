// One rank's training run: configuration and entry point. Torch-free header.
#pragma once

#include <cstdint>
#include <string>

namespace scalelab::trainer {

class EventWriter;

struct TrainingConfig {
    std::string dataDir;
    int batchSize = 64; // per worker
    int epochs = 1;
    double learningRate = 0.05;
    double momentum = 0.9;
    double weightDecay = 5e-4;
    std::uint64_t seed = 1;
    int threads = 0; // 0 = all cores
    std::int64_t maxTrainImages = 0; // 0 = whole split
    std::int64_t maxTestImages = 0;
    int rank = 0;
    int worldSize = 1;
};

// Returns an empty string when the configuration is usable, else what is wrong.
std::string validate(const TrainingConfig &config);

// Trains and evaluates, writing "started", "step", "epoch", "finished" or "error"
// events. Returns the process exit code (0 on success).
int runTraining(const TrainingConfig &config, EventWriter &events);

} // namespace scalelab::trainer
