#include "study_runner.h"

#include "spec_rules.h"

#include "checkpoint_copy.h"
#include "run_record.h"
#include "run_watch.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QRandomGenerator>

#include <limits>

namespace scalelab::core {
namespace {

constexpr int kTickMs = 500;
constexpr qint64 kCapacityRefreshMs = 2000;
// Room an agent needs to record a run (request, placement, the start of its event log).
constexpr qint64 kRecordSpace = 1'000'000;
constexpr int kKeepCopies = 2; // checkpoint copies kept per run

QString str(const std::string &s)
{
    return QString::fromStdString(s);
}

// The terminal state an event reports for the ranks of one agent (its last event, the
// state change after the summary), or "". `diverged` is set when the summary says the
// loss diverged (a recipe failure: not retried).
QString terminalState(const v1::RunEvent &e, QString *message, bool *diverged = nullptr, qint64 *spaceNeeded = nullptr)
{
    // A rank whose checkpoint did not fit: the disk failed, not the run.
    if (spaceNeeded && e.has_rank_exited() && e.rank_exited().kind() == v1::EXIT_NO_SPACE)
        *spaceNeeded = std::max<qint64>({ *spaceNeeded, e.rank_exited().bytes_needed(), 1 });
    v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
    if (e.has_state()) {
        state = e.state().state();
        *message = str(e.state().message());
    } else if (e.has_summary()) {
        // Not the end yet: the agent's terminal state change follows its summary, and a
        // watch closed here would leave it out of the journal (and the run's log).
        if (diverged && e.summary().exit_kind() == v1::EXIT_DIVERGED)
            *diverged = true;
    }
    const bool terminal = state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
    return terminal ? RunRecord::stateName(state) : QString();
}

QString lockPath(const Journal &journal, const QString &studyId)
{
    return QFileInfo(journal.path()).absolutePath() + QStringLiteral("/%1.lock").arg(studyId);
}

} // namespace

StudyRunner::StudyRunner(Journal *journal, QObject *parent)
    : QObject(parent)
    , m_journal(journal)
    , m_timer(this) // a child: it moves with the runner to the runner's thread
{
    m_timer.setInterval(kTickMs);
    connect(&m_timer, &QTimer::timeout, this, &StudyRunner::tick);
}

StudyRunner::~StudyRunner()
{
    if (m_copyTransfer)
        m_copyTransfer->cancel();
    if (m_copyThread.joinable())
        m_copyThread.join();
    m_lrCancel = true; // the test's callback returns false: the agent stops its worker
    if (m_lrThread.joinable())
        m_lrThread.join();
    // Watches first: they hold pointers to the clients.
    m_watches.clear();
    m_clients.clear();
}

void StudyRunner::setAgents(const QList<AgentEndpoint> &agents)
{
    for (const auto &a : agents) {
        const auto known = m_agents.constFind(a.name);
        if (known != m_agents.constEnd() && known->address == a.address && known->token == a.token
            && known->tls == a.tls)
            continue; // unchanged: keep the client (and the streams that use it)
        m_agents.insert(a.name, a);
        // A stream may still use the old client: it is retired, not destroyed.
        if (auto it = m_clients.find(a.name); it != m_clients.end()) {
            m_retiredClients.push_back(std::move(it->second));
            m_clients.erase(it);
        }
    }
}

AgentClient *StudyRunner::client(const QString &agent)
{
    auto it = m_clients.find(agent);
    if (it != m_clients.end())
        return it->second.get();
    if (!m_agents.contains(agent))
        return nullptr;
    const AgentEndpoint &e = m_agents.value(agent);
    auto created = std::make_unique<AgentClient>(e.address, e.token, e.tls.orEnvironment());
    AgentClient *raw = created.get();
    m_clients.emplace(agent, std::move(created));
    return raw;
}

QString StudyRunner::checkpointRoot() const
{
    return QFileInfo(m_journal->path()).absolutePath() + QStringLiteral("/checkpoints");
}

Result<QString> StudyRunner::createStudy(const v1::StudyPlan &plan)
{
    if (const QStringList problems = validatePlan(plan); !problems.isEmpty())
        return Status::failure(QStringLiteral("the plan is not valid:\n  ") + problems.join(QLatin1String("\n  ")));
    if (m_agents.isEmpty())
        return Status::failure(QStringLiteral("no agent to run the study on: give at least one agent"));
    const QString studyId = newStudyId();
    const QList<PlannedRun> runs = expandPlan(plan, studyId);
    const QJsonObject payload = StudyState::studyCreated(str(plan.name()), plan, m_agents.keys(), runs);
    if (const auto recorded = m_journal->append(studyId, QStringLiteral("study_created"), payload); !recorded)
        return Status::failure(recorded.error());
    return studyId;
}

namespace {
Status knownStudy(const Journal &journal, const QString &studyId)
{
    if (journal.hasStudy(studyId))
        return Status::success();
    return Status::failure(
        QStringLiteral("no study %1 in %2 (see `scalelab-cli study list`)").arg(studyId, journal.path()));
}

Status appended(const Result<qint64> &id)
{
    return id ? Status::success() : Status::failure(id.error());
}
} // namespace

Status StudyRunner::requestCancel(Journal *journal, const QString &studyId, const QString &runId)
{
    if (Status known = knownStudy(*journal, studyId); !known)
        return known;
    QJsonObject payload;
    if (!runId.isEmpty())
        payload.insert(QStringLiteral("runId"), runId);
    return appended(journal->append(studyId, QStringLiteral("cancel_requested"), payload));
}

Status StudyRunner::requestRetry(
    Journal *journal, const QString &studyId, const QString &runId, const QStringList &addAgents)
{
    if (Status known = knownStudy(*journal, studyId); !known)
        return known;
    const StudyState state = StudyState::replay(journal->events(studyId));
    const RunProgress *run = state.run(runId);
    if (!run)
        return Status::failure(
            QStringLiteral("study %1 has no run %2 (see `scalelab-cli study show %1`)").arg(studyId, runId));
    if (run->phase != RunPhase::Failed && run->phase != RunPhase::Cancelled)
        return Status::failure(QStringLiteral("run %1 is %2: only a FAILED or CANCELLED run can be retried")
                                   .arg(runId, phaseName(run->phase)));
    QStringList added;
    for (const QString &agent : addAgents)
        if (!state.agents().contains(agent) && !added.contains(agent))
            added << agent;
    if (!added.isEmpty()) {
        if (Status recorded = appended(journal->append(studyId, QStringLiteral("agents_added"),
                QJsonObject { { QStringLiteral("agents"), QJsonArray::fromStringList(added) } }));
            !recorded)
            return recorded;
    }
    return appended(journal->append(
        studyId, QStringLiteral("retry_requested"), QJsonObject { { QStringLiteral("runId"), runId } }));
}

Status StudyRunner::requestContinue(Journal *journal, const QString &studyId, const QString &runId, int moreEpochs)
{
    if (Status known = knownStudy(*journal, studyId); !known)
        return known;
    const StudyState state = StudyState::replay(journal->events(studyId));
    if (!state.isTune())
        return Status::failure(QStringLiteral("study %1 is not a tune: only a tune's trials can be continued (a "
                                              "study's run is retried with `study retry`)")
                                   .arg(studyId));
    const RunProgress *run = state.run(runId);
    if (!run)
        return Status::failure(
            QStringLiteral("tune %1 has no trial %2 (see `scalelab-cli study show %1`)").arg(studyId, runId));
    if (run->phase != RunPhase::Succeeded && run->phase != RunPhase::Stopped && run->phase != RunPhase::Paused)
        return Status::failure(
            QStringLiteral("trial %1 is %2: only a finished, stopped or paused trial can be continued")
                .arg(runId, phaseName(run->phase)));
    if (run->decisionDue)
        return Status::failure(QStringLiteral("trial %1 has just reached epoch %2 and its scheduler is deciding; "
                                              "try again in a moment")
                                   .arg(runId)
                                   .arg(run->target));
    const int total = run->epochsDone() + moreEpochs;
    if (moreEpochs < 1 || total > rules::kMaxEpochs)
        return Status::failure(QStringLiteral("--epochs: give 1 to %1 more epochs (got %2)")
                                   .arg(rules::kMaxEpochs - run->epochsDone())
                                   .arg(moreEpochs));
    return appended(journal->append(studyId, QStringLiteral("trial_continued"),
        QJsonObject { { QStringLiteral("runId"), runId }, { QStringLiteral("epochs"), total } }));
}

Status StudyRunner::drive(const QString &studyId)
{
    if (Status known = knownStudy(*m_journal, studyId); !known)
        return known;
    m_lock = std::make_unique<QLockFile>(lockPath(*m_journal, studyId));
    m_lock->setStaleLockTime(0); // a lock whose process died is stale at once
    if (!m_lock->tryLock(100)) {
        qint64 pid = 0;
        QString host, app;
        m_lock->getLockInfo(&pid, &host, &app);
        m_lock.reset();
        return Status::failure(QStringLiteral("study %1 is already driven by %2 (pid %3 on %4); stop that "
                                              "process or watch the study from there")
                                   .arg(studyId, app)
                                   .arg(pid)
                                   .arg(host));
    }
    m_studyId = studyId;
    m_state = StudyState();
    syncJournal();
    for (const QString &agent : m_state.agents())
        if (!m_agents.contains(agent))
            m_agents.insert(agent, AgentEndpoint { agent, agent, {} });
    Q_EMIT message(QStringLiteral("study %1 (%2): %3 runs, %4")
                       .arg(studyId, m_state.name())
                       .arg(m_state.runs().size())
                       .arg(m_state.state()));
    m_timer.start();
    QTimer::singleShot(0, this, &StudyRunner::tick);
    return Status::success();
}

void StudyRunner::syncJournal()
{
    for (const auto &e : m_journal->events(m_studyId, m_state.lastEventId())) {
        m_state.apply(e);
        Q_EMIT stateChanged(e);
    }
}

bool StudyRunner::record(const QString &type, const QJsonObject &payload)
{
    if (m_crashed)
        return false;
    if (const auto recorded = m_journal->append(m_studyId, type, payload); !recorded) {
        // Acting on a change the journal did not keep would break replay: stop here.
        m_timer.stop();
        Q_EMIT fatal(recorded.error());
        return false;
    }
    if (m_crashAfter > 0 && ++m_recorded >= m_crashAfter) {
        m_crashed = true;
        m_timer.stop();
        m_watches.clear();
        m_lock.reset();
        QTimer::singleShot(0, this, &StudyRunner::crashed);
        return false;
    }
    syncJournal();
    return true;
}

QList<NodeCapacity> StudyRunner::refreshCapacity(bool force)
{
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    if (!force && now - m_capacityAtMs < kCapacityRefreshMs && !m_capacity.isEmpty())
        return m_capacity;
    m_capacityAtMs = now;
    m_capacity.clear();
    QJsonArray newNodes;
    for (const QString &agent : m_state.agents()) {
        NodeCapacity n;
        n.agent = agent;
        v1::DescribeResponse d;
        AgentClient *c = client(agent);
        const CallResult result
            = c ? c->describe(&d, 3000) : CallResult { 5, QStringLiteral("unknown agent") };
        n.reachable = result.ok();
        n.error = result.message;
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
                QJsonArray gpus;
                for (const auto &g : d.gpus())
                    gpus.append(QStringLiteral("%1: %2 (%3 GiB)")
                                    .arg(g.index())
                                    .arg(str(g.name()))
                                    .arg(double(g.memory_bytes()) / (1 << 30), 0, 'f', 0));
                QJsonObject software;
                for (const auto &[component, version] : d.software())
                    if (component != "os")
                        software.insert(str(component), str(version));
                newNodes.append(
                    QJsonObject { { QStringLiteral("agent"), agent }, { QStringLiteral("hostname"), n.host },
                        { QStringLiteral("agentVersion"), str(d.agent_version()) },
                        { QStringLiteral("cpuCores"), n.cpuCores },
                        { QStringLiteral("memoryBytes"), double(d.memory_bytes()) },
                        { QStringLiteral("gpus"), gpus }, { QStringLiteral("cpuModel"), str(d.cpu_model()) },
                        { QStringLiteral("os"), str(d.software().count("os") ? d.software().at("os") : "") },
                        { QStringLiteral("gpuStatus"), str(d.gpu_status()) }, { QStringLiteral("software"), software } });
                m_nodesRecorded.insert(agent);
            }
        }
        m_capacity << n;
    }
    if (!newNodes.isEmpty())
        record(QStringLiteral("nodes_seen"), QJsonObject { { QStringLiteral("nodes"), newNodes } });
    return m_capacity;
}

