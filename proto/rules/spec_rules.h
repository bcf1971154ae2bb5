// The rules of a RunSpec, in one place: the console's plan check, the designer, the CLI and
// the agent's StartWorkers all call checkRunSpec, so they accept and refuse the same specs
// with the same words. Plain C++ over the generated message (no Qt, no torch).
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "status.h" // common/: BasicStatus

#include <string>
#include <vector>

namespace scalelab::rules {

// Upper limits, named in the messages that enforce them.
inline constexpr int kMaxEpochs = 10000;
inline constexpr int kMaxBatchSize = 65536;
inline constexpr int kMaxWorkers = 1024;
inline constexpr int kMaxAccumulationSteps = 1024; // micro-batches a rank adds up per step
inline constexpr double kMaxLearningRate = 10.0;
inline constexpr int kMaxThreads = 1024;
inline constexpr double kMaxGpusPerWorker = 64;
// The smallest share of a GPU is 1/kMaxWorkersPerGpu. Below ~2^-53 every 1/g is a whole
// number in floating point, so "divides one GPU evenly" alone would let 1e-300 through
// (and the agent's GPU assignment then indexes an empty list).
inline constexpr int kMaxWorkersPerGpu = 64;

// The trainer's defaults for fields a spec leaves unset (scalelab-worker --help agrees).
inline constexpr double kDefaultLearningRate = 0.02;
inline constexpr double kDefaultMomentum = 0.9;
inline constexpr double kDefaultWeightDecay = 5e-4;
inline constexpr double kDefaultWarmupEpochs = 1.0; // or half the run, when it has fewer than 2 epochs
inline constexpr double kDefaultLabelSmoothing = 0.0;
inline constexpr double kDefaultDivergenceFactor = 4.0;
inline constexpr int kDefaultDivergenceSteps = 20;
inline constexpr int kDefaultKeepCheckpoints = 2;
inline constexpr double kDefaultBlockDropout = 0.25; // the seed CNN's, after each conv block
inline constexpr double kDefaultDenseDropout = 0.5; // and before its last dense layer
inline constexpr int kMaxKeepCheckpoints = 1000;

struct FieldProblem {
    std::string field; // as the caller names it: "spec.learning_rate" or "training.learningRate"
    std::string message;
    std::string text() const { return field + ": " + message; }
};

struct SpecContext {
    std::string prefix; // "spec." or "training."
    bool jsonNames = false; // lowerCamelCase (plans) instead of the proto's snake_case
    // In a plan's `training`, batch size, epochs, threads, precision, GPUs and the lr rule
    // come from the grid: they are not checked there.
    bool gridDecides = false;
};

// Success, or every problem found, in field order (a caller may print each field's).
using SpecStatus = common::BasicStatus<std::vector<FieldProblem>>;

// Success when `spec` keeps every rule, else every problem of it, in field order. NaN and
// infinities are refused wherever a number is; unknown enum values and names too.
SpecStatus checkRunSpec(const v1::RunSpec &spec, const SpecContext &context);

// The problems on one line, as the agent refuses a request: "spec.epochs: ...; spec.momentum: ...".
std::string joinProblems(const std::vector<FieldProblem> &problems);

// The spec a worker runs: every optional number set to its value or the default, names
// ("cosine", "none") filled in. What StartWorkers passes on and what reports show.
v1::RunSpec withDefaults(const v1::RunSpec &spec);

// The shortest text that reads back as exactly `value` (std::to_chars): 1e-07, 1.25e-05.
std::string exactNumber(double value);

} // namespace scalelab::rules
