#include "agent_service.h"

#include "agent_support.h"
#include "bearer_token.h"
#include "checkpoint_transfer.h"
#include "cifar10.h"
#include "cpu_features.h"
#include "free_port.h"
#include "gpu_monitor.h"
#include "log.h"
#include "lr_find_session.h"
#include "node_sampler.h"
#include "request_limits.h"
#include "run_records.h"
#include "spec_rules.h"
#include "start_request.h"
#include "worker_command.h"
#include "worker_pump.h"

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

namespace scalelab::agent {

namespace {

grpc::Status precondition(const std::string &message)
{
    return { grpc::StatusCode::FAILED_PRECONDITION, message };
}

grpc::Status badRunId(const std::string &field, const std::string &value)
{
    return invalidArgument(badNameMessage(field, value));
}

} // namespace

AgentService::AgentService(AgentOptions options)
    : m_options(std::move(options))
    , m_runs(m_options.stateDir, m_options.finishedRunsInMemory)
    , m_inventory(m_options.dataDir, m_options.stateDir)
    , m_models(m_options.stateDir)
    , m_storage(m_options.stateDir, m_options.retention)
    , m_streams(std::make_unique<StreamLimits>(
          m_options.maxStreams, m_options.maxStreamsPerClient, m_options.streamStall))
{
    m_runs.restore(m_options.retention);
    m_models.sweep();
}

AgentService::~AgentService()
{
    shutdown();
}

void AgentService::shutdown()
{
    m_runs.shutdown(std::chrono::milliseconds(3000));
}

grpc::Status AgentService::admit(grpc::ServerContext *context, const google::protobuf::Message &request) const
{
    if (auto s = authorize(context); !s.ok())
        return s;
    if (const std::string problem = checkRequestLimits(request).error(); !problem.empty())
        return invalidArgument(problem);
    return grpc::Status::OK;
}

grpc::Status AgentService::authorize(grpc::ServerContext *context) const
{
    return checkBearerToken(context, m_options.token);
}

grpc::Status AgentService::Describe(
    grpc::ServerContext *context, const v1::DescribeRequest *, v1::DescribeResponse *response)
{
    if (auto s = authorize(context); !s.ok())
        return s;
    m_runs.releaseFinished(); // finished runs' threads, joined as they come
    m_inventory.describe(response);
    response->set_advertise_address(m_options.advertiseHost);
    response->set_network_interface(m_options.advertiseInterface);
    response->set_network_note(m_options.advertiseHow);
    response->set_network_warning(m_options.networkWarning);
    int busyRanks = 0;
    std::pair<std::string, std::int64_t> blas;
    const auto lock = m_runs.lock();
    m_runs.forEachLocked([&](const std::string &, const std::shared_ptr<RunSupervisor> &run) {
        // the active runs and the latest finished ones
        *response->add_runs() = run->info();
        if (!run->terminal())
            busyRanks += response->runs().rbegin()->ranks_size();
        if (auto used = run->blasInUse(); !used.first.empty() && used.second >= blas.second)
            blas = std::move(used);
    });
    // The agent loads no BLAS itself: the kernel its workers' latest run reported training with.
    if (!blas.first.empty())
        (*response->mutable_software())["blas"] = blas.first;
    response->set_runs_recorded(m_runs.recordedLocked());
    response->set_free_slots(std::max(0, cpuCores() - busyRanks - m_lrFinds.load()));
    *response->mutable_storage() = m_storage.read();
    for (const v1::StoredModel &model : m_models.list())
        *response->add_models() = model;
    return grpc::Status::OK;
}

grpc::Status AgentService::CollectGarbage(grpc::ServerContext *context,
    const v1::CollectGarbageRequest *request, v1::CollectGarbageResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (!request->finished_runs().empty() && request->finished_runs() != "final"
        && request->finished_runs() != "none")
        return invalidArgument("finished_runs must be \"\" (the agent's rule), \"final\" or \"none\" (got \""
            + request->finished_runs().substr(0, 32) + "\")");
    if (!std::isfinite(request->older_than_days()) || request->older_than_days() < 0
        || request->older_than_days() > 36500)
        return invalidArgument("older_than_days must be between 0 (any age) and 36500");
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const auto removed
        = collectGarbage(m_options.stateDir, m_runs.onDisk(), *request, m_options.retention, now);
    std::int64_t bytes = 0;
    for (const auto &r : removed) {
        bytes += r.bytes();
        *response->add_removed() = r;
    }
    response->set_bytes_freed(bytes);
    m_storage.invalidate(); // measured again now
    *response->mutable_storage() = m_storage.read();
    if (!request->dry_run() && !removed.empty())
        logMessage(LogLevel::Info,
            "garbage collection removed " + std::to_string(removed.size()) + " folder(s), "
                + std::to_string(bytes / 1'000'000) + " MB");
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
    const auto &spec = request->spec();
    std::map<int, std::vector<int>> gpuAssignment;
    if (spec.gpus_per_worker() > 0) {
        std::vector<int> gpus;
        for (const auto &gpu : GpuMonitor::instance().devices())
            gpus.push_back(gpu.index());
        auto assigned = assignGpus(spec.gpus_per_worker(),
            std::vector<int>(request->ranks().begin(), request->ranks().end()), gpus,
            GpuMonitor::instance().status());
        if (!assigned)
            return precondition(assigned.error());
        gpuAssignment = std::move(assigned.value());
    }
    // On GPUs the worker checks bf16 itself (compute capability 8.0) and says so.
    if (spec.precision() == v1::BF16 && spec.gpus_per_worker() == 0 && !trainer::cpu::hasBf16())
        return precondition("spec.precision BF16 needs a CPU with AVX-512 BF16 or AMX; this node has "
                            "neither. Use FP32");
    // Rendezvous: the agent that hosts rank 0 picks it when the client left it empty.
    v1::Endpoint rendezvous = request->rendezvous();
    if (request->world_size() > 1) {
        if (rendezvous.port() == 0) { // rank 0 is here (checkStartRequest)
            const bool allHere = request->ranks_size() == request->world_size();
            rendezvous.set_host(allHere ? "127.0.0.1" : m_options.advertiseHost);
            rendezvous.set_port(freeTcpPort());
            if (rendezvous.port() == 0)
                return { grpc::StatusCode::RESOURCE_EXHAUSTED, "no free TCP port for the rendezvous" };
        }
    }
    const auto datasets = m_inventory.datasets();
    const auto dataset = std::find_if(
        datasets.begin(), datasets.end(), [&](const auto &d) { return d.name() == spec.dataset(); });
    if (dataset == datasets.end() && !spec.probe_only()) {
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
    const int localRanks = request->ranks_size();
    if (spec.threads_per_worker() * localRanks > cpuCores() * 4)
        return invalidArgument("spec.threads_per_worker " + std::to_string(spec.threads_per_worker()) + " x "
            + std::to_string(localRanks) + " ranks oversubscribes this node's " + std::to_string(cpuCores())
            + " cores more than 4 times");

    // --- idempotent start -------------------------------------------------------
    std::shared_ptr<RunSupervisor> run;
    {
        const auto lock = m_runs.lock();
        if (m_runs.shuttingDownLocked())
            return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
        if (const auto existing = m_runs.findLocked(request->run_id())) {
            if (existing->attempt() == request->attempt()) {
                // Idempotent only for the same request: a different spec or placement
                // under the same (run, attempt) is a client bug, never silently ignored.
                const auto &was = existing->request();
                const bool same
                    = google::protobuf::util::MessageDifferencer::Equals(was.spec(), request->spec())
                    && was.world_size() == request->world_size()
                    && std::vector<int>(was.ranks().begin(), was.ranks().end())
                        == std::vector<int>(request->ranks().begin(), request->ranks().end());
                if (!same)
                    return { grpc::StatusCode::ALREADY_EXISTS,
                        "run " + request->run_id() + " attempt " + std::to_string(request->attempt())
                            + " already exists on this agent with a different spec, ranks or world size; "
                              "start a new attempt (or a new run id) to change them" };
                response->set_already_running(true);
                *response->mutable_run() = existing->info();
                *response->mutable_rendezvous() = response->run().rendezvous();
                return grpc::Status::OK;
            }
            if (!existing->terminal())
                return precondition("run " + request->run_id() + " attempt "
                    + std::to_string(existing->attempt())
                    + " is still running; stop it before starting attempt "
                    + std::to_string(request->attempt()));
            if (request->attempt() < existing->attempt())
                return precondition("run " + request->run_id() + " already had attempt "
                    + std::to_string(existing->attempt()) + "; a new attempt must have a higher number");
        }
        RunLaunch launch;
        launch.request = *request;
        *launch.request.mutable_rendezvous() = rendezvous;
        if (dataset != datasets.end()) { // a probe-only run may name none
            launch.dataset = *dataset;
            launch.datasetDir = (m_options.dataDir / dataset->name()).string();
        }
        launch.runDir = m_options.stateDir / "runs" / request->run_id() / std::to_string(request->attempt());
        launch.workerBinary = m_options.workerBinary;
        launch.threadsPerRank = spec.threads_per_worker() > 0 ? spec.threads_per_worker()
                                                              : std::max(1, cpuCores() / localRanks);
        launch.gpus = gpuAssignment;
        if (auto s = resolveModels(&launch); !s.ok())
            return s;
        launch.retention = m_options.retention;
        launch.counters = m_counters;
        // Ranks of a run that spans hosts use the address other hosts reach us at.
        if (request->world_size() > 1 && request->ranks_size() < request->world_size()) {
            launch.bindAddress = m_options.advertiseHost;
            launch.networkInterface = m_options.advertiseInterface;
        }
        if (const std::error_code ec = m_runs.createAttemptFolderLocked(launch.runDir))
            return { grpc::StatusCode::INTERNAL,
                "cannot create " + launch.runDir.string() + ": " + ec.message() };
        run = std::make_shared<RunSupervisor>(std::move(launch));
        m_runs.addLocked(run);
    }
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
        // A full disk is the node's problem, not the run's: the console waits for space.
        if (error.find(std::strerror(ENOSPC)) != std::string::npos
            || error.find(std::strerror(EDQUOT)) != std::string::npos)
            return { grpc::StatusCode::RESOURCE_EXHAUSTED, "no space left on device: " + error };
        return { grpc::StatusCode::INTERNAL, "could not start the worker: " + error };
    }
    *response->mutable_rendezvous() = rendezvous;
    *response->mutable_run() = run->info();
    return grpc::Status::OK;
}

grpc::Status AgentService::WatchRun(grpc::ServerContext *context, const v1::WatchRunRequest *request,
    grpc::ServerWriter<v1::RunEvent> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "WatchRun");
    if (!guard.admitted().ok())
        return guard.admitted();
    if (!common::isSafeName(request->run_id()))
        return badRunId("run_id", request->run_id());
    if (request->from_seq() < 0)
        return invalidArgument("from_seq must be 0 or more");
    const auto run = m_runs.find(request->run_id());
    if (!run)
        return { grpc::StatusCode::NOT_FOUND,
            "run_id " + shortQuote(request->run_id()) + " is not known to this agent" };
    std::int64_t next = std::max<std::int64_t>(request->from_seq(), 1);
    std::vector<v1::RunEvent> batch;
    for (;;) {
        if (context->IsCancelled())
            return { grpc::StatusCode::CANCELLED, "the client went away" };
        batch.clear();
        const bool more = run->events().read(next, 256, m_options.heartbeat, &batch);
        if (!more)
            return grpc::Status::OK; // terminal event delivered
        if (batch.empty()) {
            v1::RunEvent heartbeat;
            heartbeat.set_run_id(request->run_id());
            heartbeat.mutable_heartbeat();
            if (!guard.write(writer, heartbeat))
                return { grpc::StatusCode::CANCELLED, "the client went away" };
            continue;
        }
        for (const auto &event : batch)
            if (!guard.write(writer, event))
                return { grpc::StatusCode::CANCELLED, "the client went away" };
        next = batch.back().seq() + 1;
    }
}

