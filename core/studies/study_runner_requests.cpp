// StudyRunner, the requests part: recording a new study, and what any process may ask of
// a study through its journal (cancel, retry, continue), for the process that drives it to
// act on. The contract is in study_runner.h.
#include "qt_text.h"

#include "journal_events.h"
#include "study_runner.h"

#include "plan_models.h"

#include "spec_rules.h"

#include <QJsonArray>

namespace scalelab::core {
namespace {

Status appended(const Result<qint64> &id)
{
    return id ? Status::success() : Status::failure(id.error());
}

} // namespace

Result<QString> StudyRunner::createStudy(const v1::StudyPlan &given, const QString &planDir)
{
    if (const CheckStatus valid = checkPlan(given); !valid)
        return Status::failure(
            QStringLiteral("the plan is not valid:\n  ") + valid.error().join(QLatin1String("\n  ")));
    if (m_agents.isEmpty())
        return Status::failure(QStringLiteral("no agent to run the study on: give at least one agent"));
    v1::StudyPlan plan = given;
    if (const Status resolved = resolvePlanModels(&plan, planDir, modelStore()); !resolved)
        return resolved;
    const QString studyId = newStudyId();
    const QList<PlannedRun> runs = expandPlan(plan, studyId);
    const v1::StudyEvent created
        = journal_events::studyCreated(str(plan.name()), plan, m_agents.keys(), runs);
    if (const auto recorded = m_journal->append(studyId, created); !recorded)
        return Status::failure(recorded.error());
    return studyId;
}

Status StudyRunner::knownStudy(const Journal &journal, const QString &studyId)
{
    if (journal.hasStudy(studyId))
        return Status::success();
    return Status::failure(
        QStringLiteral("no study %1 in %2 (see `scalelab-cli study list`)").arg(studyId, journal.path()));
}

Status StudyRunner::requestCancel(Journal *journal, const QString &studyId, const QString &runId)
{
    if (Status known = knownStudy(*journal, studyId); !known)
        return known;
    return appended(journal->append(studyId, journal_events::cancelRequested(runId)));
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
        if (Status recorded = appended(journal->append(studyId, journal_events::agentsAdded(added)));
            !recorded)
            return recorded;
    }
    return appended(journal->append(studyId, journal_events::retryRequested(runId)));
}

Status StudyRunner::requestContinue(
    Journal *journal, const QString &studyId, const QString &runId, int moreEpochs)
{
    if (Status known = knownStudy(*journal, studyId); !known)
        return known;
    const StudyState state = StudyState::replay(journal->events(studyId));
    if (!state.isTune())
        return Status::failure(
            QStringLiteral("study %1 is not a tune: only a tune's trials can be continued (a "
                           "study's run is retried with `study retry`)")
                .arg(studyId));
    const RunProgress *run = state.run(runId);
    if (!run)
        return Status::failure(
            QStringLiteral("tune %1 has no trial %2 (see `scalelab-cli study show %1`)").arg(studyId, runId));
    if (run->phase != RunPhase::Succeeded && run->phase != RunPhase::Stopped
        && run->phase != RunPhase::Paused)
        return Status::failure(
            QStringLiteral("trial %1 is %2: only a finished, stopped or paused trial can be continued")
                .arg(runId, phaseName(run->phase)));
    if (run->decisionDue)
        return Status::failure(
            QStringLiteral("trial %1 has just reached epoch %2 and its scheduler is deciding; "
                           "try again in a moment")
                .arg(runId)
                .arg(run->target));
    const int total = run->epochsDone() + moreEpochs;
    if (moreEpochs < 1 || total > rules::kMaxEpochs)
        return Status::failure(QStringLiteral("--epochs: give 1 to %1 more epochs (got %2)")
                                   .arg(rules::kMaxEpochs - run->epochsDone())
                                   .arg(moreEpochs));
    return appended(journal->append(studyId, journal_events::trialContinued(runId, total)));
}

} // namespace scalelab::core
