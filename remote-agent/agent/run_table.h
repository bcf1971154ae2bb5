// The runs one agent knows, by run id: the latest attempt of each (run_supervisor.h). Every
// active run is in memory, with the finished runs used last (at most finishedRunsInMemory,
// the least recently used leaving first); every other run is only on disk, under
// <state>/runs/<run_id>/<attempt>/ (run_records.h), and is read back when asked for, so
// memory does not grow with the number of runs an agent has finished.
//
// Thread-safe. Methods named *Locked need the caller to hold lock(): a decision that must
// not change under the caller (StartWorkers' check-then-insert, a checkpoint written only
// into a run that is not active). The others take the lock themselves; never call them
// while holding it.
// Ownership: runs are shared (a watcher keeps its own reference to the run it reads); the
// threads of runs started here are joined by releaseFinished(), or by the run's destructor.
#pragma once

#include "run_supervisor.h"
#include "storage.h"

#include <chrono>
#include <cstddef>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace scalelab::agent {

class RunTable {
public:
    RunTable(std::filesystem::path stateDir, std::size_t finishedRunsInMemory);

    // At start-up, before any run is active: counts the run folders, closes the runs that
    // were active when the agent stopped (FAILED, interrupted: kept in memory, the console
    // asks for them soon), gives older records without an outcome.json one, then removes
    // what killed workers left half-written and the checkpoints `retention` no longer
    // keeps. Logs what it did.
    void restore(const RetentionPolicy &retention);

    [[nodiscard]] std::unique_lock<std::mutex> lock() const { return std::unique_lock(m_mutex); }

    // The run's latest attempt: from memory, or read back from its records on disk (it is
    // then kept in memory as the finished run used last). Null for a run not known here.
    std::shared_ptr<RunSupervisor> find(const std::string &runId);
    std::shared_ptr<RunSupervisor> findLocked(const std::string &runId);
    // The run's latest attempt if it is in memory (every active run is), without reading disk.
    std::shared_ptr<RunSupervisor> inMemoryLocked(const std::string &runId) const;
    // visit(runId, run) for each run in memory: the active runs and the latest finished ones.
    template <typename F> void forEachLocked(F &&visit) const
    {
        for (const auto &[id, run] : m_runs)
            visit(id, run);
    }
    // The run folders under <state>/runs.
    std::int64_t recordedLocked() const { return m_recordedRuns; }

    // The run's RunInfo without keeping it in memory: from memory, outcome.json, or its records.
    std::optional<v1::RunInfo> recordedInfo(const std::string &runId);
    // Every run with readable records, as garbage collection sees it.
    std::vector<RunOnDisk> onDisk();

    // Creates the folder of a new attempt (runs/<run_id>/<attempt>), counting the run's
    // folder when it is new (also when creating the attempt's then fails).
    std::error_code createAttemptFolderLocked(const std::filesystem::path &attemptDir);
    // A new attempt, started here: now its run's latest, in memory until it has finished and
    // releaseFinished() has joined its threads.
    void addLocked(const std::shared_ptr<RunSupervisor> &run);
    // An attempt refused before its records were written: removed from the table and the disk.
    void forgetUnrecorded(const std::shared_ptr<RunSupervisor> &run);
    // Joins the threads of the runs started here that have finished; each becomes the newest
    // finished run in memory, and the oldest beyond finishedRunsInMemory leave.
    void releaseFinished();

    // Agent shutdown: shuttingDown() is true from now on; interrupts every run in memory
    // (RunSupervisor::interrupt) and waits for their ranks to exit.
    void shutdown(std::chrono::milliseconds grace);
    bool shuttingDown() const;
    bool shuttingDownLocked() const { return m_shuttingDown; }

private:
    // `runId` has just finished or been read back: it is now the newest of the finished runs
    // kept in memory, and the oldest beyond m_finishedRunsInMemory leaves. m_mutex held.
    void keepRecentLocked(const std::string &runId);

    const std::filesystem::path m_stateDir;
    const std::size_t m_finishedRunsInMemory;
    mutable std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<RunSupervisor>> m_runs;
    std::deque<std::string> m_recentFinished; // oldest first
    std::int64_t m_recordedRuns = 0; // run folders under the state folder
    std::vector<std::shared_ptr<RunSupervisor>> m_unreleased; // started here, threads not yet joined
    bool m_shuttingDown = false;
};

} // namespace scalelab::agent
