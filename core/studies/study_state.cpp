#include "study_state.h"

#include "agent_client.h" // grpcVersion()
#include "build_info.h"
#include "run_anatomy.h"
#include "run_record.h"
#include "study_plan.h"

#include <google/protobuf/stubs/common.h>

#include <algorithm>

#include <QDateTime>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>

namespace scalelab::core {
namespace {

QJsonArray toArray(const QList<int> &values)
{
    QJsonArray a;
    for (int v : values)
        a.append(v);
    return a;
}

QList<Portion> portionsFromJson(const QJsonArray &array)
{
    QList<Portion> portions;
    for (const auto &value : array) {
        const QJsonObject o = value.toObject();
        Portion p;
        p.agent = o.value(QLatin1String("agent")).toString();
        for (const auto &r : o.value(QLatin1String("ranks")).toArray())
            p.ranks << r.toInt();
        portions << p;
    }
    return portions;
}

QStringList agentsOf(const QList<Portion> &portions)
{
    QStringList agents;
    for (const auto &p : portions)
        agents << p.agent;
    return agents;
}

} // namespace

QString phaseName(RunPhase phase)
{
    switch (phase) {
    case RunPhase::Pending:
        return QStringLiteral("PENDING");
    case RunPhase::Starting:
        return QStringLiteral("STARTING");
    case RunPhase::Running:
        return QStringLiteral("RUNNING");
    case RunPhase::Succeeded:
        return QStringLiteral("SUCCEEDED");
    case RunPhase::Failed:
        return QStringLiteral("FAILED");
    case RunPhase::Cancelled:
        return QStringLiteral("CANCELLED");
    case RunPhase::Paused:
        return QStringLiteral("PAUSED");
    case RunPhase::Stopped:
        return QStringLiteral("STOPPED");
    }
    return {};
}

bool isTerminal(RunPhase phase)
{
    return phase == RunPhase::Succeeded || phase == RunPhase::Failed || phase == RunPhase::Cancelled
        || phase == RunPhase::Stopped;
}

QJsonObject configToJson(const RunConfig &c)
{
    return QJsonObject { { QStringLiteral("baseline"), c.baseline }, { QStringLiteral("workers"), c.workers },
        { QStringLiteral("batchSize"), c.batchSize }, { QStringLiteral("epochs"), c.epochs },
        { QStringLiteral("gpusPerWorker"), c.gpusPerWorker },
        { QStringLiteral("threadsPerWorker"), c.threadsPerWorker },
        { QStringLiteral("precision"), c.precision }, { QStringLiteral("lrRule"), c.lrRule },
        { QStringLiteral("model"), c.model }, { QStringLiteral("accumulationSteps"), c.accumulationSteps },
        { QStringLiteral("minWorkers"), c.minWorkers } };
}

RunConfig configFromJson(const QJsonObject &o)
{
    RunConfig c;
    c.baseline = o.value(QLatin1String("baseline")).toBool();
    c.workers = o.value(QLatin1String("workers")).toInt(1);
    c.batchSize = o.value(QLatin1String("batchSize")).toInt(64);
    c.epochs = o.value(QLatin1String("epochs")).toInt(1);
    c.gpusPerWorker = o.value(QLatin1String("gpusPerWorker")).toDouble();
    c.threadsPerWorker = o.value(QLatin1String("threadsPerWorker")).toInt();
    c.precision = o.value(QLatin1String("precision")).toString(QStringLiteral("fp32"));
    c.lrRule = o.value(QLatin1String("lrRule")).toString(QStringLiteral("none"));
    // Journals written before models were a run's: every run trained the default.
    c.model = o.value(QLatin1String("model")).toString(QString::fromLatin1(kDefaultModelName));
    // Journals written before accumulation and elastic runs: neither.
    c.accumulationSteps = std::max(1, o.value(QLatin1String("accumulationSteps")).toInt(1));
    c.minWorkers = o.value(QLatin1String("minWorkers")).toInt(0);
    return c;
}

QJsonObject StudyState::studyCreated(
    const QString &name, const v1::StudyPlan &plan, const QStringList &agents, const QList<PlannedRun> &runs)
{
    QJsonArray runArray;
    for (const auto &r : runs) {
        QJsonObject o { { QStringLiteral("runId"), r.runId }, { QStringLiteral("repeat"), r.repeat },
            { QStringLiteral("maxFailures"), r.maxFailures },
            { QStringLiteral("config"), configToJson(r.config) } };
        if (r.trial) {
            o.insert(QStringLiteral("trial"), true);
            o.insert(QStringLiteral("params"), r.params);
            o.insert(QStringLiteral("bracket"), r.bracket);
        }
        runArray.append(o);
    }
    return QJsonObject { { QStringLiteral("name"), name },
        { QStringLiteral("plan"), QString::fromUtf8(planToJson(plan)) },
        { QStringLiteral("agents"), QJsonArray::fromStringList(agents) },
        { QStringLiteral("runs"), runArray } };
}

QJsonObject StudyState::attemptStarting(
    const QString &runId, int attempt, const QList<Portion> &portions, const QString &resize)
{
    QJsonArray array;
    for (const auto &p : portions)
        array.append(QJsonObject {
            { QStringLiteral("agent"), p.agent }, { QStringLiteral("ranks"), toArray(p.ranks) } });
    QJsonObject payload { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt },
        { QStringLiteral("portions"), array } };
    if (!resize.isEmpty())
        payload.insert(QStringLiteral("resize"), resize);
    return payload;
}

