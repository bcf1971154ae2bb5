#include "run_watch.h"

#include "agent_grpc.h"

#include <QDateTime>

namespace scalelab::core {

namespace {
qint64 nowMs()
{
    return QDateTime::currentMSecsSinceEpoch();
}
} // namespace

RunWatch::RunWatch(AgentClient *client, QString runId, QObject *parent)
    : QObject(parent)
    , m_client(client)
    , m_runId(std::move(runId))
{ }

RunWatch::~RunWatch()
{
    cancel();
    if (m_thread.joinable())
        m_thread.join();
    if (m_silenceWatch.joinable())
        m_silenceWatch.join();
}

void RunWatch::start(qint64 fromSeq)
{
    m_thread = std::thread([this, fromSeq] { loop(fromSeq); });
    // Cancels a stream that has gone silent, so loop() reconnects (or learns it cannot).
    m_silenceWatch = std::thread([this] {
        while (!m_cancelled) {
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
            std::lock_guard lock(m_mutex);
            if (m_context && m_lastHeardMs > 0 && nowMs() - m_lastHeardMs > kSilenceMs) {
                m_silenceCancelled = true;
                m_context->TryCancel();
            }
        }
    });
}

void RunWatch::cancel()
{
    m_cancelled = true;
    std::lock_guard lock(m_mutex);
    if (m_context)
        m_context->TryCancel();
}

std::vector<v1::RunEvent> RunWatch::takeEvents()
{
    std::lock_guard lock(m_mutex);
    return std::exchange(m_pending, {});
}

void RunWatch::loop(qint64 fromSeq)
{
    qint64 next = std::max<qint64>(fromSeq, 1);
    int failures = 0;
    qint64 lastOkMs = nowMs(); // when the agent last answered
    bool reportedUnreachable = false;
    QString error;
    while (!m_cancelled) {
        grpc::ClientContext context;
        m_client->connection().prepareStream(&context);
        m_silenceCancelled = false;
        m_lastHeardMs = nowMs();
        {
            std::lock_guard lock(m_mutex);
            m_context = &context;
            if (m_cancelled) // cancel() ran before m_context was set: it could not reach it
                context.TryCancel();
        }
        v1::WatchRunRequest request;
        request.set_run_id(m_runId.toStdString());
        request.set_from_seq(next);
        auto reader = m_client->connection().stub->WatchRun(&context, request);
        v1::RunEvent event;
        while (reader->Read(&event)) {
            failures = 0;
            lastOkMs = nowMs();
            m_lastHeardMs = lastOkMs;
            if (reportedUnreachable) {
                reportedUnreachable = false;
                QMetaObject::invokeMethod(this, &RunWatch::reachable, Qt::QueuedConnection);
            }
            if (event.has_heartbeat())
                continue;
            if (event.seq() < next)
                continue; // never hand on a duplicate
            next = event.seq() + 1;
            bool wasEmpty;
            {
                std::lock_guard lock(m_mutex);
                wasEmpty = m_pending.empty();
                m_pending.push_back(event);
            }
            // One queued notification per batch: the owner drains everything pending.
            if (wasEmpty)
                QMetaObject::invokeMethod(this, &RunWatch::eventsArrived, Qt::QueuedConnection);
        }
        const grpc::Status status = reader->Finish();
        {
            std::lock_guard lock(m_mutex);
            m_context = nullptr;
        }
        if (status.ok())
            break;
        Status result = statusFromGrpc(status, m_client->endpoint());
        if (m_silenceCancelled && !m_cancelled)
            result = Status::failure(Status::Code::Unavailable,
                QStringLiteral("no heartbeat from the agent at %1 for %2 s")
                    .arg(m_client->endpoint())
                    .arg(kSilenceMs / 1000));
        if (m_cancelled || !result.isUnreachable()) {
            error = m_cancelled ? QString() : result.error();
            break;
        }
        ++failures;
        const qint64 down = nowMs() - lastOkMs;
        if (!reportedUnreachable && down >= kUnreachableMs) {
            reportedUnreachable = true;
            QMetaObject::invokeMethod(
                this,
                [this, message = result.error(), since = lastOkMs] { Q_EMIT unreachable(message, since); },
                Qt::QueuedConnection);
        }
        if (m_giveUpAfterMs > 0 && down >= m_giveUpAfterMs) {
            error = QStringLiteral("%1 (unreachable for %2 s)").arg(result.error()).arg(down / 1000);
            break;
        }
        // Quick at first (an agent restarting), then every 2 s.
        for (int waited = 0; waited < std::min(failures, 8) * 250 && !m_cancelled; waited += 50)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    QMetaObject::invokeMethod(
        this, [this, error] { Q_EMIT finished(error); }, Qt::QueuedConnection);
}

} // namespace scalelab::core
