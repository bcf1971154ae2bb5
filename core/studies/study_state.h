// A study's state, rebuilt by replaying its journal events (event sourcing). Replaying
// any prefix of the journal gives a consistent state, so a console killed between any
// two events resumes from exactly what was committed.
// A value type, owned by one thread (the runner's); the references its getters return
// (plan(), runs(), run(), …) stay valid until the next apply() on that thread. Others
// read a copy (StudyRunner::snapshot(), StudyState::replay()).
//
// Journal event types and their payloads:
//   study_created    {name, plan (JSON text), agents [names], runs [{runId, repeat, maxFailures, config,
//                     trial?, params?, bracket?}]}   a tune's trials carry their drawn hyperparameters
//   nodes_seen       {nodes [NodeInfo]}
//   run_pending      {runId, reason}                      why it waits (capacity, retry)
//   attempt_starting {runId, attempt, portions [{agent, ranks}], resize?}   placed; StartWorkers may be in
//                                                          flight; resize: why an elastic run's size
//                                                          differs from its attempt before (or plan)
//   attempt_running  {runId, attempt, rendezvous}          every portion accepted
//   attempt_ended    {runId, attempt, outcome, reason, retry, counts?, unreachable?, unreachableSince?,
//                     notBefore?}                          outcome SUCCEEDED|FAILED|CANCELLED|RESIZED
//                                                          (an elastic run stopped at a checkpoint to
//                                                          grow back: PENDING again, not counted);
//                                                          retry = a FAILED run goes back to PENDING;
//                                                          counts = false when an unreachable agent
//                                                          (listed in `unreachable`) caused it: not
//                                                          one of maxFailures; notBefore = backoff (ms);
//                                                          noSpace {agent, bytesNeeded}: a checkpoint
//                                                          did not fit; not counted, waits for space
//   attempt_resizing {runId, attempt, reason}             an elastic run below its size is stopped at a
//                                                          checkpoint, to start again at its planned size
//   run_stalled      {runId, attempt, since, lastStep, detail}  rank 0 made no progress since `since`
//   run_unstalled    {runId, attempt, seconds}             progress again
//   checkpoint_copied {runId, attempt, epoch, agent, dir}  the console holds a verified copy of the
//                                                          checkpoint `agent` (rank 0's) committed
//   checkpoint_uploaded {runId, attempt, epoch, agent, from}  that copy was written to `agent`, rank 0's
//                                                          of `attempt`, before its start (`from` wrote it)
//   cancel_requested {runId?}                              whole study when runId is absent
//   retry_requested  {runId}                               a FAILED/CANCELLED run goes again
//   agents_added     {agents [names]}                      agents the study may use from now on (a
//                                                          retry after its agents are gone for good)
//   lr_found         {learningRate, batch, agent, minLossLr, steepestLr, steps, stoppedEarly, rule,
//                     points [[lr, smoothed loss], ...]}     the range test of a learningRateAuto plan
//   lr_find_failed   {reason, final}                       final: it will not be tried again and the
//                                                          runs still pending fail with the reason
//   network_probed   {probes [probeJson], note}            the network between the study's hosts,
//                                                          probed once before its runs (note: in
//                                                          words, why there are no probes or
//                                                          why they failed)
//   trial_decision   TrialDecision::toJson()              a tune's scheduler decided about a trial
//                                                          (tune_decisions.h): continue, stop, pause,
//                                                          promote or finish, with its inputs
//   trial_continued  {runId, epochs}                      the user continues a tune's trial to `epochs`
//   study_ended      {state}
#pragma once

#include "journal.h"
#include "placement.h"
#include "study_model.h"
#include "study_plan.h"
#include "tune_decisions.h"

#include <QJsonObject>
#include <QList>
#include <QMap>