void StudyRunner::tick()
{
    if (m_busy || m_finished || m_crashed)
        return;
    m_busy = true;
    syncJournal(); // requests from other processes (cancel)

    if (m_state.isTune())
        decideTrials();
    if (m_crashed) {
        m_busy = false;
        return;
    }
    if (m_state.isTune() && m_state.scheduler().settings().promotion())
        promoteTrials();
    if (m_crashed) {
        m_busy = false;
        return;
    }

    bool anyPending = false, freshRetry = false;
    for (const auto &run : m_state.runs()) {
        const bool pending = run.phase == RunPhase::Pending && !run.cancelRequested;
        anyPending = anyPending || pending;
        // A retry is placed on capacity asked for after its failure: an agent that died
        // with it is then seen as unreachable, so it lands elsewhere.
        freshRetry = freshRetry
            || (pending && !run.attempts.isEmpty() && run.attempts.last().endedUnixMs >= m_capacityAtMs);
    }
    if (anyPending) {
        QList<NodeCapacity> nodes = refreshCapacity(freshRetry);
        if (m_state.waitsForLearningRate())
            searchLearningRate(nodes); // runs wait for its choice
        else
            placePending(nodes);
    }
    // Snapshot of ids: record() below changes m_state.runs().
    QStringList ids;
    for (const auto &run : m_state.runs())
        ids << run.planned.runId;
    for (const QString &id : ids) {
        if (m_crashed)
            break;
        const RunProgress *run = m_state.run(id);
        if (run->phase == RunPhase::Starting)
            startAttempt(*run);
        run = m_state.run(id);
        if (run->phase == RunPhase::Running)
            followAttempt(*run);
    }
    if (!m_crashed)
        finishIfDone();
    m_busy = false;
}

