// scalelab-agent: one per node. Serves proto/scalelab/v1 over gRPC, starts and
// supervises scalelab-worker processes, and never leaves a child behind.
#include "advertise.h"
#include "agent_config.h"
#include "agent_metrics.h"
#include "agent_service.h"
#include "checkpoint_transfer.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "listen_check.h"
#include "log.h"
#include "net_address.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>

#include <atomic>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <pthread.h>
#include <unistd.h>

using namespace scalelab;
using namespace scalelab::agent;

namespace {

// The gRPC server's limits, set explicitly rather than left to gRPC's defaults.
// What a client may send: WriteCheckpoint chunks carry at most 1 MiB of data and every
// other request is small, so 4 MiB is room to spare and bounds what one request makes
// the agent hold. A larger message is refused by gRPC with RESOURCE_EXHAUSTED.
constexpr int kMaxReceiveBytes = 4 * 1024 * 1024;
static_assert(kCheckpointChunkBytes + 64 * 1024 <= kMaxReceiveBytes, "a WriteCheckpoint chunk must fit");
// What the agent sends: ReadCheckpoint chunks of 1 MiB, Describe and ListRuns that grow
// with the runs kept. Clients (core::AgentClient) accept 16 MiB.
constexpr int kMaxSendBytes = 16 * 1024 * 1024;
// Request metadata, the token header included. gRPC's default (8 KiB) said explicitly
// and doubled: a longer header is answered RESOURCE_EXHAUSTED before any handler runs.
constexpr int kMaxMetadataBytes = 16 * 1024;
// A client that is gone (host down, cable cut) is found by pinging its connection every
// 30 s and dropping it after 10 s without an answer; its streams end then.
constexpr int kKeepaliveMs = 30'000;
constexpr int kKeepaliveTimeoutMs = 10'000;

// The file's bytes, or "cannot read PATH: reason".
common::Result<std::string> readFile(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return common::Status::failure(
            QStringLiteral("cannot read %1: %2").arg(path, f.errorString()).toStdString());
    return f.readAll().toStdString();
}

int fail(const std::string &message)
{
    std::cerr << "scalelab-agent: " << message << "\n";
    logMessage(LogLevel::Error, message); // also into --log-file, when there is one
    return 2;
}

// A whole number option in [low, high], or an error naming it.
common::Result<int> numberOption(const AgentConfig &config, const char *name, int low, int high)
{
    bool ok = false;
    const QString text = config.value(QLatin1String(name));
    const int number = text.toInt(&ok);
    if (!ok || number < low || number > high)
        return common::Status::failure(common::StatusCode::InvalidArgument,
            std::string("--") + name + " must be a whole number from " + std::to_string(low) + " to "
                + std::to_string(high) + " (got '" + text.toStdString() + "' from "
                + config.source(QLatin1String(name)).toStdString() + ")");
    return number;
}

} // namespace

// grpc.health.v1.Health alone, for --health-port: SERVING while the agent serves. (The
// default health service needs a server with other synchronous services to run.)
class HealthOnly final : public grpc::health::v1::Health::Service {
public:
    std::atomic<bool> serving { false };

