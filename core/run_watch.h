// Follows one run's event stream (WatchRun) on a background thread and hands the
// events to the owner's thread in batches. The gRPC thread never touches QObjects
// other than through a queued call, so widgets can consume eventsArrived() directly.
// Reconnects with from_seq = last seen + 1 when the stream breaks, so a flaky network
// loses nothing and repeats nothing.
#pragma once

#include "agent_client.h"

#include <QObject>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace grpc {
class ClientContext;
}

namespace scalelab::core {

class RunWatch : public QObject {
    Q_OBJECT
public:
    // `client` must outlive this object.
    RunWatch(AgentClient *client, QString runId, QObject *parent = nullptr);
    ~RunWatch() override; // cancels the stream and joins the thread

    void start(qint64 fromSeq = 1);
    void cancel();

    // Events received since the last call, oldest first (heartbeats excluded).
    std::vector<v1::RunEvent> takeEvents();
    QString runId() const { return m_runId; }

Q_SIGNALS:
    void eventsArrived();
    // The stream ended: ok after the run's terminal event, else why it broke for good.
    void finished(const QString &error);

private:
    void loop(qint64 fromSeq);

    AgentClient *m_client;
    QString m_runId;
    std::thread m_thread;
    std::atomic<bool> m_cancelled = false;
    std::mutex m_mutex;
    std::vector<v1::RunEvent> m_pending;
    grpc::ClientContext *m_context = nullptr; // guarded by m_mutex
};

} // namespace scalelab::core