void StudyRunner::searchLearningRate(const QList<NodeCapacity> &nodes)
{
    if (m_lrSearching || m_crashed || m_finished || QDateTime::currentMSecsSinceEpoch() < m_lrNotBefore)
        return;
    const QString dataset = QString::fromStdString(m_state.plan().dataset());
    const NodeCapacity *node = nullptr;
    for (const NodeCapacity &n : nodes)
        if (n.reachable && n.freeSlots > 0 && n.datasets.contains(dataset) && client(n.agent)) {
            node = &n;
            break;
        }
    if (!node) {
        m_lrNotBefore = QDateTime::currentMSecsSinceEpoch() + 10'000; // say it every 10 s, not every tick
        Q_EMIT message(QStringLiteral("learning rate \"auto\": waiting for an agent with data set %1 and a free "
                                      "slot to run the range test")
                           .arg(dataset));
        return;
    }
    // At the baseline's global batch (the first run of the plan, the baseline unless skipped).
    const QList<PlannedRun> planned = expandPlan(m_state.plan(), m_state.studyId());
    const RunConfig first = planned.isEmpty() ? RunConfig {} : planned.first().config;
    const int batch = std::max(1, first.batchSize * std::max(1, first.workers));
    v1::FindLearningRateRequest request;
    *request.mutable_spec() = runSpecFor(m_state.plan(), first);
    request.mutable_spec()->set_batch_size(batch);
    request.mutable_spec()->set_gpus_per_worker(0);
    request.mutable_spec()->set_threads_per_worker(0);
    const AgentEndpoint &endpoint = m_agents[node->agent];
    const QString agent = node->agent;
    m_lrSearching = true;
    m_lrCancel = false;
    Q_EMIT message(QStringLiteral("learning rate \"auto\": range test on %1 at batch %2 (about 200 steps)")
                       .arg(agentLabel(agent))
                       .arg(batch));
    if (m_lrThread.joinable())
        m_lrThread.join();
    m_lrThread = std::thread([this, request, endpoint, agent, batch] {
        AgentClient c(endpoint.address, endpoint.token, endpoint.tls.orEnvironment());
        QList<QPair<double, double>> points;
        v1::LrFindResult found;
        const CallResult result = c.findLearningRate(
            request,
            [&](const v1::LrFindProgress &progress) {
                for (const auto &p : progress.points())
                    points.append({ p.learning_rate(), p.smoothed_loss() });
                return !m_lrCancel.load();
            },
            &found);
        QMetaObject::invokeMethod(
            this, [this, agent, batch, result, found, points] { learningRateSearched(agent, batch, result, found, points); },
            Qt::QueuedConnection);
    });
}