grpc::Status AgentService::StopRun(
    grpc::ServerContext *context, const v1::StopRunRequest *request, v1::StopRunResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (!common::isSafeName(request->run_id()))
        return badRunId("run_id", request->run_id());
    if (request->grace_ms() < 0 || request->grace_ms() > 600'000)
        return invalidArgument("grace_ms must be 0 (the agent's default) to 600000");
    const auto run = m_runs.find(request->run_id());
    if (!run)
        return { grpc::StatusCode::NOT_FOUND,
            "run_id " + shortQuote(request->run_id()) + " is not known to this agent" };
    logMessage(LogLevel::Info, "stopping run " + request->run_id());
    run->stop(request->grace_ms() > 0 ? std::chrono::milliseconds(request->grace_ms()) : m_options.stopGrace);
    response->set_state(run->info().state());
    return grpc::Status::OK;
}

grpc::Status AgentService::ListRuns(
    grpc::ServerContext *context, const v1::ListRunsRequest *request, v1::ListRunsResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (request->page_size() < 0 || request->page_size() > kMaxRunsPerPage)
        return invalidArgument("page_size must be 0 (the default, " + std::to_string(kDefaultRunsPerPage)
            + ") to " + std::to_string(kMaxRunsPerPage) + " (got " + std::to_string(request->page_size())
            + ")");
    if (!request->page_token().empty() && !common::isSafeName(request->page_token()))
        return invalidArgument("page_token " + shortQuote(request->page_token())
            + " is not one this agent gave: pass the previous page's next_page_token, or \"\" for the first "
              "page");
    m_runs.releaseFinished(); // finished runs' threads, joined as they come
    const std::size_t pageSize = request->page_size() > 0 ? request->page_size() : kDefaultRunsPerPage;
    std::int64_t total = 0;
    // One more than the page: whether there is a next page, without a second scan.
    auto ids = runIdsPage(m_options.stateDir / "runs", request->page_token(), pageSize + 1, &total);
    const bool more = ids.size() > pageSize;
    if (more)
        ids.pop_back();
    for (const auto &id : ids)
        if (auto info = m_runs.recordedInfo(id))
            *response->add_runs() = std::move(*info);
    if (more)
        response->set_next_page_token(ids.back());
    response->set_total(total);
    return grpc::Status::OK;
}

grpc::Status AgentService::CreateSyntheticDataset(
    grpc::ServerContext *context, const v1::CreateSyntheticDatasetRequest *request, v1::Dataset *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (!common::isSafeName(request->name()))
        return badRunId("name", request->name());
    if (request->train_images() < 5 || request->train_images() > 1'000'000)
        return invalidArgument("train_images must be between 5 and 1000000 (got "
            + std::to_string(request->train_images()) + ")");
    if (request->test_images() < 1 || request->test_images() > 1'000'000)
        return invalidArgument(
            "test_images must be between 1 and 1000000 (got " + std::to_string(request->test_images()) + ")");
    static std::mutex creating; // two clients creating the same set must not interleave
    std::lock_guard lock(creating);
    const auto dir = m_options.dataDir / request->name();
    if (std::filesystem::exists(dir)) {
        const auto summary = trainer::cifar::inspectDataset(dir.string());
        if (summary && summary->synthetic && summary->trainImages == request->train_images()
            && summary->testImages == request->test_images()) {
            response->set_name(request->name());
            response->set_format("cifar10-binary");
            response->set_synthetic(true);
            response->set_train_images(summary->trainImages);
            response->set_test_images(summary->testImages);
            return grpc::Status::OK; // already there: idempotent
        }
        return { grpc::StatusCode::ALREADY_EXISTS,
            "name " + shortQuote(request->name()) + " already exists under " + m_options.dataDir.string()
                + " with different contents; choose another name" };
    }
    const auto kind
        = trainer::cifar::parseSyntheticKind(request->kind().empty() ? "patterns" : request->kind());
    if (!kind)
        return invalidArgument(
            "kind must be \"patterns\" or \"shapes\" (got \"" + request->kind().substr(0, 64) + "\")");
    if (const common::Status written = trainer::cifar::writeSyntheticDataset(
            dir.string(), request->train_images(), request->test_images(), request->seed(), *kind);
        !written)
        return { grpc::StatusCode::INTERNAL, written.error() };
    logMessage(LogLevel::Info,
        "created SYNTHETIC data set " + request->name() + " (" + trainer::cifar::syntheticKindName(*kind)
            + ")");
    response->set_synthetic_kind(trainer::cifar::syntheticKindName(*kind));
    response->set_name(request->name());
    response->set_format("cifar10-binary");
    response->set_synthetic(true);
    response->set_train_images(request->train_images());
    response->set_test_images(request->test_images());
    return grpc::Status::OK;
}

grpc::Status AgentService::WatchNode(grpc::ServerContext *context, const v1::WatchNodeRequest *request,
    grpc::ServerWriter<v1::NodeSample> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "WatchNode");
    if (!guard.admitted().ok())
        return guard.admitted();
    if (request->interval_ms() != 0 && (request->interval_ms() < 100 || request->interval_ms() > 60'000))
        return invalidArgument("interval_ms must be 0 (the agent's default) or 100..60000 (got "
            + std::to_string(request->interval_ms()) + ")");
    const auto interval = request->interval_ms() > 0 ? std::chrono::milliseconds(request->interval_ms())
                                                     : m_options.sampleInterval;
    NodeSampler sampler;
    // Each sample `interval` after the previous one began, not on a fixed grid: a sample
    // that came late (a busy node, a slow client) is not followed by a short one, nor a
    // stall by a burst, so every sample's rates cover at least an interval.
    auto next = std::chrono::steady_clock::now();
    for (;;) {
        next += interval;
        // Sleep in short slices so a cancelled stream or a shutdown ends it promptly.
        while (std::chrono::steady_clock::now() < next) {
            if (context->IsCancelled())
                return { grpc::StatusCode::CANCELLED, "the client went away" };
            if (m_runs.shuttingDown())
                return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                std::chrono::milliseconds(50), next - std::chrono::steady_clock::now()));
        }
        std::vector<SampledProcess> processes;
        {
            const auto lock = m_runs.lock();
            m_runs.forEachLocked([&](const std::string &id, const std::shared_ptr<RunSupervisor> &run) {
                for (const auto &placement : run->livePlacements())
                    processes.push_back({ id, run->attempt(), placement.rank(), placement.pid() });
            });
        }
        next = std::chrono::steady_clock::now(); // the sample's own time (unix_ms) is taken now
        if (!guard.write(writer, sampler.sample(processes)))
            return { grpc::StatusCode::CANCELLED, "the client went away" };
    }
}

