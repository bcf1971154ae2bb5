#include "network_survey.h"

#include "journal_events.h"

#include "network_probe.h"
#include "runner_context.h"

#include <QJsonObject>
#include <QMetaObject>
#include <QObject>

#include <algorithm>
#include <memory>
#include <vector>

namespace scalelab::core {

NetworkSurvey::NetworkSurvey(RunnerContext &runner, QObject *context)
    : m_runner(runner)
    , m_context(context)
{ }

NetworkSurvey::~NetworkSurvey()
{
    m_cancel = true; // the probe in flight stops its run on the agents
    if (m_thread.joinable())
        m_thread.join();
}

QList<int> NetworkSurvey::worldSizes(int maxWorkers)
{
    QList<int> sizes;
    for (int p = 2; p <= maxWorkers; ++p)
        if ((p & (p - 1)) == 0 || p == maxWorkers)
            sizes << p;
    return sizes;
}

void NetworkSurvey::probe(const QList<NodeCapacity> &nodes)
{
    if (m_probing || !m_runner.driving())
        return;
    const StudyState &state = m_runner.study();
    // One agent per host, in the order the study lists its agents.
    QList<ProbeAgent> agents;
    QStringList hosts;
    for (const QString &name : state.agents())
        for (const NodeCapacity &n : nodes)
            if (n.agent == name && n.reachable && m_runner.endpoint(name) && !hosts.contains(n.host)) {
                hosts << n.host;
                agents << ProbeAgent { name, n.host };
            }
    if (hosts.size() < 2) {
        // Nothing between hosts to measure: each run's own probe measures the one host. Nothing
        // is done after it, so a record not kept needs no handling (the runner reported it).
        (void)m_runner.record(journal_events::networkProbed({},
            hosts.isEmpty() ? QStringLiteral("not probed: no agent was reachable at the study's start")
                            : QStringLiteral("not probed: every agent is on %1, where each multi-worker run "
                                             "probes its own ranks before training")
                                  .arg(hosts.first())));
        return;
    }
    int maxWorkers = 1;
    for (const RunProgress &r : state.runs())
        maxWorkers = std::max(maxWorkers, r.planned.config.workers);
    // Across hosts at each size; on one host once, at 2 ranks: the reference the links are
    // compared with (each probe starts its ranks: seconds apiece).
    QList<ProbeLayout> layouts = planProbes(agents, worldSizes(maxWorkers));
    layouts.removeIf([](const ProbeLayout &l) { return !l.acrossHosts && l.worldSize > 2; });
    QList<AgentEndpoint> endpoints;
    for (const ProbeAgent &a : agents)
        endpoints << *m_runner.endpoint(a.name);
    m_probing = true;
    m_cancel = false;
    m_runner.say(QStringLiteral("network: probing all-reduces between %1 (%2 probes, a few seconds each) "
                                "before the runs")
                     .arg(hosts.join(QStringLiteral(", ")))
                     .arg(layouts.size()));
    if (m_thread.joinable())
        m_thread.join();
    m_thread = std::thread([this, layouts, endpoints, context = m_context] {
        std::vector<std::unique_ptr<AgentClient>> owned;
        QMap<QString, AgentClient *> clients;
        for (const AgentEndpoint &e : endpoints) {
            owned.push_back(std::make_unique<AgentClient>(e.address, e.token, e.tls.orEnvironment()));
            clients.insert(e.name, owned.back().get());
        }
        QJsonArray probes;
        QStringList failed;
        for (const ProbeLayout &layout : layouts) {
            if (m_cancel)
                break;
            const ProbeOutcome outcome
                = runProbe(layout, clients, 120'000, [this] { return m_cancel.load(); });
            probes << probeJson(outcome);
            if (!outcome.ok())
                failed << QStringLiteral("%1: %2").arg(layout.text(), outcome.error);
        }
        const QString note = failed.isEmpty()
            ? QString()
            : QStringLiteral("%1 of %2 probes failed (%3); the runs' own probes "
                             "still measure their ranks")
                  .arg(failed.size())
                  .arg(layouts.size())
                  .arg(failed.join(QStringLiteral("; ")));
        QMetaObject::invokeMethod(
            context, [this, probes, note] { surveyed(probes, note); }, Qt::QueuedConnection);
    });
}

void NetworkSurvey::surveyed(const QJsonArray &probes, const QString &note)
{
    if (m_thread.joinable())
        m_thread.join();
    m_probing = false;
    if (!m_runner.driving() || m_cancel)
        return;
    if (!m_runner.record(journal_events::networkProbed(probes, note)))
        return;
    for (const QJsonValue &p : probes) {
        const QJsonObject o = p.toObject();
        const QString layout = QStringLiteral("%1 ranks, %2")
                                   .arg(o.value(QLatin1String("world_size")).toInt())
                                   .arg(o.value(QLatin1String("layout")).toString());
        m_runner.say(o.contains(QLatin1String("error"))
                ? QStringLiteral("network: %1: %2").arg(layout, o.value(QLatin1String("error")).toString())
                : QStringLiteral("network: %1: latency %2 µs, %3")
                      .arg(layout)
                      .arg(o.value(QLatin1String("latency_seconds")).toDouble() * 1e6, 0, 'f', 0)
                      .arg(bandwidthText(o.value(QLatin1String("bandwidth_bytes_per_second")).toDouble())));
    }
    m_runner.tickSoon();
}

} // namespace scalelab::core
