// The command line of the worker's run commands (train, lr-find, gradient-check, bench),
// read with worker.proto's WorkerLaunch: the agent writes it with the same code, so the
// two cannot drift. No protobuf type in this header (see event_writer.h for why).
#pragma once

#include "status.h"
#include "training.h"

#include <optional>
#include <string>
#include <vector>

namespace scalelab::trainer {

struct WorkerOptions {
    std::string command;
    TrainingConfig config;
    LrFindOptions lrFind; // lr-find
    int benchWarmupSteps = 5; // bench
    int benchSteps = 20;
    bool benchNoiseScale = false; // bench: the noise meter (and the norm it reuses) in the step
    int eventFd = 1;
};

// `arguments` are argv[1..]. Fails when an option is unknown, does not apply to the
// command, or has a value of the wrong kind.
common::Result<WorkerOptions> parseWorkerOptions(const std::vector<std::string> &arguments);

// Whether `command` is one parseWorkerOptions reads.
[[nodiscard]] bool isRunCommand(const std::string &command);

} // namespace scalelab::trainer
