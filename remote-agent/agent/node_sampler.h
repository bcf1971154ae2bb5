// Utilization of this node from /proc: CPU % of the whole node, memory, and CPU % and
// resident memory of each rank's process, plus GPU samples from GpuMonitor. Percentages
// are over the time since the previous sample(), so each watcher owns one sampler.
// Not thread-safe (one per stream).
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

namespace scalelab::agent {

// Readings of /proc, shared with the metrics (agent_metrics.h); false or zero when unreadable.
struct NodeCpuTicks {
    std::uint64_t total = 0; // every core, every mode, since boot
    std::uint64_t idle = 0; // idle + iowait
};
NodeCpuTicks readNodeCpuTicks();
// utime + stime of a process and when it started (since boot), in clock ticks.
bool readProcessTicks(pid_t pid, std::uint64_t *busy, std::uint64_t *start);
std::int64_t readResidentBytes(pid_t pid);
struct NodeMemory {
    std::int64_t total = 0;
    std::int64_t used = 0; // total minus available
};
NodeMemory readNodeMemory();

struct SampledProcess {
    std::string runId;
    int attempt = 0;
    int rank = 0;
    pid_t pid = 0;
};

class NodeSampler {
public:
    NodeSampler(); // takes the first reading, so the next sample() has a baseline
    v1::NodeSample sample(const std::vector<SampledProcess> &processes);

private:
    NodeCpuTicks m_cpu;
    std::map<pid_t, std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> m_processTicks;
};

} // namespace scalelab::agent
