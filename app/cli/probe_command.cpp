// scalelab-cli probe: the network between agents, on demand (core's network_probe.h).
#include "cli_common.h"
#include "interrupts.h"
#include "study_cli.h"

#include "agent_client.h"
#include "network_probe.h"

#include <QCommandLineParser>
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <memory>

namespace scalelab::app {

using namespace scalelab::core;

namespace {

QString duration(double seconds)
{
    if (!std::isfinite(seconds))
        return QStringLiteral("-");
    if (seconds < 1e-3)
        return QString::number(seconds * 1e6, 'f', 0) + QStringLiteral(" µs");
    if (seconds < 1)
        return QString::number(seconds * 1e3, 'f', seconds < 0.01 ? 2 : 1) + QStringLiteral(" ms");
    return QString::number(seconds, 'f', 2) + QStringLiteral(" s");
}

QString sizeText(qint64 bytes)
{
    return bytes >= (1 << 20) ? QStringLiteral("%1 MB").arg(bytes >> 20)
                              : QStringLiteral("%1 KB").arg(bytes >> 10);
}

double medianOf(QList<double> v)
{
    std::sort(v.begin(), v.end());
    if (v.isEmpty())
        return NAN;
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

const char *kDefinition
    = "each size: c10d all-reduces of float32 tensors between the ranks (one warm-up, then 3 timed; "
      "median), up to 64 MB or the first size over 0.25 s; fitted to a ring all-reduce, "
      "t = 2(p-1)*latency + 2(p-1)/p * bytes/bandwidth (least squares on relative errors)";

// --world-sizes, each once; empty when not given.
int readWorldSizes(const QCommandLineParser &parser, QList<int> *worldSizes)
{
    if (parser.isSet(QStringLiteral("world-sizes"))) {
        for (const QString &part : parser.value(QStringLiteral("world-sizes")).split(QLatin1Char(','))) {
            bool ok = false;
            const int p = part.trimmed().toInt(&ok);
            if (!ok || p < 2 || p > 512)
                return badInput(
                    QStringLiteral("--world-sizes: '%1' is not a number of ranks between 2 and 512 "
                                   "(give them comma-separated, e.g. 2,4,8)")
                        .arg(part.trimmed()));
            if (!worldSizes->contains(p))
                *worldSizes << p;
        }
    }
    return Ok;
}

// A client of each agent, and the host it says it is on.
int describeAgents(const Agents &agents, std::vector<std::unique_ptr<AgentClient>> *owned,
    QMap<QString, AgentClient *> *clients, QList<ProbeAgent> *probeAgents)
{
    for (const AgentEndpoint &e : agents.endpoints) {
        owned->push_back(std::make_unique<AgentClient>(e.address, e.token, e.tls.orEnvironment()));
        v1::DescribeResponse described;
        if (const Status s = owned->back()->describe(&described); !s) {
            err() << "scalelab-cli: agent " << e.name << ": " << s.error() << "\n";
            return AgentError;
        }
        clients->insert(e.name, owned->back().get());
        *probeAgents << ProbeAgent { e.name, QString::fromStdString(described.hostname()) };
    }
    return Ok;
}

// The probes as a table: fit, then the median time of a few sizes.
void printProbeTable(const QList<ProbeOutcome> &outcomes)
{
    // Columns: the sizes every successful probe measured, at most four of them.
    QList<qint64> sizes;
    for (const ProbeOutcome &o : outcomes)
        for (const NetworkSample &s : o.network.samples)
            if (!sizes.contains(s.bytes))
                sizes << s.bytes;
    std::sort(sizes.begin(), sizes.end());
    QList<qint64> shown;
    for (qint64 wanted : { qint64(4) << 10, qint64(1) << 20, qint64(16) << 20, qint64(64) << 20 })
        if (sizes.contains(wanted))
            shown << wanted;
    out() << "Network between the agents\n(" << QString::fromLatin1(kDefinition) << ")\n\n";
    out() << QStringLiteral("%1  %2  %3  %4")
                 .arg(QStringLiteral("probe"), -32)
                 .arg(QStringLiteral("latency"), 9)
                 .arg(QStringLiteral("bandwidth"), -26)
                 .arg(QStringLiteral("fit err"), 7);
    for (qint64 b : shown)
        out() << QStringLiteral("  %1").arg(sizeText(b), 9);
    out() << "\n";
    for (const ProbeOutcome &o : outcomes) {
        out() << QStringLiteral("%1  ").arg(
            o.layout.text() + QStringLiteral(" (") + o.network.backend + QStringLiteral(")"), -32);
        if (!o.ok()) {
            out() << "failed: " << o.error << "\n";
            continue;
        }
        out() << QStringLiteral("%1  %2  %3")
                     .arg(o.fit.ok() ? duration(o.fit.latency) : QStringLiteral("-"), 9)
                     .arg(o.fit.ok() ? bandwidthText(o.fit.bandwidth) : o.fit.problem, -26)
                     .arg(o.fit.ok()
                             ? QString::number(100 * o.fit.worstRelativeError, 'f', 0) + QStringLiteral(" %")
                             : QStringLiteral("-"),
                         7);
        for (qint64 b : shown) {
            double t = NAN;
            for (const NetworkSample &s : o.network.samples)
                if (s.bytes == b)
                    t = medianOf(s.seconds);
            out() << QStringLiteral("  %1").arg(duration(t), 9);
        }
        out() << "\n";
    }
    out() << "\nlatency and bandwidth: the ring fit's per-phase latency and the bandwidth of each link; fit "
             "err: "
             "the largest relative gap between the fit and a measured size.\n";
    // The link between hosts when there is one, else the one host's: what a study on it would do.
    const ProbeOutcome *link = nullptr;
    for (const ProbeOutcome &o : outcomes)
        if (o.ok() && o.fit.ok() && (!link || (o.layout.acrossHosts && !link->layout.acrossHosts)))
            link = &o;
    if (link)
        out() << "A study on this " << (link->layout.acrossHosts ? "network" : "host")
              << ": scalelab-cli study predict ID --bandwidth "
              << QString::number(link->fit.bandwidth * 8 / 1e9, 'g', 3) << "Gbit\n";
}

} // namespace

int probeCommand(const QStringList &arguments)
{
    QCommandLineParser parser;
    addAgentOptions(parser);
    parser.addOption({ QStringLiteral("state-dir"),
        QStringLiteral(
            "State folder of local agents (default: $SCALELAB_STATE_DIR or ~/.local/share/scalelab)."),
        QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("world-sizes"),
        QStringLiteral("Ranks per probe, comma-separated (default: 2 up to the number of hosts). Each size "
                       "is probed with every rank on the first agent's host, and dealt over the hosts when "
                       "there are several."),
        QStringLiteral("n,n,...") });
    parser.addOption({ QStringLiteral("timeout-s"),
        QStringLiteral("Give up on one probe after this many seconds (default 180)."), QStringLiteral("s"),
        QStringLiteral("180") });
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Machine-readable output (JSON).") });
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral(
                "The network between agents: c10d all-reduce times of 4 KB to 64 MB between 2 ... N "
                "ranks, on one host and across hosts, and the latency and bandwidth of a ring "
                "all-reduce fitted to them (what `study predict` assumes unless told "
                "--bandwidth). Each probe is a short run on the agents (no data, no model).")
                + interruptHelp(QStringLiteral("stops the probe under way on the agents, skips the others "
                                               "and exits 1")),
            &code))
        return code;
    QList<int> worldSizes;
    if (const int rc = readWorldSizes(parser, &worldSizes); rc != Ok)
        return rc;
    bool timeoutOk = false;
    const int timeoutS = parser.value(QStringLiteral("timeout-s")).toInt(&timeoutOk);
    if (!timeoutOk || timeoutS < 10 || timeoutS > 3600)
        return badInput(QStringLiteral("--timeout-s must be between 10 and 3600 seconds (got '%1')")
                            .arg(parser.value(QStringLiteral("timeout-s"))));
    const bool json = parser.isSet(QStringLiteral("json"));