    grpc::Status Check(grpc::ServerContext *, const grpc::health::v1::HealthCheckRequest *request,
        grpc::health::v1::HealthCheckResponse *response) override
    {
        if (!request->service().empty() && request->service() != "scalelab.v1.Agent")
            return { grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'" };
        response->set_status(serving ? grpc::health::v1::HealthCheckResponse::SERVING
                                     : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
        return grpc::Status::OK;
    }
};

namespace {

QString option(const AgentConfig &config, const char *name)
{
    return config.value(QLatin1String(name));
}

// HOST:PORT, an IPv6 address in brackets.
QString hostAndPort(const QString &host, int port)
{
    return (host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('[')) ? QStringLiteral("[%1]:%2")
                                                                                  : QStringLiteral("%1:%2"))
        .arg(host)
        .arg(port);
}

// The options' help, and the environment they read besides their own variables.
void addOptions(QCommandLineParser *parser, AgentConfig *config)
{
    parser->setApplicationDescription(QStringLiteral(
        "ScaleLab node agent: runs CIFAR-10 training workers for the ScaleLab console.\n"
        "Each option can also be set by the environment variable in brackets, or in the config\n"
        "file as 'option = value'; the command line wins over the environment, which wins over\n"
        "the file. Off loopback the agent needs a token (SCALELAB_AGENT_TOKEN or --token-file)\n"
        "and TLS (--tls-cert, --tls-key), and refuses to start without them: loopback means that\n"
        "every address --listen resolves to is loopback (127.0.0.0/8, ::1).\n"
        "\n"
        "Environment besides the options' own variables (SCALELAB_AGENT_*, in brackets below):\n"
        "  SCALELAB_AGENT_TOKEN  the token clients must send (--token-file wins); never given to workers\n"
        "  GLOO_SOCKET_IFNAME    default --iface (its first interface)\n"
        "  OMP_WAIT_POLICY       given to workers as set; unset, they get PASSIVE\n"
        "  GLIBC_TUNABLES        given to workers with glibc.malloc.hugetlb=1 added, unless it sets that\n"
        "  XDG_DATA_HOME, HOME   where the default data and state folders are\n"
        "Clients (scalelab-cli, scalelab) reach a TLS agent with SCALELAB_TLS_CA set to the CA that\n"
        "signed --tls-cert; with --tls-client-ca they also need SCALELAB_TLS_CERT and SCALELAB_TLS_KEY."));
    parser->addHelpOption();
    parser->addVersionOption();
    config->addOptions(parser);
}

// --log-file and --log-level, first, so that every later failure is logged as asked.
common::Status setUpLog(const AgentConfig &config)
{
    const QString logFile = option(config, "log-file");
    if (!logFile.isEmpty() && !setLogFile(logFile.toStdString()))
        return common::Status::failure(
            "cannot open log file '" + logFile.toStdString() + "': " + std::strerror(errno));
    LogLevel level;
    if (!parseLogLevel(option(config, "log-level").toStdString(), &level))
        return common::Status::failure("--log-level must be debug, info, warning or error (got '"
            + option(config, "log-level").toStdString() + "' from "
            + config.source(QStringLiteral("log-level")).toStdString() + ")");
    setLogLevel(level);
    return common::Status::success();
}

// The whole number options, each in its range, and the three ports apart.
struct NumberOptions {
    int port = 0, healthPort = 0, metricsPort = 0, sampleMs = 0, heartbeatMs = 0, graceMs = 0, maxStreams = 0,
        stallSeconds = 0, perClient = 0, finishedInMemory = 0;
};

common::Result<NumberOptions> readNumbers(const AgentConfig &config)
{
    NumberOptions n;
    const struct {
        const char *name;
        int low, high;
        int *out;
    } numbers[] = { { "port", 0, 65535, &n.port }, { "health-port", 0, 65535, &n.healthPort },
        { "metrics-port", 0, 65535, &n.metricsPort },
        { "finished-runs-in-memory", 1, 10'000, &n.finishedInMemory },
        { "stream-stall-s", 5, 3600, &n.stallSeconds }, { "max-streams-per-client", 1, 10'000, &n.perClient },
        { "max-streams", 1, 100'000, &n.maxStreams }, { "sample-interval-ms", 100, 60'000, &n.sampleMs },
        { "heartbeat-ms", 100, 5'000, &n.heartbeatMs }, { "stop-grace-ms", 100, 600'000, &n.graceMs } };
    for (const auto &number : numbers) {
        const common::Result<int> read = numberOption(config, number.name, number.low, number.high);
        if (!read)
            return common::Status::failure(read.error());
        *number.out = *read;
    }
    if (n.healthPort != 0 && n.healthPort == n.port)
        return common::Status::failure(
            "--health-port " + std::to_string(n.healthPort) + " is the agent's own port: pick another");
    if (n.metricsPort != 0 && (n.metricsPort == n.port || n.metricsPort == n.healthPort))
        return common::Status::failure("--metrics-port " + std::to_string(n.metricsPort)
            + " is also the agent's " + (n.metricsPort == n.port ? "--port" : "--health-port")
            + ": pick another");
    return n;
}

// --data-dir and --state-dir, created when missing, into `options`.
common::Status setUpFolders(const AgentConfig &config, AgentOptions *options)
{
    const QString home = QString::fromLocal8Bit(qgetenv("HOME"));
    QString dataHome = QString::fromLocal8Bit(qgetenv("XDG_DATA_HOME"));
    if (dataHome.isEmpty())
        dataHome = home + QStringLiteral("/.local/share");

    // An explicitly named data folder must exist: a typo should not silently give an
    // agent with no data. The default one is created.
    QString data = option(config, "data-dir");
    if (!data.isEmpty()) {
        if (!QFileInfo(data).isDir())
            return common::Status::failure("data directory '" + data.toStdString()
                + "' does not exist; create it, or point --data-dir at the folder "
                  "that holds your data sets");
    } else {
        data = dataHome + QStringLiteral("/scalelab/data");
    }
    const QString state = option(config, "state-dir").isEmpty() ? dataHome + QStringLiteral("/scalelab/agent")
                                                                : option(config, "state-dir");
    std::error_code ec;
    std::filesystem::create_directories(data.toStdString(), ec);
    if (ec)
        return common::Status::failure(
            "cannot create data directory '" + data.toStdString() + "': " + ec.message());
    std::filesystem::create_directories(state.toStdString(), ec);
    if (ec)
        return common::Status::failure(
            "cannot create state directory '" + state.toStdString() + "': " + ec.message());
    options->dataDir = std::filesystem::absolute(data.toStdString());
    options->stateDir = std::filesystem::absolute(state.toStdString());
    return common::Status::success();
}

// The token clients must send: --token-file's, else SCALELAB_AGENT_TOKEN's (which is
// then taken out of the environment: workers have no business with it).
common::Result<std::string> readToken(const AgentConfig &config)
{
    std::string token = qgetenv("SCALELAB_AGENT_TOKEN").toStdString();
    if (!option(config, "token-file").isEmpty()) {
        const common::Result<std::string> read = readFile(option(config, "token-file"));
        if (!read)
            return common::Status::failure(read.error());
        token = QString::fromStdString(*read).trimmed().toStdString();
        if (token.empty())
            return common::Status::failure(
                "token file '" + option(config, "token-file").toStdString() + "' is empty");
    }
    qunsetenv("SCALELAB_AGENT_TOKEN");
    return token;
}

// Everything AgentService is given but the addresses: folders, worker, limits, retention,
// the CIFAR-10 source and the token.
common::Result<AgentOptions> readAgentOptions(const AgentConfig &config, const NumberOptions &n)
{
    AgentOptions options;
    if (const common::Status folders = setUpFolders(config, &options); !folders)
        return folders;
    const QString worker = option(config, "worker").isEmpty()
        ? QCoreApplication::applicationDirPath() + QStringLiteral("/scalelab-worker")
        : option(config, "worker");
    options.workerBinary = worker.toStdString();
    if (!QFileInfo(worker).isExecutable())
        return common::Status::failure("worker program '" + options.workerBinary
            + "' is missing or not executable; install scalelab-worker next to the agent "
              "or pass --worker PATH");
    options.heartbeat = std::chrono::milliseconds(n.heartbeatMs);
    options.streamStall = std::chrono::seconds(n.stallSeconds);
    options.maxStreamsPerClient = n.perClient;
    options.finishedRunsInMemory = std::size_t(n.finishedInMemory);
    options.maxStreams = 4 * n.maxStreams; // over every connection; --max-streams is per connection
    bool ok = false;
    const double days = option(config, "finished-days").toDouble(&ok);
    auto retention = parseRetention(option(config, "finished-checkpoints").toStdString(), ok ? days : -1);
    if (!retention)
        return common::Status::failure(retention.error() + " (from "
            + config.source(QStringLiteral("finished-checkpoints")).toStdString() + ")");
    options.retention = *retention;
    options.sampleInterval = std::chrono::milliseconds(n.sampleMs);
    options.stopGrace = std::chrono::milliseconds(n.graceMs);
    options.cifarSource.url = option(config, "cifar-url").toStdString();
    options.cifarSource.md5 = option(config, "cifar-md5").toLower().toStdString();
    if (options.cifarSource.md5.size() != 32)
        return common::Status::failure("--cifar-md5 must be 32 hexadecimal digits");
    const common::Result<std::string> token = readToken(config);
    if (!token)
        return common::Status::failure(token.error());
    options.token = *token;
    return options;
}

// Off loopback, a token and TLS are required. Loopback is decided on the addresses the
// server will bind, every one of them: a name that merely looks like loopback
// ("127.evil") is resolved like any other, and one that does not resolve is refused,
// never guessed at.
common::Status checkExposure(const AgentConfig &config, const std::string &token, bool tls)
{
    const std::string host = option(config, "listen").toStdString();
    if (host.empty())
        return common::Status::failure("--listen must name an address (for example 127.0.0.1 or 0.0.0.0)");
    const auto loopback = trainer::net::listensOnLoopbackOnly(host);
    if (!loopback)
        return common::Status::failure("cannot listen on " + host + ": " + loopback.error()
            + ". Give --listen a numeric address (127.0.0.1, ::1, 0.0.0.0) or a name this host resolves");
    if (!loopback.value() && (token.empty() || !tls)) {
        std::string missing = token.empty() && !tls ? "a token and TLS" : token.empty() ? "a token" : "TLS";
        std::string resolved;
        for (const auto &address : trainer::net::listenAddresses(host).valueOr({}))
            resolved += (resolved.empty() ? "" : ", ") + address;
        if (resolved != host)
            resolved = " (" + resolved + ")";
        else
            resolved.clear();
        return common::Status::failure("refusing to listen on " + host + resolved + " without " + missing
            + ": anyone on the network could run code here. Set SCALELAB_AGENT_TOKEN (or "
              "--token-file) and --tls-cert/--tls-key, or listen on 127.0.0.1");
    }
    if (!option(config, "tls-client-ca").isEmpty() && !tls)
        return common::Status::failure("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key too");
    return common::Status::success();
}

// --tls-cert, --tls-key and --tls-client-ca, read and checked here because gRPC only
// says it could not listen, whatever the cause.
common::Result<std::shared_ptr<grpc::ServerCredentials>> tlsCredentials(const AgentConfig &config)
{
    if (option(config, "tls-cert").isEmpty() || option(config, "tls-key").isEmpty())
        return common::Status::failure("TLS needs both --tls-cert and --tls-key");
    grpc::SslServerCredentialsOptions ssl;
    const common::Result<std::string> readCert = readFile(option(config, "tls-cert"));
    const common::Result<std::string> readKey = readFile(option(config, "tls-key"));
    if (!readKey) // the key's problem first when both fail, as before
        return common::Status::failure(readKey.error());
    if (!readCert)
        return common::Status::failure(readCert.error());
    const std::string &cert = *readCert, &key = *readKey;
    std::string certWarning;
    if (const std::string problem = checkTlsKeyPair(cert, option(config, "tls-cert").toStdString(), key,
            option(config, "tls-key").toStdString(), &certWarning)
                                        .error();
        !problem.empty())
        return common::Status::failure(problem);
    if (!certWarning.empty())
        logMessage(LogLevel::Warning, certWarning);
    ssl.pem_key_cert_pairs.push_back({ key, cert });
    if (!option(config, "tls-client-ca").isEmpty()) {
        const common::Result<std::string> clientCa = readFile(option(config, "tls-client-ca"));
        if (!clientCa)
            return common::Status::failure(clientCa.error());
        ssl.pem_root_certs = *clientCa;
        if (const std::string problem = checkCaBundle(
                ssl.pem_root_certs, option(config, "tls-client-ca").toStdString(), "--tls-client-ca")
                                            .error();
            !problem.empty())
            return common::Status::failure(problem);
        ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    return grpc::SslServerCredentials(ssl);
}

// The address other hosts' ranks reach ours at: rendezvous store, Gloo and NCCL.
common::Status chooseAdvertised(const AgentConfig &config, AgentOptions *options)
{
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    const common::Result<AdvertiseChoice> choice
        = chooseAdvertiseAddress(option(config, "listen").toStdString(),
            option(config, "advertise-host").toStdString(), option(config, "iface").toStdString(), name);
    if (!choice)
        return common::Status::failure(choice.error());
    options->advertiseHost = choice->address;
    options->advertiseInterface = choice->interface;
    options->advertiseHow = choice->how;
    options->networkWarning = choice->warning;
    if (!choice->warning.empty())
        logMessage(LogLevel::Warning, choice->warning);
    return common::Status::success();
}

// The agent's gRPC server on `address`; `*selectedPort` is the port it bound.
common::Result<std::unique_ptr<grpc::Server>> startAgentServer(const QString &host, int port,
    const std::shared_ptr<grpc::ServerCredentials> &credentials, AgentService *service, int maxStreams,
    int *selectedPort)
{
    const QString address = hostAndPort(host, port);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address.toStdString(), credentials, selectedPort);
    builder.RegisterService(service);
    builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    builder.SetMaxSendMessageSize(kMaxSendBytes);
    builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, maxStreams);
    // gRPC sets SO_REUSEPORT by default, so a second agent on a taken port would start
    // and share it silently; without it the bind fails and is reported.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // Keep pinging a connection on which nothing is sent (a watcher between events):
    // gRPC stops after 2 pings without data otherwise, and a dead client goes unseen.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Clients ping every 10 s; one pinging more often than every 5 s gets GOAWAY after
    // 2 strikes (gRPC's default, said here).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || *selectedPort == 0) {
        std::string problem = checkBind(host.toStdString(), port).error();
        if (problem.empty())
            problem = "gRPC did not say why, and a plain bind() there works; its own log lines above "
                      "name the cause";
        return common::Status::failure("cannot listen on " + address.toStdString() + ": " + problem);
    }
    return server;
}

// The health-only port: a server of its own holding nothing but a health service that
// answers as the agent's own does.
common::Result<std::unique_ptr<grpc::Server>> startHealthServer(
    const QString &host, int port, HealthOnly *healthOnly)
{
    const std::string healthAddress = hostAndPort(host, port).toStdString();
    if (const std::string problem = checkBind(host.toStdString(), port).error(); !problem.empty())
        return common::Status::failure("cannot listen on " + healthAddress + " (--health-port): " + problem);
    grpc::ServerBuilder healthBuilder;
    healthBuilder.AddListeningPort(healthAddress, grpc::InsecureServerCredentials());
    healthBuilder.RegisterService(healthOnly);
    healthBuilder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    std::unique_ptr<grpc::Server> healthServer = healthBuilder.BuildAndStart();
    if (!healthServer)
        return common::Status::failure(
            "cannot listen on " + healthAddress + " (--health-port): gRPC did not say why");
    healthOnly->serving = true;
    logMessage(LogLevel::Info, "health service only, plaintext, on " + healthAddress);
    return healthServer;
}

// Prometheus metrics, plain HTTP on the --listen address, read at each scrape.
common::Status startMetrics(MetricsExporter *metrics, const QString &host, int port, AgentService *service)
{
    const double startTime = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                        .count())
        / 1000.0;
    if (const common::Status started = metrics->start(host.toStdString(), port,
            [service, startTime] {
                AgentSnapshot snapshot = service->metricsSnapshot();
                snapshot.version = SCALELAB_VERSION;
                snapshot.startTimeSeconds = startTime;
                return snapshot;
            });
        !started)
        return common::Status::failure(started.error() + " (--metrics-port)");
    logMessage(LogLevel::Info, "Prometheus metrics, plain HTTP, at " + metrics->url());
    return common::Status::success();
}

// The console and the tests read the first line to learn the port: HOST:PORT, an IPv6
// address in brackets.
void announce(const AgentConfig &config, const AgentOptions &options, int port, int selectedPort, bool tls)
{
    const QString host = option(config, "listen");
    const QString printedHost = host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('['))
        ? QStringLiteral("[%1]").arg(host)
        : host;
    std::printf("scalelab-agent listening on %s:%d\n", printedHost.toStdString().c_str(), selectedPort);
    std::fflush(stdout);
    logMessage(LogLevel::Info,
        "listening on " + hostAndPort(host, port).toStdString() + " (port " + std::to_string(selectedPort)
            + "), data " + options.dataDir.string() + ", state " + options.stateDir.string() + ", worker "
            + options.workerBinary + (options.token.empty() ? ", no token" : ", token required")
            + (tls ? (option(config, "tls-client-ca").isEmpty() ? ", TLS" : ", mutual TLS") : ", no TLS")
            + ", ranks reached at " + options.advertiseHost
            + (options.advertiseInterface.empty() ? std::string() : " on " + options.advertiseInterface)
            + " (" + options.advertiseHow + ")");
}

} // namespace

