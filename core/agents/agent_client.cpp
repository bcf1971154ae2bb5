#include "agent_client.h"

#include "agent_grpc.h"
#include "grpc/health/v1/health.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <QFile>

#include <chrono>
#include <thread>

namespace scalelab::core {

namespace {
constexpr int kCallTimeoutMs = 10'000;
constexpr int kMaxMessageBytes = 16 * 1024 * 1024;
} // namespace

namespace {
// What a failed connection set-up most likely means when TLS is involved, from gRPC
// 1.51's words (seen for real: plaintext against TLS, TLS against plaintext, a CA that
// did not sign the agent's certificate, a name it does not list, a client certificate
// a mutual-TLS agent refused). Empty when the words say nothing about TLS.
QString tlsProblem(const QString &detail, const QString &endpoint, const AgentTls *tls)
{
    const auto has
        = [&detail](const char *text) { return detail.contains(QLatin1String(text), Qt::CaseInsensitive); };
    const QString ca = tls && tls->enabled() ? tls->caFile : QStringLiteral("the CA file");
    if (has("wrong version number")) // our ClientHello answered in plaintext HTTP/2
        return QStringLiteral("agent %1 does not speak TLS, but this client does (SCALELAB_TLS_CA or the "
                              "agent's CA file is set): unset it for this agent, or start the agent with "
                              "--tls-cert and --tls-key")
            .arg(endpoint);
    if (has("certificate verify failed"))
        return QStringLiteral("agent %1 presented a certificate that %2 does not vouch for (not signed by "
                              "that CA, or expired): set SCALELAB_TLS_CA to the CA that signed the agent's "
                              "--tls-cert, see --help")
            .arg(endpoint, ca);
    if (has("is not in peer certificate"))
        return QStringLiteral("agent %1 presented a certificate for another name: connect with a name or "
                              "address its certificate lists, or set SCALELAB_TLS_SERVER_NAME to one of "
                              "them, see --help")
            .arg(endpoint);
    // A TLS agent hangs up on a plaintext client, and a mutual-TLS agent on a client
    // without an acceptable certificate; gRPC says only that the socket closed.
    const bool hungUp = has("failed to connect to all addresses")
        && (has("socket closed") || has("connection reset") || has("end of tcp stream"));
    if (hungUp && !tls)
        return QStringLiteral("agent %1 closed the connection while it was set up: TLS on one side only "
                              "(SCALELAB_TLS_CA), or a client certificate it refused? See --help")
            .arg(endpoint);
    if (hungUp && !tls->enabled())
        return QStringLiteral("agent %1 most likely speaks TLS, but this client has no CA: set "
                              "SCALELAB_TLS_CA to the PEM file of the CA that signed the agent's "
                              "certificate, see --help")
            .arg(endpoint);
    if (hungUp && tls->certFile.isEmpty())
        return QStringLiteral("agent %1 ended the TLS handshake: it most likely requires a client "
                              "certificate (mutual TLS). Set SCALELAB_TLS_CERT and SCALELAB_TLS_KEY to a "
                              "certificate signed by the agent's --tls-client-ca, see --help")
            .arg(endpoint);
    if (hungUp)
        return QStringLiteral("agent %1 ended the TLS handshake: it most likely refused this client's "
                              "certificate %2. Is it signed by the agent's --tls-client-ca, and unexpired?")
            .arg(endpoint, tls->certFile);
    if (has("handshake") || has("ssl_error"))
        return QStringLiteral("the TLS handshake with agent %1 failed: do %2 and the agent's certificate "
                              "belong together? See --help")
            .arg(endpoint, ca);
    return {};
}
} // namespace

Status statusFromGrpc(const grpc::Status &status, const QString &endpoint, const AgentTls *tls)
{
    if (status.ok())
        return Status::success();
    const auto code = static_cast<Status::Code>(status.error_code()); // the same numbers
    const QString detail = QString::fromStdString(status.error_message());
    switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
        if (const QString problem = tlsProblem(detail, endpoint, tls); !problem.isEmpty())
            return Status::failure(code, QStringLiteral("%1 (gRPC: %2)").arg(problem, detail));
        return Status::failure(code,
            QStringLiteral("cannot reach the agent at %1 (%2). Is scalelab-agent running "
                           "there, and are the address and port right?")
                .arg(endpoint, detail));
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
        if (detail.contains(QLatin1String("metadata size exceeds limit")))
            return Status::failure(code,
                QStringLiteral("agent %1 refused the call's headers as too large (%2): is the token "
                               "(SCALELAB_TOKEN or --token-file) the right file? Agents take 16 KiB")
                    .arg(endpoint, detail));
        return Status::failure(code, QStringLiteral("agent %1: %2").arg(endpoint, detail));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
        return Status::failure(code,
            QStringLiteral("the agent at %1 did not answer in time; it may be overloaded "
                           "or the network is down")
                .arg(endpoint));
    default:
        return Status::failure(code, QStringLiteral("agent %1: %2").arg(endpoint, detail));
    }
}

