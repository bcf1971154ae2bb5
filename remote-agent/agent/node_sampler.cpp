#include "node_sampler.h"

#include "agent_support.h"
#include "gpu_monitor.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace scalelab::agent {

namespace {

double uptimeSeconds()
{
    std::ifstream in("/proc/uptime");
    double seconds = 0;
    in >> seconds;
    return seconds;
}

} // namespace

// utime + stime (fields 14 and 15 of /proc/PID/stat) and starttime (22), in clock ticks.
bool readProcessTicks(pid_t pid, std::uint64_t *busy, std::uint64_t *start)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text))
        return false;
    // The command name (field 2) may hold spaces and parentheses: skip to its last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos)
        return false;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    std::uint64_t utime = 0, stime = 0;
    for (int index = 3; fields >> field; ++index) {
        if (index == 14)
            utime = std::stoull(field);
        else if (index == 15)
            stime = std::stoull(field);
        else if (index == 22) {
            *start = std::stoull(field);
            *busy = utime + stime;
            return true;
        }
    }
    return false;
}

std::int64_t readResidentBytes(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
    std::int64_t size = 0, resident = 0;
    if (!(in >> size >> resident))
        return 0;
    return resident * sysconf(_SC_PAGE_SIZE);
}

NodeCpuTicks readNodeCpuTicks()
{
    std::ifstream in("/proc/stat");
    std::string label;
    NodeCpuTicks times;
    in >> label; // "cpu": the sum over all cores
    std::uint64_t value = 0;
    for (int i = 0; i < 8 && in >> value; ++i) { // user nice system idle iowait irq softirq steal
        times.total += value;
        if (i == 3 || i == 4)
            times.idle += value;
    }
    return times;
}

NodeMemory readNodeMemory()
{
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    std::int64_t value = 0, memTotal = 0, memAvailable = 0;
    while (meminfo >> key >> value >> unit) {
        if (key == "MemTotal:")
            memTotal = value * 1024;
        else if (key == "MemAvailable:")
            memAvailable = value * 1024;
    }
    return { memTotal, memTotal - memAvailable };
}

NodeSampler::NodeSampler()
    : m_cpu(readNodeCpuTicks())
{ }

v1::NodeSample NodeSampler::sample(const std::vector<SampledProcess> &processes)
{
    v1::NodeSample sample;
    sample.set_unix_ms(nowUnixMs());
    sample.set_cpu_cores(static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))));

    const NodeCpuTicks cpu = readNodeCpuTicks();
    const std::uint64_t total = cpu.total - m_cpu.total;
    const std::uint64_t idle = cpu.idle - m_cpu.idle;
    sample.set_cpu_percent(total > 0 ? 100.0 * double(total - std::min(idle, total)) / double(total) : 0.0);
    m_cpu = cpu;

    const NodeMemory memory = readNodeMemory();
    sample.set_memory_total_bytes(memory.total);
    sample.set_memory_used_bytes(memory.used);

    const double ticksPerSecond = double(sysconf(_SC_CLK_TCK));
    const auto now = std::chrono::steady_clock::now();
    std::map<pid_t, std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> seen;
    for (const auto &process : processes) {
        std::uint64_t busy = 0, start = 0;
        if (!readProcessTicks(process.pid, &busy, &start))
            continue; // it exited since the list was made
        double percent;
        if (auto it = m_processTicks.find(process.pid); it != m_processTicks.end()) {
            const double wall = std::chrono::duration<double>(now - it->second.second).count();
            percent = wall > 0 ? 100.0 * double(busy - it->second.first) / ticksPerSecond / wall : 0.0;
        } else {
            // First sight: the average since the process started.
            const double age = uptimeSeconds() - double(start) / ticksPerSecond;
            percent = age > 0 ? 100.0 * double(busy) / ticksPerSecond / age : 0.0;
        }
        seen[process.pid] = { busy, now };
        auto *p = sample.add_processes();
        p->set_run_id(process.runId);
        p->set_attempt(process.attempt);
        p->set_rank(process.rank);
        p->set_pid(process.pid);
        p->set_cpu_percent(percent);
        p->set_rss_bytes(readResidentBytes(process.pid));
    }
    m_processTicks = std::move(seen);

    for (auto &gpu : GpuMonitor::instance().sample())
        *sample.add_gpus() = std::move(gpu);
    return sample;
}

} // namespace scalelab::agent
