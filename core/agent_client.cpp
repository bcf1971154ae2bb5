#include "agent_client.h"

#include "grpc/health/v1/health.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <QFile>

#include <chrono>

namespace scalelab::core {

namespace {
constexpr int kCallTimeoutMs = 10'000;
constexpr int kMaxMessageBytes = 16 * 1024 * 1024;
} // namespace

bool CallResult::unreachable() const
{
    return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

CallResult CallResult::fromStatus(const grpc::Status &status, const QString &endpoint)
{
    if (status.ok())
        return {};
    const QString detail = QString::fromStdString(status.error_message());
    switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
        return { status.error_code(),
            QStringLiteral("cannot reach the agent at %1 (%2). Is scalelab-agent running "
                           "there, and are the address and port right?")
                .arg(endpoint, detail) };
    case grpc::StatusCode::DEADLINE_EXCEEDED:
        return { status.error_code(),
            QStringLiteral("the agent at %1 did not answer in time; it may be overloaded "
                           "or the network is down")
                .arg(endpoint) };
    default:
        return { status.error_code(), QStringLiteral("agent %1: %2").arg(endpoint, detail) };
    }
}

QString AgentClient::endpointError(const QString &endpoint)
{
    const int colon = endpoint.lastIndexOf(QLatin1Char(':'));
    if (colon <= 0)
        return QStringLiteral("agent address '%1' is not HOST:PORT (for example 127.0.0.1:7450)")
            .arg(endpoint);
    bool ok = false;
    const int port = endpoint.mid(colon + 1).toInt(&ok);
    if (!ok || port < 1 || port > 65535)
        return QStringLiteral("agent address '%1' has no valid port (1-65535)").arg(endpoint);
    return {};
}

AgentTls AgentTls::fromEnvironment()
{
    AgentTls tls;
    tls.caFile = QString::fromLocal8Bit(qgetenv("SCALELAB_TLS_CA"));
    tls.certFile = QString::fromLocal8Bit(qgetenv("SCALELAB_TLS_CERT"));
    tls.keyFile = QString::fromLocal8Bit(qgetenv("SCALELAB_TLS_KEY"));
    tls.serverName = QString::fromLocal8Bit(qgetenv("SCALELAB_TLS_SERVER_NAME"));
    return tls;
}

namespace {
std::string readPem(const QString &path, const char *what, QString *error)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error->isEmpty())
            *error = QStringLiteral("cannot read the TLS %1 %2: %3")
                         .arg(QLatin1String(what), path, f.errorString());
        return {};
    }
    return f.readAll().toStdString();
}
} // namespace

AgentClient::AgentClient(const QString &endpoint, const QString &token)
    : AgentClient(endpoint, token, AgentTls::fromEnvironment())
{ }

AgentClient::AgentClient(const QString &endpoint, const QString &token, const AgentTls &tls)
    : m_endpoint(endpoint)
    , m_token(token.toStdString())
{
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000); // a dead connection is found in ~15 s
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
    // Fail fast and retry ourselves: a dead agent should be reported in seconds.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5'000);
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (tls.enabled()) {
        grpc::SslCredentialsOptions ssl;
        ssl.pem_root_certs = readPem(tls.caFile, "CA file", &m_setupError);
        if (!tls.certFile.isEmpty() || !tls.keyFile.isEmpty()) {
            if (tls.certFile.isEmpty() || tls.keyFile.isEmpty())
                m_setupError = QStringLiteral("mutual TLS needs both a client certificate and its key");
            ssl.pem_cert_chain = readPem(tls.certFile, "client certificate", &m_setupError);
            ssl.pem_private_key = readPem(tls.keyFile, "client key", &m_setupError);
        }
        if (!tls.serverName.isEmpty())
            args.SetSslTargetNameOverride(tls.serverName.toStdString());
        credentials = grpc::SslCredentials(ssl);
    }
    m_channel = grpc::CreateCustomChannel(endpoint.toStdString(), credentials, args);
    m_stub = v1::Agent::NewStub(m_channel);
}

void AgentClient::prepare(grpc::ClientContext *context, int timeoutMs) const
{
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeoutMs));
    if (!m_token.empty())
        context->AddMetadata("authorization", "Bearer " + m_token);
}

void AgentClient::prepareStreamContext(grpc::ClientContext *context) const
{
    if (!m_token.empty())
        context->AddMetadata("authorization", "Bearer " + m_token);
}