RunProgress *StudyState::mutableRun(const QString &runId)
{
    for (auto &r : m_runs)
        if (r.planned.runId == runId)
            return &r;
    return nullptr;
}

const RunProgress *StudyState::run(const QString &runId) const
{
    return const_cast<StudyState *>(this)->mutableRun(runId);
}

StudyState StudyState::replay(const QList<JournalEvent> &events)
{
    StudyState state;
    for (const auto &e : events)
        state.apply(e);
    return state;
}

bool StudyState::waitsForNetworkProbe() const
{
    if (m_networkProbed || m_cancelRequested || m_plan.training().skip_network_probe())
        return false;
    return std::any_of(
        m_runs.begin(), m_runs.end(), [](const RunProgress &r) { return r.planned.config.workers > 1; });
}

bool StudyState::shouldRetry(const RunProgress &run) const
{
    return !m_cancelRequested && !run.cancelRequested
        && run.failures < run.planned.maxFailures + run.extraAttempts;
}

void StudyState::apply(const JournalEvent &event)
{
    m_lastEventId = event.id;
    // One handler per event type (the types and their payloads: study_state.h). A type this
    // release does not know, or an event of a run the study does not have, is ignored.
    using StudyHandler = void (StudyState::*)(const JournalEvent &);
    using RunHandler = void (StudyState::*)(RunProgress *, const JournalEvent &);
    static const QHash<QString, StudyHandler> studyEvents {
        { QStringLiteral("study_created"), &StudyState::onStudyCreated },
        { QStringLiteral("agents_added"), &StudyState::onAgentsAdded },
        { QStringLiteral("nodes_seen"), &StudyState::onNodesSeen },
        { QStringLiteral("lr_found"), &StudyState::onLrFound },
        { QStringLiteral("network_probed"), &StudyState::onNetworkProbed },
        { QStringLiteral("lr_find_failed"), &StudyState::onLrFindFailed },
        { QStringLiteral("cancel_requested"), &StudyState::onCancelRequested },
        { QStringLiteral("retry_requested"), &StudyState::onRetryRequested },
        { QStringLiteral("trial_continued"), &StudyState::onTrialContinued },
        { QStringLiteral("study_ended"), &StudyState::onStudyEnded },
    };
    static const QHash<QString, RunHandler> runEvents {
        { QStringLiteral("run_pending"), &StudyState::onRunPending },
        { QStringLiteral("attempt_starting"), &StudyState::onAttemptStarting },
        { QStringLiteral("attempt_running"), &StudyState::onAttemptRunning },
        { QStringLiteral("checkpoint_copied"), &StudyState::onCheckpointCopied },
        { QStringLiteral("checkpoint_uploaded"), &StudyState::onCheckpointUploaded },
        { QStringLiteral("attempt_resizing"), &StudyState::onAttemptResizing },
        { QStringLiteral("run_stalled"), &StudyState::onRunStalled },
        { QStringLiteral("run_unstalled"), &StudyState::onRunUnstalled },
        { QStringLiteral("trial_decision"), &StudyState::onTrialDecision },
        { QStringLiteral("attempt_ended"), &StudyState::onAttemptEnded },
    };
    if (const auto handler = studyEvents.constFind(event.type); handler != studyEvents.constEnd()) {
        (this->*handler.value())(event);
        return;
    }
    const auto handler = runEvents.constFind(event.type);
    RunProgress *run = mutableRun(event.payload.value(QLatin1String("runId")).toString());
    if (handler != runEvents.constEnd() && run)
        (this->*handler.value())(run, event);
}

