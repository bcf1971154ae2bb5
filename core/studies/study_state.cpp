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
            { QStringLiteral("maxFailures"), r.maxFailures }, { QStringLiteral("config"), configToJson(r.config) } };
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
    QString text = QStringLiteral("stalled: no progress for %1 s").arg(std::max<qint64>(0, (nowMs - run.stalledSinceMs) / 1000));
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

namespace {

QJsonArray doubles(const google::protobuf::RepeatedField<double> &values)
{
    QJsonArray out;
    for (double v : values)
        out.append(v);
    return out;
}

// The recipe a RunStarted event reports (see RunResult::recipe).
QJsonObject recipeOf(const v1::RunStarted &started)
{
    const v1::RunSpec &e = started.effective();
    const v1::Dataset &d = started.dataset();
    QJsonObject o { { QStringLiteral("dataset"), QString::fromStdString(d.name()) },
        { QStringLiteral("dataset_synthetic"), d.synthetic() },
        { QStringLiteral("dataset_train_images"), double(d.train_images()) },
        { QStringLiteral("dataset_test_images"), double(d.test_images()) },
        { QStringLiteral("dataset_sha256"), QString::fromStdString(d.content_sha256()) },
        { QStringLiteral("workers"), started.world_size() },
        { QStringLiteral("global_batch"), double(started.global_batch()) },
        { QStringLiteral("peak_learning_rate"), started.peak_learning_rate() },
        { QStringLiteral("steps_per_epoch"), double(started.steps_per_epoch()) },
        { QStringLiteral("warmup_steps"), double(started.warmup_steps()) },
        { QStringLiteral("threads"), started.threads() },
        { QStringLiteral("device"), QString::fromStdString(started.device()) },
        { QStringLiteral("parameters"), double(started.parameters()) },
        { QStringLiteral("gradient_bytes"), double(started.gradient_bytes()) },
        { QStringLiteral("forward_flops_per_image"), double(started.forward_flops_per_image()) },
        { QStringLiteral("normalize_mean"), doubles(started.normalize_mean()) },
        { QStringLiteral("normalize_std"), doubles(started.normalize_std()) } };
    if (!d.synthetic_kind().empty())
        o.insert(QStringLiteral("dataset_synthetic_kind"), QString::fromStdString(d.synthetic_kind()));
    if (started.has_core_share())
        o.insert(QStringLiteral("core_share"),
            QJsonObject { { QStringLiteral("machines"), started.core_share().machines() },
                { QStringLiteral("threads"), started.core_share().threads() },
                { QStringLiteral("cores"), started.core_share().cores() } });
    if (started.has_effective()) {
        o.insert(QStringLiteral("batch_size"), e.batch_size());
        o.insert(QStringLiteral("epochs"), e.epochs());
        o.insert(QStringLiteral("learning_rate"), e.learning_rate());
        o.insert(QStringLiteral("lr_scaling"), QString::fromStdString(e.lr_scaling()));
        o.insert(QStringLiteral("momentum"), e.momentum());
        o.insert(QStringLiteral("weight_decay"), e.weight_decay());
        o.insert(QStringLiteral("schedule"), QString::fromStdString(e.schedule()));
        o.insert(QStringLiteral("warmup_epochs"), e.warmup_epochs());
        o.insert(QStringLiteral("label_smoothing"), e.label_smoothing());
        o.insert(QStringLiteral("augment"), !e.no_augment());
        o.insert(QStringLiteral("precision"), e.precision() == v1::BF16 ? QStringLiteral("bf16") : QStringLiteral("fp32"));
        o.insert(QStringLiteral("model"),
            e.model().empty() ? QString::fromLatin1(kDefaultModelName) : QString::fromStdString(e.model()));
        o.insert(QStringLiteral("seed"), QString::number(e.seed())); // 64 bits: a string keeps it exact
        o.insert(QStringLiteral("max_train_images"), double(e.max_train_images()));
        o.insert(QStringLiteral("max_test_images"), double(e.max_test_images()));
        o.insert(QStringLiteral("divergence_factor"), e.divergence_factor());
        o.insert(QStringLiteral("divergence_steps"), e.divergence_steps());
        if (e.finetune().head_epochs() > 0) {
            o.insert(QStringLiteral("finetune_head_epochs"), e.finetune().head_epochs());
            o.insert(QStringLiteral("finetune_head_learning_rate"), e.finetune().head_learning_rate());
            o.insert(QStringLiteral("finetune_head"), QString::fromStdString(e.finetune().head()));
        }
    }
    for (const auto &[component, version] : started.software())
        o.insert(QStringLiteral("worker_%1").arg(QString::fromStdString(component)), QString::fromStdString(version));
    return o;
}

} // namespace

