#include "agent_metrics.h"

#include "gpu_monitor.h"
#include "log.h"
#include "node_sampler.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <exception>
#include <map>
#include <unistd.h>

namespace scalelab::agent {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

const char *const kStates[] = { "starting", "running", "succeeded", "failed", "cancelled" };

std::string stateLabel(v1::RunState state)
{
    switch (state) {
    case v1::RUNNING:
        return "running";
    case v1::SUCCEEDED:
        return "succeeded";
    case v1::FAILED:
        return "failed";
    case v1::CANCELLED:
        return "cancelled";
    default:
        return "starting";
    }
}

// The families in catalogue order, filled by name; those left without a sample are not served.
class Families {
public:
    Families()
    {
        for (const auto &description : metricCatalogue()) {
            MetricFamily family;
            family.name = description.name;
            family.help = description.help;
            family.type = description.type == "counter" ? MetricType::Counter : MetricType::Gauge;
            m_index[description.name] = m_families.size();
            m_families.push_back(std::move(family));
        }
    }

    void add(const std::string &name, double value, std::vector<ClientMetric::Label> labels = {})
    {
        MetricFamily &family = m_families.at(m_index.at(name));
        ClientMetric metric;
        metric.label = std::move(labels);
        if (family.type == MetricType::Counter)
            metric.counter.value = value;
        else
            metric.gauge.value = value;
        family.metric.push_back(std::move(metric));
    }

    std::vector<MetricFamily> take()
    {
        std::vector<MetricFamily> served;
        for (auto &family : m_families)
            if (!family.metric.empty())
                served.push_back(std::move(family));
        return served;
    }

private:
    std::vector<MetricFamily> m_families;
    std::map<std::string, std::size_t> m_index;
};

std::vector<MetricFamily> families(const AgentSnapshot &s)
{
    Families f;
    f.add("scalelab_agent_info", 1, { { "version", s.version } });
    f.add("scalelab_agent_start_time_seconds", s.startTimeSeconds);
    f.add("scalelab_agent_runs_active",
        double(std::count_if(
            s.runs.begin(), s.runs.end(), [](const auto &run) { return run.second.active(); })));
    f.add("scalelab_agent_attempts_started_total", double(s.attemptsStarted));
    f.add("scalelab_agent_retries_total", double(s.retries));
    f.add("scalelab_agent_attempts_finished_total", double(s.succeeded), { { "state", "succeeded" } });
    f.add("scalelab_agent_attempts_finished_total", double(s.failed), { { "state", "failed" } });
    f.add("scalelab_agent_attempts_finished_total", double(s.cancelled), { { "state", "cancelled" } });
    f.add("scalelab_agent_checkpoints_total", double(s.checkpoints));

    f.add("scalelab_node_cpu_cores", s.cpuCores);
    f.add("scalelab_node_cpu_seconds_total", s.cpuBusySeconds, { { "mode", "busy" } });
    f.add("scalelab_node_cpu_seconds_total", s.cpuIdleSeconds, { { "mode", "idle" } });
    f.add("scalelab_node_memory_total_bytes", double(s.memoryTotalBytes));
    f.add("scalelab_node_memory_used_bytes", double(s.memoryUsedBytes));
    for (const auto &gpu : s.gpus) {
        const std::vector<ClientMetric::Label> labels = { { "gpu", std::to_string(gpu.index) } };
        f.add("scalelab_gpu_utilization_ratio", gpu.utilization, labels);
        f.add("scalelab_gpu_memory_used_bytes", double(gpu.memoryUsedBytes), labels);
        f.add("scalelab_gpu_memory_total_bytes", double(gpu.memoryTotalBytes), labels);
    }
    for (const auto &rank : s.ranks) {
        const std::vector<ClientMetric::Label> labels
            = { { "run_id", rank.runId }, { "rank", std::to_string(rank.rank) } };
        f.add("scalelab_rank_cpu_seconds_total", rank.cpuSeconds, labels);
        f.add("scalelab_rank_resident_memory_bytes", double(rank.residentBytes), labels);
    }

    for (const auto &[runId, g] : s.runs) {
        const std::vector<ClientMetric::Label> run = { { "run_id", runId } };
        const std::string state = stateLabel(g.state);
        for (const char *name : kStates)
            f.add("scalelab_run_state", state == name ? 1 : 0, { { "run_id", runId }, { "state", name } });
        f.add("scalelab_run_attempt", g.attempt, run);
        f.add("scalelab_run_world_size", g.worldSize, run);
        f.add("scalelab_run_planned_epochs", g.epochs, run);
        f.add("scalelab_run_stalled", g.stalled ? 1 : 0, run);
        if (g.stepsPerEpoch == 0)
            continue; // rank 0 is elsewhere, or has not started training
        f.add("scalelab_run_epoch", g.epoch, run);
        f.add("scalelab_run_step", double(g.step), run);
        f.add("scalelab_run_planned_steps", double(g.stepsPerEpoch * g.epochs), run);
        f.add("scalelab_run_steps_total", double(g.stepsTrained), run);
        f.add("scalelab_run_images_total", double(g.imagesTrained), run);
        f.add("scalelab_run_checkpoints_total", double(g.checkpoints), run);
        if (g.stepsTrained == 0)
            continue;
        f.add("scalelab_run_images_per_second", g.imagesPerSecond, run);
        f.add("scalelab_run_step_seconds", g.stepSeconds, run);
        f.add("scalelab_run_step_compute_seconds", std::max(0.0, g.stepSeconds - g.exposedAllReduceSeconds),
            run);
        f.add("scalelab_run_step_exposed_allreduce_seconds", g.exposedAllReduceSeconds, run);
        f.add("scalelab_run_loss", g.loss, run);
        f.add("scalelab_run_learning_rate", g.learningRate, run);
        f.add("scalelab_run_gradient_norm", g.gradientNorm, run);
        if (g.gradientNoiseScale > 0)
            f.add("scalelab_run_gradient_noise_scale", g.gradientNoiseScale, run);
        if (!g.hasEpoch)
            continue;
        f.add("scalelab_run_train_accuracy_ratio", g.trainAccuracy, run);
        f.add("scalelab_run_test_accuracy_ratio", g.testAccuracy, run);
        f.add("scalelab_run_test_loss", g.testLoss, run);
    }
    return f.take();
}

class SnapshotCollector final : public prometheus::Collectable {
public:
    explicit SnapshotCollector(std::function<AgentSnapshot()> snapshot)
        : m_snapshot(std::move(snapshot))
    { }
    // On the exposer's threads: nothing may escape (an exception there ends the agent).
    std::vector<MetricFamily> Collect() const override
    {
        try {
            return families(m_snapshot());
        } catch (const std::exception &e) {
            logMessage(LogLevel::Error, std::string("metrics: cannot collect: ") + e.what());
            return {};
        }
    }

private:
    std::function<AgentSnapshot()> m_snapshot;
};

} // namespace