void StudyRunner::learningRateSearched(const QString &agent, int batch, const CallResult &result,
    const v1::LrFindResult &found, const QList<QPair<double, double>> &points)
{
    if (m_lrThread.joinable())
        m_lrThread.join();
    m_lrSearching = false;
    if (m_crashed || m_finished)
        return;
    constexpr int kMaxFailures = 3;
    if (!result.ok() || !(found.suggested_learning_rate() > 0)) {
        const QString reason = result.ok() ? QStringLiteral("no usable suggestion") : result.message;
        const bool final = m_state.learningRateSearch().failures + 1 >= kMaxFailures;
        record(QStringLiteral("lr_find_failed"),
            QJsonObject { { QStringLiteral("reason"), reason }, { QStringLiteral("agent"), agent },
                { QStringLiteral("final"), final } });
        m_lrNotBefore = QDateTime::currentMSecsSinceEpoch() + 10'000;
        Q_EMIT message(QStringLiteral("learning rate \"auto\": the range test on %1 failed (%2)%3")
                           .arg(agentLabel(agent), reason,
                               final ? QStringLiteral("; the runs fail with it") : QStringLiteral("; trying again in 10 s")));
        return;
    }
    // Up to 200 points keep the curve for reports without swelling the journal.
    QJsonArray curve;
    const int stride = std::max(1, int(points.size()) / 200);
    for (int i = 0; i < points.size(); i += stride)
        curve.append(QJsonArray { points[i].first, std::isfinite(points[i].second) ? points[i].second : 0.0 });
    // An inconclusive test (the loss never clearly fell) says nothing: the default stays.
    const double lr = found.conclusive() ? found.suggested_learning_rate() : rules::kDefaultLearningRate;
    const QString rule = found.conclusive()
        ? QString::fromStdString(found.rule())
        : QStringLiteral("inconclusive, so the default %1 is used: %2")
              .arg(rules::kDefaultLearningRate)
              .arg(QString::fromStdString(found.note()));
    if (!record(QStringLiteral("lr_found"),
            QJsonObject { { QStringLiteral("learningRate"), lr }, { QStringLiteral("batch"), batch },
                { QStringLiteral("agent"), agent }, { QStringLiteral("minLossLr"), found.min_loss_learning_rate() },
                { QStringLiteral("steepestLr"), found.steepest_learning_rate() }, { QStringLiteral("steps"), found.steps() },
                { QStringLiteral("stoppedEarly"), found.stopped_early() },
                { QStringLiteral("rule"), rule }, { QStringLiteral("conclusive"), found.conclusive() },
                { QStringLiteral("points"), curve } }))
        return;
    Q_EMIT message(QStringLiteral("learning rate \"auto\": %1 at batch %2 (%3), from the range test on %4")
                       .arg(QString::number(lr, 'g', 4))
                       .arg(batch)
                       .arg(rule, agentLabel(agent)));
    QTimer::singleShot(0, this, &StudyRunner::tick);
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
    // Hosts that run an open attempt of this study.
    QSet<QString> busyAgents;
    QMap<QString, double> gpusInUse;
    for (const auto &run : m_state.runs())
        if (run.attemptOpen())
            for (const auto &p : run.portions) {
                busyAgents.insert(p.agent);
                gpusInUse[p.agent] += run.planned.config.gpusPerWorker * p.ranks.size();
            }
    auto markBusy = [&]() {
        QSet<QString> busyHosts;
        for (const auto &n : nodes)
            if (busyAgents.contains(n.agent) && !n.host.isEmpty())
                busyHosts.insert(n.host);
        for (auto &n : nodes) {
            n.busy = busyAgents.contains(n.agent) || busyHosts.contains(n.host);
            n.gpusInUse = gpusInUse.value(n.agent);
        }
    };
    markBusy();
    // The capacity is refreshed every few seconds: attempts placed since then, or just
    // before (their ranks may not have started when the agent answered), hold slots the
    // agents did not report yet; else runs sharing nodes oversubscribe them.
    for (const auto &run : m_state.runs())
        if (run.attemptOpen() && !run.attempts.isEmpty()
            && run.attempts.last().startedUnixMs >= m_capacityAtMs - kCapacityRefreshMs)
            for (const auto &p : run.portions)
                for (auto &n : nodes)
                    if (n.agent == p.agent)
                        n.freeSlots -= int(p.ranks.size());

    QStringList ids;
    for (const auto &run : m_state.runs())
        if (run.phase == RunPhase::Pending && !run.cancelRequested)
            ids << run.planned.runId;
    // A trial that goes on (continued, promoted, retried) before one that never ran, as
    // ASHA's get_job prefers promotions to new trials.
    std::stable_partition(ids.begin(), ids.end(), [&](const QString &id) { return m_state.run(id)->attempt > 0; });
    for (const QString &id : ids) {
        if (m_crashed)
            return;
        if (openTrials >= maxOpen)
            return; // tune.maxConcurrentTrials
        const RunProgress run = *m_state.run(id);
        if (run.notBeforeMs > QDateTime::currentMSecsSinceEpoch())
            continue; // backing off after a failure
        // A trial resumes from the checkpoint of its last rung, which rank 0's agent of its
        // last successful attempt holds: until the console has a copy (on its way), only
        // that agent can take it.
        QString holder;
        int holderAttempt = 0;
        for (auto a = run.attempts.crbegin(); a != run.attempts.crend() && holder.isEmpty(); ++a)
            if (a->outcome == QLatin1String("SUCCEEDED") && !a->agents.isEmpty()) {
                holder = a->agents.first();
                holderAttempt = a->attempt;
            }
        const bool needsCopy = run.planned.trial && run.epochsDone() > run.checkpoint.epoch && !holder.isEmpty();
        bool copyPending = m_copyQueue.count(id) > 0 || (m_copying && m_copying->runId == id);
        if (needsCopy && !copyPending && m_copyFailed.value(id) < run.epochsDone()) {
            // Not asked for yet: a runner started again after the attempt ended.
            queueCopy(CopyRequest { id, holderAttempt, run.epochsDone(), holder });
            copyPending = m_copyQueue.count(id) > 0 || (m_copying && m_copying->runId == id);
        }
        // A retry prefers the agent that holds its checkpoints (rank 0's last time).
        QList<NodeCapacity> ordered = nodes;
        if (run.spaceNeeded > 0) {
            // Its checkpoint did not fit: only agents known to have the room now (the
            // free space is refreshed with the capacity, every few seconds).
            ordered.removeIf([&](const NodeCapacity &n) { return n.freeBytes >= 0 && n.freeBytes < run.spaceNeeded; });
            if (ordered.isEmpty())
                continue; // its reason says what it waits for
        }
        const QString preferred = !holder.isEmpty() ? holder : run.portions.isEmpty() ? QString() : run.portions.first().agent;
        if (!preferred.isEmpty())
            std::stable_partition(
                ordered.begin(), ordered.end(), [&](const NodeCapacity &n) { return n.agent == preferred; });
        if (needsCopy && copyPending) {
            ordered.removeIf([&](const NodeCapacity &n) { return n.agent != holder; });
            if (ordered.isEmpty())
                continue;
        }
        const Placement placement
            = placeRun(run.planned.config, ordered, policy, exclusive, str(m_state.plan().dataset()));
        // An attempt lost to an unreachable host waits for it, unless the run fits on as
        // many hosts without it: two ranks on one host is not the run that was asked for.
        bool waitingForHost = false;
        if (!run.waitingFor.isEmpty())
            for (const auto &n : nodes)
                waitingForHost = waitingForHost || (run.waitingFor.contains(n.agent) && !n.reachable);
        if (waitingForHost && (!placement.ok() || placement.portions.size() < run.portions.size()))
            continue; // its reason says whom it waits for
        if (!placement.ok()) {
            if (placement.reason != run.reason && !run.reason.startsWith(QLatin1String("retrying")))
                record(QStringLiteral("run_pending"),
                    QJsonObject {
                        { QStringLiteral("runId"), id }, { QStringLiteral("reason"), placement.reason } });
            else if (run.reason.startsWith(QLatin1String("retrying")) && placement.infeasible)
                record(QStringLiteral("run_pending"),
                    QJsonObject {
                        { QStringLiteral("runId"), id }, { QStringLiteral("reason"), placement.reason } });
            continue;
        }
        if (!record(QStringLiteral("attempt_starting"),
                StudyState::attemptStarting(id, run.attempt + 1, placement.portions)))
            return;
        ++openTrials;
        QStringList where;
        for (const auto &p : placement.portions) {
            busyAgents.insert(p.agent);
            gpusInUse[p.agent] += run.planned.config.gpusPerWorker * p.ranks.size();
            for (auto &n : nodes)
                if (n.agent == p.agent)
                    n.freeSlots -= int(p.ranks.size());
            where << QStringLiteral("%1 (%2 rank%3)")
                         .arg(p.agent)
                         .arg(p.ranks.size())
                         .arg(p.ranks.size() == 1 ? "" : "s");
        }
        markBusy();
        Q_EMIT message(QStringLiteral("%1 %2: attempt %3 placed on %4")
                           .arg(id, run.planned.config.key())
                           .arg(run.attempt + 1)
                           .arg(where.join(QLatin1String(", "))));
    }
}

void StudyRunner::startAttempt(const RunProgress &run)
{
    v1::RunSpec spec = runSpecFor(m_state.plan(), run.planned, m_state.learningRateSearch().found);
    if (run.planned.trial && run.target > 0 && run.target < run.planned.config.epochs)
        spec.set_stop_after_epochs(run.target); // a tune's rung: the scheduler decides what follows
    v1::Endpoint rendezvous;
    auto fail = [&](const QString &reason, bool retryable, const QString &unreachableAgent = {}) {
        for (const auto &p : run.portions) // ranks already started must not linger
            if (AgentClient *c = client(p.agent)) {
                v1::StopRunResponse ignored;
                (void)c->stopRun(run.planned.runId, &ignored); // best effort: an agent not reached ends them itself
            }
        endFailedAttempt(run, reason, unreachableAgent.isEmpty() ? QStringList {} : QStringList { unreachableAgent },
            unreachableAgent.isEmpty() ? 0 : QDateTime::currentMSecsSinceEpoch(), retryable);
        Q_EMIT message(QStringLiteral("%1: attempt %2 could not start: %3")
                           .arg(run.planned.runId)
                           .arg(run.attempt)
                           .arg(reason));
    };
    QString failure;
    bool retryable = true;
    if (!transferCheckpoint(run, &failure, &retryable)) {
        if (!failure.isEmpty())
            fail(failure, retryable);
        return;
    }
    for (const auto &p : run.portions) {
        AgentClient *c = client(p.agent);
        if (!c)
            return fail(QStringLiteral("agent %1 is not configured in this console").arg(p.agent), true);
        v1::StartWorkersRequest request;
        request.set_run_id(run.planned.runId.toStdString());
        request.set_attempt(run.attempt);
        request.set_world_size(run.planned.config.workers);
        for (int rank : p.ranks)
            request.add_ranks(rank);
        *request.mutable_spec() = spec;
        if (!rendezvous.host().empty())
            *request.mutable_rendezvous() = rendezvous;
        v1::StartWorkersResponse response;
        const CallResult result = c->startWorkers(request, &response);
        if (!result.ok() && result.code == int(grpc::StatusCode::FAILED_PRECONDITION)
            && result.message.contains(QLatin1String("is still running"))) {
            // An earlier attempt lingers there (its host was cut off, say): stop it and
            // try again on the next tick; StartWorkers is idempotent for the portions sent.
            v1::StopRunResponse ignored;
            (void)c->stopRun(run.planned.runId, &ignored); // asked again on the next tick
            Q_EMIT message(QStringLiteral("%1: attempt %2 waits for %3 to stop an earlier attempt")
                               .arg(run.planned.runId)
                               .arg(run.attempt)
                               .arg(agentLabel(p.agent)));
            return;
        }
        if (!result.ok() && result.code == int(grpc::StatusCode::RESOURCE_EXHAUSTED)
            && result.message.contains(QLatin1String("no space left on device"))) {
            // The agent could not even record the run: wait for space there, not counted.
            for (const auto &q : run.portions) // ranks already started must not linger
                if (AgentClient *other = client(q.agent)) {
                    v1::StopRunResponse ignored;
                    (void)other->stopRun(run.planned.runId, &ignored); // best effort, as above
                }
            endFailedAttempt(run, QStringLiteral("%1: %2").arg(agentLabel(p.agent), result.message), {}, 0, true,
                p.agent, kRecordSpace);
            return;
        }
        if (!result.ok()) {
            // Bad input stays bad; an unreachable or busy agent may do better next time,
            // and an unreachable one is waited for, not counted.
            return fail(QStringLiteral("%1: %2").arg(agentLabel(p.agent), result.message),
                result.code != int(grpc::StatusCode::INVALID_ARGUMENT),
                result.unreachable() ? p.agent : QString());
        }
        if (rendezvous.host().empty()) // an agent asked again (already running) reports it in `run`
            rendezvous = !response.rendezvous().host().empty() ? response.rendezvous() : response.run().rendezvous();
    }
    record(QStringLiteral("attempt_running"),
        QJsonObject { { QStringLiteral("runId"), run.planned.runId },
            { QStringLiteral("attempt"), run.attempt },
            { QStringLiteral("rendezvous"),
                QStringLiteral("%1:%2").arg(str(rendezvous.host())).arg(rendezvous.port()) } });
}