namespace {

// A run's measurements from its attempts' events in the journal: its steps, epochs, recipe,
// anatomy, noise scale, accuracies and (`succeeded`) wall-clock; the software and SYNTHETIC
// data its workers reported go to `s`. A retried run's clock runs from its first start of
// training through every gap between attempts.
void foldRunEvents(RunResult &r, const Journal &journal, bool succeeded, StudySnapshot &s)
{
    // Time runs from the first attempt's start of training; a retried run's clock
    // keeps running through the failure, its detection and the restart.
    double offset = 0; // seconds from the first start of training to this attempt's
    double lastElapsed = 0;
    QMap<int, EpochTimes> epochTimes;
    double checkpointSeconds = 0;
    qint64 firstStartMs = 0;
    for (auto &attempt : r.attempts) {
        if (attempt.agents.isEmpty())
            continue;
        const double previousEnd = offset; // the previous attempt's last moment
        lastElapsed = 0;
        const auto events = journal.runEvents(r.runId, attempt.attempt, attempt.agents.first());
        for (const auto &e : events)
            if (e.has_started()) {
                if (firstStartMs == 0)
                    firstStartMs = e.unix_ms();
                else // the agents' clocks: the gap between attempts is counted too
                    offset = std::max(previousEnd, double(e.unix_ms() - firstStartMs) / 1000.0);
                break;
            }
        for (const auto &e : events) {
            if (e.has_started()) {
                r.recipe = recipeOf(e.started());
                r.workerCommand.clear();
                for (const auto &arg : e.started().worker_command())
                    r.workerCommand << QString::fromStdString(arg);
                for (const auto &[component, version] : e.started().software())
                    s.software.insert(QStringLiteral("worker: %1").arg(QString::fromStdString(component)),
                        QString::fromStdString(version));
                attempt.resumedFromEpoch = e.started().resumed_from_epoch();
                s.synthetic = s.synthetic || e.started().dataset().synthetic();
                const int keep = e.started().resumed_from_epoch();
                r.epochs.removeIf([keep](const EpochPoint &p) { return p.epoch > keep; });
                epochTimes.removeIf([keep](const auto &entry) { return entry.key() > keep; });
                if (e.started().has_network())
                    r.network = networkOf(e.started().network());
                if (e.started().gradient_bytes() > 0)
                    r.gradientBytes = double(e.started().gradient_bytes());
                r.threads = e.started().threads();
                r.coreShare = coreShareOf(e.started());
                r.steps.removeIf([keep](const StepPoint &p) { return p.epoch > keep; });
            } else if (e.has_step()) {
                StepPoint p;
                p.step = e.step().step();
                p.epoch = e.step().epoch();
                p.loss = e.step().loss();
                p.elapsedSeconds = offset + e.step().elapsed_seconds();
                if (e.step().step_seconds() > 0)
                    p.times
                        = { e.step().data_seconds(), e.step().forward_seconds(), e.step().backward_seconds(),
                              e.step().exposed_allreduce_seconds(), e.step().optimizer_seconds() };
                lastElapsed = std::max(lastElapsed, e.step().elapsed_seconds());
                r.steps << p;
            } else if (e.has_epoch()) {
                const auto &m = e.epoch();
                EpochPoint p;
                p.epoch = m.epoch();
                p.trainLoss = m.train_loss();
                p.trainAccuracy = m.train_accuracy();
                p.testLoss = m.test_loss();
                p.testAccuracy = m.test_accuracy();
                p.elapsedSeconds = offset + m.elapsed_seconds();
                p.imagesPerSecond = m.images_per_second();
                if (const auto &n = m.gradient_noise(); n.samples() > 0)
                    p.noise = { n.b_simple() > 0 ? n.b_simple() : kNotMeasured, n.grad_squared(),
                        n.trace_sigma(), n.samples(), n.batches_per_step(), n.differenced() };
                lastElapsed = std::max(lastElapsed, m.elapsed_seconds());
                r.epochs.removeIf([&](const EpochPoint &old) { return old.epoch == p.epoch; });
                r.epochs << p;
                ++r.epochsTrained; // an epoch trained again after a resume counts again
                if (m.ranks_size() > 0)
                    epochTimes.insert(m.epoch(), epochTimesOf(m));
            } else if (e.has_checkpoint()) {
                checkpointSeconds += e.checkpoint().seconds();
            } else if (e.has_summary() && e.summary().state() == v1::SUCCEEDED) {
                lastElapsed = std::max(lastElapsed, e.summary().wall_seconds());
            }
        }
        offset += lastElapsed;
    }
    r.imagesPerSecond = runImagesPerSecond(r.epochs);
    r.anatomy = anatomyOf(epochTimes, checkpointSeconds);
    for (const EpochPoint &p : r.epochs)
        if (p.noise.measured())
            r.noise = p.noise;
    if (!r.epochs.isEmpty()) {
        r.finalTestAccuracy = r.epochs.last().testAccuracy;
        r.bestTestAccuracy = 0;
        for (const auto &p : r.epochs) {
            r.bestTestAccuracy = std::max(r.bestTestAccuracy, p.testAccuracy);
            if (!r.timeToTargetSeconds && std::isfinite(s.targetAccuracy)
                && p.testAccuracy >= s.targetAccuracy)
                r.timeToTargetSeconds = p.elapsedSeconds;
        }
    }
    if (succeeded)
        r.wallSeconds = offset;
}

// This console's software; the agents' and workers' are added from what they reported.
void addConsoleSoftware(StudySnapshot &s)
{
    s.software.insert(QStringLiteral("console: ScaleLab"),
        QStringLiteral("%1 (git %2)")
            .arg(QStringLiteral(SCALELAB_VERSION), QString::fromLatin1(common::gitCommit())));
    s.software.insert(QStringLiteral("console: Qt"), QString::fromLatin1(qVersion()));
    s.software.insert(QStringLiteral("console: gRPC"), grpcVersion());
    s.software.insert(QStringLiteral("console: protobuf"),
        QString::fromStdString(google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION)));
}

} // namespace