void StudyState::onStudyCreated(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    m_studyId = event.studyId;
    m_name = p.value(QLatin1String("name")).toString();
    if (auto plan = parsePlanJson(p.value(QLatin1String("plan")).toString().toUtf8()))
        m_plan = std::move(plan).value();
    m_agents.clear();
    for (const auto &a : p.value(QLatin1String("agents")).toArray())
        m_agents << a.toString();
    m_created = event.unixMs;
    for (const auto &value : p.value(QLatin1String("runs")).toArray()) {
        const QJsonObject o = value.toObject();
        RunProgress run;
        run.planned.runId = o.value(QLatin1String("runId")).toString();
        run.planned.repeat = o.value(QLatin1String("repeat")).toInt();
        run.planned.maxFailures = o.value(QLatin1String("maxFailures")).toInt();
        run.planned.config = configFromJson(o.value(QLatin1String("config")).toObject());
        run.planned.trial = o.value(QLatin1String("trial")).toBool();
        run.planned.params = o.value(QLatin1String("params")).toObject();
        run.planned.bracket = o.value(QLatin1String("bracket")).toInt();
        m_runs << run;
    }
    if (m_plan.has_tune()) {
        QList<PlannedRun> trials;
        for (const auto &r : m_runs)
            trials << r.planned;
        m_scheduler = TrialScheduler(tuneSettings(m_plan), trials);
        for (auto &r : m_runs)
            r.target = m_scheduler.targets(r.planned.runId).value(0);
    }
}

void StudyState::onAgentsAdded(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    for (const auto &a : p.value(QLatin1String("agents")).toArray())
        if (!m_agents.contains(a.toString()))
            m_agents << a.toString();
}

void StudyState::onNodesSeen(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    for (const auto &value : p.value(QLatin1String("nodes")).toArray()) {
        const QJsonObject o = value.toObject();
        NodeInfo n;
        n.agent = o.value(QLatin1String("agent")).toString();
        n.hostname = o.value(QLatin1String("hostname")).toString();
        n.agentVersion = o.value(QLatin1String("agentVersion")).toString();
        n.cpuCores = o.value(QLatin1String("cpuCores")).toInt();
        n.memoryBytes = o.value(QLatin1String("memoryBytes")).toInteger();
        for (const auto &g : o.value(QLatin1String("gpus")).toArray())
            n.gpus << g.toString();
        n.cpuModel = o.value(QLatin1String("cpuModel")).toString();
        n.os = o.value(QLatin1String("os")).toString();
        n.gpuStatus = o.value(QLatin1String("gpuStatus")).toString();
        const QJsonObject software = o.value(QLatin1String("software")).toObject();
        for (auto it = software.begin(); it != software.end(); ++it)
            n.software.insert(it.key(), it.value().toString());
        m_nodes.removeIf([&](const NodeInfo &old) { return old.agent == n.agent; });
        m_nodes << n;
    }
}

void StudyState::onLrFound(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    m_lrSearch.found = FoundLearningRate { p.value(QLatin1String("learningRate")).toDouble(),
        p.value(QLatin1String("batch")).toInt() };
    m_lrSearch.agent = p.value(QLatin1String("agent")).toString();
    m_lrSearch.minLossLearningRate = p.value(QLatin1String("minLossLr")).toDouble();
    m_lrSearch.steepestLearningRate = p.value(QLatin1String("steepestLr")).toDouble();
    m_lrSearch.steps = p.value(QLatin1String("steps")).toInt();
    m_lrSearch.stoppedEarly = p.value(QLatin1String("stoppedEarly")).toBool();
    m_lrSearch.conclusive = p.value(QLatin1String("conclusive")).toBool(true);
    m_lrSearch.rule = p.value(QLatin1String("rule")).toString();
    m_lrSearch.points.clear();
    for (const auto &point : p.value(QLatin1String("points")).toArray())
        m_lrSearch.points.append({ point.toArray().at(0).toDouble(), point.toArray().at(1).toDouble() });
}

void StudyState::onNetworkProbed(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    m_networkProbed = true;
    m_networkProbes = p.value(QLatin1String("probes")).toArray();
    m_networkNote = p.value(QLatin1String("note")).toString();
}