AgentSnapshot AgentService::metricsSnapshot()
{
    AgentSnapshot snapshot;
    snapshot.attemptsStarted = m_counters->attemptsStarted;
    snapshot.retries = m_counters->retries;
    snapshot.succeeded = m_counters->succeeded;
    snapshot.failed = m_counters->failed;
    snapshot.cancelled = m_counters->cancelled;
    snapshot.checkpoints = m_counters->checkpoints;
    std::vector<LiveRank> ranks;
    {
        const auto lock = m_runs.lock();
        const std::int64_t shownSince = std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count()
            - std::int64_t(kEndedRunsShownSeconds) * 1000;
        m_runs.forEachLocked([&](const std::string &id, const std::shared_ptr<RunSupervisor> &run) {
            RunGauges gauges = run->gauges();
            if (!gauges.active() && gauges.endedUnixMs < shownSince)
                return;
            snapshot.runs.emplace_back(id, std::move(gauges));
            for (const auto &placement : run->livePlacements())
                ranks.push_back({ id, placement.rank(), placement.pid() });
        });
    }
    sampleNode(&snapshot, ranks);
    return snapshot;
}

grpc::Status AgentService::FetchDataset(grpc::ServerContext *context, const v1::FetchDatasetRequest *request,
    grpc::ServerWriter<v1::FetchProgress> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "FetchDataset");
    if (!guard.admitted().ok())
        return guard.admitted();
    const std::string name = request->name().empty() ? "cifar-10" : request->name();
    if (name != "cifar-10")
        return invalidArgument("name '" + name
            + "' is not a data set this agent can fetch; the only one is 'cifar-10' "
              "(CreateSyntheticDataset makes synthetic ones)");
    logMessage(LogLevel::Info, "fetching " + name + " from " + m_options.cifarSource.url);
    v1::Dataset dataset;
    const auto result = fetchCifar10(
        m_options.dataDir, name, m_options.cifarSource,
        [&](const v1::FetchProgress &progress) {
            return !context->IsCancelled() && guard.write(writer, progress);
        },
        &dataset);
    switch (result.failure) {
    case FetchFailure::None: {
        v1::FetchProgress done;
        done.set_phase(v1::FetchProgress::DONE);
        done.set_message("ready: " + (m_options.dataDir / name).string());
        *done.mutable_dataset() = dataset;
        guard.write(writer, done);
        return grpc::Status::OK;
    }
    case FetchFailure::Network:
        logMessage(LogLevel::Warning, result.message);
        return { grpc::StatusCode::UNAVAILABLE, result.message };
    case FetchFailure::Checksum:
        logMessage(LogLevel::Warning, result.message);
        return { grpc::StatusCode::DATA_LOSS, result.message };
    case FetchFailure::Conflict:
        return precondition(result.message);
    case FetchFailure::Abandoned:
        return { grpc::StatusCode::CANCELLED, result.message };
    case FetchFailure::Local:
        break;
    }
    logMessage(LogLevel::Error, result.message);
    return { grpc::StatusCode::INTERNAL, result.message };
}

