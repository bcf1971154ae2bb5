// Why a rank ended, in the run's terms: its wait status, whether a stop was asked for, the
// worker's own last words and the kernel's OOM kills sorted into an ExitKind with a message
// that says what to do (finished, stopped, out of memory, out of disk, diverged, failed,
// killed). Pure but for cgroupOomKills, which reads /proc and /sys.
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <string>

namespace scalelab::agent {

// Sorts a rank's exit into an ExitKind. `oomKills` is how many processes the kernel's
// OOM killer ended in our cgroup while the rank ran (-1 = unknown).
v1::RankExit classifyExit(int rank, int waitStatus, bool stopRequested, const std::string &workerError,
    bool finished, long oomKills);

// The kernel's oom_kill count for this process's cgroup (cgroup v2), or -1.
long cgroupOomKills();

} // namespace scalelab::agent
