// Starts worker processes. Contract:
// - Every child gets its own process group and PR_SET_PDEATHSIG(SIGKILL), so it dies
//   with the agent even when the agent is killed with SIGKILL.
// - PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. gRPC
//   handler threads come and go, so all forks happen on one thread owned by this
//   class, which lives as long as the agent. spawn() is safe from any thread.
#pragma once

#include "status.h" // common/

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace scalelab::agent {

struct SpawnRequest {
    std::vector<std::string> argv; // argv[0] is the executable path
    std::vector<std::string> extraEnv; // "KEY=VALUE", added to the agent's environment
    pid_t processGroup = 0; // 0 = start a new group led by the child
};

struct SpawnedProcess {
    pid_t pid = -1;
    int outputFd = -1; // read end: the child's stdout and stderr
    int eventFd = -1; // read end: the child's fd 3 (JSON-line events)
};

class ProcessLauncher {
public:
    ProcessLauncher();
    ~ProcessLauncher();
    ProcessLauncher(const ProcessLauncher &) = delete;
    ProcessLauncher &operator=(const ProcessLauncher &) = delete;

    // The started child, or why it could not start ("cannot start PATH: No such file or
    // directory"; "pipe: ...", "fork: ..."; Unavailable when the agent is shutting down).
    common::Result<SpawnedProcess> spawn(SpawnRequest request);

private:
    void loop();
    static common::Result<SpawnedProcess> forkExec(const SpawnRequest &request);

    struct Job {
        SpawnRequest request;
        std::promise<common::Result<SpawnedProcess>> done;
    };
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::queue<Job> m_jobs;
    bool m_stopping = false;
    std::thread m_thread;
};

} // namespace scalelab::agent
