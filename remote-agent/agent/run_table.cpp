#include "run_table.h"

#include "log.h"
#include "run_records.h"
#include "safe_name.h"

#include <algorithm>
#include <malloc.h>

namespace scalelab::agent {

namespace {

std::string join(const std::vector<std::string> &parts, const std::string &separator)
{
    std::string joined;
    for (const auto &part : parts)
        joined += (joined.empty() ? "" : separator) + part;
    return joined;
}

// The newest attempt of runs/<run_id> whose records can be read (older ones stay on disk:
// a newer attempt whose records are damaged, by a full disk say, does not hide them).
// `problems` gets one line per attempt skipped.
std::shared_ptr<RunSupervisor> openNewestAttempt(
    const std::filesystem::path &runPath, bool closeIfActive, std::vector<std::string> *problems)
{
    for (int attempt : attemptsOf(runPath)) {
        auto run = RunSupervisor::restore(runPath / std::to_string(attempt), closeIfActive);
        if (run)
            return std::move(run).value();
        problems->push_back("attempt " + std::to_string(attempt) + ": " + run.error());
    }
    return nullptr;
}

} // namespace

RunTable::RunTable(std::filesystem::path stateDir, std::size_t finishedRunsInMemory)
    : m_stateDir(std::move(stateDir))
    , m_finishedRunsInMemory(finishedRunsInMemory)
{ }

void RunTable::restore(const RetentionPolicy &retention)
{
    const auto runsDir = m_stateDir / "runs";
    int reopened = 0, interrupted = 0;
    std::int64_t recordedRuns = 0;
    {
        std::lock_guard lock(m_mutex);
        std::error_code ec;
        for (const auto &runEntry : std::filesystem::directory_iterator(runsDir, ec)) {
            const std::string runId = runEntry.path().filename().string();
            if (!runEntry.is_directory() || !common::isSafeName(runId))
                continue;
            ++m_recordedRuns;
            // A run that ended is only counted: it is read back from disk when asked for.
            if (const auto attempts = attemptsOf(runEntry.path());
                !attempts.empty() && readOutcome(runEntry.path() / std::to_string(attempts.front())))
                continue;
            std::vector<std::string> problems;
            auto run = openNewestAttempt(runEntry.path(), /*closeIfActive=*/true, &problems);
            if (!problems.empty())
                logMessage(LogLevel::Warning,
                    "run " + runId + ": skipped unreadable attempt(s) (" + join(problems, "; ") + ")"
                        + (run ? "; reopened attempt " + std::to_string(run->attempt())
                               : "; nothing to reopen"));
            if (!run)
                continue;
            ++reopened;
            if (!run->closedOnRestore()) {
                // Ended before there were outcome files: write one, so the next start is quick
                // (best effort: without it the next start reads the event log, as this one did).
                (void)writeOutcome(runEntry.path() / std::to_string(run->attempt()), run->info());
                continue;
            }
            ++interrupted; // the console will ask for these soon: kept at hand (its outcome is written)
            m_runs[runId] = std::move(run);
            keepRecentLocked(runId);
        }
        recordedRuns = m_recordedRuns;
    }
    // No run is active yet: what killed workers left half-written goes now, and so do the
    // checkpoints of finished runs that the retention rule no longer keeps.
    std::int64_t swept = 0;
    const auto removed = collectGarbage(m_stateDir, onDisk(), v1::CollectGarbageRequest {}, retention,
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    for (const auto &r : removed)
        swept += r.bytes();
    if (!removed.empty())
        logMessage(LogLevel::Info,
            "removed " + std::to_string(removed.size()) + " checkpoint folder(s) (unfinished ones, and what "
                + retention.words() + " does not keep), " + std::to_string(swept / 1'000'000) + " MB");
    if (recordedRuns > 0)
        logMessage(LogLevel::Info,
            std::to_string(recordedRuns) + " run(s) recorded in " + runsDir.string() + "; "
                + std::to_string(interrupted)
                + " closed as FAILED (interrupted: active when the agent stopped), "
                + std::to_string(reopened - interrupted) + " older record(s) given an outcome.json");
}

bool RunTable::shuttingDown() const
{
    std::lock_guard lock(m_mutex);
    return m_shuttingDown;
}

void RunTable::shutdown(std::chrono::milliseconds grace)
{
    std::map<std::string, std::shared_ptr<RunSupervisor>> runs;
    {
        std::lock_guard lock(m_mutex);
        m_shuttingDown = true;
        runs = m_runs;
    }
    for (auto &[id, run] : runs)
        run->interrupt(grace);
    for (auto &[id, run] : runs)
        run->waitFinished();
}

std::shared_ptr<RunSupervisor> RunTable::find(const std::string &runId)
{
    std::lock_guard lock(m_mutex);
    return findLocked(runId);
}

std::shared_ptr<RunSupervisor> RunTable::findLocked(const std::string &runId)
{
    if (const auto it = m_runs.find(runId); it != m_runs.end())
        return it->second;
    // Not active and not finished lately: its records are on disk, if anywhere. Every
    // active run is in m_runs (a start inserts it under this lock before writing its
    // records), so what is read here has ended and is only read.
    const auto runPath = m_stateDir / "runs" / runId;
    std::error_code ec;
    if (!common::isSafeName(runId) || !std::filesystem::is_directory(runPath, ec))
        return nullptr;
    std::vector<std::string> problems;
    auto run = openNewestAttempt(runPath, /*closeIfActive=*/false, &problems);
    if (!run)
        return nullptr;
    m_runs[runId] = run;
    keepRecentLocked(runId);
    return run;
}

std::shared_ptr<RunSupervisor> RunTable::inMemoryLocked(const std::string &runId) const
{
    const auto it = m_runs.find(runId);
    return it == m_runs.end() ? nullptr : it->second;
}

void RunTable::keepRecentLocked(const std::string &runId)
{
    m_recentFinished.erase(
        std::remove(m_recentFinished.begin(), m_recentFinished.end(), runId), m_recentFinished.end());
    m_recentFinished.push_back(runId);
    while (m_recentFinished.size() > m_finishedRunsInMemory) {
        const std::string oldest = m_recentFinished.front();
        m_recentFinished.pop_front();
        const auto it = m_runs.find(oldest);
        if (it != m_runs.end() && it->second->terminal())
            m_runs.erase(it); // a watcher still reading it holds its own reference
    }
}

std::optional<v1::RunInfo> RunTable::recordedInfo(const std::string &runId)
{
    {
        std::lock_guard lock(m_mutex);
        if (const auto it = m_runs.find(runId); it != m_runs.end())
            return it->second->info();
    }
    const auto runPath = m_stateDir / "runs" / runId;
    const auto attempts = attemptsOf(runPath);
    if (attempts.empty())
        return std::nullopt;
    if (auto info = readOutcome(runPath / std::to_string(attempts.front())))
        return info;
    // An attempt without an outcome: damaged records (read an older one), or a run that
    // started between the look into m_runs above and now (read as it is).
    std::vector<std::string> problems;
    const auto run = openNewestAttempt(runPath, /*closeIfActive=*/false, &problems);
    if (!run)
        return std::nullopt;
    return run->info();
}

std::vector<RunOnDisk> RunTable::onDisk()
{
    std::vector<RunOnDisk> runs;
    std::int64_t total = 0;
    for (const auto &id : runIdsPage(m_stateDir / "runs", "", std::size_t(-1), &total)) {
        const auto info = recordedInfo(id);
        if (!info)
            continue;
        const bool ended
            = info->state() == v1::SUCCEEDED || info->state() == v1::FAILED || info->state() == v1::CANCELLED;
        const bool paused = info->spec().stop_after_epochs() > 0
            && info->spec().stop_after_epochs() < info->spec().epochs();
        runs.push_back(RunOnDisk { id, info->state(), info->ended_unix_ms(), !ended, paused });
    }
    return runs;
}

std::error_code RunTable::createAttemptFolderLocked(const std::filesystem::path &attemptDir)
{
    std::error_code ec;
    if (!std::filesystem::exists(attemptDir.parent_path(), ec))
        ++m_recordedRuns;
    std::filesystem::create_directories(attemptDir, ec);
    return ec;
}

void RunTable::addLocked(const std::shared_ptr<RunSupervisor> &run)
{
    m_runs[run->runId()] = run;
    m_unreleased.push_back(run);
}

void RunTable::forgetUnrecorded(const std::shared_ptr<RunSupervisor> &run)
{
    // Nothing of the attempt was recorded: it leaves no folder, and the run is what it was
    // before (an earlier attempt, read back from disk, or nothing).
    std::lock_guard lock(m_mutex);
    if (const auto it = m_runs.find(run->runId()); it != m_runs.end() && it->second == run)
        m_runs.erase(it);
    const auto attemptDir = m_stateDir / "runs" / run->runId() / std::to_string(run->attempt());
    std::error_code ec;
    if (std::filesystem::exists(attemptDir / "request.json", ec))
        return;
    std::filesystem::remove_all(attemptDir, ec);
    if (std::filesystem::is_empty(attemptDir.parent_path(), ec) && !ec
        && std::filesystem::remove(attemptDir.parent_path(), ec))
        --m_recordedRuns;
}

void RunTable::releaseFinished()
{
    std::vector<std::shared_ptr<RunSupervisor>> finished;
    {
        std::lock_guard lock(m_mutex);
        for (auto it = m_unreleased.begin(); it != m_unreleased.end();) {
            if ((*it)->terminal()) {
                finished.push_back(*it);
                it = m_unreleased.erase(it);
            } else {
                ++it;
            }
        }
    }
    if (finished.empty())
        return;
    for (auto &run : finished)
        run->releaseThreads(); // outside the lock: it waits for the threads to end
    {
        std::lock_guard lock(m_mutex);
        for (auto &run : finished)
            if (const auto it = m_runs.find(run->runId()); it != m_runs.end() && it->second == run)
                keepRecentLocked(run->runId()); // the oldest finished one leaves memory
    }
    // What a run used is free now, but glibc keeps freed pages in each thread's arena;
    // gRPC serves from many threads, so without this an agent's resident memory creeps up
    // with every run although its live heap does not (heaptrack: flat at ~0.5 MB).
    finished.clear();
    ::malloc_trim(0);
}

} // namespace scalelab::agent
