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
    struct CpuTimes {
        std::uint64_t total = 0;
        std::uint64_t idle = 0;
    };
    static CpuTimes readCpu();

    CpuTimes m_cpu;
    std::map<pid_t, std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> m_processTicks;
};

} // namespace scalelab::agent
