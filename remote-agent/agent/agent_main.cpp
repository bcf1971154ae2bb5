// scalelab-agent: one per node. Serves proto/scalelab/v1 over gRPC, starts and
// supervises scalelab-worker processes, and never leaves a child behind.
#include "agent_service.h"
#include "log.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <pthread.h>

using namespace scalelab;
using namespace scalelab::agent;

namespace {

constexpr int kMaxMessageBytes = 16 * 1024 * 1024;

QString envOr(const char *name, const QString &fallback)
{
    const QByteArray value = qgetenv(name);
    return value.isEmpty() ? fallback : QString::fromLocal8Bit(value);
}

bool isLoopback(const QString &host)
{
    return host == QLatin1String("127.0.0.1") || host == QLatin1String("localhost")
        || host == QLatin1String("::1") || host.startsWith(QLatin1String("127."));
}

QString readFileOrEmpty(const QString &path, QString *error)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("cannot read %1: %2").arg(path, f.errorString());
        return {};
    }
    return QString::fromUtf8(f.readAll()).trimmed();
}

int fail(const std::string &message)
{
    std::cerr << "scalelab-agent: " << message << "\n";
    return 2;
}

} // namespace

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

    const QString home = QString::fromLocal8Bit(qgetenv("HOME"));
    const QString dataHome = envOr("XDG_DATA_HOME", home + QStringLiteral("/.local/share"));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("ScaleLab node agent: runs CIFAR-10 training workers for the ScaleLab console.\n"
                       "Every option can also be set by the environment variable named in brackets."));
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption listen(QStringLiteral("listen"),
        QStringLiteral("Address to listen on [SCALELAB_AGENT_LISTEN]. Anything "
                       "but loopback needs --token-file and --tls-cert/--tls-key."),
        QStringLiteral("host"), envOr("SCALELAB_AGENT_LISTEN", QStringLiteral("127.0.0.1")));
    QCommandLineOption port(QStringLiteral("port"),
        QStringLiteral("TCP port; 0 picks a free one and prints it [SCALELAB_AGENT_PORT]."),
        QStringLiteral("port"), envOr("SCALELAB_AGENT_PORT", QStringLiteral("7450")));
    QCommandLineOption dataDir(QStringLiteral("data-dir"),
        QStringLiteral("Folder holding one sub-folder per data set "
                       "[SCALELAB_AGENT_DATA_DIR]."),
        QStringLiteral("dir"));
    QCommandLineOption stateDir(QStringLiteral("state-dir"),
        QStringLiteral("Folder for run records and checkpoints "
                       "[SCALELAB_AGENT_STATE_DIR]."),
        QStringLiteral("dir"),
        envOr("SCALELAB_AGENT_STATE_DIR", dataHome + QStringLiteral("/scalelab/agent")));
    QCommandLineOption workerBin(QStringLiteral("worker"),
        QStringLiteral("Path of scalelab-worker; default: next to this "
                       "program [SCALELAB_WORKER_BIN]."),
        QStringLiteral("path"),
        envOr("SCALELAB_WORKER_BIN",
            QCoreApplication::applicationDirPath() + QStringLiteral("/scalelab-worker")));
    QCommandLineOption tokenFile(QStringLiteral("token-file"),
        QStringLiteral("File holding the bearer token clients must send. "
                       "The token may instead come from SCALELAB_AGENT_TOKEN "
                       "(never put it on the command line)."),
        QStringLiteral("path"), envOr("SCALELAB_AGENT_TOKEN_FILE", {}));
    QCommandLineOption tlsCert(QStringLiteral("tls-cert"),
        QStringLiteral("PEM server certificate chain [SCALELAB_AGENT_TLS_CERT]."), QStringLiteral("path"),
        envOr("SCALELAB_AGENT_TLS_CERT", {}));
    QCommandLineOption tlsKey(QStringLiteral("tls-key"),
        QStringLiteral("PEM private key [SCALELAB_AGENT_TLS_KEY]."), QStringLiteral("path"),
        envOr("SCALELAB_AGENT_TLS_KEY", {}));
    QCommandLineOption logLevel(QStringLiteral("log-level"),
        QStringLiteral("debug, info, warning or error [SCALELAB_AGENT_LOG_LEVEL]."), QStringLiteral("level"),
        envOr("SCALELAB_AGENT_LOG_LEVEL", QStringLiteral("info")));
    parser.addOptions({ listen, port, dataDir, stateDir, workerBin, tokenFile, tlsCert, tlsKey, logLevel });
    parser.process(app);
    if (!parser.positionalArguments().isEmpty())
        return fail(
            "unexpected argument '" + parser.positionalArguments().first().toStdString() + "'; see --help");

    LogLevel level;
    if (!parseLogLevel(parser.value(logLevel).toStdString(), &level))
        return fail("--log-level must be debug, info, warning or error");
    setLogLevel(level);

    bool portOk = false;
    const int portNumber = parser.value(port).toInt(&portOk);
    if (!portOk || portNumber < 0 || portNumber > 65535)
        return fail(
            "--port must be a number from 0 to 65535 (got '" + parser.value(port).toStdString() + "')");

    // An explicitly named data folder must exist: a typo should not silently give an
    // agent with no data. The default one is created.
    QString data = parser.isSet(dataDir) ? parser.value(dataDir) : envOr("SCALELAB_AGENT_DATA_DIR", {});
    if (!data.isEmpty()) {
        if (!QFileInfo(data).isDir())
            return fail("data directory '" + data.toStdString()
                + "' does not exist; create it, or point --data-dir at the folder "
                  "that holds your data sets");
    } else {
        data = dataHome + QStringLiteral("/scalelab/data");
    }
    std::error_code ec;
    std::filesystem::create_directories(data.toStdString(), ec);
    std::filesystem::create_directories(parser.value(stateDir).toStdString(), ec);
    if (ec)
        return fail(
            "cannot create state directory '" + parser.value(stateDir).toStdString() + "': " + ec.message());

    AgentOptions options;
    options.dataDir = std::filesystem::absolute(data.toStdString());
    options.stateDir = std::filesystem::absolute(parser.value(stateDir).toStdString());
    options.workerBinary = parser.value(workerBin).toStdString();
    if (!QFileInfo(parser.value(workerBin)).isExecutable())
        return fail("worker program '" + options.workerBinary
            + "' is missing or not executable; install scalelab-worker next to the agent "
              "or pass --worker PATH");
    QString error;
    QString token = QString::fromLocal8Bit(qgetenv("SCALELAB_AGENT_TOKEN"));
    if (!parser.value(tokenFile).isEmpty()) {
        token = readFileOrEmpty(parser.value(tokenFile), &error);
        if (!error.isEmpty())
            return fail(error.toStdString());
    }
    options.token = token.toStdString();
    qunsetenv("SCALELAB_AGENT_TOKEN"); // workers have no business with it

    const QString host = parser.value(listen);
    std::shared_ptr<grpc::ServerCredentials> credentials;
    const bool tls = !parser.value(tlsCert).isEmpty() || !parser.value(tlsKey).isEmpty();
    if (tls) {
        grpc::SslServerCredentialsOptions ssl;
        const QString cert = readFileOrEmpty(parser.value(tlsCert), &error);
        const QString key = readFileOrEmpty(parser.value(tlsKey), &error);
        if (!error.isEmpty())
            return fail(error.toStdString() + " (TLS needs both --tls-cert and --tls-key)");
        ssl.pem_key_cert_pairs.push_back({ key.toStdString() + "\n", cert.toStdString() + "\n" });
        credentials = grpc::SslServerCredentials(ssl);
    } else {
        credentials = grpc::InsecureServerCredentials();
    }
    if (!isLoopback(host) && (options.token.empty() || !tls))
        return fail("refusing to listen on " + host.toStdString()
            + " without a token and TLS: anyone on the network could run code here. "
              "Set SCALELAB_AGENT_TOKEN (or --token-file) and --tls-cert/--tls-key, or "
              "listen on 127.0.0.1");

    AgentService service(options);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int selectedPort = 0;
    const QString address
        = (host.contains(QLatin1Char(':')) ? QStringLiteral("[%1]:%2") : QStringLiteral("%1:%2"))
              .arg(host)
              .arg(portNumber);
    builder.AddListeningPort(address.toStdString(), credentials, &selectedPort);
    builder.RegisterService(&service);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || selectedPort == 0)
        return fail("cannot listen on " + address.toStdString()
            + " (is the port in use? pick another with --port, or --port 0)");
    server->GetHealthCheckService()->SetServingStatus(true);

    // The console and the tests read this line to learn the port.
    std::printf("scalelab-agent listening on %s:%d\n", host.toStdString().c_str(), selectedPort);
    std::fflush(stdout);
    logMessage(LogLevel::Info,
        "data " + options.dataDir.string() + ", state " + options.stateDir.string() + ", worker "
            + options.workerBinary + (options.token.empty() ? ", no token" : ", token required")
            + (tls ? ", TLS" : ""));

    int signal = 0;
    sigwait(&shutdownSignals, &signal);
    logMessage(LogLevel::Info, std::string("received ") + strsignal(signal) + ", stopping runs");
    server->GetHealthCheckService()->SetServingStatus(false);
    service.shutdown(); // ends every run, so WatchRun streams finish
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
    logMessage(LogLevel::Info, "stopped");
    return 0;
}
