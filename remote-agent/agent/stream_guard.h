// Bounds the agent's server streams (WatchRun, WatchNode, ReadCheckpoint, ...). gRPC's
// synchronous API gives every open stream a thread, and a Write() to a client that
// stops reading blocks that thread for as long as the connection lives. So:
//   - at most `maxStreams` streams at once, and `maxPerPeer` from one client host;
//     a stream over the limit is refused with RESOURCE_EXHAUSTED, saying which limit;
//   - a Write() blocked for longer than `stallLimit` cancels its stream (the client
//     reconnects and resumes from the sequence number it has, as RunWatch does).
// Thread-safe. One StreamLimits per service; one StreamGuard per stream handler.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace scalelab::agent {

class StreamGuard;

class StreamLimits {
public:
    StreamLimits(int maxStreams, int maxPerPeer, std::chrono::milliseconds stallLimit);
    ~StreamLimits();
    StreamLimits(const StreamLimits &) = delete;
    StreamLimits &operator=(const StreamLimits &) = delete;

    int open() const;
    std::chrono::milliseconds stallLimit() const { return m_stallLimit; }
    int maxStreams() const { return m_maxStreams; }
    int maxPerPeer() const { return m_maxPerPeer; }
    // Streams cancelled because their client stopped reading, since the start.
    long cancelledStalls() const { return m_cancelled.load(); }

private:
    friend class StreamGuard;
    grpc::Status enter(StreamGuard *guard);
    void leave(StreamGuard *guard);
    void watch();

    const int m_maxStreams;
    const int m_maxPerPeer;
    const std::chrono::milliseconds m_stallLimit;
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    std::set<StreamGuard *> m_guards;
    std::map<std::string, int> m_perPeer;
    bool m_stopping = false;
    std::atomic<long> m_cancelled { 0 };
    std::thread m_watcher;
};

class StreamGuard {
public:
    // `what` names the stream in messages ("WatchRun").
    StreamGuard(StreamLimits &limits, grpc::ServerContext *context, const char *what);
    ~StreamGuard();
    StreamGuard(const StreamGuard &) = delete;
    StreamGuard &operator=(const StreamGuard &) = delete;

    // OK when the stream may go on; else the status to return at once.
    const grpc::Status &admitted() const { return m_admitted; }

    // writer->Write(message), cancelled when the client does not take it in time.
    template <typename Writer, typename Message> bool write(Writer *writer, const Message &message)
    {
        m_writeStartedMs.store(nowMs());
        const bool ok = writer->Write(message);
        m_writeStartedMs.store(0);
        return ok;
    }

private:
    friend class StreamLimits;
    static std::int64_t nowMs();

    StreamLimits &m_limits;
    grpc::ServerContext *m_context;
    std::string m_what;
    std::string m_peer; // the client's host, without its port
    grpc::Status m_admitted;
    bool m_entered = false;
    bool m_cancelled = false; // guarded by the limits' mutex
    std::atomic<std::int64_t> m_writeStartedMs { 0 }; // 0 = not writing
};

} // namespace scalelab::agent