void StudyState::onLrFindFailed(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    ++m_lrSearch.failures;
    m_lrSearch.lastFailure = p.value(QLatin1String("reason")).toString();
    if (p.value(QLatin1String("final")).toBool()) {
        m_lrSearch.gaveUp = true;
        for (auto &r : m_runs)
            if (r.phase == RunPhase::Pending) {
                r.phase = RunPhase::Failed;
                r.reason
                    = QStringLiteral("the learning-rate range test failed: %1").arg(m_lrSearch.lastFailure);
            }
    }
}

void StudyState::onCancelRequested(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    const QString runId = p.value(QLatin1String("runId")).toString();
    for (auto &r : m_runs) {
        if (!runId.isEmpty() && r.planned.runId != runId)
            continue;
        r.cancelRequested = true;
        if (r.phase == RunPhase::Pending || r.phase == RunPhase::Paused) { // nothing runs: cancelled at once
            r.reason = r.phase == RunPhase::Paused || !r.attempts.isEmpty()
                ? QStringLiteral("cancelled after epoch %1").arg(r.epochsDone())
                : QStringLiteral("cancelled before it started");
            r.phase = RunPhase::Cancelled;
            r.decisionDue = false;
            if (r.planned.trial)
                m_scheduler.withdraw(r.planned.runId);
        }
    }
    if (runId.isEmpty())
        m_cancelRequested = true;
}

void StudyState::onRetryRequested(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    // A FAILED or CANCELLED run goes back to PENDING for one more attempt (resuming
    // from its last checkpoint); a study that had ended runs again until it is done.
    RunProgress *run = mutableRun(p.value(QLatin1String("runId")).toString());
    if (!run || (run->phase != RunPhase::Failed && run->phase != RunPhase::Cancelled))
        return;
    run->phase = RunPhase::Pending;
    run->cancelRequested = false;
    run->reason = QStringLiteral("retry requested by the user");
    ++run->extraAttempts;
    m_cancelRequested = false;
    m_endState.clear();
    m_ended = 0;
}

void StudyState::onTrialContinued(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    // The user continues a trial beyond its schedule: it is trained to `epochs`, resumed
    // from its last checkpoint; the tune runs again until it is done.
    RunProgress *run = mutableRun(p.value(QLatin1String("runId")).toString());
    if (!run || !run->planned.trial
        || (run->phase != RunPhase::Succeeded && run->phase != RunPhase::Stopped
            && run->phase != RunPhase::Paused))
        return;
    const int epochs = p.value(QLatin1String("epochs")).toInt();
    if (epochs <= run->epochsDone() || run->decisionDue)
        return;
    m_scheduler.withdraw(run->planned.runId);
    // Within its schedule it stops there; past it, the schedule is stretched.
    run->planned.config.epochs = std::max(run->planned.config.epochs, epochs);
    run->target = epochs;
    run->continuedTo = epochs;
    run->phase = RunPhase::Pending;
    run->cancelRequested = false;
    run->reason = QStringLiteral("continued by the user to epoch %1").arg(epochs);
    m_cancelRequested = false;
    m_endState.clear();
    m_ended = 0;
}

void StudyState::onStudyEnded(const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    m_endState = p.value(QLatin1String("state")).toString();
    m_ended = event.unixMs;
}

void StudyState::onRunPending(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (!isTerminal(run->phase))
        run->reason = p.value(QLatin1String("reason")).toString();
}

void StudyState::onAttemptStarting(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    run->attempt = p.value(QLatin1String("attempt")).toInt();
    run->portions = portionsFromJson(p.value(QLatin1String("portions")).toArray());
    run->rendezvous.clear();
    run->phase = RunPhase::Starting;
    run->reason.clear();
    run->waitingFor.clear();
    run->spaceNeeded = 0; // placed where the space is
    run->spaceShortOn.clear();
    run->stalledSinceMs = 0;
    run->stallDetail.clear();
    AttemptRecord a;
    a.attempt = run->attempt;
    a.agents = agentsOf(run->portions);
    a.outcome = QStringLiteral("STARTING");
    a.startedUnixMs = event.unixMs;
    for (const auto &portion : run->portions)
        a.worldSize += int(portion.ranks.size());
    a.resize = p.value(QLatin1String("resize")).toString();
    if (a.worldSize >= run->planned.config.workers)
        run->lostAgents.clear();
    run->attempts << a;
}

