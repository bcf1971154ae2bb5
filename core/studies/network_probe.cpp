#include "network_probe.h"

#include "qt_text.h"
#include "run_anatomy.h"
#include "run_request.h"
#include "run_watch.h"

#include <QElapsedTimer>
#include <QEventLoop>
#include <QJsonArray>
#include <QTimer>

#include <algorithm>
#include <cmath>

namespace scalelab::core {

QString ProbeLayout::text() const
{
    return acrossHosts
        ? QStringLiteral("%1 ranks over %2").arg(worldSize).arg(hosts.join(QStringLiteral(", ")))
        : QStringLiteral("%1 ranks on %2").arg(worldSize).arg(hosts.value(0));
}

QList<ProbeLayout> planProbes(const QList<ProbeAgent> &agents, const QList<int> &worldSizes)
{
    QList<ProbeLayout> layouts;
    if (agents.isEmpty())
        return layouts;
    // One agent per host, in the order given: ranks across hosts go one to each in turn.
    QList<ProbeAgent> perHost;
    for (const ProbeAgent &a : agents)
        if (std::none_of(
                perHost.begin(), perHost.end(), [&](const ProbeAgent &b) { return b.host == a.host; }))
            perHost << a;
    for (int p : worldSizes) {
        if (p < 2)
            continue;
        ProbeLayout one;
        one.worldSize = p;
        one.hosts = { agents.first().host };
        Portion all { agents.first().name, {} };
        for (int r = 0; r < p; ++r)
            all.ranks << r;
        one.portions = { all };
        layouts << one;
        if (perHost.size() < 2)
            continue;
        ProbeLayout spread;
        spread.worldSize = p;
        spread.acrossHosts = true;
        const int hosts = std::min<int>(p, perHost.size());
        for (int h = 0; h < hosts; ++h) {
            spread.hosts << perHost[h].host;
            spread.portions << Portion { perHost[h].name, {} };
        }
        for (int r = 0; r < p; ++r)
            spread.portions[r % hosts].ranks << r;
        layouts << spread;
    }
    return layouts;
}

namespace {

// Best effort: the run is over for us.
void stopProbe(const ProbeLayout &layout, const QMap<QString, AgentClient *> &clients, const QString &runId)
{
    for (const Portion &p : layout.portions)
        if (AgentClient *c = clients.value(p.agent)) {
            v1::StopRunResponse ignored;
            (void)c->stopRun(runId, &ignored);
        }
}

// Starts each portion's ranks, rank 0's first: the others meet at its rendezvous.
Status startProbe(
    const ProbeLayout &layout, const QMap<QString, AgentClient *> &clients, const QString &runId)
{
    v1::RunSpec spec;
    spec.set_probe_only(true);
    spec.set_threads_per_worker(1); // the collectives' own threads do the work
    spec.set_collective_timeout_seconds(60);
    v1::Endpoint rendezvous;
    for (const Portion &p : layout.portions) {
        AgentClient *c = clients.value(p.agent);
        if (!c)
            return Status::failure(QStringLiteral("agent %1 is not among the agents given").arg(p.agent));
        v1::StartWorkersRequest request;
        request.set_run_id(runId.toStdString());
        request.set_attempt(1);
        request.set_world_size(layout.worldSize);
        for (int rank : p.ranks)
            request.add_ranks(rank);
        *request.mutable_spec() = spec;
        if (!rendezvous.host().empty())
            *request.mutable_rendezvous() = rendezvous;
        v1::StartWorkersResponse response;
        if (const Status started = c->startWorkers(request, &response); !started) {
            stopProbe(layout, clients, runId);
            return Status::failure(QStringLiteral("agent %1: %2").arg(p.agent, started.error()));
        }
        if (rendezvous.host().empty())
            rendezvous = response.rendezvous();
    }
    return Status::success();
}

// What rank 0's events said of a probe run by the time it ended, or was given up on.
struct ProbeWatch {
    RunNetwork network;
    bool terminal = false;
    QString ended; // the terminal state's name and message, when it did not succeed
    QString streamError;
    bool cancelled = false;
};

ProbeWatch watchProbe(
    AgentClient *rankZero, const QString &runId, int timeoutMs, const std::function<bool()> &cancelled)
{
    ProbeWatch seen;
    RunWatch watch(rankZero, runId);
    watch.setGiveUpAfterMs(30'000);
    QEventLoop loop;
    QObject::connect(&watch, &RunWatch::eventsArrived, &loop, [&] {
        for (const v1::RunEvent &e : watch.takeEvents()) {
            if (e.has_started() && e.started().has_network())
                seen.network = networkOf(e.started().network());
            if (e.has_state()
                && (e.state().state() == v1::SUCCEEDED || e.state().state() == v1::FAILED
                    || e.state().state() == v1::CANCELLED)) {
                seen.terminal = true;
                if (e.state().state() != v1::SUCCEEDED)
                    seen.ended = QStringLiteral("the probe run %1: %2")
                                     .arg(e.state().state() == v1::FAILED ? QStringLiteral("failed")
                                                                          : QStringLiteral("was cancelled"),
                                         str(e.state().message()));
            }
        }
    });
    QObject::connect(&watch, &RunWatch::finished, &loop, [&](const QString &error) {
        seen.streamError = error;
        loop.quit();
    });
    QTimer deadline;
    deadline.setSingleShot(true);
    QObject::connect(&deadline, &QTimer::timeout, &loop, &QEventLoop::quit);
    deadline.start(timeoutMs);
    QTimer poll;
    if (cancelled) {
        QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
            if (cancelled()) {
                seen.cancelled = true;
                loop.quit();
            }
        });
        poll.start(200);
    }
    watch.start();
    loop.exec();
    // What arrived with the last batch, before finished().
    for (const v1::RunEvent &e : watch.takeEvents())
        if (e.has_started() && e.started().has_network())
            seen.network = networkOf(e.started().network());
    watch.cancel();
    return seen;
}

// Rank 0's end is the probe's result, but the other agents' ranks may still be exiting: runs
// placed right after the survey would find those agents busy (a spread run then left a host
// out). Each is watched to its end too, 20 s at most, and stopped if it has not ended by then.
void waitForOtherPortions(const ProbeLayout &layout, const QMap<QString, AgentClient *> &clients,
    const QString &runId, const std::function<bool()> &cancelled)
{
    const QString &rankZeroAgent = layout.portions.first().agent;
    for (const Portion &p : layout.portions) {
        if (p.agent == rankZeroAgent)
            continue;
        if (!watchProbe(clients.value(p.agent), runId, 20'000, cancelled).terminal)
            stopProbe(layout, clients, runId);
    }
}

} // namespace

ProbeOutcome runProbe(const ProbeLayout &layout, const QMap<QString, AgentClient *> &clients, int timeoutMs,
    const std::function<bool()> &cancelled)
{
    ProbeOutcome outcome;
    outcome.layout = layout;
    outcome.runId = QStringLiteral("probe-") + newRunId().mid(4);
    QElapsedTimer clock;
    clock.start();
    const auto failed = [&](const QString &error) {
        outcome.error = error;
        outcome.seconds = clock.elapsed() / 1000.0;
        return outcome;
    };

    if (const Status started = startProbe(layout, clients, outcome.runId); !started)
        return failed(started.error());
    // Rank 0 reports the network in its started event; the run's end says whether all went well.
    const ProbeWatch seen
        = watchProbe(clients.value(layout.portions.first().agent), outcome.runId, timeoutMs, cancelled);
    outcome.network = seen.network;
    if (seen.cancelled) {
        stopProbe(layout, clients, outcome.runId);
        return failed(QStringLiteral("cancelled"));
    }
    if (!seen.terminal) {
        stopProbe(layout, clients, outcome.runId);
        return failed(!seen.streamError.isEmpty()
                ? QStringLiteral("lost rank 0's events: %1").arg(seen.streamError)
                : QStringLiteral("no result after %1 s: the ranks could not reach each other (a firewall "
                                 "between the hosts, or an advertised address the others cannot route to: "
                                 "see scalelab-cli describe)")
                      .arg(timeoutMs / 1000));
    }
    waitForOtherPortions(layout, clients, outcome.runId, cancelled);
    if (!seen.ended.isEmpty())
        return failed(seen.ended);
    if (outcome.network.worldSize < 2)
        return failed(QStringLiteral("the probe run ended without reporting its all-reduce times"));
    outcome.fit = fitLink({ outcome.network });
    outcome.seconds = clock.elapsed() / 1000.0;
    return outcome;
}

QJsonObject probeJson(const ProbeOutcome &o)
{
    const auto finite = [](double v) { return std::isfinite(v) ? QJsonValue(v) : QJsonValue(); };
    QJsonObject json { { QStringLiteral("world_size"), o.layout.worldSize },
        { QStringLiteral("layout"),
            o.layout.acrossHosts ? QStringLiteral("across hosts") : QStringLiteral("one host") },
        { QStringLiteral("hosts"), QJsonArray::fromStringList(o.layout.hosts) },
        { QStringLiteral("run_id"), o.runId }, { QStringLiteral("seconds"), o.seconds } };
    if (!o.ok()) {
        json.insert(QStringLiteral("error"), o.error);
        return json;
    }
    json.insert(QStringLiteral("latency_seconds"), finite(o.fit.latency));
    json.insert(QStringLiteral("bandwidth_bytes_per_second"), finite(o.fit.bandwidth));
    json.insert(QStringLiteral("fit_worst_relative_error"), finite(o.fit.worstRelativeError));
    if (!o.fit.ok())
        json.insert(QStringLiteral("fit_problem"), o.fit.problem);
    json.insert(QStringLiteral("network"), networkJson(o.network));
    return json;
}

} // namespace scalelab::core
