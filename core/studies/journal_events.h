// The study journal's events as the runner writes them: one builder per event of
// proto/scalelab/v1/journal.proto, from core's own types, so that what is written and what
// StudyState::apply reads are the same messages. Pure functions.
#pragma once

#include "placement.h"
#include "study_model.h"
#include "study_plan.h"
#include "tune_decisions.h"

#include "scalelab/v1/journal.pb.h"

#include <QJsonArray>
#include <QList>
#include <QString>
#include <QStringList>

namespace scalelab::core::journal_events {

v1::StudyEvent studyCreated(
    const QString &name, const v1::StudyPlan &plan, const QStringList &agents, const QList<PlannedRun> &runs);
v1::StudyEvent nodesSeen(const QList<NodeInfo> &nodes);
v1::StudyEvent runPending(const QString &runId, const QString &reason);
// `resize`: why the attempt's size differs from the attempt before (or the plan), when it does.
v1::StudyEvent attemptStarting(
    const QString &runId, int attempt, const QList<Portion> &portions, const QString &resize = {});
v1::StudyEvent attemptRunning(const QString &runId, int attempt, const QString &rendezvous);
// An attempt that ended and is not retried, or (FAILED) the start of one: the failure's own
// fields are set on the returned message's attempt_ended().
v1::StudyEvent attemptEnded(
    const QString &runId, int attempt, v1::AttemptOutcome outcome, const QString &reason);
v1::StudyEvent attemptResizing(const QString &runId, int attempt, const QString &reason);
v1::StudyEvent runStalled(
    const QString &runId, int attempt, qint64 sinceUnixMs, qint64 lastStep, const QString &detail);
v1::StudyEvent runUnstalled(const QString &runId, int attempt, double seconds);
v1::StudyEvent checkpointCopied(
    const QString &runId, int attempt, int epoch, const QString &agent, const QString &dir);
v1::StudyEvent checkpointUploaded(
    const QString &runId, int attempt, int epoch, const QString &agent, const QString &from);
// The whole study when runId is empty.
v1::StudyEvent cancelRequested(const QString &runId = {});
v1::StudyEvent retryRequested(const QString &runId);
v1::StudyEvent agentsAdded(const QStringList &agents);
v1::StudyEvent lrFindFailed(const QString &reason, const QString &agent, bool finalAttempt);
// probes: probeJson() objects (network_probe.h).
v1::StudyEvent networkProbed(const QJsonArray &probes, const QString &note);
v1::StudyEvent trialDecision(const TrialDecision &decision);
v1::StudyEvent trialContinued(const QString &runId, int epochs);
v1::StudyEvent studyEnded(const QString &state);

// core's types and their records.
v1::RunConfigRecord configRecord(const RunConfig &config);
RunConfig configFromRecord(const v1::RunConfigRecord &record);
v1::TrialDecisionRecord decisionRecord(const TrialDecision &decision);
TrialDecision decisionFromRecord(const v1::TrialDecisionRecord &record);
NodeInfo nodeFromRecord(const v1::NodeRecord &record);
QJsonObject structToJson(const google::protobuf::Struct &s);

// "SUCCEEDED" for ATTEMPT_SUCCEEDED: the words attempts are shown with.
QString outcomeName(v1::AttemptOutcome outcome);
// And back; ATTEMPT_OUTCOME_UNSPECIFIED for a name that is none.
v1::AttemptOutcome outcomeFromName(const QString &name);

} // namespace scalelab::core::journal_events