grpc::Status AgentService::refuseWhileActive(const std::string &runId, const char *what) const
{
    const auto run = m_runs.inMemoryLocked(runId);
    if (!run || run->terminal())
        return grpc::Status::OK;
    return precondition("run " + runId + " attempt " + std::to_string(run->attempt())
        + " is active on this agent; " + what + " only into a run that is not running (stop it first)");
}

grpc::Status AgentService::ReadCheckpoint(grpc::ServerContext *context,
    const v1::ReadCheckpointRequest *request, grpc::ServerWriter<v1::CheckpointChunk> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "ReadCheckpoint");
    if (!guard.admitted().ok())
        return guard.admitted();
    if (!common::isSafeName(request->run_id()))
        return badRunId("run_id", request->run_id());
    if (request->epoch() < 0)
        return invalidArgument("epoch must be 0 (the newest committed checkpoint) or more (got "
            + std::to_string(request->epoch()) + ")");
    CheckpointSource source;
    if (auto s = source.open(checkpointsOf(m_options.stateDir / "runs" / request->run_id()),
            request->run_id(), request->epoch());
        !s.ok())
        return s;
    v1::CheckpointChunk chunk;
    grpc::Status status;
    while (source.next(&chunk, &status)) {
        if (context->IsCancelled() || !guard.write(writer, chunk))
            return { grpc::StatusCode::CANCELLED, "the client went away" };
    }
    if (status.ok())
        logMessage(LogLevel::Info, "sent checkpoint " + source.folder().string());
    else
        logMessage(LogLevel::Warning, status.error_message());
    return status;
}

