// What StartWorkers decides before it looks at this node: whether a request is well
// formed (every field named in the refusal) and which GPUs each local rank gets. Pure:
// no gRPC server, no files, no NVML, so the rules are unit-tested (tst_agent_rules) and
// the service's handler is left with the checks that need this node (its data sets, its
// cores, its runs). Any thread.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "status.h"

#include <map>
#include <string>
#include <vector>

namespace scalelab::agent {

// A run id, data set or checkpoint name that is not a safe name: the words for `field`.
std::string badNameMessage(const std::string &field, const std::string &value);

// Host names, IPv4 and IPv6 addresses: nothing that could smuggle an option or a path
// onto the worker's command line.
bool isHostName(const std::string &host);

// The request's own fields: run id, attempt, world size, ranks (inside the world, each
// once), the spec (rules::checkRunSpec, as the console and CLI check it), the data set's
// name (a folder under the data directory) and the rendezvous's shape (host and port both or neither; empty
// only when rank 0 is here, whose agent then picks it). The first problem, in that order, names its field.
common::Status checkStartRequest(const v1::StartWorkersRequest &request);

// GPUs for the local ranks, in the order `ranks` lists them: with g = gpus_per_worker,
// g >= 1 gives each rank g whole GPUs of its own (rank i the i-th block of g); g < 1
// (1/2, 1/3, ...: rules::checkRunSpec allows only those) lets 1/g consecutive ranks
// share one GPU (rank i gets GPU floor(i * g)). `gpus` are the node's device indices in
// the order NVML lists them. Fails, saying how many are needed and how many there are,
// when the node has too few; `whyNone` (the GPU monitor's status) is added when it has
// none. g = 0 (CPU training) assigns nothing.
common::Result<std::map<int, std::vector<int>>> assignGpus(double gpusPerWorker,
    const std::vector<int> &ranks, const std::vector<int> &gpus, const std::string &whyNone);

} // namespace scalelab::agent
