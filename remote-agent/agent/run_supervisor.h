// Supervises the local ranks of one run attempt: starts a scalelab-worker per rank,
// turns their JSON-line events and output into RunEvents, classifies their exits
// (succeeded, failed with the worker's error, killed, out of memory, stopped) and
// writes the terminal state. Thread-safe; one monitor thread per rank.
//
// A run folder left by an earlier agent process is reopened with restore(): its log
// keeps its numbering, and a run that was still active is closed as FAILED with
// `interrupted` set (its checkpoints stay where they are).
#pragma once

#include "process_launcher.h"
#include "run_event_log.h"
#include "run_gauges.h"
#include "scalelab/v1/agent.pb.h"
#include "storage.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace scalelab::agent {

struct RunLaunch {
    v1::StartWorkersRequest request;
    v1::Dataset dataset;
    std::string datasetDir;
    std::filesystem::path runDir; // runs/<run_id>/<attempt>
    std::string workerBinary;
    // The stored TorchScript modules the spec names by sum (model, initial_weights
    // "sha256:HEX"), resolved by the agent; empty: none.
    std::filesystem::path modelFile;
    std::filesystem::path initialWeightsFile;
    int threadsPerRank = 1;
    std::map<int, std::vector<int>> gpus; // rank -> node GPU indices; missing = CPU
    // For a run spanning hosts: this host's advertised address (--bind-address) and the
    // interface holding it (NCCL_SOCKET_IFNAME, unless the agent's environment sets it).
    std::string bindAddress;
    std::string networkInterface;
    // What the run leaves on disk when it ends (see storage.h): unfinished checkpoint
    // folders always go, and a SUCCEEDED run keeps its final checkpoint or none.
    RetentionPolicy retention;
    // Counted into when set, by the agent that hosts rank 0 (so that a sum over agents counts
    // each attempt once): the attempt's start, its checkpoints and its outcome (the metrics).
    std::shared_ptr<AgentCounters> counters;
};

class RunSupervisor {
public:
    // What started this attempt (the StartWorkers request, rendezvous filled in).
    const v1::StartWorkersRequest &request() const { return m_launch.request; }
    explicit RunSupervisor(RunLaunch launch);
    ~RunSupervisor(); // stops and reaps every rank
    RunSupervisor(const RunSupervisor &) = delete;
    RunSupervisor &operator=(const RunSupervisor &) = delete;

    // Reopens runs/<run_id>/<attempt> written by an earlier agent; fails when the folder
    // holds no readable request. A run the records show still active is closed as FAILED,
    // interrupted (the agent that ran it is gone), unless closeIfActive is false: then it
    // is only read.
    static common::Result<std::shared_ptr<RunSupervisor>> restore(
        const std::filesystem::path &runDir, bool closeIfActive = true);

    // Starts every rank; on failure records FAILED and says why.
    common::Status start(ProcessLauncher &launcher);

    // SIGTERM to the run's process group, SIGKILL after `grace`. Returns at once;
    // the terminal state follows when the ranks have exited.
    void stop(std::chrono::milliseconds grace);
    // Like stop(), for an agent that shuts down: the run ends FAILED with `interrupted`
    // set, so the console retries it from its last checkpoint instead of giving up.
    void interrupt(std::chrono::milliseconds grace);

    // Blocks until every rank has exited and the terminal event is written.
    void waitFinished();

    v1::RunInfo info() const;
    RunEventLog &events() { return *m_events; }
    const std::string &runId() const { return m_launch.request.run_id(); }
    int attempt() const { return m_launch.request.attempt(); }
    bool terminal() const;
    // Once the run is terminal: joins its finished threads (rank monitors, stall watch,
    // kill timer), whose stacks an unjoined thread keeps. Not from those threads; any
    // number of calls. Returns false while the run is still active.
    bool releaseThreads();
    // Whether the attempt's records (request.json) are on disk: false for an attempt refused
    // before it could be recorded, which leaves nothing a restarted agent would reopen.
    bool recorded() const { return m_recorded; }
    // restore() found the attempt still active and closed it (FAILED, interrupted).
    bool closedOnRestore() const { return m_closedOnRestore; }
    // Live ranks' placements (pid > 0), for utilization sampling.
    std::vector<v1::RankPlacement> livePlacements() const;
    // What the attempt is doing now (its state, rank 0's latest measurements, its counts).
    RunGauges gauges() const;
    // The BLAS library and kernel rank 0 reported training with ("" before it started, or
    // when rank 0 runs on another agent), and when it started (ms since the epoch).
    std::pair<std::string, std::int64_t> blasInUse() const;

private:
    static bool isTerminal(v1::RunState state); // SUCCEEDED, FAILED or CANCELLED
    std::vector<std::string> m_rankZeroCommand; // for RunStarted.worker_command
    struct Rank {
        int rank = 0;
        pid_t pid = -1;
        std::thread monitor;
        int exitCode = 0;
        int signal = 0;
        bool exited = false;
        long oomKillsAtStart = -1;
        v1::RankExit exit;
    };
    struct Restored {
        bool closeIfActive = true;
    };
    RunSupervisor(RunLaunch launch, Restored);

