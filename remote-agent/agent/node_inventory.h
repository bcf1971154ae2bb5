// What this node is, as Describe reports it: host name, agent and library versions, CPU
// model and cores, memory, GPUs (gpu_monitor.h) and the data sets under the data folder
// (with their statistics, dataset_statistics.h). Read from /proc, /etc/os-release, NVML
// and the data folder each time it is asked for; nothing about runs (AgentService adds
// those) and nothing the operator configured beyond the data folder.
//
// Ownership: a NodeInventory owns the data sets' statistics cache (kept in memory and
// under <state>/datasets/). Thread: any; one inventory serves every gRPC thread.
#pragma once

#include "dataset_statistics.h"
#include "scalelab/v1/agent.pb.h"

#include <filesystem>
#include <memory>
#include <vector>

namespace scalelab::agent {

// The cores online on this node, at least 1.
int cpuCores();

class NodeInventory {
public:
    NodeInventory(std::filesystem::path dataDir, const std::filesystem::path &stateDir);

    // The usable data sets: every safely named folder of the data folder that holds a
    // CIFAR-10-format set, sorted by name, with its normalisation and checksum when they
    // could be measured (the first call for a new or changed set reads all its images).
    std::vector<v1::Dataset> datasets() const;

    // Fills the node's part of a Describe reply: hostname, agent_version, cpu_model,
    // software, cpu_cores, memory_bytes, data_dir, gpus, gpu_status and datasets.
    void describe(v1::DescribeResponse *response) const;

private:
    std::filesystem::path m_dataDir;
    std::unique_ptr<DatasetStatisticsCache> m_statistics;
};

} // namespace scalelab::agent
