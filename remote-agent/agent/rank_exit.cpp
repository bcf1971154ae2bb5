#include "rank_exit.h"

#include "worker_contract.h"

#include <csignal>
#include <cstring>
#include <fstream>
#include <sys/wait.h>

namespace scalelab::agent {

namespace {

bool mentionsMemoryExhaustion(const std::string &text)
{
    for (const char *needle :
        { "out of memory", "bad_alloc", "can't allocate memory", "Cannot allocate memory" })
        if (text.find(needle) != std::string::npos)
            return true;
    return false;
}

} // namespace

long cgroupOomKills()
{
    // cgroup v2: "0::/path" in /proc/self/cgroup; memory.events has "oom_kill N".
    std::ifstream cgroup("/proc/self/cgroup");
    std::string line, path;
    while (std::getline(cgroup, line))
        if (line.rfind("0::", 0) == 0)
            path = line.substr(3);
    if (path.empty())
        return -1;
    std::ifstream events("/sys/fs/cgroup" + path + "/memory.events");
    std::string key;
    long value = 0;
    while (events >> key >> value)
        if (key == "oom_kill")
            return value;
    return -1;
}

v1::RankExit classifyExit(int rank, int waitStatus, bool stopRequested, const std::string &workerError,
    bool finished, long oomKills)
{
    v1::RankExit exit;
    exit.set_rank(rank);
    const std::string who = "rank " + std::to_string(rank);
    const std::string because = workerError.empty() ? std::string() : ": " + workerError;
    if (WIFEXITED(waitStatus)) {
        const int code = WEXITSTATUS(waitStatus);
        exit.set_exit_code(code);
        if (code == worker::kExitFinished && (finished || !stopRequested)) {
            exit.set_kind(finished ? v1::EXIT_SUCCEEDED : v1::EXIT_FAILED);
            exit.set_message(finished ? who + " finished" : who + " exited without reporting a result");
        } else if (mentionsMemoryExhaustion(workerError)) {
            exit.set_kind(v1::EXIT_OUT_OF_MEMORY);
            exit.set_message(who + " ran out of memory" + because
                + "; lower spec.batch_size or run fewer ranks on this node");
        } else if (stopRequested) {
            exit.set_kind(v1::EXIT_STOPPED);
            exit.set_message(who + " stopped (exit code " + std::to_string(code) + ")");
        } else if (code == worker::kExitNoSpace && workerError.rfind("no space left on device", 0) == 0) {
            // The worker's own check or a write that hit ENOSPC: the node's disk, not the run.
            exit.set_kind(v1::EXIT_NO_SPACE);
            exit.set_message(
                who + ": " + workerError + "; free space there (scalelab-cli gc) and the run goes on");
        } else if (code == worker::kExitDiverged && workerError.rfind("diverged", 0) == 0) {
            // The worker's own verdict ("diverged at step N (loss nan): ..."), not any exit 3.
            exit.set_kind(v1::EXIT_DIVERGED);
            exit.set_message(who + ": " + workerError);
        } else {
            exit.set_kind(v1::EXIT_FAILED);
            exit.set_message(who + " exited with code " + std::to_string(code) + because);
        }
    } else if (WIFSIGNALED(waitStatus)) {
        const int signal = WTERMSIG(waitStatus);
        exit.set_signal(signal);
        const std::string name = std::to_string(signal) + " (" + strsignal(signal) + ")";
        if (stopRequested && (signal == SIGTERM || signal == SIGKILL)) {
            exit.set_kind(v1::EXIT_STOPPED);
            exit.set_message(who + " stopped by signal " + name);
        } else if (signal == SIGKILL && oomKills > 0) {
            exit.set_kind(v1::EXIT_OUT_OF_MEMORY);
            exit.set_message(who
                + " was killed by the kernel's OOM killer; lower spec.batch_size or run "
                  "fewer ranks on this node");
        } else {
            exit.set_kind(v1::EXIT_KILLED);
            exit.set_message(who + " was killed by signal " + name
                + (signal == SIGKILL
                        ? "; if nobody killed it, the kernel may have run out of memory (see dmesg)"
                        : ""));
        }
    }
    return exit;
}

} // namespace scalelab::agent