RunConfig singleRunConfig(const v1::StartWorkersRequest &request)
{
    RunConfig c;
    const v1::RunSpec &spec = request.spec();
    c.workers = std::max(1, request.world_size());
    c.baseline = c.workers == 1;
    c.batchSize = spec.batch_size();
    c.epochs = spec.epochs();
    c.gpusPerWorker = spec.gpus_per_worker();
    c.threadsPerWorker = spec.threads_per_worker();
    c.precision = spec.precision() == v1::BF16 ? QStringLiteral("bf16") : QStringLiteral("fp32");
    c.lrRule = spec.lr_scaling().empty() ? QStringLiteral("none") : QString::fromStdString(spec.lr_scaling());
    if (!spec.model().empty())
        c.model = QString::fromStdString(spec.model());
    c.accumulationSteps = std::max(1, spec.accumulation_steps());
    if (spec.batches_per_step() > 0) // started on fewer workers than asked for
        c.workers = std::max(c.workers, spec.batches_per_step() / c.accumulationSteps);
    return c;
}

StudySnapshot singleRunSnapshot(const Journal &journal, const SingleRunEntry &entry)
{
    StudySnapshot s;
    const v1::RunSpec &spec = entry.request.spec();
    s.studyId = entry.runId;
    s.name = entry.label.isEmpty() ? entry.runId : entry.label;
    s.state = RunRecord::stateName(entry.state);
    s.dataset = QString::fromStdString(spec.dataset());
    s.createdUnixMs = entry.launchedUnixMs;
    s.finishedUnixMs = entry.endedUnixMs;
    addConsoleSoftware(s);
    RunResult r;
    r.runId = entry.runId;
    r.config = singleRunConfig(entry.request);
    r.state = s.state;
    r.attempts << AttemptRecord { 1, { entry.agent }, s.state, {}, 0, entry.launchedUnixMs, entry.endedUnixMs,
        0, {}, std::max(1, entry.request.world_size()), {} };
    foldRunEvents(r, journal, entry.state == v1::SUCCEEDED, s);
    s.runs << r;
    return s;
}

