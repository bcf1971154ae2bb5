#include "agent_config.h"

#include <QFile>
#include <QTextStream>

#include <algorithm>

namespace scalelab::agent {

namespace {

// Its config file; where it listens, what it serves besides the agent API, and the address
// other hosts reach it at.
std::vector<AgentSetting> networkSettings()
{
    return {
        { QStringLiteral("config"), QStringLiteral("SCALELAB_AGENT_CONFIG"), QStringLiteral("file"),
            QStringLiteral("Config file: one 'option = value' per line (long option names, # comments)."),
            {} },
        { QStringLiteral("listen"), QStringLiteral("SCALELAB_AGENT_LISTEN"), QStringLiteral("host"),
            QStringLiteral("Address to listen on. Anything but loopback needs a token and TLS."),
            QStringLiteral("127.0.0.1") },
        { QStringLiteral("port"), QStringLiteral("SCALELAB_AGENT_PORT"), QStringLiteral("port"),
            QStringLiteral("TCP port; 0 picks a free one and prints it."), QStringLiteral("7450") },
        { QStringLiteral("health-port"), QStringLiteral("SCALELAB_AGENT_HEALTH_PORT"), QStringLiteral("port"),
            QStringLiteral(
                "A second port, on the --listen address, in plaintext and without a token, serving only "
                "gRPC's health service (grpc.health.v1.Health: SERVING or NOT_SERVING, nothing else), "
                "for probes that speak no TLS, such as Kubernetes' gRPC probes. 0: none."),
            QStringLiteral("0") },
        { QStringLiteral("metrics-port"), QStringLiteral("SCALELAB_AGENT_METRICS_PORT"),
            QStringLiteral("port"),
            QStringLiteral(
                "A port, on the --listen address, serving Prometheus metrics at /metrics over plain "
                "HTTP without a token: the node's CPU, memory and GPUs, and each active run's "
                "progress, speed and loss. It carries no secrets but says what runs here. 0: none."),
            QStringLiteral("0") },
        { QStringLiteral("max-streams"), QStringLiteral("SCALELAB_AGENT_MAX_STREAMS"), QStringLiteral("n"),
            QStringLiteral("Calls one client connection may have open at once (HTTP/2 "
                           "MAX_CONCURRENT_STREAMS, 1-100000); more wait until one ends."),
            QStringLiteral("256") },
        { QStringLiteral("advertise-host"), QStringLiteral("SCALELAB_AGENT_ADVERTISE_HOST"),
            QStringLiteral("host"),
            QStringLiteral("Address other hosts' ranks reach this host's ranks at: rank 0's rendezvous "
                           "store listens there and every rank's Gloo/NCCL sockets use it. Default: the "
                           "address of --iface; 127.0.0.1 on loopback; the --listen address when it is "
                           "specific; else the host name's address unless that is loopback (as on stock "
                           "Debian), else the first non-loopback interface (logged with the others)."),
            {} },
        { QStringLiteral("iface"), QStringLiteral("SCALELAB_AGENT_IFACE"), QStringLiteral("name"),
            QStringLiteral("Network interface of the cluster network (eth1, ib0): its address is advertised "
                           "and NCCL uses it (NCCL_SOCKET_IFNAME). Default: the first of GLOO_SOCKET_IFNAME "
                           "when set."),
            {} },
    };
}

// Its folders, the worker it starts, and the credentials clients and it present.
std::vector<AgentSetting> fileSettings()
{
    return {
        { QStringLiteral("data-dir"), QStringLiteral("SCALELAB_AGENT_DATA_DIR"), QStringLiteral("dir"),
            QStringLiteral("Folder holding one sub-folder per data set; must exist when given."),
            QStringLiteral("$XDG_DATA_HOME/scalelab/data") },
        { QStringLiteral("state-dir"), QStringLiteral("SCALELAB_AGENT_STATE_DIR"), QStringLiteral("dir"),
            QStringLiteral("Folder for run records, event logs and checkpoints."),
            QStringLiteral("$XDG_DATA_HOME/scalelab/agent") },
        { QStringLiteral("worker"), QStringLiteral("SCALELAB_WORKER_BIN"), QStringLiteral("path"),
            QStringLiteral("Path of scalelab-worker."), QStringLiteral("(next to this program)") },
        { QStringLiteral("token-file"), QStringLiteral("SCALELAB_AGENT_TOKEN_FILE"), QStringLiteral("path"),
            QStringLiteral("File holding the bearer token clients must send. The token itself may come "
                           "from SCALELAB_AGENT_TOKEN instead (never put it on the command line)."),
            {} },
        { QStringLiteral("tls-cert"), QStringLiteral("SCALELAB_AGENT_TLS_CERT"), QStringLiteral("path"),
            QStringLiteral("PEM server certificate chain; with --tls-key, serves TLS."), {} },
        { QStringLiteral("tls-key"), QStringLiteral("SCALELAB_AGENT_TLS_KEY"), QStringLiteral("path"),
            QStringLiteral("PEM private key of --tls-cert."), {} },
        { QStringLiteral("tls-client-ca"), QStringLiteral("SCALELAB_AGENT_TLS_CLIENT_CA"),
            QStringLiteral("path"),
            QStringLiteral("Mutual TLS: require a client certificate signed by this PEM CA."), {} },
    };
}

// What finished runs keep on disk and in memory, and how many streams a client may hold.
std::vector<AgentSetting> retentionSettings()
{
    return {
        { QStringLiteral("finished-checkpoints"), QStringLiteral("SCALELAB_AGENT_FINISHED_CHECKPOINTS"),
            QStringLiteral("rule"),
            QStringLiteral(
                "What a run that SUCCEEDED keeps on disk: all (the newest its worker kept), final "
                "(its last checkpoint) or none. "
                "FAILED and CANCELLED runs keep theirs for a retry; `scalelab-cli gc` frees more."),
            QStringLiteral("final") },
        { QStringLiteral("finished-days"), QStringLiteral("SCALELAB_AGENT_FINISHED_DAYS"),
            QStringLiteral("days"),
            QStringLiteral("Remove a finished run's final checkpoint this many days after it ended (checked "
                           "at start and by gc); 0 keeps it."),
            QStringLiteral("0") },
        { QStringLiteral("stream-stall-s"), QStringLiteral("SCALELAB_AGENT_STREAM_STALL_S"),
            QStringLiteral("s"),
            QStringLiteral("Cancel a stream (WatchRun, WatchNode, ...) whose client takes no data for this "
                           "long; it reconnects and resumes (5-3600)."),
            QStringLiteral("30") },
        { QStringLiteral("max-streams-per-client"), QStringLiteral("SCALELAB_AGENT_MAX_STREAMS_PER_CLIENT"),
            QStringLiteral("n"),
            QStringLiteral(
                "Streams one client host may have open at once over all its connections (1-10000); "
                "more are refused with RESOURCE_EXHAUSTED. The agent serves at most 4 x --max-streams."),
            QStringLiteral("64") },
        { QStringLiteral("finished-runs-in-memory"), QStringLiteral("SCALELAB_AGENT_FINISHED_RUNS_IN_MEMORY"),
            QStringLiteral("n"),
            QStringLiteral(
                "Finished runs kept at hand in memory, the most recently used (1-10000); every other "
                "run is read back from its records on disk when asked for."),
            QStringLiteral("32") },
    };
}

// Its log, and the pace of samples, heartbeats and stops.
std::vector<AgentSetting> loggingSettings()
{
    return {
        { QStringLiteral("log-level"), QStringLiteral("SCALELAB_AGENT_LOG_LEVEL"), QStringLiteral("level"),
            QStringLiteral("debug, info, warning or error."), QStringLiteral("info") },
        { QStringLiteral("log-file"), QStringLiteral("SCALELAB_AGENT_LOG_FILE"), QStringLiteral("path"),
            QStringLiteral("Append log lines to this file instead of standard error."), {} },
        { QStringLiteral("sample-interval-ms"), QStringLiteral("SCALELAB_AGENT_SAMPLE_INTERVAL_MS"),
            QStringLiteral("ms"), QStringLiteral("Default WatchNode sampling interval (100-60000)."),
            QStringLiteral("1000") },
        { QStringLiteral("heartbeat-ms"), QStringLiteral("SCALELAB_AGENT_HEARTBEAT_MS"), QStringLiteral("ms"),
            QStringLiteral("Heartbeat interval of idle WatchRun streams (100-5000): consoles take a stream "
                           "silent for 10 s as a cut link."),
            QStringLiteral("2000") },
        { QStringLiteral("stop-grace-ms"), QStringLiteral("SCALELAB_AGENT_STOP_GRACE_MS"),
            QStringLiteral("ms"),
            QStringLiteral("Default time between SIGTERM and SIGKILL when stopping a run (100-600000)."),
            QStringLiteral("5000") },
    };
}

// Where FetchDataset gets CIFAR-10.
std::vector<AgentSetting> datasetSettings()
{
    return {
        { QStringLiteral("cifar-url"), QStringLiteral("SCALELAB_AGENT_CIFAR_URL"), QStringLiteral("url"),
            QStringLiteral("Where FetchDataset downloads cifar-10-binary.tar.gz (http, https or file; "
                           "point it at a local mirror on a closed network)."),
            QStringLiteral("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz") },
        { QStringLiteral("cifar-md5"), QStringLiteral("SCALELAB_AGENT_CIFAR_MD5"), QStringLiteral("hex"),
            QStringLiteral("Expected MD5 of that tarball (the published one)."),
            QStringLiteral("c32a1d4ab5d03f1284b67883e8d87530") },
    };
}

} // namespace

const std::vector<AgentSetting> &agentSettings()
{
    static const std::vector<AgentSetting> settings = [] {
        std::vector<AgentSetting> all;
        for (const auto &group :
            { networkSettings(), fileSettings(), retentionSettings(), loggingSettings(), datasetSettings() })
            all.insert(all.end(), group.begin(), group.end());
        return all;
    }();
    return settings;
}

void AgentConfig::addOptions(QCommandLineParser *parser)
{
    for (const auto &s : agentSettings()) {
        QString help = s.help + QStringLiteral(" [%1]").arg(s.env);
        if (!s.defaultValue.isEmpty())
            help += QStringLiteral(" (default: %1)").arg(s.defaultValue);
        parser->addOption(QCommandLineOption(s.name, help, s.valueName));
    }
}

common::Status AgentConfig::resolve(const QCommandLineParser &parser)
{
    // The file named on the command line or in the environment.
    QMap<QString, QPair<QString, QString>> fromFile; // name -> (value, "file:line")
    QString file = parser.value(QStringLiteral("config"));
    if (file.isEmpty())
        file = QString::fromLocal8Bit(qgetenv("SCALELAB_AGENT_CONFIG"));
    if (!file.isEmpty()) {
        QFile f(file);
        if (!f.open(QIODevice::ReadOnly | QIODevice::Text))
            return common::Status::failure(
                QStringLiteral("cannot read config file %1: %2").arg(file, f.errorString()).toStdString());
        QTextStream in(&f);
        for (int number = 1; !in.atEnd(); ++number) {
            const QString line = in.readLine().trimmed();
            if (line.isEmpty() || line.startsWith(QLatin1Char('#')))
                continue;
            const int eq = line.indexOf(QLatin1Char('='));
            const QString key = line.left(eq).trimmed();
            if (eq < 0)
                return common::Status::failure(QStringLiteral("%1:%2: expected 'option = value', got '%3'")
                                                   .arg(file)
                                                   .arg(number)
                                                   .arg(line)
                                                   .toStdString());
            const bool known = std::any_of(agentSettings().begin(), agentSettings().end(),
                [&](const AgentSetting &s) { return s.name == key && s.name != QLatin1String("config"); });
            if (!known)
                return common::Status::failure(
                    QStringLiteral("%1:%2: unknown option '%3' (see --help for the names)")
                        .arg(file)
                        .arg(number)
                        .arg(key)
                        .toStdString());
            fromFile[key] = { line.mid(eq + 1).trimmed(), QStringLiteral("%1:%2").arg(file).arg(number) };
        }
    }
    for (const auto &s : agentSettings()) {
        const QByteArray env = qgetenv(s.env.toLocal8Bit().constData());
        if (parser.isSet(s.name)) {
            m_values[s.name] = parser.value(s.name);
            m_sources[s.name] = QStringLiteral("command line");
        } else if (!env.isEmpty()) {
            m_values[s.name] = QString::fromLocal8Bit(env);
            m_sources[s.name] = s.env;
        } else if (fromFile.contains(s.name)) {
            m_values[s.name] = fromFile[s.name].first;
            m_sources[s.name] = fromFile[s.name].second;
        } else {
            // "$XDG_DATA_HOME/..." and "(...)" describe defaults the agent works out itself.
            const bool literal = !s.defaultValue.startsWith(QLatin1Char('$'))
                && !s.defaultValue.startsWith(QLatin1Char('('));
            m_values[s.name] = literal ? s.defaultValue : QString();
            m_sources[s.name] = QStringLiteral("default");
        }
    }
    return common::Status::success();
}

} // namespace scalelab::agent
