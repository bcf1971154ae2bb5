// The agent's Prometheus metrics (--metrics-port): the node, ScaleLab's share of it, and each
// active run, in Prometheus' text format at http://LISTEN:PORT/metrics, served by
// prometheus-cpp's exposer (civetweb). Values are read when Prometheus scrapes, never cached.
//
// The names follow Prometheus' rules: a scalelab_ prefix, base units in the name (_seconds,
// _bytes), _total on counters, ratios from 0 to 1. Labels are bounded: run_id, rank, gpu,
// state (one of five), mode (busy or idle), version; never free text. The catalogue, with
// what each means, is metricCatalogue() (and docs/observability.md).
//
// Runs are shown while active (starting or running) on this agent, and for
// kEndedRunsShownSeconds after they end (their state then says how: a dashboard or an alert
// sees the outcome); the training metrics (scalelab_run_epoch ... scalelab_run_test_loss)
// only by the agent that hosts the run's rank 0, which hears them. The scalelab_agent_*_total
// counters count each attempt on the agent that hosts its rank 0.
#pragma once

#include "run_gauges.h"
#include "status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace scalelab::agent {

inline constexpr int kEndedRunsShownSeconds = 300;

struct RankUsage {
    std::string runId;
    int rank = 0;
    double cpuSeconds = 0; // user + system since the process started
    std::int64_t residentBytes = 0;
};

struct GpuUsage {
    int index = 0;
    double utilization = 0; // 0..1
    std::int64_t memoryUsedBytes = 0;
    std::int64_t memoryTotalBytes = 0;
};

struct AgentSnapshot {
    std::string version;
    double startTimeSeconds = 0; // Unix time the agent started
    // Counters since the agent started (AgentCounters' values).
    std::int64_t attemptsStarted = 0;
    std::int64_t retries = 0;
    std::int64_t succeeded = 0;
    std::int64_t failed = 0;
    std::int64_t cancelled = 0;
    std::int64_t checkpoints = 0;
    // The node, from /proc and NVML.
    int cpuCores = 0;
    double cpuBusySeconds = 0; // over every core, since boot
    double cpuIdleSeconds = 0;
    std::int64_t memoryTotalBytes = 0;
    std::int64_t memoryUsedBytes = 0; // total minus available
    std::vector<GpuUsage> gpus;
    // The active runs and those that ended in the last kEndedRunsShownSeconds, by run id,
    // and their live ranks on this node.
    std::vector<std::pair<std::string, RunGauges>> runs;
    std::vector<RankUsage> ranks;
};

// Fills the node's part of `snapshot` (CPU times, memory, GPUs) and each rank's use from
// /proc/PID: pids by run id and rank.
struct LiveRank {
    std::string runId;
    int rank = 0;
    int pid = 0;
};
void sampleNode(AgentSnapshot *snapshot, const std::vector<LiveRank> &ranks);

struct MetricDescription {
    std::string name;
    std::string type; // "counter" or "gauge"
    std::string labels; // "run_id, rank", or "" for none
    std::string help;
};
// Every metric the agent serves, in the order served.
const std::vector<MetricDescription> &metricCatalogue();

// `snapshot` in Prometheus' text exposition format (version 0.0.4).
std::string metricsText(const AgentSnapshot &snapshot);

class MetricsExporter {
public:
    MetricsExporter();
    ~MetricsExporter(); // stops serving
    MetricsExporter(const MetricsExporter &) = delete;
    MetricsExporter &operator=(const MetricsExporter &) = delete;

    // Serves /metrics on host:port (an IPv6 address without brackets is fine), calling
    // `snapshot` at each scrape (from the exposer's threads). Fails saying why it could not
    // listen.
    common::Status start(const std::string &host, int port, std::function<AgentSnapshot()> snapshot);
    // "http://HOST:PORT/metrics" once started.
    std::string url() const { return m_url; }

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    std::string m_url;
};

} // namespace scalelab::agent