CallResult AgentClient::setupFailure() const
{
    return { grpc::StatusCode::FAILED_PRECONDITION, m_setupError };
}

CallResult AgentClient::describe(v1::DescribeResponse *response, int timeoutMs)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, timeoutMs);
    return CallResult::fromStatus(m_stub->Describe(&context, {}, response), m_endpoint);
}

CallResult AgentClient::startWorkers(
    const v1::StartWorkersRequest &request, v1::StartWorkersResponse *response)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, kCallTimeoutMs);
    return CallResult::fromStatus(m_stub->StartWorkers(&context, request, response), m_endpoint);
}

CallResult AgentClient::stopRun(const QString &runId, v1::StopRunResponse *response)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, kCallTimeoutMs);
    v1::StopRunRequest request;
    request.set_run_id(runId.toStdString());
    return CallResult::fromStatus(m_stub->StopRun(&context, request, response), m_endpoint);
}

CallResult AgentClient::listRuns(v1::ListRunsResponse *response)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, kCallTimeoutMs);
    return CallResult::fromStatus(m_stub->ListRuns(&context, {}, response), m_endpoint);
}

CallResult AgentClient::createSyntheticDataset(
    const v1::CreateSyntheticDatasetRequest &request, v1::Dataset *response)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, 120'000); // writing a large set takes a while
    return CallResult::fromStatus(m_stub->CreateSyntheticDataset(&context, request, response), m_endpoint);
}

CallResult AgentClient::checkHealth(int timeoutMs)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    auto health = grpc::health::v1::Health::NewStub(m_channel);
    grpc::ClientContext context;
    prepare(&context, timeoutMs);
    grpc::health::v1::HealthCheckResponse response;
    const auto status = health->Check(&context, {}, &response);
    if (!status.ok())
        return CallResult::fromStatus(status, m_endpoint);
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING)
        return { grpc::StatusCode::UNAVAILABLE,
            QStringLiteral("the agent at %1 is not serving (shutting down?)").arg(m_endpoint) };
    return {};
}

CallResult AgentClient::watchNode(int intervalMs, const std::function<bool(const v1::NodeSample &)> &onSample)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepareStreamContext(&context);
    v1::WatchNodeRequest request;
    request.set_interval_ms(intervalMs);
    auto reader = m_stub->WatchNode(&context, request);
    v1::NodeSample sample;
    bool stoppedByUs = false;
    while (reader->Read(&sample)) {
        if (!onSample(sample)) {
            stoppedByUs = true;
            context.TryCancel();
            break;
        }
    }
    const grpc::Status status = reader->Finish();
    return stoppedByUs ? CallResult {} : CallResult::fromStatus(status, m_endpoint);
}

CallResult AgentClient::fetchDataset(const QString &name,
    const std::function<void(const v1::FetchProgress &)> &onProgress, v1::Dataset *dataset, int timeoutMs)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, timeoutMs);
    v1::FetchDatasetRequest request;
    request.set_name(name.toStdString());
    auto reader = m_stub->FetchDataset(&context, request);
    v1::FetchProgress progress;
    while (reader->Read(&progress)) {
        if (progress.phase() == v1::FetchProgress::DONE && dataset)
            *dataset = progress.dataset();
        if (onProgress)
            onProgress(progress);
    }
    return CallResult::fromStatus(reader->Finish(), m_endpoint);
}

CallResult AgentClient::findLearningRate(const v1::FindLearningRateRequest &request,
    const std::function<bool(const v1::LrFindProgress &)> &onPoints, v1::LrFindResult *result, int timeoutMs)
{
    if (!m_setupError.isEmpty())
        return setupFailure();
    grpc::ClientContext context;
    prepare(&context, timeoutMs);
    auto reader = m_stub->FindLearningRate(&context, request);
    v1::LrFindProgress progress;
    bool haveResult = false;
    while (reader->Read(&progress)) {
        if (progress.has_result()) {
            haveResult = true;
            if (result)
                *result = progress.result();
        }
        if (onPoints && !onPoints(progress)) {
            context.TryCancel();
            (void)reader->Finish();
            return CallResult { int(grpc::StatusCode::CANCELLED), QStringLiteral("the range test was cancelled") };
        }
    }
    CallResult outcome = CallResult::fromStatus(reader->Finish(), m_endpoint);
    if (outcome.ok() && !haveResult)
        return CallResult { int(grpc::StatusCode::INTERNAL), QStringLiteral("the agent sent no result") };
    return outcome;
}

} // namespace scalelab::core
