// Keeps watching one agent: asks for its inventory (Describe), then follows its
// utilization stream (WatchNode), and when either fails says why in words and tries
// again with exponential backoff, until stopped. The console's Agents tab has one per
// configured agent.
//
// Threading: the gRPC calls block, so they run on a thread of the monitor's own. What it
// learns reaches the owner's thread through queued calls (statusChanged,
// inventoryChanged) and a mutex-guarded sample buffer with one queued wake-up per batch
// (samplesArrived, then takeSamples()), as ChartFeed does. stop() (and the destructor)
// cancels the call in flight and joins the thread, so it returns within moments even
// when the agent hangs.
#pragma once

#include "agent_endpoint.h"

#include <QObject>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace grpc {
class ClientContext;
}

namespace scalelab::core {

struct AgentStatus {
    enum State { Stopped, Connecting, Connected, Unreachable, Unauthenticated, Misconfigured, Failed };
    State state = Stopped;
    QString words; // short: "connected", "unreachable: connection refused", "unauthenticated: token rejected"
    QString advice; // what to check or do about it, in a sentence (may be empty)
    int retryInMs = 0; // when the next attempt is due (0: none planned)
    bool ok() const { return state == Connected; }
};

struct TimedNodeSample {
    qint64 receivedMs = 0; // the console's clock (agents' clocks may disagree)
    v1::NodeSample sample;
};

class NodeMonitor : public QObject {
    Q_OBJECT
public:
    explicit NodeMonitor(AgentEndpoint endpoint, QObject *parent = nullptr);
    ~NodeMonitor() override; // stop()

    void setSampleInterval(int ms) { m_intervalMs = ms; } // before start(); 0 = the agent's default
    void setBackoff(int initialMs, int maxMs); // before start()
    void start();
    void stop(); // cancels, joins; statusChanged(Stopped) is not emitted
    bool running() const { return m_thread.joinable(); }
    const AgentEndpoint &endpoint() const { return m_endpoint; }

    // Samples received since the last call, oldest first.
    std::vector<TimedNodeSample> takeSamples();

    // A failed call in words, and the state it puts the agent in.
    static AgentStatus statusFor(const Status &result, const AgentEndpoint &endpoint);

Q_SIGNALS:
    void statusChanged(const scalelab::core::AgentStatus &status);
    void inventoryChanged(const scalelab::v1::DescribeResponse &inventory);
    void samplesArrived();

private:
    void loop();
    Status describe(AgentClient &client, v1::DescribeResponse *response);
    Status watch(AgentClient &client);
    bool waitMs(int ms); // false when stopped meanwhile
    void report(const AgentStatus &status);
    void reportInventory(const v1::DescribeResponse &inventory);

    AgentEndpoint m_endpoint;
    int m_intervalMs = 0;
    int m_initialBackoffMs = 500;
    int m_maxBackoffMs = 15'000;
    int m_failures = 0; // in a row; the monitor's thread only
    std::thread m_thread;
    std::atomic<bool> m_stop = false;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    grpc::ClientContext *m_context = nullptr; // the call in flight; guarded by m_mutex
    std::vector<TimedNodeSample> m_pending; // guarded by m_mutex
};

} // namespace scalelab::core

Q_DECLARE_METATYPE(scalelab::core::AgentStatus)