    InterruptGuard interrupts; // before the agents: stopping local ones stays within its reach
    Agents agents;
    if (const int rc = setUpAgents(parser, &agents); rc != Ok)
        return rc;
    std::vector<std::unique_ptr<AgentClient>> owned;
    QMap<QString, AgentClient *> clients;
    QList<ProbeAgent> probeAgents;
    if (const int rc = describeAgents(agents, &owned, &clients, &probeAgents); rc != Ok)
        return rc;
    if (worldSizes.isEmpty()) {
        QStringList hosts;
        for (const ProbeAgent &a : probeAgents)
            if (!hosts.contains(a.host))
                hosts << a.host;
        for (int p = 2; p <= std::max<int>(2, hosts.size()); ++p)
            worldSizes << p;
    }

    QList<ProbeOutcome> outcomes;
    bool allOk = true;
    for (const ProbeLayout &layout : planProbes(probeAgents, worldSizes)) {
        if (!interrupts.requested()) {
            err() << "probing " << layout.text() << " ...\n";
            err().flush();
            outcomes << runProbe(layout, clients, timeoutS * 1000, [&] { return interrupts.requested(); });
        }
        if (interrupts.requested()) { // the probe under way, if any, was stopped on its agents
            err() << "scalelab-cli: interrupted: no more probes\n";
            return RunFailed;
        }
        const ProbeOutcome &o = outcomes.last();
        if (!o.ok()) {
            allOk = false;
            err() << "scalelab-cli: " << layout.text() << ": " << o.error << "\n";
            err().flush();
        }
    }

    if (json) {
        QJsonArray probes;
        for (const ProbeOutcome &o : outcomes)
            probes << probeJson(o);
        out() << QJsonDocument(QJsonObject { { QStringLiteral("probes"), probes },
                                   { QStringLiteral("definition"), QString::fromLatin1(kDefinition) } })
                     .toJson(QJsonDocument::Indented);
        return allOk ? Ok : AgentError;
    }
    printProbeTable(outcomes);
    return allOk ? Ok : AgentError;
}

} // namespace scalelab::app