Status AgentClient::checkEndpoint(const QString &endpoint)
{
    const int colon = endpoint.lastIndexOf(QLatin1Char(':'));
    if (colon <= 0)
        return Status::failure(
            QStringLiteral("agent address '%1' is not HOST:PORT (for example 127.0.0.1:7450)").arg(endpoint));
    bool ok = false;
    const int port = endpoint.mid(colon + 1).toInt(&ok);
    if (!ok || port < 1 || port > 65535)
        return Status::failure(
            QStringLiteral("agent address '%1' has no valid port (1-65535)").arg(endpoint));
    return Status::success();
}

QString AgentTls::environmentHelp()
{
    return QStringLiteral(
        "  SCALELAB_TLS_CA           PEM file of the CA that signed the agents' certificates: set, every\n"
        "                            agent without a CA of its own is reached over TLS (agents off\n"
        "                            loopback serve only TLS); unset, in plaintext\n"
        "  SCALELAB_TLS_CERT         client certificate (PEM) for agents started with --tls-client-ca\n"
        "  SCALELAB_TLS_KEY          its private key\n"
        "  SCALELAB_TLS_SERVER_NAME  name to check in the agents' certificates instead of the host\n"
        "                            of their address\n");
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
Result<std::string> readPem(const QString &path, const char *what)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return Status::failure(Status::Code::FailedPrecondition,
            QStringLiteral("cannot read the TLS %1 %2: %3").arg(QLatin1String(what), path, f.errorString()));
    return f.readAll().toStdString();
}
} // namespace

AgentClient::AgentClient(const QString &endpoint, const QString &token)
    : AgentClient(endpoint, token, AgentTls::fromEnvironment())
{ }

AgentClient::AgentClient(const QString &endpoint, const QString &token, const AgentTls &tls)
    : m_endpoint(endpoint)
    , m_tls(tls)
    , m_connection(std::make_unique<Connection>())
{
    m_connection->token = token.toStdString();
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
        // The file's text; empty when it cannot be read, the first such problem kept to be
        // reported by every call.
        const auto pem = [this](const Result<std::string> &read) {
            if (!read && m_setupError.isEmpty())
                m_setupError = read.error();
            return read.valueOr({});
        };
        grpc::SslCredentialsOptions ssl;
        ssl.pem_root_certs = pem(readPem(tls.caFile, "CA file"));
        if (!tls.certFile.isEmpty() || !tls.keyFile.isEmpty()) {
            if (tls.certFile.isEmpty() || tls.keyFile.isEmpty())
                m_setupError = QStringLiteral("mutual TLS needs both a client certificate and its key");
            ssl.pem_cert_chain = pem(readPem(tls.certFile, "client certificate"));
            ssl.pem_private_key = pem(readPem(tls.keyFile, "client key"));
        }
        if (!tls.serverName.isEmpty())
            args.SetSslTargetNameOverride(tls.serverName.toStdString());
        credentials = grpc::SslCredentials(ssl);
    }
    m_connection->channel = grpc::CreateCustomChannel(endpoint.toStdString(), credentials, args);
    m_connection->stub = v1::Agent::NewStub(m_connection->channel);
}

AgentClient::~AgentClient() = default;

void AgentClient::Connection::prepare(grpc::ClientContext *context, int timeoutMs) const
{
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeoutMs));
    prepareStream(context);
}

void AgentClient::Connection::prepareStream(grpc::ClientContext *context) const
{
    if (!token.empty())
        context->AddMetadata("authorization", "Bearer " + token);
}

Status AgentClient::setup() const
{
    if (m_setupError.isEmpty())
        return Status::success();
    return Status::failure(Status::Code::FailedPrecondition, m_setupError);
}

std::vector<DescribeAnswer> describeEach(const std::vector<AgentClient *> &clients, int timeoutMs)
{
    std::vector<DescribeAnswer> answers(clients.size());
    std::vector<std::thread> calls;
    calls.reserve(clients.size());
    for (std::size_t i = 0; i < clients.size(); ++i) {
        if (!clients[i]) {
            answers[i].status = Status::failure(Status::Code::NotFound, QStringLiteral("unknown agent"));
            continue;
        }
        // Each thread writes its own element only; the vector is not resized meanwhile.
        calls.emplace_back([&answer = answers[i], client = clients[i], timeoutMs] {
            answer.status = client->describe(&answer.response, timeoutMs);
        });
    }
    for (std::thread &call : calls)
        call.join();
    return answers;
}

QString grpcVersion()
{
    return QString::fromStdString(grpc::Version());
}

