#include "process_launcher.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace scalelab::agent {

namespace {

// "CALL: strerror(errno)", for a system call that failed in the agent.
common::Status systemFailure(const char *call)
{
    return common::Status::failure(
        common::StatusCode::Internal, std::string(call) + ": " + std::strerror(errno));
}

} // namespace

ProcessLauncher::ProcessLauncher()
    : m_thread([this] { loop(); })
{ }

ProcessLauncher::~ProcessLauncher()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    m_thread.join();
}

common::Result<SpawnedProcess> ProcessLauncher::spawn(SpawnRequest request)
{
    std::future<common::Result<SpawnedProcess>> result;
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping)
            return common::Status::failure(common::StatusCode::Unavailable, "the agent is shutting down");
        Job job { std::move(request), {} };
        result = job.done.get_future();
        m_jobs.push(std::move(job));
    }
    m_wake.notify_one();
    return result.get();
}

void ProcessLauncher::loop()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_wake.wait(lock, [this] { return m_stopping || !m_jobs.empty(); });
        if (m_jobs.empty())
            return; // stopping and nothing left
        Job job = std::move(m_jobs.front());
        m_jobs.pop();
        lock.unlock();
        job.done.set_value(forkExec(job.request));
        lock.lock();
    }
}

common::Result<SpawnedProcess> ProcessLauncher::forkExec(const SpawnRequest &request)
{
    // Everything the child needs is prepared before fork(): after it, only
    // async-signal-safe calls are allowed in a multi-threaded process.
    std::vector<char *> argv;
    for (const auto &a : request.argv)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> envStore;
    for (char **e = environ; *e; ++e)
        envStore.emplace_back(*e);
    for (const auto &e : request.extraEnv) {
        const auto key = e.substr(0, e.find('=') + 1);
        std::erase_if(envStore, [&](const std::string &s) { return s.rfind(key, 0) == 0; });
        envStore.push_back(e);
    }
    std::vector<char *> envp;
    for (auto &e : envStore)
        envp.push_back(e.data());
    envp.push_back(nullptr);

    int output[2], events[2], status[2];
    if (pipe2(output, O_CLOEXEC) != 0)
        return systemFailure("pipe");
    if (pipe2(events, O_CLOEXEC) != 0) {
        close(output[0]), close(output[1]);
        return systemFailure("pipe");
    }
    // Reports exec failure to the parent: closes on successful exec (CLOEXEC).
    if (pipe2(status, O_CLOEXEC) != 0) {
        close(output[0]), close(output[1]), close(events[0]), close(events[1]);
        return systemFailure("pipe");
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        for (int fd : { output[0], output[1], events[0], events[1], status[0], status[1] })
            close(fd);
        return systemFailure("fork");
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); // the agent died between fork() and prctl()
        setpgid(0, request.processGroup);
        // Undo the agent's blocked signals: the worker must die on SIGTERM.
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        signal(SIGPIPE, SIG_DFL);
        const int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(output[1], 1);
        dup2(output[1], 2);
        dup2(events[1], 3);
        execve(argv[0], argv.data(), envp.data());
        const int err = errno;
        ssize_t ignored = write(status[1], &err, sizeof err);
        (void)ignored;
        _exit(127);
    }
    setpgid(pid, request.processGroup ? request.processGroup : pid); // avoid the race with the child
    close(output[1]);
    close(events[1]);
    close(status[1]);
    int childErrno = 0;
    ssize_t n;
    do {
        n = read(status[0], &childErrno, sizeof childErrno);
    } while (n < 0 && errno == EINTR);
    close(status[0]);
    if (n == sizeof childErrno) {
        close(output[0]);
        close(events[0]);
        int ignored;
        waitpid(pid, &ignored, 0);
        return common::Status::failure("cannot start " + request.argv[0] + ": " + std::strerror(childErrno));
    }
    return SpawnedProcess { .pid = pid, .outputFd = output[0], .eventFd = events[0] };
}

} // namespace scalelab::agent
