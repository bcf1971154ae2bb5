// The scalelab-worker command line of one rank, built in one place from the run's spec.
#pragma once

#include "run_supervisor.h"

#include <string>
#include <vector>

namespace scalelab::agent {

// Every training value is passed explicitly, from rules::withDefaults(spec): the worker's
// own defaults never decide a run the agent started, zero is a value (momentum 0 turns
// momentum off), and numbers are written so they read back exactly (1e-07, not 0.000000).
// The data set's measured normalisation is passed when the agent has it.
std::vector<std::string> workerCommand(const RunLaunch &launch, int rank);

} // namespace scalelab::agent
