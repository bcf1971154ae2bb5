// StudyRunner, the part only a tune needs: the scheduler's decision for each trial whose
// attempt reached its rung, and ASHA's promotions. The contract is in study_runner.h.
#include "study_runner.h"

#include "journal_events.h"

#include <algorithm>
#include <limits>

namespace scalelab::core {

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
                value = epochMetric(
                    metric, e.epoch().test_accuracy(), e.epoch().test_loss(), e.epoch().train_loss());
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
            Q_EMIT message(
                QStringLiteral("%1: no result was reported for epoch %2 (the newest is epoch %3); judged "
                               "without a value")
                    .arg(id)
                    .arg(run->target)
                    .arg(epoch));
            epoch = run->target;
            value = std::numeric_limits<double>::quiet_NaN();
        }
        const TrialDecision decision = m_state.scheduler().decide(id, epoch, value, run->continuedTo);
        if (!record(journal_events::trialDecision(decision)))
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
    bool promoted = false;
    while (slots-- > 0) {
        const auto promotion = m_state.scheduler().nextPromotion();
        if (!promotion)
            break;
        if (!record(journal_events::trialDecision(*promotion)))
            return;
        promoted = true;
        Q_EMIT message(QStringLiteral("%1: %2").arg(promotion->runId, promotion->reason));
    }
    // Nothing runs, nothing waits and nothing can be promoted: the paused trials stay
    // where they are, stopped at their rung. A trial promoted just now waits to be placed
    // (the counts above are from before it): its result may promote a paused one yet.
    if (promoted || open > 0 || queued > 0 || fresh > 0 || m_state.scheduler().nextPromotion())
        return;
    QStringList paused;
    for (const auto &run : m_state.runs())
        if (run.phase == RunPhase::Paused)
            paused << run.planned.runId;
    for (const QString &id : paused) {
        const RunProgress *run = m_state.run(id);
        const TrialDecision last = run->decisions.isEmpty() ? TrialDecision {} : run->decisions.last();
        const TrialDecision decision = m_state.scheduler().closeOut(id, last.epoch, last.value);
        if (!record(journal_events::trialDecision(decision)))
            return;
        Q_EMIT message(QStringLiteral("%1: %2").arg(id, decision.reason));
    }
}

} // namespace scalelab::core