const std::vector<MetricDescription> &metricCatalogue()
{
    static const std::vector<MetricDescription> catalogue = {
        { "scalelab_agent_info", "gauge", "version", "Always 1; the agent's version in its label." },
        { "scalelab_agent_start_time_seconds", "gauge", "", "When the agent started, in Unix time." },
        { "scalelab_agent_runs_active", "gauge", "", "Run attempts starting or running on this agent." },
        { "scalelab_agent_attempts_started_total", "counter", "",
            "Run attempts started, counted by the agent that hosts their rank 0, since it started." },
        { "scalelab_agent_retries_total", "counter", "",
            "Attempts started that retry an earlier attempt of their run (attempt 2 and later), counted as "
            "attempts are." },
        { "scalelab_agent_attempts_finished_total", "counter", "state",
            "Run attempts that ended, by their state (succeeded, failed or cancelled), counted as attempts "
            "are." },
        { "scalelab_agent_checkpoints_total", "counter", "",
            "Checkpoints committed by ranks 0 on this agent." },
        { "scalelab_node_cpu_cores", "gauge", "", "CPU cores online on this node." },
        { "scalelab_node_cpu_seconds_total", "counter", "mode",
            "CPU time of every core of this node since boot, busy or idle (idle includes iowait), from "
            "/proc/stat." },
        { "scalelab_node_memory_total_bytes", "gauge", "", "Memory of this node." },
        { "scalelab_node_memory_used_bytes", "gauge", "",
            "Memory in use on this node: total minus available." },
        { "scalelab_gpu_utilization_ratio", "gauge", "gpu",
            "Share of the last sample period the GPU was busy, 0 to 1 (NVML)." },
        { "scalelab_gpu_memory_used_bytes", "gauge", "gpu", "GPU memory in use (NVML)." },
        { "scalelab_gpu_memory_total_bytes", "gauge", "gpu", "GPU memory (NVML)." },
        { "scalelab_rank_cpu_seconds_total", "counter", "run_id, rank",
            "CPU time (user + system) of a rank's worker process on this node." },
        { "scalelab_rank_resident_memory_bytes", "gauge", "run_id, rank",
            "Resident memory of a rank's worker process on this node." },
        { "scalelab_run_state", "gauge", "run_id, state",
            "1 for the run's current state (starting, running, succeeded, failed, cancelled), 0 for the "
            "others; "
            "an ended run is shown 5 minutes." },
        { "scalelab_run_attempt", "gauge", "run_id",
            "The attempt running (1 = the first; each retry adds 1)." },
        { "scalelab_run_world_size", "gauge", "run_id", "Ranks of the run, on every host." },
        { "scalelab_run_planned_epochs", "gauge", "run_id", "Epochs the run trains." },
        { "scalelab_run_stalled", "gauge", "run_id",
            "1 while rank 0 has made no progress for the run's stall time, else 0." },
        { "scalelab_run_epoch", "gauge", "run_id",
            "The epoch rank 0 is training (1-based), or trained last." },
        { "scalelab_run_step", "gauge", "run_id",
            "Rank 0's latest optimizer step over the whole run (a resumed attempt goes on from its "
            "checkpoint)." },
        { "scalelab_run_planned_steps", "gauge", "run_id",
            "Optimizer steps of the whole run: epochs times steps per epoch." },
        { "scalelab_run_steps_total", "counter", "run_id", "Optimizer steps this attempt has trained." },
        { "scalelab_run_images_total", "counter", "run_id",
            "Training images this attempt has trained: its steps times the global batch." },
        { "scalelab_run_checkpoints_total", "counter", "run_id", "Checkpoints this attempt has committed." },
        { "scalelab_run_images_per_second", "gauge", "run_id",
            "Training images per second over every rank, as rank 0 measured its latest step." },
        { "scalelab_run_step_seconds", "gauge", "run_id", "Wall-clock time of rank 0's latest step." },
        { "scalelab_run_step_compute_seconds", "gauge", "run_id",
            "The latest step's time less its exposed all-reduce: data, forward, backward, optimizer." },
        { "scalelab_run_step_exposed_allreduce_seconds", "gauge", "run_id",
            "The latest step's wait for gradient all-reduces that backward did not hide (0 on one rank)." },
        { "scalelab_run_loss", "gauge", "run_id", "Training loss of rank 0's latest step." },
        { "scalelab_run_learning_rate", "gauge", "run_id", "Learning rate of the latest step." },
        { "scalelab_run_gradient_norm", "gauge", "run_id",
            "L2 norm of the latest step's all-reduced gradients, before the optimizer step." },
        { "scalelab_run_gradient_noise_scale", "gauge", "run_id",
            "Gradient noise scale B_simple = tr(Sigma)/|G|^2 in examples, about the critical batch: moving "
            "averages over rank 0's last ~100 steps (served once known)." },
        { "scalelab_run_train_accuracy_ratio", "gauge", "run_id",
            "Training accuracy of the latest epoch, 0 to 1." },
        { "scalelab_run_test_accuracy_ratio", "gauge", "run_id",
            "Test accuracy of the latest epoch, 0 to 1." },
        { "scalelab_run_test_loss", "gauge", "run_id", "Test loss of the latest epoch." },
    };
    return catalogue;
}