    // The rank's pipes until they close (worker_pump.h), then its exit.
    void monitor(Rank &rank, const SpawnedProcess &process);
    void handleEventLine(int rank, const std::string &line);
    // Folds the event into the gauges, then appends it to the log.
    void record(v1::RunEvent event, bool durable);
    bool hostsRankZero() const;
    // The attempt ended in `state`: counted into m_launch.counters (once per attempt).
    void countOutcome(v1::RunState state);
    void handleOutputLine(int rank, const std::string &line);
    void onRankExited(Rank &rank, int status);
    void finish();
    void tidyCheckpoints(v1::RunState state);
    void joinThreads(); // the rank monitors, kill timer and stall watch; not from one of them
    // SIGTERM now, SIGKILL after `grace`. `requested` = StopRun/shutdown (CANCELLED);
    // otherwise the run is being torn down after a rank failed (FAILED).
    void signalRanks(std::chrono::milliseconds grace, bool requested);
    v1::RunEvent makeEvent(int rank) const;
    void setState(v1::RunState state, const std::string &message);
    // Rank 0 did something (a step, evaluation progress, a checkpoint): ends a stall.
    void noteProgress(std::int64_t step, int epoch);
    // Reports a stall when rank 0 has made no progress for the spec's stall_seconds.
    void watchForStalls();
    // Keeps a RunStarted event's BLAS for blasInUse() (m_mutex held, or while restoring).
    void rememberBlas(const v1::RunEvent &started);
    // A Stall event's fields from the progress last seen (m_mutex held).
    void fillStall(v1::Stall *stall, bool stalled, std::int64_t sinceMs, std::int64_t nowMs) const;

    RunLaunch m_launch;
    std::unique_ptr<RunEventLog> m_events;
    mutable std::mutex m_mutex;
    std::vector<std::unique_ptr<Rank>> m_ranks;
    std::mutex m_releaseMutex; // releaseThreads() runs once
    bool m_released = false;
    std::atomic<bool> m_recorded = false; // request.json written (or read back)
    bool m_closedOnRestore = false;
    pid_t m_processGroup = 0;
    v1::RunState m_state = v1::STARTING;
    std::string m_message;
    std::int64_t m_startedMs = 0;
    std::int64_t m_endedMs = 0;
    std::optional<v1::RunSummary> m_finished; // from the worker's "finished" event
    std::string m_blas; // RunStarted.software["blas"]
    std::int64_t m_blasSinceMs = 0;
    std::string m_lastOutputLine;
    int m_exitedRanks = 0;
    bool m_stopRequested = false;
    bool m_interrupted = false;
    bool m_aborting = false; // stopping the other ranks after one failed
    std::optional<v1::RankExit> m_decidingExit; // the first rank that failed
    std::map<int, std::string> m_rankErrors; // the worker's own "error" event, by rank
    std::map<int, std::int64_t> m_rankBytesNeeded; // a checkpoint that did not fit, by rank
    std::set<int> m_finishedRanks; // ranks that reported "finished"
    std::vector<v1::RankPlacement> m_placements;
    std::atomic<bool> m_killTimerArmed = false;
    std::thread m_killTimer;
    std::condition_variable m_terminalCv;
    // Stall detection (agents that host rank 0): guarded by m_mutex.
    std::int64_t m_lastProgressMs = 0; // 0 until rank 0 started training
    std::int64_t m_lastStep = 0;
    int m_lastEpoch = 0;
    bool m_stalled = false;
    bool m_stallWatchStop = false;
    std::thread m_stallWatch;
    mutable std::mutex m_gaugesMutex; // last: taken while m_mutex may be held, never the other way
    RunGauges m_gauges;
};

} // namespace scalelab::agent
