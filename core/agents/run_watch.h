// Follows one run's event stream (WatchRun) on a background thread and hands the
// events to the owner's thread in batches. The gRPC thread never touches QObjects
// other than through a queued call, so widgets can consume eventsArrived() directly.
// Reconnects with from_seq = last seen + 1 when the stream breaks, so a flaky network
// loses nothing and repeats nothing.
//
// Liveness: the agent sends a heartbeat every 2 s on an idle stream, so a stream silent
// for kSilenceMs is taken as broken (a cut link sends no RST) and reconnected. After
// kUnreachableMs of failing to reconnect, unreachable() says so, once, with the error
// and since when; reachable() follows when the stream works again. The watch gives up
// (finished with the error) only after giveUpAfterMs of unreachability (0 = never; the
// study runner decides itself), or at once on an error that retrying cannot fix.
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
    // Default 60 s; 0 = keep trying until cancelled. Set before start().
    void setGiveUpAfterMs(qint64 ms) { m_giveUpAfterMs = ms; }

    static constexpr qint64 kSilenceMs = 10'000;
    static constexpr qint64 kUnreachableMs = 3'000;

    // Events received since the last call, oldest first (heartbeats excluded).
    std::vector<v1::RunEvent> takeEvents();
    QString runId() const { return m_runId; }

Q_SIGNALS:
    void eventsArrived();
    // The stream ended: ok after the run's terminal event, else why it broke for good.
    void finished(const QString &error);
    // The agent has not answered for kUnreachableMs (or the stream went silent):
    // `sinceUnixMs` is when it last did.
    void unreachable(const QString &error, qint64 sinceUnixMs);
    void reachable();

private:
    void loop(qint64 fromSeq);

    AgentClient *m_client;
    QString m_runId;
    std::thread m_thread;
    std::thread m_silenceWatch;
    qint64 m_giveUpAfterMs = 60'000;
    std::atomic<qint64> m_lastHeardMs = 0; // data or heartbeat on the current stream
    std::atomic<bool> m_silenceCancelled = false;
    std::atomic<bool> m_cancelled = false;
    std::mutex m_mutex;
    std::vector<v1::RunEvent> m_pending;
    grpc::ClientContext *m_context = nullptr; // guarded by m_mutex
};

} // namespace scalelab::core
