// GPUs of this node through NVML, loaded at run time with dlopen("libnvidia-ml.so.1"),
// so the agent builds and runs on a CPU-only node without any NVIDIA library. When
// NVML is missing or fails, the node has no GPU and status() says why.
// Thread-safe; NVML is initialised once, on first use, and shut down at exit.
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <string>
#include <vector>

namespace scalelab::agent {

class GpuMonitor {
public:
    static GpuMonitor &instance();

    // Index, name and memory of every GPU; empty without NVML.
    std::vector<v1::GpuInfo> devices();
    // Utilization and memory in use, per GPU; empty without NVML.
    std::vector<v1::GpuSample> sample();
    // "NVML 12.535.104 (driver ...)" or why there are no GPUs.
    std::string status();

    GpuMonitor(const GpuMonitor &) = delete;
    GpuMonitor &operator=(const GpuMonitor &) = delete;

private:
    GpuMonitor();
    ~GpuMonitor();
    struct Api;
    template <typename F> void forEachDevice(F &&visit); // visit(index, nvml::Device)
    Api *m_api = nullptr; // null when NVML is not usable
    std::string m_status;
};

} // namespace scalelab::agent