grpc::Status AgentService::WriteCheckpoint(grpc::ServerContext *context,
    grpc::ServerReader<v1::CheckpointChunk> *reader, v1::WriteCheckpointResponse *response)
{
    if (auto s = authorize(context); !s.ok())
        return s;
    v1::CheckpointChunk chunk;
    if (!reader->Read(&chunk))
        return invalidArgument("the stream held no message: send the manifest first");
    if (!chunk.has_manifest())
        return invalidArgument("the first message must carry the manifest (run_id, epoch, files)");
    if (const std::string problem = checkRequestLimits(chunk.manifest()).error(); !problem.empty())
        return invalidArgument("manifest." + problem);
    const v1::CheckpointManifest manifest = chunk.manifest();
    if (!common::isSafeName(manifest.run_id()))
        return badRunId("manifest.run_id", manifest.run_id());
    if (manifest.epoch() < 1)
        return invalidArgument(
            "manifest.epoch must be 1 or more (got " + std::to_string(manifest.epoch()) + ")");
    {
        const auto lock = m_runs.lock();
        if (m_runs.shuttingDownLocked())
            return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
        if (auto s = refuseWhileActive(manifest.run_id(), "a checkpoint can be written"); !s.ok())
            return s;
    }
    CheckpointSink sink(checkpointsOf(m_options.stateDir / "runs" / manifest.run_id()));
    if (auto s = sink.begin(manifest); !s.ok())
        return s;
    bool first = true;
    do {
        if (context->IsCancelled())
            return { grpc::StatusCode::CANCELLED, "the client went away; nothing was written" };
        if (!first && chunk.has_manifest())
            return invalidArgument("only the first message may carry a manifest");
        first = false;
        if (auto s = sink.add(chunk); !s.ok())
            return s;
    } while (reader->Read(&chunk));
    if (auto s = sink.finish(); !s.ok())
        return s;
    std::filesystem::path committed;
    {
        // Checked again where StartWorkers checks too: a worker never sees a checkpoint
        // folder change under it.
        const auto lock = m_runs.lock();
        if (auto s = refuseWhileActive(manifest.run_id(), "a checkpoint can be written"); !s.ok())
            return s;
        if (auto s = sink.commit(&committed); !s.ok())
            return s;
    }
    logMessage(LogLevel::Info,
        "received checkpoint of run " + manifest.run_id() + " epoch " + std::to_string(manifest.epoch())
            + " (" + std::to_string(sink.bytes()) + " bytes) into " + committed.string());
    response->set_run_id(manifest.run_id());
    response->set_epoch(manifest.epoch());
    response->set_bytes(sink.bytes());
    response->set_path(committed.string());
    return grpc::Status::OK;
}

