#include "study_state.h"

#include "agent_client.h" // grpcVersion()
#include "build_info.h"
#include "journal_events.h"
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

QString qstr(const std::string &s)
{
    return QString::fromStdString(s);
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
    // One handler per event (journal.proto). An event this release does not know, or one
    // of a run the study does not have, is ignored.
    using E = v1::StudyEvent;
    const E &e = event.event;
    switch (e.event_case()) {
    case E::kStudyCreated:
        return onStudyCreated(e.study_created(), event);
    case E::kAgentsAdded:
        return onAgentsAdded(e.agents_added());
    case E::kNodesSeen:
        return onNodesSeen(e.nodes_seen());
    case E::kLrFound:
        return onLrFound(e.lr_found());
    case E::kNetworkProbed:
        return onNetworkProbed(e.network_probed());
    case E::kLrFindFailed:
        return onLrFindFailed(e.lr_find_failed());
    case E::kCancelRequested:
        return onCancelRequested(e.cancel_requested());
    case E::kRetryRequested:
        return onRetryRequested(e.retry_requested());
    case E::kTrialContinued:
        return onTrialContinued(e.trial_continued());
    case E::kStudyEnded:
        return onStudyEnded(e.study_ended(), event);
    case E::kRunPending:
        return applyToRun(e.run_pending(), &StudyState::onRunPending, event);
    case E::kAttemptStarting:
        return applyToRun(e.attempt_starting(), &StudyState::onAttemptStarting, event);
    case E::kAttemptRunning:
        return applyToRun(e.attempt_running(), &StudyState::onAttemptRunning, event);
    case E::kCheckpointCopied:
        return applyToRun(e.checkpoint_copied(), &StudyState::onCheckpointCopied, event);
    case E::kCheckpointUploaded:
        return applyToRun(e.checkpoint_uploaded(), &StudyState::onCheckpointUploaded, event);
    case E::kAttemptResizing:
        return applyToRun(e.attempt_resizing(), &StudyState::onAttemptResizing, event);
    case E::kRunStalled:
        return applyToRun(e.run_stalled(), &StudyState::onRunStalled, event);
    case E::kRunUnstalled:
        return applyToRun(e.run_unstalled(), &StudyState::onRunUnstalled, event);
    case E::kTrialDecision:
        return applyToRun(e.trial_decision(), &StudyState::onTrialDecision, event);
    case E::kAttemptEnded:
        return applyToRun(e.attempt_ended(), &StudyState::onAttemptEnded, event);
    case E::EVENT_NOT_SET:
        if (!event.unreadable.isEmpty())
            m_unreadable << event.unreadable;
        return;
    }
}

template <class Event>
void StudyState::applyToRun(const Event &e,
    void (StudyState::*handler)(RunProgress *, const Event &, const JournalEvent &),
    const JournalEvent &event)
{
    if (RunProgress *run = mutableRun(QString::fromStdString(e.run_id())))
        (this->*handler)(run, e, event);
}

