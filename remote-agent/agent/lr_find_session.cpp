#include "lr_find_session.h"

#include "log.h"
#include "worker_channel.h"
#include "worker_contract.h"

#include <sys/wait.h>

namespace scalelab::agent {

LrFindSession::LrFindSession(std::vector<std::string> workerCommand, Send send)
    : m_workerCommand(std::move(workerCommand))
    , m_send(std::move(send))
{ }

WorkerPump LrFindSession::pump(std::function<bool()> cancelled)
{
    WorkerPump pump;
    pump.eventLine = [this](const std::string &line) { handleEventLine(line); };
    pump.outputLine = [this](const std::string &line) {
        if (!line.empty())
            m_lastOutput = line.substr(0, 500);
    };
    pump.keepGoing = [this, cancelled = std::move(cancelled)] {
        if (m_pending.points_size() >= 64
            || std::chrono::steady_clock::now() - m_lastSend > std::chrono::milliseconds(500))
            sendPoints();
        return !cancelled();
    };
    pump.checkEvery = std::chrono::milliseconds(200);
    pump.maxLineBytes = 0; // whole lines, however long
    pump.unterminatedLastLine = false; // a line cut short by the worker's end is not an event
    return pump;
}

void LrFindSession::handleEventLine(const std::string &line)
{
    const auto event = worker::parseEventLine(line);
    if (!event) {
        logMessage(
            LogLevel::Warning, "learning-rate range test: unparseable worker event (" + event.error() + ")");
        return;
    }
    if (event->has_lr_point()) {
        *m_pending.add_points() = event->lr_point();
    } else if (event->has_lr_found()) {
        *m_result.mutable_result() = event->lr_found();
        m_result.mutable_result()->mutable_worker_command()->Add(
            m_workerCommand.begin(), m_workerCommand.end());
        m_haveResult = true;
    } else if (event->has_error()) {
        m_workerError = event->error().message();
    }
}

void LrFindSession::sendPoints()
{
    if (m_pending.points_size() == 0)
        return;
    m_send(m_pending);
    m_pending.Clear();
    m_lastSend = std::chrono::steady_clock::now();
}

grpc::Status LrFindSession::finish(const PumpResult &ended)
{
    if (ended.stopped)
        return { grpc::StatusCode::CANCELLED, "the client went away; the range test was stopped" };
    sendPoints();
    const int status = ended.waitStatus;
    if (!m_haveResult || !WIFEXITED(status) || WEXITSTATUS(status) != worker::kExitFinished) {
        const std::string why = !m_workerError.empty() ? m_workerError
            : !m_lastOutput.empty()                    ? m_lastOutput
            : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                  : "exit code " + std::to_string(WEXITSTATUS(status));
        return { grpc::StatusCode::ABORTED, "the learning-rate range test failed: " + why };
    }
    m_send(m_result);
    return grpc::Status::OK;
}

} // namespace scalelab::agent
