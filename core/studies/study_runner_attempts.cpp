// StudyRunner, the attempts part: starting an attempt's ranks on its agents, following
// their event streams (stored, then acted on), stalls, and how an attempt ends. The
// contract is in study_runner.h; the rules it decides by are in attempt_outcome.h.
#include "model_upload.h"

#include "journal_events.h"
#include "plan_models.h"
#include "qt_text.h"
#include "study_runner.h"
#include "worker_contract.h"

#include "checkpoint_courier.h"
#include "run_record.h"
#include "run_watch.h"

#include <QDateTime>
#include <QJsonArray>
#include <QRandomGenerator>
#include <QTimer>

#include <algorithm>

namespace scalelab::core {
namespace {

// Room an agent needs to record a run (request, placement, the start of its event log).
constexpr qint64 kRecordSpace = 1'000'000;

// The terminal state an event reports for the ranks of one agent (its last event, the
// state change after the summary), or "". `diverged` is set when the summary says the
// loss diverged (a recipe failure: not retried).
QString terminalState(
    const v1::RunEvent &e, QString *message, bool *diverged = nullptr, qint64 *spaceNeeded = nullptr)
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

} // namespace

Status StudyRunner::sendModels(const RunProgress &run, const v1::RunSpec &spec)
{
    QStringList sums;
    for (const std::string &model : { spec.model(), spec.initial_weights() })
        if (worker::isModelSha256(model))
            sums << str(model);
    for (const QString &sum : sums) {
        const auto file = storedModelFile(modelStore(), sum);
        if (!file)
            return Status::failure(Status::Code::FailedPrecondition, file.error());
        for (const auto &p : run.portions) {
            const QString key = p.agent + QLatin1Char('|') + sum;
            if (m_modelsSent.contains(key))
                continue;
            AgentClient *c = client(p.agent);
            if (!c)
                continue; // startAttempt says so
            auto read = readModelFile(*file);
            if (!read || read->sha256 != sum.mid(7))
                return Status::failure(Status::Code::FailedPrecondition,
                    read ? QStringLiteral("%1 no longer has the sum of %2").arg(*file, sum) : read.error());
            read->name = modelDisplayName(m_state.plan(), sum); // the plan's file name, not the store's
            if (read->name.startsWith(QLatin1String("TorchScript ")))
                read->name = sum.mid(7, 12) + QStringLiteral(".pt");
            v1::StoredModel stored;
            bool sent = false;
            if (const Status s = sendModel(c, *read, &stored, &sent); !s.ok())
                return Status::failure(
                    s.isInvalidArgument() ? Status::Code::FailedPrecondition : Status::Code::Unavailable,
                    QStringLiteral("%1: cannot send the module %2: %3")
                        .arg(agentLabel(p.agent), read->name, s.error()));
            m_modelsSent.insert(key);
            if (sent)
                Q_EMIT message(QStringLiteral("%1: sent the module %2 (%3 bytes) to %4")
                                   .arg(run.planned.runId, read->name)
                                   .arg(read->size)
                                   .arg(agentLabel(p.agent)));
        }
    }
    return Status::success();
}

void StudyRunner::startAttempt(const RunProgress &run)
{
    v1::RunSpec spec = runSpecFor(m_state.plan(), run.planned, m_state.learningRateSearch().found);
    // An elastic run on fewer workers than planned keeps the planned run's K micro-batches
    // a step (and so its global batch, data order and schedule): each worker takes more.
    int world = 0;
    for (const auto &p : run.portions)
        world += int(p.ranks.size());
    if (world < run.planned.config.workers)
        spec.set_batches_per_step(run.planned.config.batchesPerStep());
    if (run.planned.trial && run.target > 0 && run.target < run.planned.config.epochs)
        spec.set_stop_after_epochs(run.target); // a tune's rung: the scheduler decides what follows
    v1::Endpoint rendezvous;
    auto fail = [&](const QString &reason, bool retryable, const QString &unreachableAgent = {}) {
        for (const auto &p : run.portions) // ranks already started must not linger
            if (AgentClient *c = client(p.agent)) {
                v1::StopRunResponse ignored;
                (void)c->stopRun(
                    run.planned.runId, &ignored); // best effort: an agent not reached ends them itself
            }
        endFailedAttempt(run, reason,
            unreachableAgent.isEmpty() ? QStringList {} : QStringList { unreachableAgent },
            unreachableAgent.isEmpty() ? 0 : QDateTime::currentMSecsSinceEpoch(), retryable);
        Q_EMIT message(QStringLiteral("%1: attempt %2 could not start: %3")
                           .arg(run.planned.runId)
                           .arg(run.attempt)
                           .arg(reason));
    };
    if (const Status sent = sendModels(run, spec); !sent)
        return fail(sent.error(), !sent.isFailedPrecondition());
    if (const Status sent = m_courier->sendBeforeStart(run); !sent) {
        if (sent.code() != Status::Code::Cancelled) // Cancelled: the journal refused, and the runner said so
            fail(sent.error(), !sent.isFailedPrecondition());
        return;
    }
    for (const auto &p : run.portions) {
        AgentClient *c = client(p.agent);
        if (!c)
            return fail(QStringLiteral("agent %1 is not configured in this console").arg(p.agent), true);
        v1::StartWorkersRequest request;
        request.set_run_id(run.planned.runId.toStdString());
        request.set_attempt(run.attempt);
        request.set_world_size(world);
        for (int rank : p.ranks)
            request.add_ranks(rank);
        *request.mutable_spec() = spec;
        if (!rendezvous.host().empty())
            *request.mutable_rendezvous() = rendezvous;
        v1::StartWorkersResponse response;
        const Status result = c->startWorkers(request, &response);
        if (result.isFailedPrecondition() && result.error().contains(QLatin1String("is still running"))) {
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
        if (result.isResourceExhausted()
            && result.error().contains(QLatin1String("no space left on device"))) {
            // The agent could not even record the run: wait for space there, not counted.
            for (const auto &q : run.portions) // ranks already started must not linger
                if (AgentClient *other = client(q.agent)) {
                    v1::StopRunResponse ignored;
                    (void)other->stopRun(run.planned.runId, &ignored); // best effort, as above
                }
            endFailedAttempt(run, QStringLiteral("%1: %2").arg(agentLabel(p.agent), result.error()), {}, 0,
                true, p.agent, kRecordSpace);
            return;
        }
        if (!result.ok()) {
            // Bad input stays bad; an unreachable or busy agent may do better next time,
            // and an unreachable one is waited for, not counted.
            return fail(QStringLiteral("%1: %2").arg(agentLabel(p.agent), result.error()),
                !result.isInvalidArgument(), result.isUnreachable() ? p.agent : QString());
        }
        if (rendezvous.host().empty()) // an agent asked again (already running) reports it in `run`
            rendezvous
                = !response.rendezvous().host().empty() ? response.rendezvous() : response.run().rendezvous();
    }
    record(journal_events::attemptRunning(run.planned.runId, run.attempt,
        QStringLiteral("%1:%2").arg(str(rendezvous.host())).arg(rendezvous.port())));
}

// The watch of portion `i` of `run`'s attempt: its event stream, resumed after the events
// already stored (which may already say the portion ended, or name a checkpoint not copied
// yet), or its end when its agent is not configured here.
StudyRunner::PortionWatch StudyRunner::watchPortion(const RunProgress &run, int i)
{
    const QString id = run.planned.runId;
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
            m_courier->queue(CopyRequest { id, run.attempt, checkpointEpoch, w.agent });
        if (w.outcome.isEmpty()) {
            w.watch = std::make_unique<RunWatch>(c, id);
            w.watch->setGiveUpAfterMs(0); // the runner decides when an agent is lost
            connect(w.watch.get(), &RunWatch::eventsArrived, this, [this, id, i] { onEvents(id, i); });
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
                Q_EMIT message(
                    QStringLiteral("%1: %2 answers again (unreachable for %3 s)")
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
    return w;
}

void StudyRunner::followAttempt(const RunProgress &run)
{
    const QString id = run.planned.runId;
    auto &watches = m_watches[id];
    if (!watches.empty() && watches.front().attempt != run.attempt)
        watches.clear();
    if (watches.empty())
        for (int i = 0; i < run.portions.size(); ++i)
            watches.push_back(watchPortion(run, i));

    const bool cancelling = run.cancelRequested || m_state.cancelRequested();
    // The rules are in attempt_outcome.h; the runner supplies the clock and does the I/O.
    std::vector<PortionState *> portions;
    for (auto &w : watches)
        portions.push_back(&w);
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const int collectiveSeconds = m_state.plan().training().collective_timeout_seconds() > 0
        ? m_state.plan().training().collective_timeout_seconds()
        : 120;
    markLostPortions(
        portions, now, collectiveSeconds, cancelling, RunWatch::kUnreachableMs,
        [this](const QString &agent) { return agentLabel(agent); }, clockTime);
    // A failed portion or a cancel stops every other portion of the attempt.
    if (anyPortionFailed(portions) || cancelling)
        for (auto &w : watches)
            if (w.outcome.isEmpty() && !w.stopSent)
                if (AgentClient *c = client(w.agent)) {
                    v1::StopRunResponse ignored;
                    const Status result = c->stopRun(id, &ignored);
                    w.stopSent = true;
                    if (result.isNotFound()) {
                        w.outcome = QStringLiteral("CANCELLED");
                        w.message = result.error();
                    } else if (result.isUnreachable()) {
                        // Its ranks have lost their peers: nothing there to wait for.
                        w.outcome = QStringLiteral("LOST");
                        w.unreachableSinceMs = w.unreachableSinceMs ? w.unreachableSinceMs : now;
                        w.message
                            = QStringLiteral("%1 unreachable since %2 (%3)")
                                  .arg(agentLabel(w.agent), clockTime(w.unreachableSinceMs), result.error());
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
    // Stopped to grow (attempt_resizing): not a failure, nor a cancel.
    const bool resized
        = !run.resizing.isEmpty() && !cancelling && ended.outcome != QLatin1String("SUCCEEDED");
    const QString outcome = resized ? QStringLiteral("RESIZED") : ended.outcome;
    const QString reason = resized ? run.resizing : ended.reason;
    m_watches.erase(id);
    m_stallMessageMs.erase(id);
    if (outcome == QLatin1String("FAILED")) {
        // A diverged run would diverge again from its checkpoint: the recipe failed, not a
        // machine. It ends FAILED now; `study retry` after a change of recipe is the way on.
        endFailedAttempt(run, ended.failure, ended.lostAgents, ended.lostSinceMs, ended.retry,
            ended.spaceShortOn, ended.spaceNeeded);
    } else {
        record(
            journal_events::attemptEnded(id, run.attempt, journal_events::outcomeFromName(outcome), reason));
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
    if (const Status stored = m_journal->appendRunEvents(m_studyId, runId, w.attempt, w.agent, events);
        !stored) {
        m_timer.stop();
        Q_EMIT fatal(stored.error());
        return;
    }
    // Rank 0's agent (the first portion's) reports the checkpoints. The last one of a
    // run is not copied: nothing is left to resume after it.
    const RunProgress *run = m_state.run(runId);
    for (const auto &e : events)
        if (portion == 0 && run && e.has_checkpoint() && copyWorthwhile(*run, e.checkpoint().epoch()))
            m_courier->queue(CopyRequest { runId, w.attempt, e.checkpoint().epoch(), w.agent });
    for (const auto &e : events)
        if (portion == 0 && run && e.has_checkpoint())
            growAtCheckpoint(*run, e.checkpoint().epoch());
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

QString StudyRunner::unreachableRanks(const QString &runId, bool probe)
{
    const RunProgress *run = m_state.run(runId);
    auto it = m_watches.find(runId);
    if (!run || it == m_watches.end())
        return {};
    const std::size_t portions = std::min(it->second.size(), std::size_t(run->portions.size()));
    // The portions whose stream has not noticed yet are asked (briefly), all at once.
    std::vector<AgentClient *> asked(portions, nullptr);
    if (probe)
        for (std::size_t i = 1; i < portions; ++i)
            if (it->second[i].unreachableSinceMs <= 0)
                asked[i] = client(it->second[i].agent);
    const std::vector<DescribeAnswer> answers
        = probe ? describeEach(asked, 1500) : std::vector<DescribeAnswer>(portions);
    QStringList parts;
    for (std::size_t i = 1; i < portions; ++i) {
        const PortionWatch &w = it->second[i];
        QString since;
        if (w.unreachableSinceMs > 0)
            since = clockTime(w.unreachableSinceMs);
        else if (asked[i] && !answers[i].status.ok())
            since = QStringLiteral("now");
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
        if (!record(
                journal_events::runStalled(runId, attempt, stall.since_unix_ms(), stall.last_step(), detail)))
            return;
        m_stallMessageMs[runId] = QDateTime::currentMSecsSinceEpoch();
        if (const RunProgress *now = m_state.run(runId))
            Q_EMIT message(QStringLiteral("%1: %2 (last step %3)")
                               .arg(runId, stallText(*now, QDateTime::currentMSecsSinceEpoch()))
                               .arg(stall.last_step()));
    } else {
        if (!record(journal_events::runUnstalled(runId, attempt, stall.seconds())))
            return;
        m_stallMessageMs.erase(runId);
        Q_EMIT message(QStringLiteral("%1: progress again after %2 s without any")
                           .arg(runId)
                           .arg(stall.seconds(), 0, 'f', 0));
    }
}

void StudyRunner::endFailedAttempt(const RunProgress &run, const QString &reason,
    const QStringList &unreachable, qint64 unreachableSinceMs, bool retryable, const QString &spaceShortOn,
    qint64 spaceNeeded)
{
    // An attempt lost to an unreachable host does not count against maxFailures: the run
    // waits for the host (or for others that can take it) instead of burning its retries.
    // Nor does one whose checkpoint did not fit: it waits for an agent with the space.
    const bool counts = unreachable.isEmpty() && spaceShortOn.isEmpty();
    const bool cancelled = run.cancelRequested || m_state.cancelRequested();
    const bool retry = retryable && !cancelled && (!counts || m_state.shouldRetry(run));
    int failedAttempts = 0;
    for (const auto &a : run.attempts)
        failedAttempts
            += a.outcome != QLatin1String("SUCCEEDED") && a.outcome != QLatin1String("RESIZED") ? 1 : 0;
    // An elastic run that lost a host goes on at once on the hosts it still has: its cause
    // is known, and waiting is what it was asked not to do.
    const bool goOnAtOnce = run.planned.config.elastic() && !unreachable.isEmpty();
    const qint64 notBefore = retry ? QDateTime::currentMSecsSinceEpoch()
            + (goOnAtOnce ? 0 : retryBackoffMs(failedAttempts, QRandomGenerator::global()->generateDouble()))
                                   : 0;
    v1::StudyEvent event
        = journal_events::attemptEnded(run.planned.runId, run.attempt, v1::ATTEMPT_FAILED, reason);
    v1::AttemptEnded &ended = *event.mutable_attempt_ended();
    ended.set_retry(retry);
    ended.set_counts(counts);
    ended.set_not_before(notBefore);
    if (!spaceShortOn.isEmpty()) {
        ended.mutable_no_space()->set_agent(spaceShortOn.toStdString());
        ended.mutable_no_space()->set_bytes_needed(spaceNeeded);
    }
    QStringList labels;
    for (const QString &a : unreachable) {
        ended.add_unreachable(a.toStdString());
        labels << agentLabel(a);
    }
    if (!unreachable.isEmpty()) {
        ended.set_unreachable_since(unreachableSinceMs);
        ended.set_unreachable_text(labels.join(QLatin1String(", ")).toStdString());
    }
    if (!record(event))
        return;
    afterAttemptEnded(run.planned.runId);
    const RunProgress *after = m_state.run(run.planned.runId);
    if (!after)
        return;
    Q_EMIT message(
        QStringLiteral("%1: attempt %2 FAILED (%3) — run %4%5")
            .arg(run.planned.runId)
            .arg(run.attempt)
            .arg(reason, phaseName(after->phase))
            .arg(after->phase == RunPhase::Pending
                    ? (counts ? QStringLiteral(", next attempt in %1 s")
                                    .arg((notBefore - QDateTime::currentMSecsSinceEpoch() + 999) / 1000)
                            : !spaceShortOn.isEmpty()
                            ? QStringLiteral(", waiting for %1 MB free on an agent")
                                  .arg((spaceNeeded + 999'999) / 1'000'000)
                            : QStringLiteral(", waiting for %1").arg(labels.join(QLatin1String(", "))))
                    : QString()));
}

void StudyRunner::growAtCheckpoint(const RunProgress &run, int epoch)
{
    const RunConfig &config = run.planned.config;
    int world = 0;
    for (const auto &p : run.portions)
        world += int(p.ranks.size());
    const bool last = epoch >= config.epochs || (run.target > 0 && epoch >= run.target);
    if (!config.elastic() || world >= config.workers || last || !run.resizing.isEmpty() || !run.attemptOpen())
        return;
    // The agents as they are now, with this run's own ranks free again: the planned size
    // must fit where nothing else of the study runs.
    QList<NodeCapacity> nodes = refreshCapacity(true);
    // A run that lost hosts grows when one of them is back (the hosts it kept took all the
    // ranks they could when it shrank).
    const bool lostOneBack = std::any_of(nodes.begin(), nodes.end(),
        [&](const NodeCapacity &n) { return n.reachable && run.lostAgents.contains(n.agent); });
    if (!run.lostAgents.isEmpty() && !lostOneBack)
        return;
    QSet<QString> others;
    for (const auto &r : m_state.runs())
        if (r.attemptOpen() && r.planned.runId != run.planned.runId)
            for (const auto &p : r.portions)
                others.insert(p.agent);
    for (auto &n : nodes) {
        n.busy = others.contains(n.agent);
        for (const auto &p : run.portions)
            if (p.agent == n.agent)
                n.freeSlots += int(p.ranks.size());
    }
    const bool exclusive = !m_state.plan().share_nodes() && !m_state.isTune();
    const auto policy
        = m_state.plan().placement() == "spread" ? PlacementPolicy::Spread : PlacementPolicy::Pack;
    if (!placeRun(config, nodes, policy, exclusive, str(m_state.plan().dataset())).ok())
        return;
    const QString why
        = QStringLiteral("stopped after the checkpoint of epoch %1 to grow from %2 to %3 workers")
              .arg(epoch)
              .arg(world)
              .arg(config.workers);
    // Journaled first: a runner started again after this point still ends the attempt RESIZED.
    if (!record(journal_events::attemptResizing(run.planned.runId, run.attempt, why)))
        return;
    for (const auto &p : run.portions)
        if (AgentClient *c = client(p.agent)) {
            v1::StopRunResponse ignored;
            (void)c->stopRun(run.planned.runId, &ignored); // its end is followed as any other
        }
    Q_EMIT message(QStringLiteral("%1: %2").arg(run.planned.runId, why));
}

} // namespace scalelab::core
