#include "run_watch.h"

#include <grpcpp/grpcpp.h>

namespace scalelab::core {

namespace {
constexpr int kMaxReconnects = 20;
}

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
}

void RunWatch::start(qint64 fromSeq)
{
    m_thread = std::thread([this, fromSeq] { loop(fromSeq); });
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
    QString error;
    while (!m_cancelled) {
        grpc::ClientContext context;
        m_client->prepareStreamContext(&context);
        {
            std::lock_guard lock(m_mutex);
            m_context = &context;
        }
        v1::WatchRunRequest request;
        request.set_run_id(m_runId.toStdString());
        request.set_from_seq(next);
        auto reader = m_client->stub().WatchRun(&context, request);
        v1::RunEvent event;
        while (reader->Read(&event)) {
            failures = 0;
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
        const auto result = CallResult::fromStatus(status, m_client->endpoint());
        if (m_cancelled || !result.unreachable() || ++failures > kMaxReconnects) {
            error = m_cancelled ? QString() : result.message;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250 * std::min(failures, 8)));
    }
    QMetaObject::invokeMethod(
        this, [this, error] { Q_EMIT finished(error); }, Qt::QueuedConnection);
}

} // namespace scalelab::core