namespace scalelab::core {

// Paused and Stopped are a tune's trials': Paused, an attempt ended at a rung and the
// trial waits for its decision or (ASHA promotion) its promotion; Stopped, the scheduler
// ended it early, which is a success for the study.
enum class RunPhase { Pending, Starting, Running, Succeeded, Failed, Cancelled, Paused, Stopped };
QString phaseName(RunPhase phase);
bool isTerminal(RunPhase phase);

// The newest checkpoint of a run that the console holds a copy of.
struct CopiedCheckpoint {
    int epoch = 0; // 0 = none
    int attempt = 0; // that wrote it
    QString agent; // that wrote it (rank 0's), and so holds it
    QString dir; // the copy, in the console's state folder
};

struct RunProgress {
    PlannedRun planned;
    RunPhase phase = RunPhase::Pending;
    QString reason; // why pending / why failed
    int attempt = 0; // latest attempt (0 = never started)
    QList<Portion> portions; // of the latest attempt
    QString rendezvous; // of the latest attempt, "host:port"
    int failures = 0;
    int extraAttempts = 0; // retries the user asked for, on top of maxFailures
    bool cancelRequested = false;
    QList<AttemptRecord> attempts;
    CopiedCheckpoint checkpoint;
    // The agents whose unreachability ended the last attempt: the retry waits for them
    // unless the run fits on as many other hosts. Not counted as failures.
    QStringList waitingFor;
    qint64 unreachableSinceMs = 0;
    // A checkpoint of the last attempt did not fit on its agent's disk: the retry waits
    // for an agent with this much free space (not counted as a failure). 0 = none.
    qint64 spaceNeeded = 0;
    QString spaceShortOn; // the agent whose disk was full
    qint64 notBeforeMs = 0; // the next attempt starts no earlier (backoff)
    // An elastic run's attempt being stopped at a checkpoint to grow back (attempt_resizing):
    // why; it ends RESIZED. Empty otherwise.
    QString resizing;
    // The agents an elastic run lost and went on without (attempt_ended's unreachable ones):
    // it grows back when one returns. Cleared when an attempt starts at the planned size.
    QStringList lostAgents;
    // Rank 0 has made no progress since then (0 = it does); detail names the ranks and
    // hosts that cannot be reached.
    qint64 stalledSinceMs = 0;
    QString stallDetail;
    bool attemptOpen() const { return phase == RunPhase::Starting || phase == RunPhase::Running; }

    // A tune's trial: the epoch its open (or next) attempt stops after, its decisions in
    // order, and whether its last attempt ended at a target and awaits one.
    int target = 0;
    QList<TrialDecision> decisions;
    bool decisionDue = false;
    qint64 dueSinceEventId = 0; // decisions are made in the order attempts ended
    int continuedTo = 0; // the epoch the user continued it to (trial_continued); 0 = not continued
    int epochsDone() const { return decisions.isEmpty() ? 0 : decisions.last().epoch; }
};

// The learning-rate range test of a plan with learningRateAuto, as journalled.
struct LearningRateSearch {
    std::optional<FoundLearningRate> found;
    QString agent;
    double minLossLearningRate = 0;
    double steepestLearningRate = 0;
    int steps = 0;
    bool stoppedEarly = false;
    bool conclusive = true; // false: the loss never clearly fell, the default was kept
    QString rule;
    QList<QPair<double, double>> points; // (lr, smoothed loss)
    int failures = 0;
    QString lastFailure;
    bool gaveUp = false;
};

class StudyState {
public:
    void apply(const JournalEvent &event);
    static StudyState replay(const QList<JournalEvent> &events);

    QString studyId() const { return m_studyId; }
    QString name() const { return m_name; }
    const v1::StudyPlan &plan() const { return m_plan; }
    QStringList agents() const { return m_agents; }
    const QList<RunProgress> &runs() const { return m_runs; }
    const RunProgress *run(const QString &runId) const;
    bool cancelRequested() const { return m_cancelRequested; }
    bool ended() const { return !m_endState.isEmpty(); }
    // RUNNING until every run is terminal; then SUCCEEDED, FAILED (a run failed for
    // good) or CANCELLED.
    QString state() const;
    bool allRunsTerminal() const;
    qint64 createdUnixMs() const { return m_created; }
    qint64 endedUnixMs() const { return m_ended; }
    const QList<NodeInfo> &nodes() const { return m_nodes; }
    const LearningRateSearch &learningRateSearch() const { return m_lrSearch; }
    // A learningRateAuto plan whose runs must wait for the range test's choice.
    bool waitsForLearningRate() const
    {
        return m_plan.learning_rate_auto() && !m_lrSearch.found && !m_lrSearch.gaveUp;
    }
    // The survey of the network between the study's hosts before its runs (network_probed):
    // due when a run has several workers, unless the plan skips probes
    // (training.skipNetworkProbe); it ends the wait whatever it found.
    bool waitsForNetworkProbe() const;
    const QJsonArray &networkProbes() const { return m_networkProbes; }
    QString networkNote() const { return m_networkNote; }
    qint64 lastEventId() const { return m_lastEventId; }
    // A tune: its scheduler, holding every decision journalled so far.
    bool isTune() const { return m_plan.has_tune(); }
    const TrialScheduler &scheduler() const { return m_scheduler; }