void StudyState::onAttemptRunning(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (run->phase == RunPhase::Starting && p.value(QLatin1String("attempt")).toInt() == run->attempt) {
        run->phase = RunPhase::Running;
        run->rendezvous = p.value(QLatin1String("rendezvous")).toString();
        if (!run->attempts.isEmpty())
            run->attempts.last().outcome = QStringLiteral("RUNNING");
    }
}

void StudyState::onCheckpointCopied(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    const int epoch = p.value(QLatin1String("epoch")).toInt();
    if (epoch >= run->checkpoint.epoch)
        run->checkpoint = CopiedCheckpoint { epoch, p.value(QLatin1String("attempt")).toInt(),
            p.value(QLatin1String("agent")).toString(), p.value(QLatin1String("dir")).toString() };
}

void StudyState::onCheckpointUploaded(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (p.value(QLatin1String("attempt")).toInt() != run->attempt || run->attempts.isEmpty())
        return;
    AttemptRecord &a = run->attempts.last();
    a.transferredEpoch = p.value(QLatin1String("epoch")).toInt();
    a.transferredFrom = p.value(QLatin1String("from")).toString();
    if (run->attemptOpen())
        run->reason = resumeNote(a);
}

void StudyState::onAttemptResizing(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (p.value(QLatin1String("attempt")).toInt() == run->attempt && run->attemptOpen())
        run->resizing = p.value(QLatin1String("reason")).toString();
}

void StudyState::onRunStalled(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (p.value(QLatin1String("attempt")).toInt() != run->attempt || !run->attemptOpen())
        return;
    run->stalledSinceMs = p.value(QLatin1String("since")).toInteger();
    run->stallDetail = p.value(QLatin1String("detail")).toString();
}

void StudyState::onRunUnstalled(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (p.value(QLatin1String("attempt")).toInt() != run->attempt)
        return;
    run->stalledSinceMs = 0;
    run->stallDetail.clear();
}

void StudyState::onTrialDecision(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    TrialDecision d = TrialDecision::fromJson(p);
    d.eventId = event.id;
    d.unixMs = event.unixMs;
    m_scheduler.apply(d);
    // Decisions are about a trial at a rung (PAUSED), a promotion about one waiting
    // there with its result recorded; a trial cancelled or continued meanwhile keeps
    // its own state.
    if (run->phase != RunPhase::Paused || (d.action == QLatin1String("promote") && run->decisionDue))
        return;
    run->decisions << d;
    run->decisionDue = false;
    run->reason = d.reason;
    if (d.action == QLatin1String("continue") || d.action == QLatin1String("promote")) {
        run->target = d.nextTarget;
        run->phase = run->cancelRequested ? RunPhase::Cancelled : RunPhase::Pending;
    } else if (d.action == QLatin1String("stop")) {
        run->phase = RunPhase::Stopped;
    } else if (d.action == QLatin1String("finish")) {
        run->phase = RunPhase::Succeeded;
    } else { // pause: waits for a promotion
        run->phase = run->cancelRequested ? RunPhase::Cancelled : RunPhase::Paused;
    }
}

