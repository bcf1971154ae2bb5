#include "gpu_monitor.h"

#include "log.h"

#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <type_traits>

namespace scalelab::agent {

// The few NVML declarations we use (nvml.h is not needed to build). Not in an anonymous
// namespace: GpuMonitor::Api, which has external linkage, holds pointers to functions of
// these types.
namespace nvml {
using Return = int;
using Device = struct nvmlDevice_st *;
struct Memory {
    unsigned long long total, free, used;
};
struct Utilization {
    unsigned int gpu, memory;
};
constexpr Return kSuccess = 0;
constexpr int kNameLength = 96;
} // namespace nvml

namespace {

std::mutex g_nvmlMutex; // NVML is thread-safe, but our lazy set-up is not

} // namespace

struct GpuMonitor::Api {
    void *library = nullptr;
    nvml::Return (*init)() = nullptr;
    nvml::Return (*shutdown)() = nullptr;
    const char *(*errorString)(nvml::Return) = nullptr;
    nvml::Return (*deviceCount)(unsigned int *) = nullptr;
    nvml::Return (*handleByIndex)(unsigned int, nvml::Device *) = nullptr;
    nvml::Return (*name)(nvml::Device, char *, unsigned int) = nullptr;
    nvml::Return (*memoryInfo)(nvml::Device, nvml::Memory *) = nullptr;
    nvml::Return (*utilization)(nvml::Device, nvml::Utilization *) = nullptr;
    nvml::Return (*driverVersion)(char *, unsigned int) = nullptr;
};

GpuMonitor &GpuMonitor::instance()
{
    static GpuMonitor monitor;
    return monitor;
}

GpuMonitor::GpuMonitor()
{
    void *library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        m_status = std::string("no GPU: NVML (libnvidia-ml.so.1) not found (") + (why ? why : "unknown")
            + "); install the NVIDIA driver to use GPUs";
        logMessage(LogLevel::Info, m_status);
        return;
    }
    auto api = std::make_unique<Api>();
    api->library = library;
    auto load = [&](auto &fn, const char *name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
        return fn != nullptr;
    };
    const bool complete = load(api->init, "nvmlInit_v2") && load(api->shutdown, "nvmlShutdown")
        && load(api->errorString, "nvmlErrorString") && load(api->deviceCount, "nvmlDeviceGetCount_v2")
        && load(api->handleByIndex, "nvmlDeviceGetHandleByIndex_v2") && load(api->name, "nvmlDeviceGetName")
        && load(api->memoryInfo, "nvmlDeviceGetMemoryInfo")
        && load(api->utilization, "nvmlDeviceGetUtilizationRates")
        && load(api->driverVersion, "nvmlSystemGetDriverVersion");
    if (!complete) {
        m_status = "no GPU: libnvidia-ml.so.1 lacks an NVML function the agent needs (driver too old?)";
        logMessage(LogLevel::Warning, m_status);
        dlclose(library);
        return;
    }
    if (const nvml::Return r = api->init(); r != nvml::kSuccess) {
        m_status = std::string("no GPU: nvmlInit failed: ") + api->errorString(r);
        logMessage(LogLevel::Warning, m_status);
        dlclose(library);
        return;
    }
    char driver[nvml::kNameLength] = {};
    api->driverVersion(driver, sizeof driver);
    m_status = std::string("NVML, driver ") + driver;
    m_api = api.release();
    logMessage(LogLevel::Info, m_status);
}

GpuMonitor::~GpuMonitor()
{
    if (m_api) {
        m_api->shutdown();
        dlclose(m_api->library);
        delete m_api;
    }
}

template <typename F> void GpuMonitor::forEachDevice(F &&visit)
{
    std::lock_guard lock(g_nvmlMutex);
    unsigned int count = 0;
    if (!m_api || m_api->deviceCount(&count) != nvml::kSuccess)
        return;
    for (unsigned int i = 0; i < count; ++i) {
        nvml::Device device = nullptr;
        if (m_api->handleByIndex(i, &device) == nvml::kSuccess)
            visit(static_cast<int>(i), device);
    }
}

std::vector<v1::GpuInfo> GpuMonitor::devices()
{
    std::vector<v1::GpuInfo> found;
    forEachDevice([&](int index, nvml::Device device) {
        v1::GpuInfo info;
        info.set_index(index);
        char name[nvml::kNameLength] = {};
        if (m_api->name(device, name, sizeof name) == nvml::kSuccess)
            info.set_name(name);
        nvml::Memory memory {};
        if (m_api->memoryInfo(device, &memory) == nvml::kSuccess)
            info.set_memory_bytes(static_cast<std::int64_t>(memory.total));
        found.push_back(std::move(info));
    });
    return found;
}

std::vector<v1::GpuSample> GpuMonitor::sample()
{
    std::vector<v1::GpuSample> samples;
    forEachDevice([&](int index, nvml::Device device) {
        v1::GpuSample sample;
        sample.set_index(index);
        nvml::Utilization utilization {};
        if (m_api->utilization(device, &utilization) == nvml::kSuccess)
            sample.set_utilization_percent(utilization.gpu);
        nvml::Memory memory {};
        if (m_api->memoryInfo(device, &memory) == nvml::kSuccess) {
            sample.set_memory_used_bytes(static_cast<std::int64_t>(memory.used));
            sample.set_memory_total_bytes(static_cast<std::int64_t>(memory.total));
        }
        samples.push_back(std::move(sample));
    });
    return samples;
}

std::string GpuMonitor::status()
{
    return m_status;
}

} // namespace scalelab::agent
