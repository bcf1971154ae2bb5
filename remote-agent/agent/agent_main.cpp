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
    parser.setApplicationDescription(QStringLiteral(
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
    parser.addHelpOption();
    parser.addVersionOption();
    AgentConfig config;
    config.addOptions(&parser);
    parser.process(app);
    if (!parser.positionalArguments().isEmpty())
        return fail(
            "unexpected argument '" + parser.positionalArguments().first().toStdString() + "'; see --help");
    if (const common::Status resolved = config.resolve(parser); !resolved)
        return fail(resolved.error());
    const auto value = [&](const char *name) { return config.value(QLatin1String(name)); };

    if (!value("log-file").isEmpty() && !setLogFile(value("log-file").toStdString()))
        return fail(
            "cannot open log file '" + value("log-file").toStdString() + "': " + std::strerror(errno));
    LogLevel level;
    if (!parseLogLevel(value("log-level").toStdString(), &level))
        return fail("--log-level must be debug, info, warning or error (got '"
            + value("log-level").toStdString() + "' from "
            + config.source(QStringLiteral("log-level")).toStdString() + ")");
    setLogLevel(level);

    int portNumber = 0, healthPort = 0, metricsPort = 0, sampleMs = 0, heartbeatMs = 0, graceMs = 0,
        maxStreams = 0, stallSeconds = 0, perClient = 0, finishedInMemory = 0;
    const struct {
        const char *name;
        int low, high;
        int *out;
    } numbers[] = { { "port", 0, 65535, &portNumber }, { "health-port", 0, 65535, &healthPort },
        { "metrics-port", 0, 65535, &metricsPort },
        { "finished-runs-in-memory", 1, 10'000, &finishedInMemory },
        { "stream-stall-s", 5, 3600, &stallSeconds }, { "max-streams-per-client", 1, 10'000, &perClient },
        { "max-streams", 1, 100'000, &maxStreams }, { "sample-interval-ms", 100, 60'000, &sampleMs },
        { "heartbeat-ms", 100, 5'000, &heartbeatMs }, { "stop-grace-ms", 100, 600'000, &graceMs } };
    for (const auto &n : numbers) {
        const common::Result<int> number = numberOption(config, n.name, n.low, n.high);
        if (!number)
            return fail(number.error());
        *n.out = *number;
    }
    if (healthPort != 0 && healthPort == portNumber)
        return fail("--health-port " + std::to_string(healthPort) + " is the agent's own port: pick another");
    if (metricsPort != 0 && (metricsPort == portNumber || metricsPort == healthPort))
        return fail("--metrics-port " + std::to_string(metricsPort) + " is also the agent's "
            + (metricsPort == portNumber ? "--port" : "--health-port") + ": pick another");

    const QString home = QString::fromLocal8Bit(qgetenv("HOME"));
    QString dataHome = QString::fromLocal8Bit(qgetenv("XDG_DATA_HOME"));
    if (dataHome.isEmpty())
        dataHome = home + QStringLiteral("/.local/share");

    // An explicitly named data folder must exist: a typo should not silently give an
    // agent with no data. The default one is created.
    QString data = value("data-dir");
    if (!data.isEmpty()) {
        if (!QFileInfo(data).isDir())
            return fail("data directory '" + data.toStdString()
                + "' does not exist; create it, or point --data-dir at the folder "
                  "that holds your data sets");
    } else {
        data = dataHome + QStringLiteral("/scalelab/data");
    }
    const QString state
        = value("state-dir").isEmpty() ? dataHome + QStringLiteral("/scalelab/agent") : value("state-dir");
    std::error_code ec;
    std::filesystem::create_directories(data.toStdString(), ec);
    if (ec)
        return fail("cannot create data directory '" + data.toStdString() + "': " + ec.message());
    std::filesystem::create_directories(state.toStdString(), ec);
    if (ec)
        return fail("cannot create state directory '" + state.toStdString() + "': " + ec.message());

    AgentOptions options;
    options.dataDir = std::filesystem::absolute(data.toStdString());
    options.stateDir = std::filesystem::absolute(state.toStdString());
    const QString worker = value("worker").isEmpty()
        ? QCoreApplication::applicationDirPath() + QStringLiteral("/scalelab-worker")
        : value("worker");
    options.workerBinary = worker.toStdString();
    if (!QFileInfo(worker).isExecutable())
        return fail("worker program '" + options.workerBinary
            + "' is missing or not executable; install scalelab-worker next to the agent "
              "or pass --worker PATH");
    options.heartbeat = std::chrono::milliseconds(heartbeatMs);
    options.streamStall = std::chrono::seconds(stallSeconds);
    options.maxStreamsPerClient = perClient;
    options.finishedRunsInMemory = std::size_t(finishedInMemory);
    options.maxStreams = 4 * maxStreams; // over every connection; --max-streams is per connection
    {
        bool ok = false;
        const double days = value("finished-days").toDouble(&ok);
        auto retention = parseRetention(value("finished-checkpoints").toStdString(), ok ? days : -1);
        if (!retention)
            return fail(retention.error() + " (from "
                + config.source(QStringLiteral("finished-checkpoints")).toStdString() + ")");
        options.retention = *retention;
    }
    options.sampleInterval = std::chrono::milliseconds(sampleMs);
    options.stopGrace = std::chrono::milliseconds(graceMs);
    options.cifarSource.url = value("cifar-url").toStdString();
    options.cifarSource.md5 = value("cifar-md5").toLower().toStdString();
    if (options.cifarSource.md5.size() != 32)
        return fail("--cifar-md5 must be 32 hexadecimal digits");

    std::string token = qgetenv("SCALELAB_AGENT_TOKEN").toStdString();
    if (!value("token-file").isEmpty()) {
        const common::Result<std::string> read = readFile(value("token-file"));
        if (!read)
            return fail(read.error());
        token = QString::fromStdString(*read).trimmed().toStdString();
        if (token.empty())
            return fail("token file '" + value("token-file").toStdString() + "' is empty");
    }
    options.token = token;
    qunsetenv("SCALELAB_AGENT_TOKEN"); // workers have no business with it

    const QString host = value("listen");
    if (host.isEmpty())
        return fail("--listen must name an address (for example 127.0.0.1 or 0.0.0.0)");
    // Loopback is decided on the addresses the server will bind, every one of them: a
    // name that merely looks like loopback ("127.evil") is resolved like any other, and
    // one that does not resolve is refused, never guessed at.
    const auto loopback = trainer::net::listensOnLoopbackOnly(host.toStdString());
    if (!loopback)
        return fail("cannot listen on " + host.toStdString() + ": " + loopback.error()
            + ". Give --listen a numeric address (127.0.0.1, ::1, 0.0.0.0) or a name this host resolves");
    const bool tls = !value("tls-cert").isEmpty() || !value("tls-key").isEmpty();
    const bool loopbackOnly = loopback.value();
    if (!loopbackOnly && (options.token.empty() || !tls)) {
        std::string missing = options.token.empty() && !tls ? "a token and TLS"
            : options.token.empty()                         ? "a token"
                                                            : "TLS";
        std::string resolved;
        for (const auto &address : trainer::net::listenAddresses(host.toStdString()).valueOr({}))
            resolved += (resolved.empty() ? "" : ", ") + address;
        if (resolved != host.toStdString())
            resolved = " (" + resolved + ")";
        else
            resolved.clear();
        return fail("refusing to listen on " + host.toStdString() + resolved + " without " + missing
            + ": anyone on the network could run code here. Set SCALELAB_AGENT_TOKEN (or "
              "--token-file) and --tls-cert/--tls-key, or listen on 127.0.0.1");
    }
    if (!value("tls-client-ca").isEmpty() && !tls)
        return fail("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key too");

    std::shared_ptr<grpc::ServerCredentials> credentials;
    if (tls) {
        if (value("tls-cert").isEmpty() || value("tls-key").isEmpty())
            return fail("TLS needs both --tls-cert and --tls-key");
        grpc::SslServerCredentialsOptions ssl;
        const common::Result<std::string> readCert = readFile(value("tls-cert"));
        const common::Result<std::string> readKey = readFile(value("tls-key"));
        if (!readKey) // the key's problem first when both fail, as before
            return fail(readKey.error());
        if (!readCert)
            return fail(readCert.error());
        const std::string &cert = *readCert, &key = *readKey;
        // Checked here because gRPC only says it could not listen, whatever the cause.
        std::string certWarning;
        if (const std::string problem = checkTlsKeyPair(
                cert, value("tls-cert").toStdString(), key, value("tls-key").toStdString(), &certWarning)
                                            .error();
            !problem.empty())
            return fail(problem);
        if (!certWarning.empty())
            logMessage(LogLevel::Warning, certWarning);
        ssl.pem_key_cert_pairs.push_back({ key, cert });
        if (!value("tls-client-ca").isEmpty()) {
            const common::Result<std::string> clientCa = readFile(value("tls-client-ca"));
            if (!clientCa)
                return fail(clientCa.error());
            ssl.pem_root_certs = *clientCa;
            if (const std::string problem
                = checkCaBundle(ssl.pem_root_certs, value("tls-client-ca").toStdString(), "--tls-client-ca")
                      .error();
                !problem.empty())
                return fail(problem);
            ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
        }
        credentials = grpc::SslServerCredentials(ssl);
    } else {
        credentials = grpc::InsecureServerCredentials();
    }

    // The address other hosts' ranks reach ours at: rendezvous store, Gloo and NCCL.
    {
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        const common::Result<AdvertiseChoice> choice = chooseAdvertiseAddress(
            host.toStdString(), value("advertise-host").toStdString(), value("iface").toStdString(), name);
        if (!choice)
            return fail(choice.error());
        options.advertiseHost = choice->address;
        options.advertiseInterface = choice->interface;
        options.advertiseHow = choice->how;
        options.networkWarning = choice->warning;
        if (!choice->warning.empty())
            logMessage(LogLevel::Warning, choice->warning);
    }

    const QString address
        = (host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('[')) ? QStringLiteral("[%1]:%2")
                                                                                 : QStringLiteral("%1:%2"))
              .arg(host)
              .arg(portNumber);
    // A port held by another agent is found before this one opens the state folder and
    // marks runs there as interrupted; gRPC's own failure below says no more than "no".
    if (portNumber != 0)
        if (const std::string problem = checkBind(host.toStdString(), portNumber).error(); !problem.empty())
            return fail("cannot listen on " + address.toStdString() + ": " + problem);
    if (metricsPort != 0)
        if (const std::string problem = checkBind(host.toStdString(), metricsPort).error(); !problem.empty())
            return fail("cannot serve metrics on port " + std::to_string(metricsPort)
                + " (--metrics-port): " + problem);

    AgentService service(options);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int selectedPort = 0;
    builder.AddListeningPort(address.toStdString(), credentials, &selectedPort);
    builder.RegisterService(&service);
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
    if (!server || selectedPort == 0) {
        std::string problem = checkBind(host.toStdString(), portNumber).error();
        if (problem.empty())
            problem = "gRPC did not say why, and a plain bind() there works; its own log lines above "
                      "name the cause";
        return fail("cannot listen on " + address.toStdString() + ": " + problem);
    }
    // The health-only port: a server of its own holding nothing but a health service
    // that answers as the agent's own does.
    HealthOnly healthOnly;
    std::unique_ptr<grpc::Server> healthServer;
    if (healthPort != 0) {
        const std::string healthAddress
            = (host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('['))
                    ? QStringLiteral("[%1]:%2")
                    : QStringLiteral("%1:%2"))
                  .arg(host)
                  .arg(healthPort)
                  .toStdString();
        if (const std::string problem = checkBind(host.toStdString(), healthPort).error(); !problem.empty())
            return fail("cannot listen on " + healthAddress + " (--health-port): " + problem);
        grpc::ServerBuilder healthBuilder;
        healthBuilder.AddListeningPort(healthAddress, grpc::InsecureServerCredentials());
        healthBuilder.RegisterService(&healthOnly);
        healthBuilder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
        healthServer = healthBuilder.BuildAndStart();
        if (!healthServer)
            return fail("cannot listen on " + healthAddress + " (--health-port): gRPC did not say why");
        healthOnly.serving = true;
        logMessage(LogLevel::Info, "health service only, plaintext, on " + healthAddress);
    }
    // Prometheus metrics, plain HTTP on the --listen address, read at each scrape.
    MetricsExporter metrics;
    if (metricsPort != 0) {
        const double startTime = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                            .count())
            / 1000.0;
        if (const common::Status started = metrics.start(host.toStdString(), metricsPort,
                [&service, startTime] {
                    AgentSnapshot snapshot = service.metricsSnapshot();
                    snapshot.version = SCALELAB_VERSION;
                    snapshot.startTimeSeconds = startTime;
                    return snapshot;
                });
            !started)
            return fail(started.error() + " (--metrics-port)");
        logMessage(LogLevel::Info, "Prometheus metrics, plain HTTP, at " + metrics.url());
    }
    server->GetHealthCheckService()->SetServingStatus(true);

    // The console and the tests read this line to learn the port: HOST:PORT, an IPv6
    // address in brackets.
    const QString printedHost = host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('['))
        ? QStringLiteral("[%1]").arg(host)
        : host;
    std::printf("scalelab-agent listening on %s:%d\n", printedHost.toStdString().c_str(), selectedPort);
    std::fflush(stdout);
    logMessage(LogLevel::Info,
        "listening on " + address.toStdString() + " (port " + std::to_string(selectedPort) + "), data "
            + options.dataDir.string() + ", state " + options.stateDir.string() + ", worker "
            + options.workerBinary + (options.token.empty() ? ", no token" : ", token required")
            + (tls ? (value("tls-client-ca").isEmpty() ? ", TLS" : ", mutual TLS") : ", no TLS")
            + ", ranks reached at " + options.advertiseHost
            + (options.advertiseInterface.empty() ? std::string() : " on " + options.advertiseInterface)
            + " (" + options.advertiseHow + ")");

    int signal = 0;
    sigwait(&shutdownSignals, &signal);
    logMessage(LogLevel::Info, std::string("received ") + strsignal(signal) + ", stopping runs");
    server->GetHealthCheckService()->SetServingStatus(false);
    healthOnly.serving = false;
    service.shutdown(); // ends every run, so WatchRun streams finish
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
    if (healthServer)
        healthServer->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    logMessage(LogLevel::Info, "stopped");
    return 0;
}
