// StartWorkers in its steps: the request against what this node has (GPUs, the rendezvous
// port, the data set, cores), then the idempotent start of the attempt under the run
// table's lock, then the worker processes.
#include "agent_service.h"

#include "agent_support.h"
#include "cifar10.h"
#include "cpu_features.h"
#include "free_port.h"
#include "gpu_monitor.h"
#include "log.h"
#include "start_request.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

namespace scalelab::agent {

// What this node gives a StartWorkers request.
struct StartPlacement {
    std::map<int, std::vector<int>> gpus; // rank -> GPU indices
    v1::Endpoint rendezvous;
    std::optional<v1::Dataset> dataset; // none for a probe-only run
};

namespace {

// An attempt of the run is known here already: the same request again is answered as the
// first was (OK, with `*answered`); anything else is refused or, when the old attempt is
// over and the new one is higher, let through (OK, `*answered` false).
grpc::Status repeatedStart(const RunSupervisor &existing, const v1::StartWorkersRequest &request,
    v1::StartWorkersResponse *response, bool *answered)
{
    *answered = false;
    if (existing.attempt() == request.attempt()) {
        // Idempotent only for the same request: a different spec or placement under the
        // same (run, attempt) is a client bug, never silently ignored.
        const auto &was = existing.request();
        const bool same = google::protobuf::util::MessageDifferencer::Equals(was.spec(), request.spec())
            && was.world_size() == request.world_size()
            && std::vector<int>(was.ranks().begin(), was.ranks().end())
                == std::vector<int>(request.ranks().begin(), request.ranks().end());
        if (!same)
            return { grpc::StatusCode::ALREADY_EXISTS,
                "run " + request.run_id() + " attempt " + std::to_string(request.attempt())
                    + " already exists on this agent with a different spec, ranks or world size; "
                      "start a new attempt (or a new run id) to change them" };
        response->set_already_running(true);
        *response->mutable_run() = existing.info();
        *response->mutable_rendezvous() = response->run().rendezvous();
        *answered = true;
        return grpc::Status::OK;
    }
    if (!existing.terminal())
        return precondition("run " + request.run_id() + " attempt " + std::to_string(existing.attempt())
            + " is still running; stop it before starting attempt " + std::to_string(request.attempt()));
    if (request.attempt() < existing.attempt())
        return precondition("run " + request.run_id() + " already had attempt "
            + std::to_string(existing.attempt()) + "; a new attempt must have a higher number");
    return grpc::Status::OK;
}

// The worker processes did not start: a full disk is the node's problem, not the run's (the
// console waits for space); anything else is the agent's.
grpc::Status startFailure(const std::string &error)
{
    if (error.find(std::strerror(ENOSPC)) != std::string::npos
        || error.find(std::strerror(EDQUOT)) != std::string::npos)
        return { grpc::StatusCode::RESOURCE_EXHAUSTED, "no space left on device: " + error };
    return { grpc::StatusCode::INTERNAL, "could not start the worker: " + error };
}

} // namespace

grpc::Status AgentService::placeOnThisNode(
    const v1::StartWorkersRequest &request, StartPlacement *placement) const
{
    const auto &spec = request.spec();
    if (spec.gpus_per_worker() > 0) {
        std::vector<int> gpus;
        for (const auto &gpu : GpuMonitor::instance().devices())
            gpus.push_back(gpu.index());
        auto assigned = assignGpus(spec.gpus_per_worker(),
            std::vector<int>(request.ranks().begin(), request.ranks().end()), gpus,
            GpuMonitor::instance().status());
        if (!assigned)
            return precondition(assigned.error());
        placement->gpus = std::move(assigned.value());
    }
    // On GPUs the worker checks bf16 itself (compute capability 8.0) and says so.
    if (spec.precision() == v1::BF16 && spec.gpus_per_worker() == 0 && !trainer::cpu::hasBf16())
        return precondition("spec.precision BF16 needs a CPU with AVX-512 BF16 or AMX; this node has "
                            "neither. Use FP32");
    // Rendezvous: the agent that hosts rank 0 picks it when the client left it empty.
    placement->rendezvous = request.rendezvous();
    if (request.world_size() > 1) {
        if (placement->rendezvous.port() == 0) { // rank 0 is here (checkStartRequest)
            const bool allHere = request.ranks_size() == request.world_size();
            placement->rendezvous.set_host(allHere ? "127.0.0.1" : m_options.advertiseHost);
            placement->rendezvous.set_port(freeTcpPort());
            if (placement->rendezvous.port() == 0)
                return { grpc::StatusCode::RESOURCE_EXHAUSTED, "no free TCP port for the rendezvous" };
        }
    }
    const auto datasets = m_inventory.datasets();
    const auto dataset = std::find_if(
        datasets.begin(), datasets.end(), [&](const auto &d) { return d.name() == spec.dataset(); });
    if (dataset != datasets.end())
        placement->dataset = *dataset;
    else if (!spec.probe_only()) {
        std::string names;
        for (const auto &d : datasets)
            names += (names.empty() ? "" : ", ") + d.name() + (d.synthetic() ? " (synthetic)" : "");
        const auto inspected = trainer::cifar::inspectDataset((m_options.dataDir / spec.dataset()).string());
        const std::string why = inspected ? "it is not listed" : inspected.error();
        return precondition("spec.dataset " + shortQuote(spec.dataset())
            + " is not usable on this agent: " + why + " Data sets here: " + (names.empty() ? "none" : names)
            + ". Fetch CIFAR-10 with FetchDataset, create a synthetic set with "
              "CreateSyntheticDataset, or put CIFAR-10 binary files under "
            + m_options.dataDir.string());
    }
    const int localRanks = request.ranks_size();
    if (spec.threads_per_worker() * localRanks > cpuCores() * 4)
        return invalidArgument("spec.threads_per_worker " + std::to_string(spec.threads_per_worker()) + " x "
            + std::to_string(localRanks) + " ranks oversubscribes this node's " + std::to_string(cpuCores())
            + " cores more than 4 times");
    return grpc::Status::OK;
}

grpc::Status AgentService::makeLaunch(
    const v1::StartWorkersRequest &request, const StartPlacement &placement, RunLaunch *launch) const
{
    const auto &spec = request.spec();
    launch->request = request;
    *launch->request.mutable_rendezvous() = placement.rendezvous;
    if (placement.dataset) { // a probe-only run may name none
        launch->dataset = *placement.dataset;
        launch->datasetDir = (m_options.dataDir / placement.dataset->name()).string();
    }
    launch->runDir = m_options.stateDir / "runs" / request.run_id() / std::to_string(request.attempt());
    launch->workerBinary = m_options.workerBinary;
    launch->threadsPerRank = spec.threads_per_worker() > 0 ? spec.threads_per_worker()
                                                           : std::max(1, cpuCores() / request.ranks_size());
    launch->gpus = placement.gpus;
    if (auto s = resolveModels(launch); !s.ok())
        return s;
    launch->retention = m_options.retention;
    launch->counters = m_counters;
    // Ranks of a run that spans hosts use the address other hosts reach us at.
    if (request.world_size() > 1 && request.ranks_size() < request.world_size()) {
        launch->bindAddress = m_options.advertiseHost;
        launch->networkInterface = m_options.advertiseInterface;
    }
    return grpc::Status::OK;
}

grpc::Status AgentService::StartWorkers(
    grpc::ServerContext *context, const v1::StartWorkersRequest *request, v1::StartWorkersResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    m_runs.releaseFinished(); // finished runs' threads, joined as they come
    // --- the request's own fields, then what this node has -------------------
    if (const common::Status checked = checkStartRequest(*request); !checked)
        return invalidArgument(checked.error());
    StartPlacement placement;
    if (auto s = placeOnThisNode(*request, &placement); !s.ok())
        return s;

    // --- idempotent start -------------------------------------------------------
    std::shared_ptr<RunSupervisor> run;
    {
        const auto lock = m_runs.lock();
        if (m_runs.shuttingDownLocked())
            return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
        if (const auto existing = m_runs.findLocked(request->run_id())) {
            bool answered = false;
            if (auto s = repeatedStart(*existing, *request, response, &answered); !s.ok() || answered)
                return s;
        }
        RunLaunch launch;
        if (auto s = makeLaunch(*request, placement, &launch); !s.ok())
            return s;
        if (const std::error_code ec = m_runs.createAttemptFolderLocked(launch.runDir))
            return { grpc::StatusCode::INTERNAL,
                "cannot create " + launch.runDir.string() + ": " + ec.message() };
        run = std::make_shared<RunSupervisor>(std::move(launch));
        m_runs.addLocked(run);
    }
    const auto &spec = request->spec();
    logMessage(LogLevel::Info,
        "starting run " + request->run_id() + " attempt " + std::to_string(request->attempt())
            + (spec.probe_only()
                    ? std::string(": a network probe of ") + std::to_string(request->world_size()) + " ranks"
                    : " on data set " + spec.dataset()));
    if (const common::Status started = run->start(m_launcher); !started) {
        const std::string &error = started.error();
        logMessage(LogLevel::Error, "run " + request->run_id() + ": " + error);
        if (!run->recorded())
            m_runs.forgetUnrecorded(run);
        return startFailure(error);
    }
    *response->mutable_rendezvous() = placement.rendezvous;
    *response->mutable_run() = run->info();
    return grpc::Status::OK;
}

} // namespace scalelab::agent