void StudyState::onStudyCreated(const v1::StudyCreated &p, const JournalEvent &event)
{
    m_studyId = event.studyId;
    m_name = qstr(p.name());
    m_plan = p.plan();
    m_agents.clear();
    for (const auto &a : p.agents())
        m_agents << qstr(a);
    m_created = event.unixMs;
    for (const v1::PlannedRunRecord &r : p.runs()) {
        RunProgress run;
        run.planned.runId = qstr(r.run_id());
        run.planned.repeat = r.repeat();
        run.planned.maxFailures = r.max_failures();
        run.planned.config = journal_events::configFromRecord(r.config());
        run.planned.trial = r.trial();
        run.planned.params = journal_events::structToJson(r.params());
        run.planned.bracket = r.bracket();
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

void StudyState::onAgentsAdded(const v1::AgentsAdded &p)
{
    for (const auto &a : p.agents())
        if (!m_agents.contains(qstr(a)))
            m_agents << qstr(a);
}

void StudyState::onNodesSeen(const v1::NodesSeen &p)
{
    for (const v1::NodeRecord &record : p.nodes()) {
        NodeInfo n = journal_events::nodeFromRecord(record);
        m_nodes.removeIf([&](const NodeInfo &old) { return old.agent == n.agent; });
        m_nodes << n;
    }
}

void StudyState::onLrFound(const v1::LrFound &p)
{
    m_lrSearch.found = FoundLearningRate { p.learning_rate(), p.batch() };
    m_lrSearch.agent = qstr(p.agent());
    m_lrSearch.minLossLearningRate = p.min_loss_lr();
    m_lrSearch.steepestLearningRate = p.steepest_lr();
    m_lrSearch.steps = p.steps();
    m_lrSearch.stoppedEarly = p.stopped_early();
    m_lrSearch.conclusive = !p.has_conclusive() || p.conclusive();
    m_lrSearch.rule = qstr(p.rule());
    m_lrSearch.points.clear();
    for (const v1::LearningRatePoint &point : p.points())
        m_lrSearch.points.append({ point.learning_rate(), point.smoothed_loss() });
}

void StudyState::onNetworkProbed(const v1::NetworkProbed &p)
{
    m_networkProbed = true;
    m_networkProbes = QJsonArray();
    for (const auto &probe : p.probes())
        m_networkProbes.append(journal_events::structToJson(probe));
    m_networkNote = qstr(p.note());
}

void StudyState::onLrFindFailed(const v1::LrFindFailed &p)
{
    ++m_lrSearch.failures;
    m_lrSearch.lastFailure = qstr(p.reason());
    if (p.final_attempt()) {
        m_lrSearch.gaveUp = true;
        for (auto &r : m_runs)
            if (r.phase == RunPhase::Pending) {
                r.phase = RunPhase::Failed;
                r.reason
                    = QStringLiteral("the learning-rate range test failed: %1").arg(m_lrSearch.lastFailure);
            }
    }
}

void StudyState::onCancelRequested(const v1::CancelRequested &p)
{
    const QString runId = qstr(p.run_id());
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

void StudyState::onRetryRequested(const v1::RetryRequested &p)
{
    // A FAILED or CANCELLED run goes back to PENDING for one more attempt (resuming
    // from its last checkpoint); a study that had ended runs again until it is done.
    RunProgress *run = mutableRun(qstr(p.run_id()));
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

void StudyState::onTrialContinued(const v1::TrialContinued &p)
{
    // The user continues a trial beyond its schedule: it is trained to `epochs`, resumed
    // from its last checkpoint; the tune runs again until it is done.
    RunProgress *run = mutableRun(qstr(p.run_id()));
    if (!run || !run->planned.trial
        || (run->phase != RunPhase::Succeeded && run->phase != RunPhase::Stopped
            && run->phase != RunPhase::Paused))
        return;
    const int epochs = p.epochs();
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

void StudyState::onStudyEnded(const v1::StudyEnded &p, const JournalEvent &event)
{
    m_endState = qstr(p.state());
    m_ended = event.unixMs;
}

void StudyState::onRunPending(RunProgress *run, const v1::RunPending &p, const JournalEvent &)
{
    if (!isTerminal(run->phase))
        run->reason = qstr(p.reason());
}

void StudyState::onAttemptStarting(RunProgress *run, const v1::AttemptStarting &p, const JournalEvent &event)
{
    run->attempt = p.attempt();
    run->portions.clear();
    for (const v1::PortionRecord &record : p.portions()) {
        Portion portion;
        portion.agent = qstr(record.agent());
        for (int rank : record.ranks())
            portion.ranks << rank;
        run->portions << portion;
    }
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
    a.resize = qstr(p.resize());
    if (a.worldSize >= run->planned.config.workers)
        run->lostAgents.clear();
    run->attempts << a;
}

void StudyState::onAttemptRunning(RunProgress *run, const v1::AttemptRunning &p, const JournalEvent &)
{
    if (run->phase == RunPhase::Starting && p.attempt() == run->attempt) {
        run->phase = RunPhase::Running;
        run->rendezvous = qstr(p.rendezvous());
        if (!run->attempts.isEmpty())
            run->attempts.last().outcome = QStringLiteral("RUNNING");
    }
}

void StudyState::onCheckpointCopied(RunProgress *run, const v1::CheckpointCopied &p, const JournalEvent &)
{
    if (p.epoch() >= run->checkpoint.epoch)
        run->checkpoint = CopiedCheckpoint { p.epoch(), p.attempt(), qstr(p.agent()), qstr(p.dir()) };
}

void StudyState::onCheckpointUploaded(RunProgress *run, const v1::CheckpointUploaded &p, const JournalEvent &)
{
    if (p.attempt() != run->attempt || run->attempts.isEmpty())
        return;
    AttemptRecord &a = run->attempts.last();
    a.transferredEpoch = p.epoch();
    a.transferredFrom = qstr(p.from());
    if (run->attemptOpen())
        run->reason = resumeNote(a);
}

void StudyState::onAttemptResizing(RunProgress *run, const v1::AttemptResizing &p, const JournalEvent &)
{
    if (p.attempt() == run->attempt && run->attemptOpen())
        run->resizing = qstr(p.reason());
}

void StudyState::onRunStalled(RunProgress *run, const v1::RunStalled &p, const JournalEvent &)
{
    if (p.attempt() != run->attempt || !run->attemptOpen())
        return;
    run->stalledSinceMs = p.since();
    run->stallDetail = qstr(p.detail());
}

void StudyState::onRunUnstalled(RunProgress *run, const v1::RunUnstalled &p, const JournalEvent &)
{
    if (p.attempt() != run->attempt)
        return;
    run->stalledSinceMs = 0;
    run->stallDetail.clear();
}

void StudyState::onTrialDecision(
    RunProgress *run, const v1::TrialDecisionRecord &p, const JournalEvent &event)
{
    TrialDecision d = journal_events::decisionFromRecord(p);
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

void StudyState::onAttemptEnded(RunProgress *run, const v1::AttemptEnded &p, const JournalEvent &event)
{
    if (p.attempt() != run->attempt || !run->attemptOpen())
        return;
    const QString reason = qstr(p.reason());
    if (!run->attempts.isEmpty()) {
        run->attempts.last().outcome = journal_events::outcomeName(p.outcome());
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
    run->notBeforeMs = p.not_before();
    switch (p.outcome()) {
    case v1::ATTEMPT_SUCCEEDED:
        return attemptSucceeded(run, event);
    case v1::ATTEMPT_CANCELLED:
        run->phase = RunPhase::Cancelled;
        return;
    case v1::ATTEMPT_RESIZED:
        // An elastic run stopped at a checkpoint to grow back: placed again at once.
        run->phase = run->cancelRequested ? RunPhase::Cancelled : RunPhase::Pending;
        return;
    default:
        return attemptFailed(run, p);
    }
}

void StudyState::attemptSucceeded(RunProgress *run, const JournalEvent &event)
{
    if (run->planned.trial) {
        // At its target: the tune's scheduler decides what follows (trial_decision).
        run->phase = RunPhase::Paused;
        run->decisionDue = true;
        run->dueSinceEventId = event.id;
        run->reason
            = QStringLiteral("reached epoch %1; waiting for the scheduler's decision").arg(run->target);
        return;
    }
    run->phase = RunPhase::Succeeded;
    // Said in words; the snapshot refines it with the epoch the worker reported.
    if (!run->attempts.isEmpty() && run->attempts.last().transferredEpoch > 0)
        run->reason = QStringLiteral("resumed from epoch %1, checkpoint copied from agent %2")
                          .arg(run->attempts.last().transferredEpoch)
                          .arg(run->attempts.last().transferredFrom);
}

void StudyState::attemptFailed(RunProgress *run, const v1::AttemptEnded &p)
{
    const QString reason = qstr(p.reason());
    const bool counts = !p.has_counts() || p.counts();
    if (counts)
        ++run->failures;
    for (const auto &unreachable : p.unreachable()) {
        const QString a = qstr(unreachable);
        run->waitingFor << a;
        if (run->planned.config.elastic() && !run->lostAgents.contains(a))
            run->lostAgents << a;
    }
    run->unreachableSinceMs = p.unreachable_since();
    const bool noSpace = p.has_no_space();
    if (noSpace) {
        run->spaceNeeded = p.no_space().bytes_needed();
        run->spaceShortOn = qstr(p.no_space().agent());
    }
    if (p.retry() && noSpace) {
        run->phase = RunPhase::Pending;
        run->reason = QStringLiteral("waiting for disk space (not counted as a failure; free space on "
                                     "%1, e.g. `scalelab-cli gc`, or add an agent): %2")
                          .arg(run->spaceShortOn, reason);
    } else if (p.retry() && !counts) {
        run->phase = RunPhase::Pending;
        const QString waitingFor = p.unreachable_text().empty() ? run->waitingFor.join(QLatin1String(", "))
                                                                : qstr(p.unreachable_text());
        run->reason = QStringLiteral("waiting for %1 (unreachable since %2); resumes from its checkpoint "
                                     "when it returns or other hosts can take the run (not counted as a "
                                     "failure): %3")
                          .arg(waitingFor, clockTime(run->unreachableSinceMs), reason);
    } else if (p.retry()) {
        run->phase = RunPhase::Pending;
        run->reason = QStringLiteral("retrying (failure %1 of at most %2): %3")
                          .arg(run->failures)
                          .arg(run->planned.maxFailures)
                          .arg(reason);
    } else {
        run->phase = RunPhase::Failed;
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
