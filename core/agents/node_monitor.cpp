#include "node_monitor.h"

#include "agent_grpc.h"

#include <QDateTime>

#include <chrono>

namespace scalelab::core {

namespace {
constexpr int kDescribeTimeoutMs = 5000;
constexpr qint64 kRedescribeMs = 10'000; // free slots and data sets change while connected

// gRPC's transport messages ("failed to connect to all addresses; last error: UNKNOWN:
// ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused") in words.
struct Reason {
    QString words; // short, for the table
    QString advice; // a sentence, for the details
};

Reason plainReason(const QString &detail, const QString &address)
{
    const QString d = detail.toLower();
    const QString port = address.section(QLatin1Char(':'), -1);
    const QString host = address.left(address.size() - port.size() - 1);
    const auto has = [&d](const char *text) { return d.contains(QLatin1String(text)); };
    if (has("connection refused"))
        return { QStringLiteral("connection refused"),
            QStringLiteral("Nothing listens on port %1 of %2: is scalelab-agent running there, on this port?")
                .arg(port, host) };
    if (has("dns") || has("name or service not known") || has("not found") || has("resolve"))
        return { QStringLiteral("unknown host '%1'").arg(host),
            QStringLiteral("The host name does not resolve: a typo, or a host on another network?") };
    if (has("no route to host"))
        return { QStringLiteral("no route to host"),
            QStringLiteral("Is %1 up, and on this network?").arg(host) };
    if (has("network is unreachable"))
        return { QStringLiteral("network unreachable"),
            QStringLiteral("This computer has no route to that network.") };
    if (has("ssl") || has("tls") || has("handshake") || has("certificate"))
        return { QStringLiteral("TLS handshake failed"),
            QStringLiteral(
                "Does the agent use TLS, and do the CA file and server name match its certificate?") };
    if (has("socket closed") || has("connection reset") || has("end of tcp stream") || has("eof"))
        return { QStringLiteral("connection closed by the agent"),
            QStringLiteral("An agent with TLS reached without it, or the other way round?") };
    if (has("timed out") || has("timeout"))
        return { QStringLiteral("connection timed out"),
            QStringLiteral("Host down, or a firewall in the way?") };
    if (has("shutting down"))
        return { QStringLiteral("the agent is shutting down"), {} };
    return { QStringLiteral("no connection"), detail };
}
} // namespace

NodeMonitor::NodeMonitor(AgentEndpoint endpoint, QObject *parent)
    : QObject(parent)
    , m_endpoint(std::move(endpoint))
{
    qRegisterMetaType<AgentStatus>();
}

NodeMonitor::~NodeMonitor()
{
    stop();
}

void NodeMonitor::setBackoff(int initialMs, int maxMs)
{
    m_initialBackoffMs = qMax(1, initialMs);
    m_maxBackoffMs = qMax(m_initialBackoffMs, maxMs);
}

void NodeMonitor::start()
{
    if (m_thread.joinable())
        return;
    m_stop = false;
    m_thread = std::thread([this] { loop(); });
}

void NodeMonitor::stop()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        if (m_context)
            m_context->TryCancel();
    }
    m_wake.notify_all();
    if (m_thread.joinable())
        m_thread.join();
}

std::vector<TimedNodeSample> NodeMonitor::takeSamples()
{
    std::lock_guard lock(m_mutex);
    return std::exchange(m_pending, {});
}

AgentStatus NodeMonitor::statusFor(const Status &result, const AgentEndpoint &endpoint)
{
    AgentStatus s;
    // The detail gRPC gave, without the "cannot reach the agent at …" frame around it.
    QString detail = result.error();
    switch (result.code()) {
    case Status::Code::Ok:
        s.state = AgentStatus::Connected;
        s.words = QStringLiteral("connected");
        return s;
    case Status::Code::Unauthenticated:
        s.state = AgentStatus::Unauthenticated;
        s.words = endpoint.token.isEmpty() ? QStringLiteral("unauthenticated: no token given")
                                           : QStringLiteral("unauthenticated: token rejected");
        s.advice = endpoint.token.isEmpty()
            ? QStringLiteral("The agent requires a token: copy it from the agent's token file.")
            : QStringLiteral("The agent expects another token: copy it from the agent's token file.");
        return s;
    case Status::Code::Unavailable: {
        const int open = int(detail.indexOf(QLatin1Char('('))),
                  close = int(detail.lastIndexOf(QLatin1Char(')')));
        if (open >= 0 && close > open)
            detail = detail.mid(open + 1, close - open - 1);
        const Reason reason = plainReason(detail, endpoint.address);
        s.state = AgentStatus::Unreachable;
        s.words = QStringLiteral("unreachable: ") + reason.words;
        s.advice = reason.advice;
        return s;
    }
    case Status::Code::DeadlineExceeded:
        s.state = AgentStatus::Unreachable;
        s.words = QStringLiteral("unreachable: no answer within %1 s").arg(kDescribeTimeoutMs / 1000);
        s.advice = QStringLiteral("Host down, network or firewall trouble, or the agent is overloaded.");
        return s;
    case Status::Code::FailedPrecondition:
        s.state = AgentStatus::Misconfigured;
        s.words = QStringLiteral("TLS settings unusable");
        s.advice = detail;
        return s;
    case Status::Code::PermissionDenied:
        s.state = AgentStatus::Unauthenticated;
        s.words = QStringLiteral("permission denied");
        s.advice = detail;
        return s;
    case Status::Code::Unimplemented:
        s.state = AgentStatus::Failed;
        s.words = QStringLiteral("incompatible agent");
        s.advice = QStringLiteral("It lacks a call this console needs: an older scalelab-agent?");
        return s;
    default:
        s.state = AgentStatus::Failed;
        s.words = QStringLiteral("error");
        s.advice = detail;
        return s;
    }
}