void StudyRunner::followAttempt(const RunProgress &run)
{
    const QString id = run.planned.runId;
    auto &watches = m_watches[id];
    if (!watches.empty() && watches.front().attempt != run.attempt)
        watches.clear();
    if (watches.empty()) {
        for (int i = 0; i < run.portions.size(); ++i) {
            PortionWatch w;
            w.agent = run.portions[i].agent;
            w.attempt = run.attempt;
            AgentClient *c = client(w.agent);
            if (!c) {
                w.outcome = QStringLiteral("FAILED");
                w.message = QStringLiteral("agent %1 is not configured in this console").arg(w.agent);
            } else {
                // Events already stored are not asked for again, and the stored ones
                // may already say the portion ended (a runner restarted after the end),
                // or name a checkpoint that was not copied yet.
                int checkpointEpoch = 0;
                for (const auto &e : m_journal->runEvents(id, run.attempt, w.agent)) {
                    if (QString m, s = terminalState(e, &m, &w.diverged, &w.spaceNeeded); !s.isEmpty()) {
                        w.outcome = s;
                        w.message = m;
                    }
                    if (e.has_checkpoint())
                        checkpointEpoch = std::max(checkpointEpoch, e.checkpoint().epoch());
                }
                if (i == 0 && w.outcome.isEmpty() && copyWorthwhile(run, checkpointEpoch))
                    queueCopy(CopyRequest { id, run.attempt, checkpointEpoch, w.agent });
                if (w.outcome.isEmpty()) {
                    w.watch = std::make_unique<RunWatch>(c, id);
                    w.watch->setGiveUpAfterMs(0); // the runner decides when an agent is lost
                    connect(
                        w.watch.get(), &RunWatch::eventsArrived, this, [this, id, i] { onEvents(id, i); });
                    connect(w.watch.get(), &RunWatch::unreachable, this,
                        [this, id, i](const QString &error, qint64 since) {
                            auto &ws = m_watches[id];
                            if (i >= int(ws.size()))
                                return;
                            ws[i].unreachableSinceMs = since;
                            ws[i].unreachableError = error;
                            Q_EMIT message(QStringLiteral("%1: %2 unreachable since %3: %4")
                                               .arg(id, agentLabel(ws[i].agent), clockTime(since), error));
                            QTimer::singleShot(0, this, &StudyRunner::tick);
                        });
                    connect(w.watch.get(), &RunWatch::reachable, this, [this, id, i] {
                        auto &ws = m_watches[id];
                        if (i >= int(ws.size()) || ws[i].unreachableSinceMs == 0)
                            return;
                        Q_EMIT message(QStringLiteral("%1: %2 answers again (unreachable for %3 s)")
                                           .arg(id, agentLabel(ws[i].agent))
                                           .arg((QDateTime::currentMSecsSinceEpoch() - ws[i].unreachableSinceMs) / 1000));
                        ws[i].unreachableSinceMs = 0;
                        ws[i].unreachableError.clear();
                    });
                    connect(w.watch.get(), &RunWatch::finished, this, [this, id, i](const QString &error) {
                        onEvents(id, i);
                        auto &ws = m_watches[id];
                        if (i < int(ws.size()) && ws[i].outcome.isEmpty()) {
                            ws[i].outcome = QStringLiteral("FAILED");
                            ws[i].message = error.isEmpty()
                                ? QStringLiteral("the event stream of agent %1 ended without a final state")
                                      .arg(ws[i].agent)
                                : QStringLiteral("lost agent %1: %2").arg(ws[i].agent, error);
                        }
                        QTimer::singleShot(0, this, &StudyRunner::tick);
                    });
                    w.watch->start(m_journal->lastRunEventSeq(id, run.attempt, w.agent) + 1);
                }
            }
            watches.push_back(std::move(w));
        }
    }

    const bool cancelling = run.cancelRequested || m_state.cancelRequested();
    // The rules are in attempt_outcome.h; the runner supplies the clock and does the I/O.
    std::vector<PortionState *> portions;
    for (auto &w : watches)
        portions.push_back(&w);
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const int collectiveSeconds = m_state.plan().training().collective_timeout_seconds() > 0
        ? m_state.plan().training().collective_timeout_seconds()
        : 120;
    markLostPortions(portions, now, collectiveSeconds, cancelling, RunWatch::kUnreachableMs,
        [this](const QString &agent) { return agentLabel(agent); }, clockTime);
    // A failed portion or a cancel stops every other portion of the attempt.
    if (anyPortionFailed(portions) || cancelling)
        for (auto &w : watches)
            if (w.outcome.isEmpty() && !w.stopSent)
                if (AgentClient *c = client(w.agent)) {
                    v1::StopRunResponse ignored;
                    const CallResult result = c->stopRun(id, &ignored);
                    w.stopSent = true;
                    if (!result.ok() && result.code == int(grpc::StatusCode::NOT_FOUND)) {
                        w.outcome = QStringLiteral("CANCELLED");
                        w.message = result.message;
                    } else if (!result.ok() && result.unreachable()) {
                        // Its ranks have lost their peers: nothing there to wait for.
                        w.outcome = QStringLiteral("LOST");
                        w.unreachableSinceMs = w.unreachableSinceMs ? w.unreachableSinceMs : now;
                        w.message = QStringLiteral("%1 unreachable since %2 (%3)")
                                        .arg(agentLabel(w.agent), clockTime(w.unreachableSinceMs), result.message);
                    }
                }
    if (!allPortionsEnded(portions)) {
        // A stall goes on: say so every 10 s, with what can and cannot be reached.
        if (run.stalledSinceMs > 0 && now - m_stallMessageMs[id] >= 10'000) {
            m_stallMessageMs[id] = now;
            RunProgress current = run;
            const QString who = unreachableRanks(id, false);
            if (!who.isEmpty())
                current.stallDetail = who;
            Q_EMIT message(QStringLiteral("%1: %2").arg(id, stallText(current, now)));
        }
        return;
    }
    const AttemptOutcome ended = attemptOutcome(portions, cancelling);
    const QString &outcome = ended.outcome;
    const QString &reason = ended.reason;
    m_watches.erase(id);
    m_stallMessageMs.erase(id);
    if (outcome == QLatin1String("FAILED")) {
        // A diverged run would diverge again from its checkpoint: the recipe failed, not a
        // machine. It ends FAILED now; `study retry` after a change of recipe is the way on.
        endFailedAttempt(run, ended.failure, ended.lostAgents, ended.lostSinceMs, ended.retry, ended.spaceShortOn,
            ended.spaceNeeded);
    } else {
        record(QStringLiteral("attempt_ended"),
            QJsonObject { { QStringLiteral("runId"), id }, { QStringLiteral("attempt"), run.attempt },
                { QStringLiteral("outcome"), outcome }, { QStringLiteral("reason"), reason },
                { QStringLiteral("retry"), false } });
        afterAttemptEnded(id);
    }
    const RunProgress *after = m_state.run(id);
    if (outcome == QLatin1String("FAILED") || !after)
        return; // endFailedAttempt said it
    Q_EMIT message(QStringLiteral("%1: attempt %2 %3%4 — run %5")
                       .arg(id)
                       .arg(run.attempt)
                       .arg(outcome)
                       .arg(reason.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(reason))
                       .arg(phaseName(after->phase)));
}