    // The run's next attempt is a retry (it failed before and may go again).
    bool shouldRetry(const RunProgress &run) const;

    // Journal payloads, built in one place so writer and reader agree.
    static QJsonObject studyCreated(const QString &name, const v1::StudyPlan &plan, const QStringList &agents,
        const QList<PlannedRun> &runs);
    // `resize`: why the attempt's size differs from the attempt before (or the plan), when it does.
    static QJsonObject attemptStarting(
        const QString &runId, int attempt, const QList<Portion> &portions, const QString &resize = {});

private:
    // apply()'s handlers, one per journal event type.
    void onStudyCreated(const JournalEvent &event);
    void onAgentsAdded(const JournalEvent &event);
    void onNodesSeen(const JournalEvent &event);
    void onLrFound(const JournalEvent &event);
    void onNetworkProbed(const JournalEvent &event);
    void onLrFindFailed(const JournalEvent &event);
    void onCancelRequested(const JournalEvent &event);
    void onRetryRequested(const JournalEvent &event);
    void onTrialContinued(const JournalEvent &event);
    void onStudyEnded(const JournalEvent &event);
    void onRunPending(RunProgress *run, const JournalEvent &event);
    void onAttemptStarting(RunProgress *run, const JournalEvent &event);
    void onAttemptRunning(RunProgress *run, const JournalEvent &event);
    void onCheckpointCopied(RunProgress *run, const JournalEvent &event);
    void onCheckpointUploaded(RunProgress *run, const JournalEvent &event);
    void onAttemptResizing(RunProgress *run, const JournalEvent &event);
    void onRunStalled(RunProgress *run, const JournalEvent &event);
    void onRunUnstalled(RunProgress *run, const JournalEvent &event);
    void onTrialDecision(RunProgress *run, const JournalEvent &event);
    void onAttemptEnded(RunProgress *run, const JournalEvent &event);
    RunProgress *mutableRun(const QString &runId);

    QString m_studyId;
    QString m_name;
    v1::StudyPlan m_plan;
    QStringList m_agents;
    QList<RunProgress> m_runs;
    QList<NodeInfo> m_nodes;
    LearningRateSearch m_lrSearch;
    bool m_networkProbed = false;
    QJsonArray m_networkProbes;
    QString m_networkNote;
    TrialScheduler m_scheduler;
    bool m_cancelRequested = false;
    QString m_endState;
    qint64 m_created = 0;
    qint64 m_ended = 0;
    qint64 m_lastEventId = 0;
};

QJsonObject configToJson(const RunConfig &config);
RunConfig configFromJson(const QJsonObject &json);

// "stalled: no progress for 20 s; rank 1 on hostB unreachable", from the run's state at `nowMs`.
QString stallText(const RunProgress &run, qint64 nowMs);
// "16:03:12" in local time.
QString clockTime(qint64 unixMs);
// The delay before attempt n+1 after n failed attempts: 2 s doubling to at most 60 s,
// with `jitter` in [0, 1) spreading it by ±20 %.
qint64 retryBackoffMs(int failedAttempts, double jitter);

// Everything the reports and views need: the journal's state plus the metrics of
// each attempt, from the run events stored beside it.
StudySnapshot buildSnapshot(const StudyState &state, const Journal &journal);

// The configuration of a run started outside a study, from what it asked its agent for: the
// workers it asked for (a `run --workers MIN:MAX` that started on fewer keeps K = workers x
// accumulation in batches_per_step), batch, epochs, device, threads, precision, rule, model.
RunConfig singleRunConfig(const v1::StartWorkersRequest &request);

// The same for one run started outside a study (`scalelab-cli run`, the console's Run tab):
// a snapshot of that run alone, named by its id, so reports and `study show` take it.
StudySnapshot singleRunSnapshot(const Journal &journal, const SingleRunEntry &entry);

} // namespace scalelab::core
