#include "study_runner.h"

#include "journal_events.h"

#include "checkpoint_courier.h"
#include "learning_rate_finder.h"
#include "network_survey.h"
#include "run_watch.h"

#include <QFileInfo>

namespace scalelab::core {
namespace {

constexpr int kTickMs = 500;

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
    // What the parts may use of the runner; their threads post back to the runner's thread.
    RunnerContext &context = *this;
    m_courier = std::make_unique<CheckpointCourier>(context, this, checkpointRoot());
    m_lrFinder = std::make_unique<LearningRateFinder>(context, this);
    m_networkSurvey = std::make_unique<NetworkSurvey>(context, this);
}

StudyRunner::~StudyRunner()
{
    m_courier.reset(); // cancels the copy in flight and joins its thread
    m_lrFinder.reset(); // tells the range test to stop and joins its thread
    m_networkSurvey.reset(); // stops the probe in flight and joins its thread
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

QString StudyRunner::modelStore() const
{
    return QFileInfo(m_journal->path()).absolutePath() + QStringLiteral("/models");
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

bool StudyRunner::record(const v1::StudyEvent &event)
{
    if (m_crashed)
        return false;
    if (const auto recorded = m_journal->append(m_studyId, event); !recorded) {
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
            m_lrFinder->search(nodes); // runs wait for its choice
        else if (m_state.waitsForNetworkProbe())
            m_networkSurvey->probe(nodes); // runs wait for it: it measures an idle network
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

void StudyRunner::finishIfDone()
{
    if (m_state.runs().isEmpty() || !m_state.allRunsTerminal())
        return;
    if (!m_state.ended() && !record(journal_events::studyEnded(m_state.state())))
        return;
    m_finished = true;
    m_timer.stop();
    Q_EMIT finished(m_state.state());
}

void StudyRunner::afterAttemptEnded(const QString &runId)
{
    const RunProgress *run = m_state.run(runId);
    if (m_crashed || !run || !isTerminal(run->phase))
        return;
    m_courier->runEnded(*run);
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

const StudyState &StudyRunner::study() const
{
    return m_state;
}

bool StudyRunner::driving() const
{
    return !m_crashed && !m_finished;
}

const AgentEndpoint *StudyRunner::endpoint(const QString &agent) const
{
    const auto it = m_agents.constFind(agent);
    return it == m_agents.constEnd() ? nullptr : &*it;
}

void StudyRunner::say(const QString &line)
{
    Q_EMIT message(line);
}

void StudyRunner::tickSoon()
{
    QTimer::singleShot(0, this, &StudyRunner::tick);
}

} // namespace scalelab::core