void StudyState::onAttemptEnded(RunProgress *run, const JournalEvent &event)
{
    const QJsonObject &p = event.payload;
    if (p.value(QLatin1String("attempt")).toInt() != run->attempt || !run->attemptOpen())
        return;
    const QString outcome = p.value(QLatin1String("outcome")).toString();
    const QString reason = p.value(QLatin1String("reason")).toString();
    if (!run->attempts.isEmpty()) {
        run->attempts.last().outcome = outcome;
        run->attempts.last().reason = reason;
        run->attempts.last().endedUnixMs = event.unixMs;
    }
    run->reason = reason;
    run->resizing.clear();
    run->stalledSinceMs = 0;
    run->stallDetail.clear();
    run->waitingFor.clear();
    run->unreachableSinceMs = 0;
    run->spaceNeeded = 0;
    run->spaceShortOn.clear();
    run->notBeforeMs = p.value(QLatin1String("notBefore")).toInteger();
    if (outcome == QLatin1String("SUCCEEDED") && run->planned.trial) {
        // At its target: the tune's scheduler decides what follows (trial_decision).
        run->phase = RunPhase::Paused;
        run->decisionDue = true;
        run->dueSinceEventId = event.id;
        run->reason
            = QStringLiteral("reached epoch %1; waiting for the scheduler's decision").arg(run->target);
    } else if (outcome == QLatin1String("SUCCEEDED")) {
        run->phase = RunPhase::Succeeded;
        // Said in words; the snapshot refines it with the epoch the worker reported.
        if (!run->attempts.isEmpty() && run->attempts.last().transferredEpoch > 0)
            run->reason = QStringLiteral("resumed from epoch %1, checkpoint copied from agent %2")
                              .arg(run->attempts.last().transferredEpoch)
                              .arg(run->attempts.last().transferredFrom);
    } else if (outcome == QLatin1String("CANCELLED")) {
        run->phase = RunPhase::Cancelled;
    } else if (outcome == QLatin1String("RESIZED")) {
        // An elastic run stopped at a checkpoint to grow back: placed again at once.
        run->phase = run->cancelRequested ? RunPhase::Cancelled : RunPhase::Pending;
    } else {
        const bool counts = p.value(QLatin1String("counts")).toBool(true);
        if (counts)
            ++run->failures;
        for (const auto &a : p.value(QLatin1String("unreachable")).toArray()) {
            run->waitingFor << a.toString();
            if (run->planned.config.elastic() && !run->lostAgents.contains(a.toString()))
                run->lostAgents << a.toString();
        }
        run->unreachableSinceMs = p.value(QLatin1String("unreachableSince")).toInteger();
        const QJsonObject noSpace = p.value(QLatin1String("noSpace")).toObject();
        if (!noSpace.isEmpty()) {
            run->spaceNeeded = noSpace.value(QLatin1String("bytesNeeded")).toInteger();
            run->spaceShortOn = noSpace.value(QLatin1String("agent")).toString();
        }
        if (p.value(QLatin1String("retry")).toBool() && !noSpace.isEmpty()) {
            run->phase = RunPhase::Pending;
            run->reason = QStringLiteral("waiting for disk space (not counted as a failure; free space on "
                                         "%1, e.g. `scalelab-cli gc`, or add an agent): %2")
                              .arg(run->spaceShortOn, reason);
        } else if (p.value(QLatin1String("retry")).toBool() && !counts) {
            run->phase = RunPhase::Pending;
            run->reason = QStringLiteral("waiting for %1 (unreachable since %2); resumes from its checkpoint "
                                         "when it returns or other hosts can take the run (not counted as a "
                                         "failure): %3")
                              .arg(p.value(QLatin1String("unreachableText"))
                                       .toString(run->waitingFor.join(QLatin1String(", "))),
                                  clockTime(run->unreachableSinceMs), reason);
        } else if (p.value(QLatin1String("retry")).toBool()) {
            run->phase = RunPhase::Pending;
            run->reason = QStringLiteral("retrying (failure %1 of at most %2): %3")
                              .arg(run->failures)
                              .arg(run->planned.maxFailures)
                              .arg(reason);
        } else {
            run->phase = RunPhase::Failed;
        }
    }
}

QString clockTime(qint64 unixMs)
{
    return unixMs > 0 ? QDateTime::fromMSecsSinceEpoch(unixMs).toString(QStringLiteral("HH:mm:ss"))
                      : QStringLiteral("?");
}

QString stallText(const RunProgress &run, qint64 nowMs)
{
    if (run.stalledSinceMs <= 0)
        return {};
    QString text = QStringLiteral("stalled: no progress for %1 s")
                       .arg(std::max<qint64>(0, (nowMs - run.stalledSinceMs) / 1000));
    if (!run.stallDetail.isEmpty())
        text += QStringLiteral("; ") + run.stallDetail;
    return text;
}

qint64 retryBackoffMs(int failedAttempts, double jitter)
{
    const qint64 base = std::min<qint64>(60'000, 2'000LL << std::clamp(failedAttempts - 1, 0, 5));
    return qint64(double(base) * (0.8 + 0.4 * std::clamp(jitter, 0.0, 1.0)));
}

bool StudyState::allRunsTerminal() const
{
    return std::all_of(
        m_runs.begin(), m_runs.end(), [](const RunProgress &r) { return isTerminal(r.phase); });
}

QString StudyState::state() const
{
    if (!m_endState.isEmpty())
        return m_endState;
    if (m_runs.isEmpty() || !allRunsTerminal())
        return m_cancelRequested ? QStringLiteral("CANCELLING") : QStringLiteral("RUNNING");
    if (m_cancelRequested)
        return QStringLiteral("CANCELLED");
    for (const auto &r : m_runs)
        if (r.phase != RunPhase::Succeeded && r.phase != RunPhase::Stopped)
            return QStringLiteral("FAILED");
    return QStringLiteral("SUCCEEDED");
}

} // namespace scalelab::core