void NodeMonitor::report(const AgentStatus &status)
{
    QMetaObject::invokeMethod(
        this, [this, status] { Q_EMIT statusChanged(status); }, Qt::QueuedConnection);
}

void NodeMonitor::reportInventory(const v1::DescribeResponse &inventory)
{
    QMetaObject::invokeMethod(
        this, [this, inventory] { Q_EMIT inventoryChanged(inventory); }, Qt::QueuedConnection);
}

bool NodeMonitor::waitMs(int ms)
{
    std::unique_lock lock(m_mutex);
    return !m_wake.wait_for(lock, std::chrono::milliseconds(ms), [this] { return m_stop.load(); });
}

Status NodeMonitor::describe(AgentClient &client, v1::DescribeResponse *response)
{
    grpc::ClientContext context;
    client.connection().prepareStream(&context);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(kDescribeTimeoutMs));
    {
        std::lock_guard lock(m_mutex);
        if (m_stop)
            return Status::failure(Status::Code::Cancelled, QStringLiteral("stopped"));
        m_context = &context;
    }
    const grpc::Status status = client.connection().stub->Describe(&context, {}, response);
    std::lock_guard lock(m_mutex);
    m_context = nullptr;
    return statusFromGrpc(status, m_endpoint.address);
}

Status NodeMonitor::watch(AgentClient &client)
{
    grpc::ClientContext context;
    client.connection().prepareStream(&context);
    {
        std::lock_guard lock(m_mutex);
        if (m_stop)
            return Status::failure(Status::Code::Cancelled, QStringLiteral("stopped"));
        m_context = &context;
    }
    v1::WatchNodeRequest request;
    request.set_interval_ms(m_intervalMs);
    auto reader = client.connection().stub->WatchNode(&context, request);
    TimedNodeSample timed;
    qint64 describedAt = QDateTime::currentMSecsSinceEpoch();
    while (reader->Read(&timed.sample)) {
        m_failures = 0; // samples flow: the next failure starts the backoff afresh
        timed.receivedMs = QDateTime::currentMSecsSinceEpoch();
        bool wake = false;
        {
            std::lock_guard lock(m_mutex);
            wake = m_pending.empty();
            m_pending.push_back(timed);
        }
        if (wake) // one queued wake-up per batch: the owner drains everything pending
            QMetaObject::invokeMethod(this, &NodeMonitor::samplesArrived, Qt::QueuedConnection);
        if (timed.receivedMs - describedAt > kRedescribeMs) {
            describedAt = timed.receivedMs;
            // A short call on the same channel between two samples; a failure here is
            // left to the stream to notice.
            grpc::ClientContext again;
            client.connection().prepareStream(&again);
            again.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(2000));
            v1::DescribeResponse inventory;
            if (client.connection().stub->Describe(&again, {}, &inventory).ok())
                reportInventory(inventory);
        }
    }
    const grpc::Status status = reader->Finish();
    std::lock_guard lock(m_mutex);
    m_context = nullptr;
    if (status.ok()) // the agent ended the stream without an error: treat as a dropped link
        return Status::failure(
            Status::Code::Unavailable, QStringLiteral("(the agent ended the utilization stream)"));
    return statusFromGrpc(status, m_endpoint.address);
}

void NodeMonitor::loop()
{
    m_failures = 0;
    while (!m_stop) {
        AgentClient client(m_endpoint.address, m_endpoint.token, m_endpoint.tls.orEnvironment());
        Status result = client.setup();
        if (result.ok()) {
            if (m_failures == 0)
                report({ AgentStatus::Connecting, QStringLiteral("connecting…"), {}, 0 });
            v1::DescribeResponse inventory;
            result = describe(client, &inventory);
            if (result.ok()) {
                reportInventory(inventory);
                report(statusFor(Status::success(), m_endpoint));
                result = watch(client);
            }
        }
        if (m_stop)
            break;
        // Exponential backoff, capped: a node that comes back is noticed within maxBackoff.
        const int delay
            = int(qMin<qint64>(qint64(m_initialBackoffMs) << qMin(m_failures, 16), m_maxBackoffMs));
        ++m_failures;
        AgentStatus status = statusFor(result, m_endpoint);
        status.retryInMs = delay;
        report(status);
        if (!waitMs(delay))
            break;
    }
}

} // namespace scalelab::core
