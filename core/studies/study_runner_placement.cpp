// StudyRunner, the placement part: what the agents can take now (asked every few seconds,
// new nodes journaled), and where each pending run's next attempt goes. The contract is in
// study_runner.h.
#include "qt_text.h"

#include "journal_events.h"
#include "study_runner.h"

#include "checkpoint_courier.h"

#include <QDateTime>
#include <QJsonArray>

#include <algorithm>
#include <functional>
#include <limits>

namespace scalelab::core {
namespace {

constexpr qint64 kCapacityRefreshMs = 2000;
constexpr int kDescribeTimeoutMs = 3000; // an agent's answer to a refresh of the capacity
// How long a spread run's first attempt waits for a known agent that answered late.
constexpr qint64 kSpreadWaitMs = 30'000;

// What this study's open attempts hold: the agents they run on (whose hosts a scale-up
// study keeps to one run) and the GPUs they use, marked on the nodes.
struct NodeUse {
    QSet<QString> busyAgents;
    QMap<QString, double> gpusInUse;

    void hold(const QList<Portion> &portions, double gpusPerWorker)
    {
        for (const auto &p : portions) {
            busyAgents.insert(p.agent);
            gpusInUse[p.agent] += gpusPerWorker * p.ranks.size();
        }
    }

    void mark(QList<NodeCapacity> &nodes) const
    {
        QSet<QString> busyHosts;
        for (const auto &n : nodes)
            if (busyAgents.contains(n.agent) && !n.host.isEmpty())
                busyHosts.insert(n.host);
        for (auto &n : nodes) {
            n.busy = busyAgents.contains(n.agent) || busyHosts.contains(n.host);
            n.gpusInUse = gpusInUse.value(n.agent);
        }
    }
};

// The slots a portion's ranks take on its agent.
void takeSlots(QList<NodeCapacity> &nodes, const Portion &portion)
{
    for (auto &n : nodes)
        if (n.agent == portion.agent)
            n.freeSlots -= int(portion.ranks.size());
}

int worldOf(const QList<Portion> &portions)
{
    int world = 0;
    for (const auto &p : portions)
        world += int(p.ranks.size());
    return world;
}

// The ranks `portions` placed on `agents`.
int ranksOn(const QList<Portion> &portions, const QStringList &agents)
{
    int ranks = 0;
    for (const auto &p : portions)
        ranks += agents.contains(p.agent) ? int(p.ranks.size()) : 0;
    return ranks;
}

// Why an elastic run's next attempt has another size than its attempt before (or than its
// plan, for a first attempt), in words for the journal, `study show` and the reports; "" when
// it has the same.
QString resizeText(const RunProgress &run, const QList<Portion> &placed, const QString &lost)
{
    const RunConfig &c = run.planned.config;
    const int world = worldOf(placed);
    const int before = run.attempts.isEmpty() || run.attempts.last().worldSize == 0
        ? c.workers
        : run.attempts.last().worldSize;
    if (world == before)
        return {};
    const QString step
        = QStringLiteral("a step still averages %1 micro-batches of %2 (global batch %3), %4 per worker")
              .arg(c.batchesPerStep())
              .arg(c.batchSize)
              .arg(c.globalBatch())
              .arg(microBatchesPerWorker(c, world));
    if (world > before)
        return QStringLiteral("grew from %1 to %2 of %3 workers: capacity returned; %4")
            .arg(before)
            .arg(world)
            .arg(c.workers)
            .arg(step);
    return QStringLiteral("shrank from %1 to %2 of %3 workers: %4; %5")
        .arg(before)
        .arg(world)
        .arg(c.workers)
        .arg(lost.isEmpty() ? QStringLiteral("only %1 fit now").arg(world) : lost + QStringLiteral(" lost"))
        .arg(step);
}

// The next attempt's placement on `ordered`: the planned size; an elastic run that lost
// hosts goes on with the ranks it still has (not squeezed onto the hosts left), and one that
// does not fit on agents that all answer with fewer workers, at the same global batch,
// rather than wait (a failed placeElastic keeps the planned placement and its reason).
Placement placeAttempt(const RunProgress &run, const QList<NodeCapacity> &ordered, PlacementPolicy policy,
    bool exclusive, const QString &dataset)
{
    const RunConfig &config = run.planned.config;
    Placement placement = placeRun(config, ordered, policy, exclusive, dataset);
    if (!config.elastic())
        return placement;
    const int kept = worldOf(run.portions) - ranksOn(run.portions, run.waitingFor);
    const bool lostHosts = !run.waitingFor.isEmpty() && kept < config.workers;
    // An agent that does not answer now, but that this run did not lose, may answer at the
    // next refresh (a slow Describe on a loaded node): the run waits for it, as a fixed one
    // does, rather than start small for the whole attempt.
    const bool allAnswer
        = std::all_of(ordered.begin(), ordered.end(), [](const NodeCapacity &n) { return n.reachable; });
    if ((!placement.ok() && (allAnswer || lostHosts)) || lostHosts)
        if (Placement smaller
            = placeElastic(config, ordered, policy, exclusive, dataset, lostHosts ? kept : 0);
            smaller.ok())
            return smaller;
    return placement;
}

// What the journal keeps of an agent first seen: its host as Describe told it.
NodeInfo nodeInfo(const QString &agent, const v1::DescribeResponse &d)
{
    NodeInfo n;
    n.agent = agent;
    n.hostname = str(d.hostname());
    n.agentVersion = str(d.agent_version());
    n.cpuCores = d.cpu_cores();
    n.memoryBytes = qint64(d.memory_bytes());
    for (const auto &g : d.gpus())
        n.gpus << QStringLiteral("%1: %2 (%3 GiB)")
                      .arg(g.index())
                      .arg(str(g.name()))
                      .arg(double(g.memory_bytes()) / (1 << 30), 0, 'f', 0);
    n.cpuModel = str(d.cpu_model());
    n.os = str(d.software().count("os") ? d.software().at("os") : "");
    n.gpuStatus = str(d.gpu_status());
    for (const auto &[component, version] : d.software())
        if (component != "os")
            n.software.insert(str(component), str(version));
    return n;
}

// "A (1 rank), B (2 ranks)", then the candidates it is not on that a reader would expect it
// on: any unreachable one, and under spread any left out for want of a free slot. A spread
// run on fewer hosts than asked says why (a host still busy with the network probe, say).
QString placedText(const QList<Portion> &portions, const QList<NodeCapacity> &candidates,
    PlacementPolicy policy, const std::function<QString(const QString &)> &label)
{
    QStringList where, notOn;
    for (const auto &p : portions)
        where << QStringLiteral("%1 (%2 rank%3)")
                     .arg(p.agent)
                     .arg(p.ranks.size())
                     .arg(p.ranks.size() == 1 ? "" : "s");
    for (const NodeCapacity &n : candidates) {
        if (std::any_of(
                portions.begin(), portions.end(), [&](const Portion &p) { return p.agent == n.agent; }))
            continue;
        if (!n.reachable)
            notOn << QStringLiteral("%1: unreachable (%2)").arg(label(n.agent), n.error);
        else if (policy == PlacementPolicy::Spread && n.freeSlots <= 0)
            notOn << QStringLiteral("%1: no free slot").arg(label(n.agent));
    }
    return where.join(QLatin1String(", "))
        + (notOn.isEmpty() ? QString() : QStringLiteral("; not on %1").arg(notOn.join(QLatin1String("; "))));
}

} // namespace

QList<NodeCapacity> StudyRunner::refreshCapacity(bool force)
{
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    if (!force && now - m_capacityAtMs < kCapacityRefreshMs && !m_capacity.isEmpty())
        return m_capacity;
    m_capacityAtMs = now;
    m_capacity.clear();
    QList<NodeInfo> newNodes;
    const QStringList &agents = m_state.agents();
    std::vector<AgentClient *> clients;
    for (const QString &agent : agents)
        clients.push_back(client(agent));
    // All at once: the runner's thread waits for the slowest agent, not for the sum of them.
    const std::vector<DescribeAnswer> answers = describeEach(clients, kDescribeTimeoutMs);
    for (qsizetype i = 0; i < agents.size(); ++i) {
        const QString &agent = agents[i];
        const v1::DescribeResponse &d = answers[std::size_t(i)].response;
        NodeCapacity n;
        n.agent = agent;
        n.reachable = answers[std::size_t(i)].status.ok();
        n.error = answers[std::size_t(i)].status.error();
        if (n.reachable) {
            n.host = str(d.hostname());
            n.cpuCores = d.cpu_cores();
            n.freeSlots = d.free_slots();
            if (d.has_storage())
                n.freeBytes = d.storage().free_bytes();
            n.gpus = d.gpus_size();
            for (const auto &dataset : d.datasets())
                n.datasets << str(dataset.name());
            const bool known = std::any_of(m_state.nodes().begin(), m_state.nodes().end(),
                [&](const NodeInfo &node) { return node.agent == agent; });
            if (!known && !m_nodesRecorded.count(agent)) {
                newNodes << nodeInfo(agent, d);
                m_nodesRecorded.insert(agent);
            }
        }
        m_capacity << n;
    }
    if (!newNodes.isEmpty())
        record(journal_events::nodesSeen(newNodes));
    return m_capacity;
}

// Where a pending run may go, in order of preference: the agent that holds its checkpoint
// first (rank 0's last time; a trial's rung checkpoint only there until the console has a
// copy), only agents with the room when its checkpoint did not fit. None: it waits.
std::optional<QList<NodeCapacity>> StudyRunner::candidateNodes(
    const RunProgress &run, const QList<NodeCapacity> &nodes)
{
    const QString &id = run.planned.runId;
    QString holder;
    int holderAttempt = 0;
    for (auto a = run.attempts.crbegin(); a != run.attempts.crend() && holder.isEmpty(); ++a)
        if (a->outcome == QLatin1String("SUCCEEDED") && !a->agents.isEmpty()) {
            holder = a->agents.first();
            holderAttempt = a->attempt;
        }
    const bool needsCopy = run.planned.trial && run.epochsDone() > run.checkpoint.epoch && !holder.isEmpty();
    bool copyPending = m_courier->pending(id);
    if (needsCopy && !copyPending && m_courier->gaveUpAt(id) < run.epochsDone()) {
        // Not asked for yet: a runner started again after the attempt ended.
        m_courier->queue(CopyRequest { id, holderAttempt, run.epochsDone(), holder });
        copyPending = m_courier->pending(id);
    }
    QList<NodeCapacity> ordered = nodes;
    if (run.spaceNeeded > 0) {
        // Its checkpoint did not fit: only agents known to have the room now (the free space
        // is refreshed with the capacity, every few seconds).
        ordered.removeIf(
            [&](const NodeCapacity &n) { return n.freeBytes >= 0 && n.freeBytes < run.spaceNeeded; });
        if (ordered.isEmpty())
            return std::nullopt;
    }
    const QString preferred = !holder.isEmpty() ? holder
        : run.portions.isEmpty()                ? QString()
                                                : run.portions.first().agent;
    if (!preferred.isEmpty())
        std::stable_partition(
            ordered.begin(), ordered.end(), [&](const NodeCapacity &n) { return n.agent == preferred; });
    if (needsCopy && copyPending) {
        ordered.removeIf([&](const NodeCapacity &n) { return n.agent != holder; });
        if (ordered.isEmpty())
            return std::nullopt;
    }
    return ordered;
}

void StudyRunner::placePending(QList<NodeCapacity> &nodes)
{
    // A scale-up study measures each run alone; a tune's trials share nodes (issue 18).
    const bool exclusive = !m_state.plan().share_nodes() && !m_state.isTune();
    int openTrials = 0;
    for (const auto &run : m_state.runs())
        openTrials += run.attemptOpen() ? 1 : 0;
    const int maxOpen = m_state.isTune() && m_state.scheduler().settings().maxConcurrent > 0
        ? m_state.scheduler().settings().maxConcurrent
        : std::numeric_limits<int>::max();
    const auto policy
        = m_state.plan().placement() == "spread" ? PlacementPolicy::Spread : PlacementPolicy::Pack;
    NodeUse use;
    for (const auto &run : m_state.runs())
        if (run.attemptOpen())
            use.hold(run.portions, run.planned.config.gpusPerWorker);
    use.mark(nodes);
    // The capacity is refreshed every few seconds: attempts placed since then, or just
    // before (their ranks may not have started when the agent answered), hold slots the
    // agents did not report yet; else runs sharing nodes oversubscribe them.
    for (const auto &run : m_state.runs())
        if (run.attemptOpen() && !run.attempts.isEmpty()
            && run.attempts.last().startedUnixMs >= m_capacityAtMs - kCapacityRefreshMs)
            for (const auto &p : run.portions)
                takeSlots(nodes, p);

    QStringList ids;
    for (const auto &run : m_state.runs())
        if (run.phase == RunPhase::Pending && !run.cancelRequested)
            ids << run.planned.runId;
    QStringList knownAgents; // they have answered a Describe before
    for (const NodeInfo &n : m_state.nodes())
        knownAgents << n.agent;
    // A trial that goes on (continued, promoted, retried) before one that never ran, as
    // ASHA's get_job prefers promotions to new trials.
    std::stable_partition(
        ids.begin(), ids.end(), [&](const QString &id) { return m_state.run(id)->attempt > 0; });
    for (const QString &id : ids) {
        if (m_crashed)
            return;
        if (openTrials >= maxOpen)
            return; // tune.maxConcurrentTrials
        const RunProgress run = *m_state.run(id);
        if (run.notBeforeMs > QDateTime::currentMSecsSinceEpoch())
            continue; // backing off after a failure
        const std::optional<QList<NodeCapacity>> ordered = candidateNodes(run, nodes);
        if (!ordered)
            continue; // its reason says what it waits for
        const RunConfig &config = run.planned.config;
        const Placement placement
            = placeAttempt(run, *ordered, policy, exclusive, str(m_state.plan().dataset()));
        // An attempt lost to an unreachable host waits for it, unless the run fits on as
        // many hosts without it: two ranks on one host is not the run that was asked for.
        // An elastic run was asked to go on without it.
        bool waitingForHost = false;
        if (!run.waitingFor.isEmpty() && !config.elastic())
            for (const auto &n : nodes)
                waitingForHost = waitingForHost || (run.waitingFor.contains(n.agent) && !n.reachable);
        if (waitingForHost && (!placement.ok() || placement.portions.size() < run.portions.size()))
            continue; // its reason says whom it waits for
        if (policy == PlacementPolicy::Spread && run.attempts.isEmpty() && !config.elastic()
            && waitsToSpread(run, spreadWaitsFor(placement, *ordered, config.workers, knownAgents)))
            continue;
        if (!placement.ok()) {
            if (placement.reason != run.reason && !run.reason.startsWith(QLatin1String("retrying")))
                record(journal_events::runPending(id, placement.reason));
            else if (run.reason.startsWith(QLatin1String("retrying")) && placement.infeasible)
                record(journal_events::runPending(id, placement.reason));
            continue;
        }
        QStringList lost;
        for (const QString &agent : run.waitingFor)
            lost << agentLabel(agent);
        const QString resize = config.elastic()
            ? resizeText(run, placement.portions, lost.join(QLatin1String(", ")))
            : QString();
        if (!record(journal_events::attemptStarting(id, run.attempt + 1, placement.portions, resize)))
            return;
        if (!resize.isEmpty())
            Q_EMIT message(QStringLiteral("%1 %2: %3").arg(id, config.key(), resize));
        ++openTrials;
        use.hold(placement.portions, run.planned.config.gpusPerWorker);
        const QString where = placedText(
            placement.portions, *ordered, policy, [this](const QString &a) { return agentLabel(a); });
        for (const auto &p : placement.portions)
            takeSlots(nodes, p);
        use.mark(nodes);
        Q_EMIT message(QStringLiteral("%1 %2: attempt %3 placed on %4")
                           .arg(id, run.planned.config.key())
                           .arg(run.attempt + 1)
                           .arg(where));
    }
}

bool StudyRunner::waitsToSpread(const RunProgress &run, const QStringList &waitFor)
{
    const QString &id = run.planned.runId;
    if (waitFor.isEmpty()) {
        m_spreadWaitSinceMs.erase(id);
        return false;
    }
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const qint64 since = m_spreadWaitSinceMs.try_emplace(id, now).first->second;
    if (now - since >= kSpreadWaitMs)
        return false; // placed without them: its placement line says why
    QStringList labels;
    for (const QString &agent : waitFor)
        labels << agentLabel(agent);
    const QString reason
        = QStringLiteral("waiting up to %1 s for %2, which did not answer in time, to spread "
                         "its ranks as planned")
              .arg(kSpreadWaitMs / 1000)
              .arg(labels.join(QLatin1String(", ")));
    if (run.reason != reason)
        record(journal_events::runPending(id, reason));
    return true;
}

} // namespace scalelab::core
