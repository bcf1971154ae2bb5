#include "worker_pump.h"

#include <cerrno>
#include <csignal>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace scalelab::agent {

namespace {

// Splits a byte stream into lines; calls `emit` for each complete one.
class LineSplitter {
public:
    explicit LineSplitter(std::size_t maxLineBytes)
        : m_maxLineBytes(maxLineBytes)
    { }
    template <typename F> void feed(const char *data, std::size_t n, F &&emit)
    {
        for (std::size_t i = 0; i < n; ++i) {
            if (data[i] == '\n') {
                emit(m_buffer);
                m_buffer.clear();
            } else if (m_maxLineBytes == 0 || m_buffer.size() < m_maxLineBytes) {
                m_buffer += data[i];
            }
        }
    }
    template <typename F> void flush(F &&emit)
    {
        if (!m_buffer.empty())
            emit(m_buffer);
        m_buffer.clear();
    }

private:
    std::size_t m_maxLineBytes;
    std::string m_buffer;
};

} // namespace

PumpResult pumpWorker(const SpawnedProcess &process, const WorkerPump &pump)
{
    LineSplitter outputLines(pump.maxLineBytes), eventLines(pump.maxLineBytes);
    pollfd fds[2] = { { process.outputFd, POLLIN, 0 }, { process.eventFd, POLLIN, 0 } };
    int open = (process.outputFd >= 0 ? 1 : 0) + (process.eventFd >= 0 ? 1 : 0);
    const int timeoutMs = static_cast<int>(pump.checkEvery.count()); // negative: no limit
    PumpResult result;
    char buffer[8192];
    while (open > 0) {
        if (pump.keepGoing && !pump.keepGoing()) {
            result.stopped = true;
            break;
        }
        if (::poll(fds, 2, timeoutMs) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
                continue;
            }
            if (i == 0)
                outputLines.feed(buffer, static_cast<std::size_t>(n), pump.outputLine);
            else
                eventLines.feed(buffer, static_cast<std::size_t>(n), pump.eventLine);
        }
    }
    if (result.stopped)
        ::kill(-process.pid, SIGKILL);
    if (pump.unterminatedLastLine) {
        outputLines.flush(pump.outputLine);
        eventLines.flush(pump.eventLine);
    }
    for (auto &fd : fds)
        if (fd.fd >= 0)
            ::close(fd.fd);
    while (::waitpid(process.pid, &result.waitStatus, 0) < 0 && errno == EINTR) { }
    return result;
}

} // namespace scalelab::agent
