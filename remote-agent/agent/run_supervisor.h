// Supervises the local ranks of one run attempt: starts a scalelab-worker per rank,
// turns their JSON-line events and output into RunEvents, classifies their exits and
// writes the terminal state. Thread-safe; one monitor thread per rank.
#pragma once

#include "process_launcher.h"
#include "run_event_log.h"
#include "scalelab/v1/agent.pb.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace scalelab::agent {

struct RunLaunch {
    v1::StartWorkersRequest request;
    v1::Dataset dataset;
    std::string datasetDir;
    std::filesystem::path runDir; // runs/<run_id>/<attempt>
    std::string workerBinary;
    int threadsPerRank = 1;
};

class RunSupervisor {
public:
    explicit RunSupervisor(RunLaunch launch);
    ~RunSupervisor(); // stops and reaps every rank
    RunSupervisor(const RunSupervisor &) = delete;
    RunSupervisor &operator=(const RunSupervisor &) = delete;

    // Starts every rank. Returns an error message (and records FAILED) on failure.
    std::string start(ProcessLauncher &launcher);

    // SIGTERM to the run's process group, SIGKILL after `grace`. Returns at once;
    // the terminal state follows when the ranks have exited.
    void stop(std::chrono::milliseconds grace);

    // Blocks until every rank has exited and the terminal event is written.
    void waitFinished();

    v1::RunInfo info() const;
    RunEventLog &events() { return *m_events; }
    const std::string &runId() const { return m_launch.request.run_id(); }
    int attempt() const { return m_launch.request.attempt(); }
    bool terminal() const;

private:
    struct Rank {
        int rank = 0;
        pid_t pid = -1;
        std::thread monitor;
        int exitCode = 0;
        int signal = 0;
        bool exited = false;
    };

    void monitor(Rank &rank, int outputFd, int eventFd);
    void handleEventLine(int rank, const std::string &line);
    void handleOutputLine(int rank, const std::string &line);
    void onRankExited(Rank &rank, int status);
    void finish();
    v1::RunEvent makeEvent(int rank) const;
    void setState(v1::RunState state, const std::string &message);

    RunLaunch m_launch;
    std::unique_ptr<RunEventLog> m_events;
    mutable std::mutex m_mutex;
    std::vector<std::unique_ptr<Rank>> m_ranks;
    pid_t m_processGroup = 0;
    v1::RunState m_state = v1::STARTING;
    std::string m_message;
    std::int64_t m_startedMs = 0;
    std::int64_t m_endedMs = 0;
    std::optional<v1::RunSummary> m_finished; // from the worker's "finished" event
    std::string m_workerError; // from the worker's "error" event
    std::string m_lastOutputLine;
    int m_exitedRanks = 0;
    bool m_stopRequested = false;
    std::atomic<bool> m_killTimerArmed = false;
    std::thread m_killTimer;
    std::condition_variable m_terminalCv;
};

} // namespace scalelab::agent
