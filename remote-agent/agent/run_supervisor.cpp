#include "run_supervisor.h"

#include "rank_exit.h"

#include "agent_support.h"
#include "spec_rules.h"
#include "worker_channel.h"
#include "worker_command.h"
#include "worker_contract.h"

#include "checkpoint_transfer.h"
#include "file_io.h"
#include "log.h"
#include "run_records.h"
#include "worker_pump.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace scalelab::agent {

bool RunSupervisor::isTerminal(v1::RunState s)
{
    return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

RunSupervisor::RunSupervisor(RunLaunch launch)
    : m_launch(std::move(launch))
{
    m_events = std::make_unique<RunEventLog>(m_launch.runDir / "events.log");
    m_gauges.attempt = m_launch.request.attempt();
    m_gauges.worldSize = m_launch.request.world_size();
    m_gauges.epochs = m_launch.request.spec().epochs();
    for (int rank : m_launch.request.ranks()) {
        v1::RankPlacement placement;
        placement.set_rank(rank);
        placement.set_threads(m_launch.threadsPerRank);
        if (auto it = m_launch.gpus.find(rank); it != m_launch.gpus.end())
            placement.mutable_gpus()->Add(it->second.begin(), it->second.end());
        m_placements.push_back(std::move(placement));
    }
}

RunSupervisor::RunSupervisor(RunLaunch launch, Restored how)
    : m_launch(std::move(launch))
{
    m_recorded = true; // read back from its request.json
    m_events = std::make_unique<RunEventLog>(m_launch.runDir / "events.log");
    v1::RunInfo saved;
    if (google::protobuf::util::JsonStringToMessage(readText(m_launch.runDir / "placement.json"), &saved)
            .ok())
        m_placements.assign(saved.placements().begin(), saved.placements().end());
    for (auto &placement : m_placements)
        placement.set_pid(0);
    std::vector<v1::RunEvent> all;
    m_events->read(1, std::size_t(-1), std::chrono::milliseconds(0), &all);
    if (!all.empty())
        m_startedMs = all.front().unix_ms();
    m_gauges.attempt = m_launch.request.attempt();
    m_gauges.worldSize = m_launch.request.world_size();
    m_gauges.epochs = m_launch.request.spec().epochs();
    for (const auto &event : all) {
        m_gauges.observe(event);
        if (event.has_state()) {
            m_gauges.state = event.state().state();
            m_state = event.state().state();
            m_message = event.state().message();
            m_interrupted = event.state().interrupted();
            if (isTerminal(m_state))
                m_endedMs = event.unix_ms();
            m_gauges.endedUnixMs = m_endedMs;
        } else if (event.has_started()) {
            m_launch.dataset = event.started().dataset();
            rememberBlas(event);
        } else if (event.has_summary()) {
            m_finished = event.summary();
        } else if (event.has_rank_exited()) {
            for (auto &placement : m_placements)
                if (placement.rank() == event.rank_exited().rank())
                    *placement.mutable_exit() = event.rank_exited();
        }
    }
    if (!isTerminal(m_state) && how.closeIfActive) {
        // The agent went away while this run was active; its workers died with it.
        m_closedOnRestore = true;
        m_interrupted = true;
        m_stopRequested = true;
        const std::string message = "interrupted: the agent stopped while the run was "
            + v1::RunState_Name(m_state) + "; checkpoints are kept, start attempt "
            + std::to_string(attempt() + 1) + " to resume";
        v1::RunSummary summary;
        summary.set_state(v1::FAILED);
        summary.set_message(message);
        auto event = makeEvent(-1);
        *event.mutable_summary() = summary;
        m_events->append(std::move(event));
        m_endedMs = nowUnixMs();
        setState(v1::FAILED, message);
    }
    m_events->close();
}

common::Result<std::shared_ptr<RunSupervisor>> RunSupervisor::restore(
    const std::filesystem::path &runDir, bool closeIfActive)
{
    RunLaunch launch;
    launch.runDir = runDir;
    const std::string json = readText(runDir / "request.json");
    if (json.empty() || !google::protobuf::util::JsonStringToMessage(json, &launch.request).ok())
        return common::Status::failure("no readable request.json in " + runDir.string());
    auto run
        = std::shared_ptr<RunSupervisor>(new RunSupervisor(std::move(launch), Restored { closeIfActive }));
    if (!run->m_events->opened())
        return run->m_events->opened();
    return run;
}

RunSupervisor::~RunSupervisor()
{
    if (!terminal())
        stop(std::chrono::milliseconds(2000));
    joinThreads();
}

void RunSupervisor::joinThreads()
{
    waitFinished();
    m_killTimerArmed = false;
    if (m_killTimer.joinable())
        m_killTimer.join();
    {
        std::lock_guard lock(m_mutex);
        m_stallWatchStop = true;
    }
    m_terminalCv.notify_all();
    if (m_stallWatch.joinable())
        m_stallWatch.join();
}

void RunSupervisor::fillStall(v1::Stall *stall, bool stalled, std::int64_t sinceMs, std::int64_t nowMs) const
{
    stall->set_stalled(stalled);
    stall->set_since_unix_ms(sinceMs);
    stall->set_seconds(double(nowMs - sinceMs) / 1000.0);
    stall->set_last_step(m_lastStep);
    stall->set_last_epoch(m_lastEpoch);
}

void RunSupervisor::noteProgress(std::int64_t step, int epoch)
{
    v1::RunEvent event = makeEvent(0);
    // Under the lock, as in watchForStalls(): a stall and its end are logged in order.
    std::lock_guard lock(m_mutex);
    {
        const std::int64_t now = nowUnixMs();
        if (step > 0)
            m_lastStep = step;
        if (epoch > 0)
            m_lastEpoch = epoch;
        const std::int64_t since = m_lastProgressMs;
        m_lastProgressMs = now;
        if (!m_stalled || m_stallWatchStop)
            return;
        m_stalled = false;
        auto *stall = event.mutable_stall();
        fillStall(stall, false, since, now);
        char text[160];
        std::snprintf(text, sizeof text, "progress again after %.0f s without any", stall->seconds());
        stall->set_message(text);
    }
    record(std::move(event), /*durable=*/false);
}

void RunSupervisor::watchForStalls()
{
    const int seconds
        = m_launch.request.spec().stall_seconds() > 0 ? m_launch.request.spec().stall_seconds() : 15;
    std::unique_lock lock(m_mutex);
    while (!m_stallWatchStop && !isTerminal(m_state)) {
        m_terminalCv.wait_for(lock, std::chrono::milliseconds(500));
        if (m_stallWatchStop || isTerminal(m_state) || m_stalled || m_lastProgressMs == 0 || m_stopRequested
            || m_aborting)
            continue;
        const std::int64_t now = nowUnixMs();
        if (now - m_lastProgressMs < std::int64_t(seconds) * 1000)
            continue;
        m_stalled = true;
        v1::RunEvent event = makeEvent(0);
        auto *stall = event.mutable_stall();
        fillStall(stall, true, m_lastProgressMs, now);
        const bool spansHosts = m_launch.request.ranks_size() < m_launch.request.world_size();
        stall->set_message("stalled: no progress for " + std::to_string(int(stall->seconds()))
            + " s (last step " + std::to_string(m_lastStep)
            + (spansHosts ? "); waiting for ranks on other hosts" : ")"));
        // Under the lock: finish() stops this watch before it writes the terminal events,
        // so a stall is never recorded after them. (The log never calls back into us.)
        record(std::move(event), /*durable=*/false);
    }
}

v1::RunEvent RunSupervisor::makeEvent(int rank) const
{
    v1::RunEvent event;
    event.set_run_id(m_launch.request.run_id());
    event.set_attempt(m_launch.request.attempt());
    event.set_rank(rank);
    return event;
}

void RunSupervisor::record(v1::RunEvent event, bool durable)
{
    {
        std::lock_guard lock(m_gaugesMutex);
        m_gauges.observe(event);
    }
    m_events->append(std::move(event), durable);
}

bool RunSupervisor::hostsRankZero() const
{
    const auto &ranks = m_launch.request.ranks();
    return std::find(ranks.begin(), ranks.end(), 0) != ranks.end();
}

void RunSupervisor::countOutcome(v1::RunState state)
{
    if (!m_launch.counters || !hostsRankZero())
        return;
    ++(state == v1::SUCCEEDED     ? m_launch.counters->succeeded
            : state == v1::FAILED ? m_launch.counters->failed
                                  : m_launch.counters->cancelled);
}

RunGauges RunSupervisor::gauges() const
{
    std::lock_guard lock(m_gaugesMutex);
    return m_gauges;
}

void RunSupervisor::setState(v1::RunState state, const std::string &message)
{
    {
        std::lock_guard lock(m_mutex);
        // An ended attempt stays ended: a late "running" (a rank that started as another
        // failed) changes nothing.
        if (isTerminal(m_state) && !isTerminal(state))
            return;
        m_state = state;
        m_message = message;
        if (isTerminal(state) && m_endedMs == 0)
            m_endedMs = nowUnixMs();
        std::lock_guard gaugesLock(m_gaugesMutex); // after m_mutex, as everywhere
        m_gauges.state = state;
        m_gauges.endedUnixMs = m_endedMs;
    }
    auto event = makeEvent(-1);
    event.mutable_state()->set_state(state);
    event.mutable_state()->set_message(message);
    event.mutable_state()->set_interrupted(m_interrupted);
    m_events->append(std::move(event), isTerminal(state));
    if (isTerminal(state) && m_recorded) {
        // The terminal state is the last event: the outcome is what a listing reads back.
        if (const common::Status written = writeOutcome(m_launch.runDir, info()); !written)
            logMessage(LogLevel::Warning,
                "run " + runId() + ": " + written.error() + " (listing it will read its event log instead)");
    }
}

common::Status RunSupervisor::start(ProcessLauncher &launcher)
{
    if (const common::Status &opened = m_events->opened(); !opened) {
        setState(v1::FAILED, opened.error());
        m_events->close();
        return opened;
    }
    // The records first: a run the agent could not record is not started, so a restarted
    // agent never finds a run it cannot reopen (older attempts' records stay as they are).
    {
        v1::RunInfo placement;
        placement.mutable_placements()->Add(m_placements.begin(), m_placements.end());
        *placement.mutable_rendezvous() = m_launch.request.rendezvous();
        common::Status written = writeJsonAtomically(placement, m_launch.runDir / "placement.json");
        if (written)
            written = writeJsonAtomically(
                m_launch.request, m_launch.runDir / "request.json"); // last: it marks the attempt
        if (!written) {
            const std::string problem = "cannot record the run on this agent's disk: " + written.error();
            logMessage(LogLevel::Warning, problem);
            setState(v1::FAILED, problem);
            m_events->close();
            std::error_code ec;
            std::filesystem::remove(m_launch.runDir / "request.json", ec);
            return common::Status::failure(problem);
        }
        m_recorded = true;
    }
    m_startedMs = nowUnixMs();
    setState(
        v1::STARTING, "starting " + std::to_string(m_launch.request.ranks_size()) + " rank(s) on this agent");
    if (m_launch.counters && hostsRankZero()) {
        ++m_launch.counters->attemptsStarted;
        if (attempt() > 1)
            ++m_launch.counters->retries;
    }

    for (int rankNumber : m_launch.request.ranks()) {
        SpawnRequest request;
        request.argv = workerCommand(m_launch, workerLaunch(m_launch, rankNumber));
        if (rankNumber == 0)
            m_rankZeroCommand = request.argv;
        request.extraEnv = workerEnvironment(m_launch, rankNumber);
        request.processGroup = m_processGroup;
        const long oomKillsAtStart = cgroupOomKills();
        const common::Result<SpawnedProcess> spawned = launcher.spawn(std::move(request));
        if (!spawned) {
            const std::string message = "rank " + std::to_string(rankNumber) + ": " + spawned.error();
            {
                std::lock_guard lock(m_mutex);
                v1::RankExit exit;
                exit.set_rank(rankNumber);
                exit.set_kind(v1::EXIT_FAILED);
                exit.set_message(message);
                if (!m_decidingExit)
                    m_decidingExit = exit;
                if (m_ranks.empty())
                    m_endedMs = nowUnixMs();
            }
            signalRanks(std::chrono::milliseconds(0), /*requested=*/false);
            if (m_ranks.empty()) {
                countOutcome(v1::FAILED); // else finish() counts it, once the started ranks exit
                setState(v1::FAILED, message);
                m_events->close();
            }
            return common::Status::failure(message);
        }
        const SpawnedProcess process = *spawned;
        std::lock_guard lock(m_mutex);
        if (m_processGroup == 0)
            m_processGroup = process.pid;
        auto rank = std::make_unique<Rank>();
        rank->rank = rankNumber;
        rank->pid = process.pid;
        rank->oomKillsAtStart = oomKillsAtStart;
        for (auto &placement : m_placements)
            if (placement.rank() == rankNumber)
                placement.set_pid(process.pid);
        Rank &ref = *rank;
        m_ranks.push_back(std::move(rank));
        ref.monitor = std::thread([this, &ref, process] { monitor(ref, process); });
    }
    // Rank 0 says when training starts; an agent without rank 0 hears nothing from its
    // ranks until they finish, so for it running means started.
    const auto &ranks = m_launch.request.ranks();
    if (std::find(ranks.begin(), ranks.end(), 0) != ranks.end())
        m_stallWatch = std::thread([this] { watchForStalls(); });
    if (std::find(ranks.begin(), ranks.end(), 0) == ranks.end()) {
        bool starting = false;
        {
            std::lock_guard lock(m_mutex);
            starting = m_state == v1::STARTING;
        }
        if (starting)
            setState(v1::RUNNING, "ranks started; rank 0 on another agent reports training");
    }
    return common::Status::success();
}

void RunSupervisor::monitor(Rank &rank, const SpawnedProcess &process)
{
    WorkerPump pump;
    pump.eventLine = [&](const std::string &l) { handleEventLine(rank.rank, l); };
    pump.outputLine = [&](const std::string &l) { handleOutputLine(rank.rank, l); };
    onRankExited(rank, pumpWorker(process, pump).waitStatus);
}

void RunSupervisor::handleOutputLine(int rank, const std::string &line)
{
    {
        std::lock_guard lock(m_mutex);
        if (!line.empty())
            m_lastOutputLine = line;
    }
    auto event = makeEvent(rank);
    event.mutable_log()->set_stream("output");
    event.mutable_log()->set_text(line);
    m_events->append(std::move(event));
}

void RunSupervisor::handleEventLine(int rank, const std::string &line)
{
    auto parsed = worker::parseEventLine(line);
    if (!parsed) {
        handleOutputLine(rank, "unparseable worker event (" + parsed.error() + "): " + line);
        return;
    }
    v1::WorkerEvent &in = *parsed;
    auto event = makeEvent(rank);
    bool durable = false;
    switch (in.kind_case()) {
    case v1::WorkerEvent::kStarted: {
        bool first = false;
        {
            std::lock_guard lock(m_mutex);
            first = m_state == v1::STARTING;
        }
        if (first)
            setState(v1::RUNNING, "training");
        auto *s = event.mutable_started();
        *s = std::move(*in.mutable_started());
        {
            std::lock_guard lock(m_mutex);
            rememberBlas(event);
        }
        // The worker knows the data set's kind and sizes; the agent its name and content.
        v1::Dataset dataset = m_launch.dataset;
        dataset.set_synthetic(s->dataset().synthetic());
        dataset.set_train_images(s->dataset().train_images());
        dataset.set_test_images(s->dataset().test_images());
        *s->mutable_dataset() = std::move(dataset);
        // The recipe the worker runs, over what the agent asked (the data set's name, the
        // GPUs and the stall time, which the worker does not decide). Fields the worker
        // leaves unset or zero keep the agent's value.
        v1::RunSpec effective = rules::withDefaults(m_launch.request.spec());
        effective.MergeFrom(s->effective());
        // A stored module by its sum, not by this agent's path to it: what a rerun names.
        effective.set_model(
            m_launch.request.spec().model().empty() ? effective.model() : m_launch.request.spec().model());
        effective.set_initial_weights(m_launch.request.spec().initial_weights());
        *s->mutable_effective() = std::move(effective);
        std::lock_guard lock(m_mutex);
        s->mutable_worker_command()->Add(m_rankZeroCommand.begin(), m_rankZeroCommand.end());
        if (rank == 0) // said once, and the event log keeps it: no copy per run in memory
            std::vector<std::string>().swap(m_rankZeroCommand);
        break;
    }
    case v1::WorkerEvent::kStep:
        *event.mutable_step() = std::move(*in.mutable_step());
        break;
    case v1::WorkerEvent::kEpoch:
        *event.mutable_epoch() = std::move(*in.mutable_epoch());
        durable = true;
        break;
    case v1::WorkerEvent::kCheckpoint:
        *event.mutable_checkpoint() = std::move(*in.mutable_checkpoint());
        durable = true;
        break;
    case v1::WorkerEvent::kProgress:
        if (rank == 0)
            noteProgress(0, in.progress().epoch());
        return; // liveness only: nothing to keep
    case v1::WorkerEvent::kWarning:
        event.mutable_log()->set_stream("warning");
        event.mutable_log()->set_text(in.warning().message());
        break;
    case v1::WorkerEvent::kFinished: {
        std::lock_guard lock(m_mutex);
        if (rank == 0 || !m_finished)
            m_finished = in.finished();
        m_finishedRanks.insert(rank);
        return; // reported in the terminal summary, once the process has exited
    }
    case v1::WorkerEvent::kError: {
        {
            std::lock_guard lock(m_mutex);
            m_rankErrors[rank] = in.error().message();
            if (in.error().bytes_needed() > 0)
                m_rankBytesNeeded[rank] = in.error().bytes_needed();
        }
        event.mutable_log()->set_stream("error");
        event.mutable_log()->set_text(in.error().message());
        break;
    }
    default: // an event of another command (bench, lr-find, gradient-check)
        handleOutputLine(rank, "unexpected worker event for a training run: " + line);
        return;
    }
    const bool progress
        = event.has_started() || event.has_step() || event.has_epoch() || event.has_checkpoint();
    const std::int64_t step = event.has_step() ? event.step().step()
        : event.has_checkpoint()               ? event.checkpoint().step()
                                               : 0;
    const int epoch = event.has_step() ? event.step().epoch() : event.has_epoch() ? event.epoch().epoch() : 0;
    if (event.has_checkpoint() && rank == 0 && m_launch.counters)
        ++m_launch.counters->checkpoints;
    record(std::move(event), durable);
    if (progress && rank == 0)
        noteProgress(step, epoch);
}

void RunSupervisor::rememberBlas(const v1::RunEvent &started)
{
    const auto &software = started.started().software();
    if (const auto blas = software.find("blas"); blas != software.end() && !blas->second.empty()) {
        m_blas = blas->second;
        m_blasSinceMs = started.unix_ms();
    }
}

std::pair<std::string, std::int64_t> RunSupervisor::blasInUse() const
{
    std::lock_guard lock(m_mutex);
    return { m_blas, m_blasSinceMs };
}

v1::RunInfo RunSupervisor::info() const
{
    v1::RunInfo info;
    std::lock_guard lock(m_mutex);
    info.set_run_id(m_launch.request.run_id());
    info.set_attempt(m_launch.request.attempt());
    info.set_state(m_state);
    *info.mutable_ranks() = m_launch.request.ranks();
    info.set_world_size(m_launch.request.world_size());
    *info.mutable_spec() = m_launch.request.spec();
    info.set_last_seq(m_events->lastSeq());
    info.set_started_unix_ms(m_startedMs);
    info.set_ended_unix_ms(m_endedMs);
    info.set_message(m_message);
    info.set_interrupted(m_interrupted);
    info.mutable_placements()->Add(m_placements.begin(), m_placements.end());
    *info.mutable_rendezvous() = m_launch.request.rendezvous();
    return info;
}

std::vector<v1::RankPlacement> RunSupervisor::livePlacements() const
{
    std::vector<v1::RankPlacement> live;
    std::lock_guard lock(m_mutex);
    for (const auto &placement : m_placements)
        if (placement.pid() > 0)
            live.push_back(placement);
    return live;
}

} // namespace scalelab::agent
