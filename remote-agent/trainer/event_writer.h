// Writes the worker's events (proto/scalelab/v1/worker.proto's WorkerEvent) as JSON lines
// to a file descriptor: the agent's pipe, or stdout when the worker runs by hand. One
// write() per event, so lines never interleave. Thread-safe.
//
// This header names no protobuf type: training.cpp includes it next to libtorch's
// headers, and a libtorch from pytorch.org carries protobuf headers of its own version
// there. The reports below are the trainer's words; event_writer.cpp alone maps them to
// worker.proto, with the generated code. Torch-free and Qt-free.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scalelab::trainer {

struct TrainingConfig;

// All-reduce times of the run's process group by message size (NetworkProbe).
struct NetworkProbeReport {
    int worldSize = 0; // 0: not measured
    std::string backend;
    int hosts = 0;
    std::vector<std::pair<std::int64_t, std::vector<double>>> samples; // bytes, seconds of each
};

// One rank's steps of an epoch, summed (StepAnatomy).
struct RankAnatomy {
    int rank = 0;
    std::int64_t steps = 0;
    double dataSeconds = 0;
    double forwardSeconds = 0;
    double backwardSeconds = 0;
    double exposedAllReduceSeconds = 0;
    double optimizerSeconds = 0;
};

// What a rank trains, after set-up (RunStarted). The recipe comes from the config.
struct StartedReport {
    bool synthetic = false;
    std::int64_t trainImages = 0;
    std::int64_t testImages = 0;
    std::int64_t parameters = 0;
    std::int64_t gradientBytes = 0;
    std::int64_t forwardFlopsPerImage = 0;
    int threads = 0;
    std::string device;
    std::int64_t stepsPerEpoch = 0;
    std::int64_t globalBatch = 0;
    int batchesPerStep = 1; // K, the micro-batches a step averages (ranks × accumulation)
    double peakLr = 0;
    int resumedEpoch = 0; // 0: a fresh start
    std::string resumedFrom; // the checkpoint folder, when resumed
    double warmupEpochs = 0;
    std::int64_t warmupSteps = 0;
    std::vector<double> normalizeMean;
    std::vector<double> normalizeStd;
    bool normalizeMeasured = false;
    std::string torchVersion;
    std::string blas;
    std::string compiler;
    std::string finetuneHead; // the head fine-tuning's phase 1 trains, resolved; "" without
    NetworkProbeReport network;
    // How the ranks shared machines' cores: the machines, and on the busiest one the threads
    // its ranks compute with and its cores (RunStarted.core_share).
    int machines = 0;
    int busiestMachineThreads = 0;
    double busiestMachineCores = 0;
};

// The gradient noise scale as measured so far (noise_scale.h; proto GradientNoise).
struct NoiseReport {
    double bSimple = 0; // 0 while not known
    double gradSquared = 0;
    double traceSigma = 0;
    std::int64_t samples = 0;
    int batchesPerStep = 1; // K = ranks × accumulation
    bool differenced = false;
};

struct EpochReport {
    int epoch = 0;
    double trainLoss = 0;
    double trainAccuracy = 0;
    double testLoss = 0;
    double testAccuracy = 0;
    std::int64_t testImages = 0;
    double epochSeconds = 0;
    double imagesPerSecond = 0;
    double elapsedSeconds = 0;
    double trainSeconds = 0;
    double evaluationSeconds = 0;
    std::vector<RankAnatomy> ranks;
    NoiseReport noise;
};

struct FinishedReport {
    double finalTestAccuracy = 0;
    double bestTestAccuracy = 0;
    double wallSeconds = 0;
    double imagesPerSecond = 0;
    int epochsCompleted = 0;
    std::string weightsSha256;
};

struct BenchReport {
    double imagesPerSecond = 0;
    double medianStepSeconds = 0;
    int batchSize = 0;
    int threads = 0;
    int worldSize = 0;
    std::string precision;
    bool channelsLast = false;
    std::string device;
    int steps = 0;
    // Where a CPU step goes; unset on a GPU.
    std::optional<double> medianForwardSeconds;
    std::optional<double> medianBackwardSeconds;
    std::optional<double> medianGradientWaitSeconds;
    std::optional<double> medianOptimizerSeconds;
};

struct LrFoundReport {
    double suggestedLr = 0;
    double minLossLr = 0;
    double minSmoothedLoss = 0;
    double steepestLr = 0;
    int steps = 0;
    bool stoppedEarly = false;
    bool conclusive = false;
    std::string note;
    int batchSize = 0;
    std::string rule;
};

// One optimizer step, as rank 0 reports it.
struct StepReport {
    int epoch = 0;
    std::int64_t step = 0;
    double loss = 0;
    double lr = 0;
    double imagesPerSecond = 0;
    double elapsedSeconds = 0;
    double gradNorm = 0;
    double stepSeconds = 0;
    double exposedAllReduceSeconds = 0;
    double dataSeconds = 0;
    double forwardSeconds = 0;
    double backwardSeconds = 0;
    double optimizerSeconds = 0;
    NoiseReport noise;
    double lrGain = 1; // AdaScale's r, by which `lr` is the schedule's (lr_rules.h)
};

class EventWriter {
public:
    explicit EventWriter(int fd)
        : m_fd(fd)
    { }

    void started(const TrainingConfig &config, const StartedReport &report);
    void step(const StepReport &report);
    void epoch(const EpochReport &report);
    void checkpoint(int epoch, std::int64_t step, const std::string &path, double seconds);
    // Rank 0 is alive while it evaluates (the agent takes silence for a stall).
    void evaluating(int epoch, std::int64_t done, std::int64_t total);
    void warning(const std::string &message);
    void finished(const FinishedReport &report);
    void error(const std::string &message);
    void noSpace(const std::string &message, std::int64_t bytesNeeded);
    void diverged(const std::string &message, std::int64_t step);
    void gradientCheck(double maxAbsDiff, double maxAbsGrad, int tensors, int worldSize);
    void bench(const BenchReport &report);
    void lrPoint(int step, double lr, double loss, double smoothed);
    void lrFound(const LrFoundReport &report);

    // For the worker's own JSON (inspect): a JSON string's content.
    static std::string escape(std::string_view text);

    // The shortest decimal text that reads back as exactly `value` (std::to_chars), so a
    // number passed through a command line arrives unchanged: 1e-07, 1.25e-05.
    static std::string number(double value);

private:
    void write(const std::string &line);

    int m_fd;
    std::mutex m_mutex;
};

} // namespace scalelab::trainer
