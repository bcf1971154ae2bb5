// A study's state, rebuilt by replaying its journal events (event sourcing). Replaying
// any prefix of the journal gives a consistent state, so a console killed between any
// two events resumes from exactly what was committed.
// A value type, owned by one thread (the runner's); the references its getters return
// (plan(), runs(), run(), …) stay valid until the next apply() on that thread. Others
// read a copy (StudyRunner::snapshot(), StudyState::replay()).
//
// The journal's events, one message each, are proto/scalelab/v1/journal.proto's StudyEvent;
// the runner builds them with journal_events.h and apply() has one handler per event.
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

    // Events of the journal that could not be read (damaged), each "event ID (type): why";
    // they were skipped.
    const QStringList &unreadableEvents() const { return m_unreadable; }

private:
    // apply()'s handlers, one per journal event.
    void onStudyCreated(const v1::StudyCreated &p, const JournalEvent &event);
    void onAgentsAdded(const v1::AgentsAdded &p);
    void onNodesSeen(const v1::NodesSeen &p);
    void onLrFound(const v1::LrFound &p);
    void onNetworkProbed(const v1::NetworkProbed &p);
    void onLrFindFailed(const v1::LrFindFailed &p);
    void onCancelRequested(const v1::CancelRequested &p);
    void onRetryRequested(const v1::RetryRequested &p);
    void onTrialContinued(const v1::TrialContinued &p);
    void onStudyEnded(const v1::StudyEnded &p, const JournalEvent &event);
    // The events of one run: applied when the study has that run.
    template <class Event>
    void applyToRun(const Event &e,
        void (StudyState::*handler)(RunProgress *, const Event &, const JournalEvent &),
        const JournalEvent &event);
    void onRunPending(RunProgress *run, const v1::RunPending &p, const JournalEvent &event);
    void onAttemptStarting(RunProgress *run, const v1::AttemptStarting &p, const JournalEvent &event);
    void onAttemptRunning(RunProgress *run, const v1::AttemptRunning &p, const JournalEvent &event);
    void onCheckpointCopied(RunProgress *run, const v1::CheckpointCopied &p, const JournalEvent &event);
    void onCheckpointUploaded(RunProgress *run, const v1::CheckpointUploaded &p, const JournalEvent &event);
    void onAttemptResizing(RunProgress *run, const v1::AttemptResizing &p, const JournalEvent &event);
    void onRunStalled(RunProgress *run, const v1::RunStalled &p, const JournalEvent &event);
    void onRunUnstalled(RunProgress *run, const v1::RunUnstalled &p, const JournalEvent &event);
    void onTrialDecision(RunProgress *run, const v1::TrialDecisionRecord &p, const JournalEvent &event);
    void onAttemptEnded(RunProgress *run, const v1::AttemptEnded &p, const JournalEvent &event);
    void attemptSucceeded(RunProgress *run, const JournalEvent &event);
    void attemptFailed(RunProgress *run, const v1::AttemptEnded &p);
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
    QStringList m_unreadable;
};

// A run's configuration as `study show --json` prints it.
QJsonObject configToJson(const RunConfig &config);

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