// Options, then credentials, then servers; every failure is said once, on stderr and in
// the log, and exits 2.
int main(int argc, char **argv)
{
    // Block the shutdown signals in every thread (gRPC's included); main waits for them.
    sigset_t shutdownSignals;
    sigemptyset(&shutdownSignals);
    sigaddset(&shutdownSignals, SIGINT);
    sigaddset(&shutdownSignals, SIGTERM);
    sigaddset(&shutdownSignals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &shutdownSignals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("scalelab-agent"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SCALELAB_VERSION));

    QCommandLineParser parser;
    AgentConfig config;
    addOptions(&parser, &config);
    parser.process(app);
    if (!parser.positionalArguments().isEmpty())
        return fail(
            "unexpected argument '" + parser.positionalArguments().first().toStdString() + "'; see --help");
    if (const common::Status resolved = config.resolve(parser); !resolved)
        return fail(resolved.error());
    if (const common::Status log = setUpLog(config); !log)
        return fail(log.error());
    const common::Result<NumberOptions> numbers = readNumbers(config);
    if (!numbers)
        return fail(numbers.error());
    common::Result<AgentOptions> read = readAgentOptions(config, *numbers);
    if (!read)
        return fail(read.error());
    AgentOptions options = std::move(read).value();

    const bool tls = !option(config, "tls-cert").isEmpty() || !option(config, "tls-key").isEmpty();
    if (const common::Status exposure = checkExposure(config, options.token, tls); !exposure)
        return fail(exposure.error());
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (tls) {
        common::Result<std::shared_ptr<grpc::ServerCredentials>> made = tlsCredentials(config);
        if (!made)
            return fail(made.error());
        credentials = *made;
    }
    if (const common::Status advertised = chooseAdvertised(config, &options); !advertised)
        return fail(advertised.error());

    const QString host = option(config, "listen");
    // A port held by another agent is found before this one opens the state folder and
    // marks runs there as interrupted; gRPC's own failure below says no more than "no".
    if (numbers->port != 0)
        if (const std::string problem = checkBind(host.toStdString(), numbers->port).error();
            !problem.empty())
            return fail(
                "cannot listen on " + hostAndPort(host, numbers->port).toStdString() + ": " + problem);
    if (numbers->metricsPort != 0)
        if (const std::string problem = checkBind(host.toStdString(), numbers->metricsPort).error();
            !problem.empty())
            return fail("cannot serve metrics on port " + std::to_string(numbers->metricsPort)
                + " (--metrics-port): " + problem);

    AgentService service(options);
    int selectedPort = 0;
    common::Result<std::unique_ptr<grpc::Server>> server
        = startAgentServer(host, numbers->port, credentials, &service, numbers->maxStreams, &selectedPort);
    if (!server)
        return fail(server.error());
    HealthOnly healthOnly;
    std::unique_ptr<grpc::Server> healthServer;
    if (numbers->healthPort != 0) {
        common::Result<std::unique_ptr<grpc::Server>> started
            = startHealthServer(host, numbers->healthPort, &healthOnly);
        if (!started)
            return fail(started.error());
        healthServer = std::move(started).value();
    }
    MetricsExporter metrics;
    if (numbers->metricsPort != 0)
        if (const common::Status started = startMetrics(&metrics, host, numbers->metricsPort, &service);
            !started)
            return fail(started.error());
    (*server)->GetHealthCheckService()->SetServingStatus(true);
    announce(config, options, numbers->port, selectedPort, tls);

    int signal = 0;
    sigwait(&shutdownSignals, &signal);
    logMessage(LogLevel::Info, std::string("received ") + strsignal(signal) + ", stopping runs");
    (*server)->GetHealthCheckService()->SetServingStatus(false);
    healthOnly.serving = false;
    service.shutdown(); // ends every run, so WatchRun streams finish
    (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
    if (healthServer)
        healthServer->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    logMessage(LogLevel::Info, "stopped");
    return 0;
}