grpc::Status AgentService::FindLearningRate(grpc::ServerContext *context,
    const v1::FindLearningRateRequest *request, grpc::ServerWriter<v1::LrFindProgress> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "FindLearningRate");
    if (!guard.admitted().ok())
        return guard.admitted();
    v1::RunSpec spec = request->spec();
    spec.set_epochs(1); // not used by the test; keeps the shared rules happy
    spec.clear_learning_rate();
    spec.clear_warmup_epochs();
    if (const rules::SpecStatus checked = rules::checkRunSpec(spec, { "spec.", false, false }); !checked)
        return invalidArgument(rules::joinProblems(checked.error()));
    const double minLr = request->min_lr() == 0 ? 1e-5 : request->min_lr();
    const double maxLr = request->max_lr() == 0 ? 10.0 : request->max_lr();
    const int steps = request->steps() == 0 ? 200 : request->steps();
    if (!(minLr > 0) || !std::isfinite(minLr) || !(maxLr > minLr) || !std::isfinite(maxLr) || maxLr > 1000)
        return invalidArgument(
            "min_lr and max_lr must be finite with 0 < min_lr < max_lr <= 1000 (0 = 1e-5 and 10)");
    if (steps < 10 || steps > 100000)
        return invalidArgument("steps must be 0 (200) or 10..100000 (got " + std::to_string(steps) + ")");
    if (spec.gpus_per_worker() > 0)
        return invalidArgument("spec.gpus_per_worker: the range test runs on the CPU here; use 0");
    const auto datasets = m_inventory.datasets();
    const auto dataset = std::find_if(
        datasets.begin(), datasets.end(), [&](const auto &d) { return d.name() == spec.dataset(); });
    if (dataset == datasets.end())
        return precondition(
            "spec.dataset '" + spec.dataset().substr(0, 64) + "' is not a data set on this agent");

    RunLaunch launch; // the worker's options are built as for a run, then turned into lr-find's
    launch.request.mutable_spec()->CopyFrom(spec);
    launch.request.set_world_size(1);
    launch.dataset = *dataset;
    launch.datasetDir = (m_options.dataDir / dataset->name()).string();
    launch.workerBinary = m_options.workerBinary;
    launch.threadsPerRank = spec.threads_per_worker() > 0 ? spec.threads_per_worker() : cpuCores();
    if (auto s = resolveModels(&launch); !s.ok())
        return s;
    SpawnRequest spawn;
    spawn.argv = workerCommand(launch, lrFindLaunch(launch, minLr, maxLr, steps));
    spawn.extraEnv = workerEnvironment(launch, 0); // launch.gpus is empty: no GPU
    const common::Result<SpawnedProcess> process = m_launcher.spawn(spawn);
    if (!process)
        return { grpc::StatusCode::INTERNAL, "could not start the worker: " + process.error() };
    ++m_lrFinds;
    logMessage(LogLevel::Info,
        "learning-rate range test on " + spec.dataset() + " (batch " + std::to_string(spec.batch_size())
            + ", " + std::to_string(steps) + " steps)");

    LrFindSession session(spawn.argv, [&](const v1::LrFindProgress &reply) { guard.write(writer, reply); });
    const PumpResult ended = pumpWorker(*process, session.pump([&] { return context->IsCancelled(); }));
    --m_lrFinds;
    return session.finish(ended);
}

} // namespace scalelab::agent
