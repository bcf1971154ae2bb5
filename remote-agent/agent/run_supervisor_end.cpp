// How a run attempt ends (run_supervisor.h): each rank's exit classified, the terminal
// state written once every rank is gone, its checkpoints tidied, and the stops that lead
// there (StopRun, the agent's shutdown, a failed rank taking the others down).
#include "run_supervisor.h"

#include "rank_exit.h"

#include "agent_support.h"
#include "checkpoint_transfer.h"
#include "log.h"
#include "run_records.h"

#include <csignal>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace scalelab::agent {

void RunSupervisor::onRankExited(Rank &rank, int status)
{
    bool last = false;
    bool failedFirst = false;
    v1::RankExit exit;
    {
        std::lock_guard lock(m_mutex);
        rank.exited = true;
        if (WIFEXITED(status))
            rank.exitCode = WEXITSTATUS(status);
        else if (WIFSIGNALED(status))
            rank.signal = WTERMSIG(status);
        const long oomNow = cgroupOomKills();
        const long oomKills = rank.oomKillsAtStart >= 0 && oomNow >= 0 ? oomNow - rank.oomKillsAtStart : -1;
        const std::string ownError = m_rankErrors.count(rank.rank) ? m_rankErrors[rank.rank] : std::string();
        exit = classifyExit(rank.rank, status, m_stopRequested || m_aborting, ownError,
            m_finishedRanks.count(rank.rank) > 0, oomKills);
        if (exit.kind() == v1::EXIT_NO_SPACE && m_rankBytesNeeded.count(rank.rank))
            exit.set_bytes_needed(m_rankBytesNeeded[rank.rank]);
        rank.exit = exit;
        for (auto &placement : m_placements)
            if (placement.rank() == rank.rank) {
                placement.set_pid(0);
                *placement.mutable_exit() = exit;
            }
        const bool bad = exit.kind() != v1::EXIT_SUCCEEDED && exit.kind() != v1::EXIT_STOPPED;
        if (bad && !m_decidingExit) {
            m_decidingExit = exit;
            failedFirst = true;
        }
        last = ++m_exitedRanks == static_cast<int>(m_ranks.size());
    }
    auto event = makeEvent(rank.rank);
    *event.mutable_rank_exited() = exit;
    m_events->append(std::move(event));
    // One rank failing dooms the run: stop the others rather than let them hang in a
    // collective that will never complete.
    if (failedFirst && !last)
        signalRanks(std::chrono::milliseconds(3000), /*requested=*/false);
    if (last)
        finish();
}

void RunSupervisor::finish()
{
    v1::RunSummary summary;
    v1::RunState state;
    std::string message;
    {
        std::lock_guard lock(m_mutex);
        m_stallWatchStop = true; // no stall event after the terminal ones
        m_endedMs = nowUnixMs();
        if (m_finished)
            summary = *m_finished;
        const bool allSucceeded = std::all_of(m_ranks.begin(), m_ranks.end(),
            [](const auto &r) { return r->exit.kind() == v1::EXIT_SUCCEEDED; });
        if (m_decidingExit) {
            state = v1::FAILED;
            message = m_decidingExit->message();
            if (m_decidingExit->kind() == v1::EXIT_FAILED
                && m_decidingExit->message().find(':') == std::string::npos && !m_lastOutputLine.empty())
                message += "; last output: " + m_lastOutputLine;
            summary.set_exit_code(m_decidingExit->exit_code());
            summary.set_signal(m_decidingExit->signal());
            summary.set_exit_kind(m_decidingExit->kind());
        } else if (m_interrupted && !allSucceeded) {
            state = v1::FAILED;
            message
                = "interrupted: the agent shut down while the run was active; checkpoints are kept, start "
                  "attempt "
                + std::to_string(attempt() + 1) + " to resume";
            summary.set_exit_kind(v1::EXIT_STOPPED);
        } else if (allSucceeded) {
            state = v1::SUCCEEDED;
            message = "finished";
            summary.set_exit_kind(v1::EXIT_SUCCEEDED);
        } else {
            state = v1::CANCELLED;
            message = "stopped on request";
            summary.set_exit_kind(v1::EXIT_STOPPED);
        }
        summary.set_state(state);
        summary.set_message(message);
    }
    tidyCheckpoints(state);
    countOutcome(state);
    auto event = makeEvent(-1);
    *event.mutable_summary() = summary;
    m_events->append(std::move(event));
    setState(state, message);
    m_events->close();
    m_killTimerArmed = false;
    m_terminalCv.notify_all();
}

