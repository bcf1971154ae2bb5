#include "agent_service.h"

#include "agent_support.h"
#include "bearer_token.h"
#include "checkpoint_transfer.h"
#include "cifar10.h"
#include "log.h"
#include "lr_find_session.h"
#include "node_sampler.h"
#include "request_limits.h"
#include "run_records.h"
#include "spec_rules.h"
#include "start_request.h"
#include "worker_command.h"
#include "worker_pump.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <thread>

namespace scalelab::agent {

namespace {

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