void sampleNode(AgentSnapshot *snapshot, const std::vector<LiveRank> &ranks)
{
    const double ticksPerSecond = double(sysconf(_SC_CLK_TCK));
    snapshot->cpuCores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    const NodeCpuTicks cpu = readNodeCpuTicks();
    snapshot->cpuIdleSeconds = double(cpu.idle) / ticksPerSecond;
    snapshot->cpuBusySeconds = double(cpu.total - std::min(cpu.idle, cpu.total)) / ticksPerSecond;
    const NodeMemory memory = readNodeMemory();
    snapshot->memoryTotalBytes = memory.total;
    snapshot->memoryUsedBytes = memory.used;
    for (const auto &gpu : GpuMonitor::instance().sample())
        snapshot->gpus.push_back({ gpu.index(), gpu.utilization_percent() / 100.0, gpu.memory_used_bytes(),
            gpu.memory_total_bytes() });
    for (const auto &rank : ranks) {
        std::uint64_t busy = 0, start = 0;
        if (!readProcessTicks(rank.pid, &busy, &start))
            continue; // it exited since the list was made
        snapshot->ranks.push_back(
            { rank.runId, rank.rank, double(busy) / ticksPerSecond, readResidentBytes(rank.pid) });
    }
}

std::string metricsText(const AgentSnapshot &snapshot)
{
    return prometheus::TextSerializer().Serialize(families(snapshot));
}

struct MetricsExporter::Impl {
    std::unique_ptr<prometheus::Exposer> exposer;
    std::shared_ptr<prometheus::Collectable> collector; // a SnapshotCollector
};

MetricsExporter::MetricsExporter()
    : m_impl(std::make_unique<Impl>())
{ }

MetricsExporter::~MetricsExporter() = default;

common::Status MetricsExporter::start(
    const std::string &host, int port, std::function<AgentSnapshot()> snapshot)
{
    const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
    const std::string address = (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
    try {
        // Two threads: a scrape takes milliseconds, and Prometheus scrapes one at a time.
        m_impl->exposer = std::make_unique<prometheus::Exposer>(address, 2);
    } catch (const std::exception &e) {
        return common::Status::failure("cannot serve metrics on " + address + ": " + e.what());
    }
    m_impl->collector = std::make_shared<SnapshotCollector>(std::move(snapshot));
    m_impl->exposer->RegisterCollectable(m_impl->collector);
    const std::vector<int> ports = m_impl->exposer->GetListeningPorts();
    m_url = "http://" + (ipv6 ? "[" + host + "]" : host) + ":"
        + std::to_string(ports.empty() ? port : ports.front()) + "/metrics";
    return common::Status::success();
}

} // namespace scalelab::agent
