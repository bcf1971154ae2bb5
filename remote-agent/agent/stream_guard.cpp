#include "stream_guard.h"

#include "log.h"

namespace scalelab::agent {

namespace {

// "ipv4:10.0.0.5:41234" -> "ipv4:10.0.0.5", "ipv6:[::1]:5" -> "ipv6:[::1]".
std::string peerHost(const std::string &peer)
{
    const auto colon = peer.rfind(':');
    const auto bracket = peer.rfind(']');
    if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket))
        return peer;
    return peer.substr(0, colon);
}

} // namespace

StreamLimits::StreamLimits(int maxStreams, int maxPerPeer, std::chrono::milliseconds stallLimit)
    : m_maxStreams(maxStreams)
    , m_maxPerPeer(maxPerPeer)
    , m_stallLimit(stallLimit)
    , m_watcher([this] { watch(); })
{ }

StreamLimits::~StreamLimits()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    m_watcher.join();
}

int StreamLimits::open() const
{
    std::lock_guard lock(m_mutex);
    return int(m_guards.size());
}

grpc::Status StreamLimits::enter(StreamGuard *guard)
{
    std::lock_guard lock(m_mutex);
    if (int(m_guards.size()) >= m_maxStreams)
        return { grpc::StatusCode::RESOURCE_EXHAUSTED,
            "the agent already serves " + std::to_string(m_maxStreams)
                + " streams (its limit, --max-streams); close some watchers and try again" };
    int &fromPeer = m_perPeer[guard->m_peer];
    if (fromPeer >= m_maxPerPeer)
        return { grpc::StatusCode::RESOURCE_EXHAUSTED,
            "this client (" + guard->m_peer + ") already has " + std::to_string(m_maxPerPeer)
                + " streams open on the agent (its limit per client); close some and try again" };
    ++fromPeer;
    m_guards.insert(guard);
    return grpc::Status::OK;
}

void StreamLimits::leave(StreamGuard *guard)
{
    std::lock_guard lock(m_mutex);
    m_guards.erase(guard);
    if (auto it = m_perPeer.find(guard->m_peer); it != m_perPeer.end() && --it->second <= 0)
        m_perPeer.erase(it);
}

void StreamLimits::watch()
{
    std::unique_lock lock(m_mutex);
    while (!m_stopping) {
        m_wake.wait_for(lock, std::chrono::milliseconds(500));
        const std::int64_t now = StreamGuard::nowMs();
        for (StreamGuard *guard : m_guards) {
            const std::int64_t started = guard->m_writeStartedMs.load();
            if (started == 0 || guard->m_cancelled || now - started < m_stallLimit.count())
                continue;
            // The guard cannot leave (and its context cannot end) while we hold the lock.
            guard->m_cancelled = true;
            guard->m_context->TryCancel();
            ++m_cancelled;
            logMessage(LogLevel::Warning,
                guard->m_what + " to " + guard->m_peer + " cancelled: the client took no data for "
                    + std::to_string(m_stallLimit.count() / 1000) + " s");
        }
    }
}

StreamGuard::StreamGuard(StreamLimits &limits, grpc::ServerContext *context, const char *what)
    : m_limits(limits)
    , m_context(context)
    , m_what(what)
    , m_peer(peerHost(context->peer()))
{
    m_admitted = m_limits.enter(this);
    m_entered = m_admitted.ok();
}

StreamGuard::~StreamGuard()
{
    if (m_entered)
        m_limits.leave(this);
}

std::int64_t StreamGuard::nowMs()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

} // namespace scalelab::agent