void StudyRunner::onEvents(const QString &runId, int portion)
{
    auto it = m_watches.find(runId);
    if (m_crashed || it == m_watches.end() || portion >= int(it->second.size()) || !it->second[portion].watch)
        return;
    PortionWatch &w = it->second[portion];
    std::vector<v1::RunEvent> events = w.watch->takeEvents();
    if (events.empty())
        return;
    if (const Status stored = m_journal->appendRunEvents(m_studyId, runId, w.attempt, w.agent, events); !stored) {
        m_timer.stop();
        Q_EMIT fatal(stored.error());
        return;
    }
    // Rank 0's agent (the first portion's) reports the checkpoints. The last one of a
    // run is not copied: nothing is left to resume after it.
    const RunProgress *run = m_state.run(runId);
    for (const auto &e : events)
        if (portion == 0 && run && e.has_checkpoint() && copyWorthwhile(*run, e.checkpoint().epoch()))
            queueCopy(CopyRequest { runId, w.attempt, e.checkpoint().epoch(), w.agent });
    for (const auto &e : events)
        if (portion == 0 && e.has_stall())
            onStall(runId, portion, e.stall());
    if (m_crashed || m_watches.find(runId) == m_watches.end())
        return;
    bool ended = false;
    for (const auto &e : events)
        if (QString m, s = terminalState(e, &m, &w.diverged, &w.spaceNeeded); !s.isEmpty()) {
            // A summary may follow the state change; keep the first words of failure.
            if (w.outcome.isEmpty() || w.message.isEmpty())
                w.message = m;
            w.outcome = s;
            ended = true;
        }
    const int attempt = w.attempt;
    Q_EMIT runEvents(runId, attempt, events);
    if (ended)
        QTimer::singleShot(0, this, &StudyRunner::tick);
}

std::pair<int, double> StudyRunner::trialResult(const RunProgress &run) const
{
    const QString metric = m_state.scheduler().settings().metric;
    int epoch = 0;
    double value = std::numeric_limits<double>::quiet_NaN();
    // The newest epoch any attempt reported (rank 0's agent reports epochs); a later
    // attempt's report of the same epoch wins.
    for (const AttemptRecord &a : run.attempts) {
        if (a.agents.isEmpty())
            continue;
        for (const auto &e : m_journal->runEvents(run.planned.runId, a.attempt, a.agents.first()))
            if (e.has_epoch() && e.epoch().epoch() >= epoch) {
                epoch = e.epoch().epoch();
                value = epochMetric(metric, e.epoch().test_accuracy(), e.epoch().test_loss(), e.epoch().train_loss());
            }
    }
    return { epoch, value };
}

void StudyRunner::decideTrials()
{
    // In the order their attempts ended, so a runner started again decides as the one
    // that stopped would have.
    QList<const RunProgress *> due;
    for (const auto &run : m_state.runs())
        if (run.decisionDue && run.phase == RunPhase::Paused && !run.cancelRequested)
            due << &run;
    std::sort(due.begin(), due.end(),
        [](const RunProgress *a, const RunProgress *b) { return a->dueSinceEventId < b->dueSinceEventId; });
    QStringList ids;
    for (const RunProgress *run : due)
        ids << run->planned.runId;
    for (const QString &id : ids) {
        const RunProgress *run = m_state.run(id);
        auto [epoch, value] = trialResult(*run);
        if (epoch != run->target) {
            // Its attempt succeeded without reporting the epoch it stopped at: judged there
            // with no value (NaN neither stops a trial nor counts in a cutoff, and is never
            // promoted), so it cannot loop back to the same target.
            Q_EMIT message(QStringLiteral("%1: no result was reported for epoch %2 (the newest is epoch %3); judged "
                                          "without a value")
                               .arg(id)
                               .arg(run->target)
                               .arg(epoch));
            epoch = run->target;
            value = std::numeric_limits<double>::quiet_NaN();
        }
        const TrialDecision decision = m_state.scheduler().decide(id, epoch, value, run->continuedTo);
        if (!record(QStringLiteral("trial_decision"), decision.toJson()))
            return;
        Q_EMIT message(QStringLiteral("%1: %2").arg(id, decision.reason));
    }
}