StudySnapshot buildSnapshot(const StudyState &state, const Journal &journal)
{
    StudySnapshot s;
    s.studyId = state.studyId();
    s.name = state.name();
    s.state = state.state();
    s.dataset = QString::fromStdString(state.plan().dataset());
    for (const auto &[sum, name] : state.plan().model_names())
        s.modelNames.insert(
            QStringLiteral("sha256:") + QString::fromStdString(sum), QString::fromStdString(name));
    s.targetAccuracy = state.plan().target_accuracy() > 0 ? state.plan().target_accuracy() : kNotMeasured;
    s.createdUnixMs = state.createdUnixMs();
    s.finishedUnixMs = state.endedUnixMs();
    s.nodes = state.nodes();
    s.planJson = planToJson(state.plan());
    if (state.plan().learning_rate_auto()) {
        const LearningRateSearch &search = state.learningRateSearch();
        if (search.found)
            s.learningRateNote = QStringLiteral("auto: %1 at global batch %2, from the range test on %3 (%4 steps; "
                                                "lowest smoothed loss at lr %5; %6)")
                                     .arg(QString::number(search.found->learningRate, 'g', 4))
                                     .arg(search.found->batch)
                                     .arg(search.agent)
                                     .arg(search.steps)
                                     .arg(QString::number(search.minLossLearningRate, 'g', 4), search.rule);
        else if (search.gaveUp)
            s.learningRateNote = QStringLiteral("auto: the range test failed %1 times (%2)")
                                     .arg(search.failures)
                                     .arg(search.lastFailure);
        else
            s.learningRateNote = QStringLiteral("auto: the range test has not chosen yet");
        s.learningRateCurve = search.points;
    }
    s.networkProbes = state.networkProbes();
    s.networkNote = state.networkNote();
    addConsoleSoftware(s);
    for (const NodeInfo &node : s.nodes)
        for (auto it = node.software.cbegin(); it != node.software.cend(); ++it)
            if (!s.software.contains(QStringLiteral("agent: %1").arg(it.key())))
                s.software.insert(QStringLiteral("agent: %1").arg(it.key()), it.value());
    if (state.isTune()) {
        const TuneSettings &t = state.scheduler().settings();
        s.tune = true;
        s.tuneMetric = t.metric;
        s.tuneMaximize = t.maximize;
        s.tuneTrialEpochs = t.trialEpochs;
        s.tuneScheduler = t.asha()
            ? QStringLiteral("ASHA %1, η %2, grace %3 epoch(s), at most %4 epochs%5")
                  .arg(t.variant)
                  .arg(t.reductionFactor)
                  .arg(t.gracePeriod)
                  .arg(t.trialEpochs)
                  .arg(t.brackets > 1 ? QStringLiteral(", %1 brackets").arg(t.brackets) : QString())
            : QStringLiteral("none: every trial trains %1 epoch(s)").arg(t.trialEpochs);
    }
    for (const auto &progress : state.runs()) {
        RunResult r;
        r.runId = progress.planned.runId;
        r.trial = progress.planned.trial;
        r.params = progress.planned.params;
        r.decisions = progress.decisions;
        r.trialTarget = progress.target;
        r.config = progress.planned.config;
        r.repeat = progress.planned.repeat;
        r.state = phaseName(progress.phase);
        r.stateReason = progress.reason;
        r.attempts = progress.attempts;
        foldRunEvents(r, journal, progress.phase == RunPhase::Succeeded, s);
        if (!r.attempts.isEmpty() && r.attempts.last().transferredEpoch > 0
            && (progress.attemptOpen() || progress.phase == RunPhase::Succeeded))
            r.stateReason = resumeNote(r.attempts.last());
        if (progress.attemptOpen() && progress.stalledSinceMs > 0)
            r.stateReason = stallText(progress, QDateTime::currentMSecsSinceEpoch());
        s.runs << r;
    }
    return s;
}

} // namespace scalelab::core