void RunSupervisor::tidyCheckpoints(v1::RunState state)
{
    // Every rank has exited: nothing writes into the run's checkpoints any more.
    const std::filesystem::path runFolder = m_launch.runDir.parent_path();
    const std::filesystem::path stateDir = runFolder.parent_path().parent_path(); // <state>/runs/<id>
    const std::string runId = runFolder.filename().string();
    const RunOnDisk self { runId, state, nowUnixMs(), false };
    // A SUCCEEDED run also loses what the agent's rule does not keep, unless it stopped
    // before its schedule's end (stop_after_epochs): it is paused, and its checkpoints are
    // what the attempt that continues it resumes from.
    const auto &spec = m_launch.request.spec();
    const bool paused = spec.stop_after_epochs() > 0 && spec.stop_after_epochs() < spec.epochs();
    const std::vector<Removal> removed = state == v1::SUCCEEDED && !paused
        ? collectGarbage(stateDir, { self }, v1::CollectGarbageRequest {}, m_launch.retention, nowUnixMs())
        : sweepTemporary(stateDir, { self });
    std::int64_t bytes = 0;
    for (const auto &r : removed)
        bytes += r.bytes();
    if (!removed.empty())
        logMessage(LogLevel::Info,
            "run " + runId + ": removed " + std::to_string(removed.size()) + " checkpoint folder(s), "
                + std::to_string(bytes / 1'000'000) + " MB (" + m_launch.retention.words() + ")");
}

void RunSupervisor::stop(std::chrono::milliseconds grace)
{
    signalRanks(grace, /*requested=*/true);
}

void RunSupervisor::interrupt(std::chrono::milliseconds grace)
{
    {
        std::lock_guard lock(m_mutex);
        if (isTerminal(m_state))
            return;
        m_interrupted = true;
    }
    signalRanks(grace, /*requested=*/true);
}

void RunSupervisor::signalRanks(std::chrono::milliseconds grace, bool requested)
{
    pid_t group;
    {
        std::lock_guard lock(m_mutex);
        if (isTerminal(m_state))
            return;
        if (requested)
            m_stopRequested = true;
        else
            m_aborting = true;
        group = m_processGroup;
    }
    if (group <= 0)
        return;
    ::kill(-group, SIGTERM);
    if (m_killTimerArmed.exchange(true))
        return; // a kill timer is already running
    if (m_killTimer.joinable())
        m_killTimer.join();
    m_killTimer = std::thread([this, group, grace] {
        std::unique_lock lock(m_mutex);
        if (!m_terminalCv.wait_for(lock, grace, [this] { return isTerminal(m_state); }))
            ::kill(-group, SIGKILL);
    });
}

bool RunSupervisor::releaseThreads()
{
    if (!terminal())
        return false;
    std::lock_guard release(m_releaseMutex);
    if (!m_released)
        joinThreads();
    m_released = true;
    return true;
}

void RunSupervisor::waitFinished()
{
    for (auto &rank : m_ranks)
        if (rank->monitor.joinable())
            rank->monitor.join();
}

bool RunSupervisor::terminal() const
{
    std::lock_guard lock(m_mutex);
    return isTerminal(m_state);
}

} // namespace scalelab::agent