Status AgentClient::describe(v1::DescribeResponse *response, int timeoutMs)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, timeoutMs);
    return statusFromGrpc(m_connection->stub->Describe(&context, {}, response), m_endpoint, &m_tls);
}

Status AgentClient::startWorkers(const v1::StartWorkersRequest &request, v1::StartWorkersResponse *response)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, kCallTimeoutMs);
    return statusFromGrpc(m_connection->stub->StartWorkers(&context, request, response), m_endpoint, &m_tls);
}

Status AgentClient::stopRun(const QString &runId, v1::StopRunResponse *response)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, kCallTimeoutMs);
    v1::StopRunRequest request;
    request.set_run_id(runId.toStdString());
    return statusFromGrpc(m_connection->stub->StopRun(&context, request, response), m_endpoint, &m_tls);
}

Status AgentClient::collectGarbage(
    const v1::CollectGarbageRequest &request, v1::CollectGarbageResponse *response)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, kCallTimeoutMs);
    return statusFromGrpc(
        m_connection->stub->CollectGarbage(&context, request, response), m_endpoint, &m_tls);
}

Status AgentClient::listRuns(const v1::ListRunsRequest &request, v1::ListRunsResponse *response)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, kCallTimeoutMs);
    return statusFromGrpc(m_connection->stub->ListRuns(&context, request, response), m_endpoint, &m_tls);
}

Status AgentClient::listAllRuns(QList<v1::RunInfo> *runs)
{
    v1::ListRunsRequest request;
    request.set_page_size(1000);
    for (;;) {
        v1::ListRunsResponse page;
        if (auto r = listRuns(request, &page); !r.ok())
            return r;
        for (auto &run : *page.mutable_runs())
            runs->append(std::move(run));
        if (page.next_page_token().empty())
            return Status::success();
        request.set_page_token(page.next_page_token());
    }
}

Status AgentClient::createSyntheticDataset(
    const v1::CreateSyntheticDatasetRequest &request, v1::Dataset *response)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, 120'000); // writing a large set takes a while
    return statusFromGrpc(
        m_connection->stub->CreateSyntheticDataset(&context, request, response), m_endpoint, &m_tls);
}

Status AgentClient::checkHealth(int timeoutMs)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    auto health = grpc::health::v1::Health::NewStub(m_connection->channel);
    grpc::ClientContext context;
    m_connection->prepare(&context, timeoutMs);
    grpc::health::v1::HealthCheckResponse response;
    const auto status = health->Check(&context, {}, &response);
    if (!status.ok())
        return statusFromGrpc(status, m_endpoint, &m_tls);
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING)
        return Status::failure(Status::Code::Unavailable,
            QStringLiteral("the agent at %1 is not serving (shutting down?)").arg(m_endpoint));
    return Status::success();
}

Status AgentClient::watchNode(int intervalMs, const std::function<bool(const v1::NodeSample &)> &onSample)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepareStream(&context);
    v1::WatchNodeRequest request;
    request.set_interval_ms(intervalMs);
    auto reader = m_connection->stub->WatchNode(&context, request);
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
    return stoppedByUs ? Status::success() : statusFromGrpc(status, m_endpoint, &m_tls);
}

Status AgentClient::fetchDataset(const QString &name,
    const std::function<void(const v1::FetchProgress &)> &onProgress, v1::Dataset *dataset, int timeoutMs)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, timeoutMs);
    v1::FetchDatasetRequest request;
    request.set_name(name.toStdString());
    auto reader = m_connection->stub->FetchDataset(&context, request);
    v1::FetchProgress progress;
    while (reader->Read(&progress)) {
        if (progress.phase() == v1::FetchProgress::DONE && dataset)
            *dataset = progress.dataset();
        if (onProgress)
            onProgress(progress);
    }
    return statusFromGrpc(reader->Finish(), m_endpoint, &m_tls);
}

Status AgentClient::findLearningRate(const v1::FindLearningRateRequest &request,
    const std::function<bool(const v1::LrFindProgress &)> &onPoints, v1::LrFindResult *result, int timeoutMs)
{
    if (Status ready = setup(); !ready.ok())
        return ready;
    grpc::ClientContext context;
    m_connection->prepare(&context, timeoutMs);
    auto reader = m_connection->stub->FindLearningRate(&context, request);
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
            (void)reader->Finish(); // ends the cancelled call: its status is "cancelled", said below
            return Status::failure(Status::Code::Cancelled, QStringLiteral("the range test was cancelled"));
        }
    }
    Status outcome = statusFromGrpc(reader->Finish(), m_endpoint, &m_tls);
    if (outcome.ok() && !haveResult)
        return Status::failure(Status::Code::Internal, QStringLiteral("the agent sent no result"));
    return outcome;
}

} // namespace scalelab::core