void StudyRunner::promoteTrials()
{
    if (m_state.cancelRequested())
        return;
    const int workers = std::max(1, m_state.scheduler().settings().workers);
    int open = 0, queued = 0, fresh = 0;
    bool due = false;
    for (const auto &run : m_state.runs()) {
        open += run.attemptOpen() ? 1 : 0;
        queued += run.phase == RunPhase::Pending && run.attempt > 0 ? 1 : 0;
        fresh += run.phase == RunPhase::Pending && run.attempt == 0 ? 1 : 0;
        due = due || run.decisionDue;
    }
    if (due)
        return; // decided first
    // Algorithm 2 promotes when a worker asks for a job: when a trial fits now.
    const int maxConcurrent = m_state.scheduler().settings().maxConcurrent;
    int slots = maxConcurrent > 0 ? maxConcurrent - open - queued : std::numeric_limits<int>::max();
    int freeSlots = 0; // a data-parallel trial may span agents
    for (const auto &n : refreshCapacity(false))
        if (n.reachable)
            freeSlots += std::max(0, n.freeSlots);
    const int fits = freeSlots / workers;
    slots = std::min(slots, fits - queued);
    while (slots-- > 0) {
        const auto promotion = m_state.scheduler().nextPromotion();
        if (!promotion)
            break;
        if (!record(QStringLiteral("trial_decision"), promotion->toJson()))
            return;
        Q_EMIT message(QStringLiteral("%1: %2").arg(promotion->runId, promotion->reason));
    }
    // Nothing runs, nothing waits and nothing can be promoted: the paused trials stay
    // where they are, stopped at their rung.
    if (open > 0 || queued > 0 || fresh > 0 || m_state.scheduler().nextPromotion())
        return;
    QStringList paused;
    for (const auto &run : m_state.runs())
        if (run.phase == RunPhase::Paused)
            paused << run.planned.runId;
    for (const QString &id : paused) {
        const RunProgress *run = m_state.run(id);
        const TrialDecision last = run->decisions.isEmpty() ? TrialDecision {} : run->decisions.last();
        const TrialDecision decision = m_state.scheduler().closeOut(id, last.epoch, last.value);
        if (!record(QStringLiteral("trial_decision"), decision.toJson()))
            return;
        Q_EMIT message(QStringLiteral("%1: %2").arg(id, decision.reason));
    }
}

void StudyRunner::finishIfDone()
{
    if (m_state.runs().isEmpty() || !m_state.allRunsTerminal())
        return;
    if (!m_state.ended()
        && !record(
            QStringLiteral("study_ended"), QJsonObject { { QStringLiteral("state"), m_state.state() } }))
        return;
    m_finished = true;
    m_timer.stop();
    Q_EMIT finished(m_state.state());
}

void StudyRunner::queueCopy(const CopyRequest &job)
{
    const auto queued = m_copyQueue.find(job.runId);
    if (!wantCopy(m_state.run(job.runId), job, m_copying, queued == m_copyQueue.end() ? nullptr : &queued->second,
            m_copyFailed.value(job.runId)))
        return;
    m_copyQueue[job.runId] = job;
    startNextCopy();
}

void StudyRunner::startNextCopy()
{
    if (m_copying || m_copyQueue.empty() || m_crashed || m_finished)
        return;
    const CopyRequest job = m_copyQueue.begin()->second;
    m_copyQueue.erase(m_copyQueue.begin());
    if (!m_agents.contains(job.agent))
        return startNextCopy();
    if (m_copyThread.joinable())
        m_copyThread.join();
    // A channel of its own: the runner's clients may be replaced (setAgents) meanwhile.
    const AgentEndpoint &endpoint = m_agents[job.agent];
    m_copyClient = std::make_unique<AgentClient>(endpoint.address, endpoint.token, endpoint.tls.orEnvironment());
    m_copyTransfer = std::make_unique<CheckpointTransfer>(m_copyClient.get());
    m_copying = job;
    m_copyThread = std::thread([this, job, transfer = m_copyTransfer.get(), root = checkpointRoot()] {
        CheckpointCopy copy;
        const CallResult result = transfer->download(job.runId, job.epoch, root, kKeepCopies, &copy);
        QMetaObject::invokeMethod(
            this, [this, job, result, dir = copy.dir] { copyFinished(job, result, dir); },
            Qt::QueuedConnection);
    });
}

void StudyRunner::copyFinished(const CopyRequest &job, const CallResult &result, const QString &dir)
{
    if (m_copyThread.joinable())
        m_copyThread.join();
    m_copying.reset();
    m_copyTransfer.reset();
    m_copyClient.reset();
    if (m_crashed || m_finished)
        return;
    switch (copyLanding(m_state.run(job.runId), result.ok())) {
    case CopyLanding::Discard:
        QDir(checkpointRoot() + QLatin1Char('/') + job.runId).removeRecursively();
        break;
    case CopyLanding::Record:
        if (!record(QStringLiteral("checkpoint_copied"),
                QJsonObject { { QStringLiteral("runId"), job.runId },
                    { QStringLiteral("attempt"), job.attempt }, { QStringLiteral("epoch"), job.epoch },
                    { QStringLiteral("agent"), job.agent }, { QStringLiteral("dir"), dir } }))
            return;
        Q_EMIT message(QStringLiteral("%1: checkpoint of epoch %2 copied from agent %3")
                           .arg(job.runId)
                           .arg(job.epoch)
                           .arg(job.agent));
        break;
    case CopyLanding::GiveUp:
        m_copyFailed[job.runId] = std::max(m_copyFailed.value(job.runId), job.epoch); // not asked again
        Q_EMIT message(QStringLiteral("%1: could not copy the checkpoint of epoch %2 from agent %3 (%4); a "
                                      "retry elsewhere resumes from the last copy")
                           .arg(job.runId)
                           .arg(job.epoch)
                           .arg(job.agent, result.message));
        break;
    }
    startNextCopy();
}

void StudyRunner::afterAttemptEnded(const QString &runId)
{
    const RunProgress *run = m_state.run(runId);
    if (m_crashed || !run || !isTerminal(run->phase))
        return;
    // Nothing newer will be written until the user retries it.
    m_copyQueue.erase(runId);
    // A FAILED or CANCELLED run keeps the newest copy: `study retry` resumes from it even
    // when the agent that wrote the checkpoint is gone for good. A run that succeeded
    // will not start again, so its copies are of no use any more.
    if (run->phase == RunPhase::Succeeded && (!m_copying || m_copying->runId != runId))
        QDir(checkpointRoot() + QLatin1Char('/') + runId).removeRecursively(); // else copyFinished() does
}

bool StudyRunner::transferCheckpoint(const RunProgress &run, QString *failure, bool *retryable)
{
    const auto upload = uploadBeforeStart(run);
    if (!upload)
        return true;
    const CopiedCheckpoint &copy = run.checkpoint;
    const QString &target = upload->target;
    AgentClient *c = client(target);
    if (!c)
        return true; // StartWorkers says why
    v1::CheckpointManifest manifest;
    if (const Status verified = CheckpointTransfer::verifyCopy(copy.dir, &manifest); !verified) {
        const QString &problem = verified.error();
        Q_EMIT message(
            QStringLiteral("%1: the console's copy of the checkpoint of epoch %2 cannot be used (%3); "
                           "attempt %4 starts without it")
                .arg(run.planned.runId)
                .arg(copy.epoch)
                .arg(problem)
                .arg(run.attempt));
        return true;
    }
    CheckpointTransfer transfer(c);
    v1::WriteCheckpointResponse response;
    const CallResult result = transfer.upload(run.planned.runId, copy.dir, &response);
    if (!result.ok()) {
        *failure = QStringLiteral("could not send the checkpoint of epoch %1 (copied from agent %2) to agent "
                                  "%3: %4")
                       .arg(copy.epoch)
                       .arg(copy.agent, target, result.message);
        *retryable = uploadRetryable(result.code);
        return false;
    }
    const QString runId = run.planned.runId;
    const int attempt = run.attempt;
    if (!record(QStringLiteral("checkpoint_uploaded"),
            QJsonObject { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt },
                { QStringLiteral("epoch"), copy.epoch }, { QStringLiteral("agent"), target },
                { QStringLiteral("from"), copy.agent } }))
        return false;
    Q_EMIT message(QStringLiteral("%1: attempt %2 resumes from epoch %3 on agent %4, checkpoint copied from "
                                  "agent %5 (%6 MiB sent)")
                       .arg(runId)
                       .arg(attempt)
                       .arg(m_state.run(runId)->checkpoint.epoch)
                       .arg(target, m_state.run(runId)->checkpoint.agent)
                       .arg(double(response.bytes()) / (1 << 20), 0, 'f', 1));
    return true;
}

QString StudyRunner::agentLabel(const QString &agent) const
{
    QString host;
    for (const auto &n : m_capacity)
        if (n.agent == agent && !n.host.isEmpty())
            host = n.host;
    if (host.isEmpty())
        for (const auto &n : m_state.nodes())
            if (n.agent == agent)
                host = n.hostname;
    return host.isEmpty() || host == agent ? QStringLiteral("agent %1").arg(agent)
                                           : QStringLiteral("agent %1 (%2)").arg(agent, host);
}

QString StudyRunner::unreachableRanks(const QString &runId, bool probe)
{
    const RunProgress *run = m_state.run(runId);
    auto it = m_watches.find(runId);
    if (!run || it == m_watches.end())
        return {};
    QStringList parts;
    for (std::size_t i = 1; i < it->second.size() && int(i) < run->portions.size(); ++i) {
        PortionWatch &w = it->second[i];
        QString since;
        if (w.unreachableSinceMs > 0) {
            since = clockTime(w.unreachableSinceMs);
        } else if (probe) {
            // Its stream may not have noticed yet: ask (briefly).
            v1::DescribeResponse ignored;
            AgentClient *c = client(w.agent);
            if (c && !c->describe(&ignored, 1500).ok())
                since = QStringLiteral("now");
        }
        if (since.isEmpty())
            continue;
        QStringList ranks;
        for (int r : run->portions[int(i)].ranks)
            ranks << QString::number(r);
        parts << QStringLiteral("rank%1 %2 on %3 unreachable%4")
                     .arg(ranks.size() > 1 ? "s" : "", ranks.join(QLatin1String(", ")), agentLabel(w.agent),
                         since == QLatin1String("now") ? QString() : QStringLiteral(" since ") + since);
    }
    return parts.join(QLatin1String("; "));
}

void StudyRunner::onStall(const QString &runId, int portion, const v1::Stall &stall)
{
    const RunProgress *run = m_state.run(runId);
    auto it = m_watches.find(runId);
    if (!run || it == m_watches.end() || portion >= int(it->second.size()))
        return;
    const int attempt = it->second[portion].attempt;
    if (stall.stalled()) {
        QString detail = unreachableRanks(runId, true);
        if (detail.isEmpty())
            detail = run->portions.size() > 1
                ? QStringLiteral("every agent of the run answers: waiting on the network between the ranks")
                : QStringLiteral("the agent answers; the rank is busy or blocked");
        if (!record(QStringLiteral("run_stalled"),
                QJsonObject { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt },
                    { QStringLiteral("since"), double(stall.since_unix_ms()) },
                    { QStringLiteral("lastStep"), double(stall.last_step()) },
                    { QStringLiteral("detail"), detail } }))
            return;
        m_stallMessageMs[runId] = QDateTime::currentMSecsSinceEpoch();
        if (const RunProgress *now = m_state.run(runId))
            Q_EMIT message(QStringLiteral("%1: %2 (last step %3)")
                               .arg(runId, stallText(*now, QDateTime::currentMSecsSinceEpoch()))
                               .arg(stall.last_step()));
    } else {
        if (!record(QStringLiteral("run_unstalled"),
                QJsonObject { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt },
                    { QStringLiteral("seconds"), stall.seconds() } }))
            return;
        m_stallMessageMs.erase(runId);
        Q_EMIT message(QStringLiteral("%1: progress again after %2 s without any")
                           .arg(runId)
                           .arg(stall.seconds(), 0, 'f', 0));
    }
}

void StudyRunner::endFailedAttempt(const RunProgress &run, const QString &reason, const QStringList &unreachable,
    qint64 unreachableSinceMs, bool retryable, const QString &spaceShortOn, qint64 spaceNeeded)
{
    // An attempt lost to an unreachable host does not count against maxFailures: the run
    // waits for the host (or for others that can take it) instead of burning its retries.
    // Nor does one whose checkpoint did not fit: it waits for an agent with the space.
    const bool counts = unreachable.isEmpty() && spaceShortOn.isEmpty();
    const bool cancelled = run.cancelRequested || m_state.cancelRequested();
    const bool retry = retryable && !cancelled && (!counts || m_state.shouldRetry(run));
    int failedAttempts = 0;
    for (const auto &a : run.attempts)
        failedAttempts += a.outcome != QLatin1String("SUCCEEDED") ? 1 : 0;
    const qint64 notBefore = retry
        ? QDateTime::currentMSecsSinceEpoch() + retryBackoffMs(failedAttempts, QRandomGenerator::global()->generateDouble())
        : 0;
    QJsonArray agents;
    QStringList labels;
    for (const QString &a : unreachable) {
        agents.append(a);
        labels << agentLabel(a);
    }
    QJsonObject payload { { QStringLiteral("runId"), run.planned.runId }, { QStringLiteral("attempt"), run.attempt },
        { QStringLiteral("outcome"), QStringLiteral("FAILED") }, { QStringLiteral("reason"), reason },
        { QStringLiteral("retry"), retry }, { QStringLiteral("counts"), counts },
        { QStringLiteral("notBefore"), double(notBefore) } };
    if (!spaceShortOn.isEmpty())
        payload.insert(QStringLiteral("noSpace"),
            QJsonObject { { QStringLiteral("agent"), spaceShortOn },
                { QStringLiteral("bytesNeeded"), double(spaceNeeded) } });
    if (!unreachable.isEmpty()) {
        payload.insert(QStringLiteral("unreachable"), agents);
        payload.insert(QStringLiteral("unreachableSince"), double(unreachableSinceMs));
        payload.insert(QStringLiteral("unreachableText"), labels.join(QLatin1String(", ")));
    }
    if (!record(QStringLiteral("attempt_ended"), payload))
        return;
    afterAttemptEnded(run.planned.runId);
    const RunProgress *after = m_state.run(run.planned.runId);
    if (!after)
        return;
    Q_EMIT message(QStringLiteral("%1: attempt %2 FAILED (%3) — run %4%5")
                       .arg(run.planned.runId)
                       .arg(run.attempt)
                       .arg(reason, phaseName(after->phase))
                       .arg(after->phase == RunPhase::Pending
                               ? (counts ? QStringLiteral(", next attempt in %1 s").arg((notBefore - QDateTime::currentMSecsSinceEpoch() + 999) / 1000)
                                       : !spaceShortOn.isEmpty()
                                       ? QStringLiteral(", waiting for %1 MB free on an agent").arg((spaceNeeded + 999'999) / 1'000'000)
                                       : QStringLiteral(", waiting for %1").arg(labels.join(QLatin1String(", "))))
                               : QString()));
}

} // namespace scalelab::core
