// Drives a study to its end: places pending runs on agents, starts their ranks, follows
// their event streams, retries failed runs from their checkpoints, and records every
// state change in the journal before acting on it — so a runner killed at any point
// and started again (same journal) continues without running anything twice:
// StartWorkers is idempotent on (run, attempt), and event streams resume at the seq
// after the last one stored.
//
// Checkpoints: every checkpoint rank 0 commits (but the last of a run) is copied from its
// agent into <journal folder>/checkpoints/<run_id>/ on a worker thread, and journaled
// (checkpoint_copied). A retry whose rank 0 lands on an agent that did not write that
// checkpoint (the one that did is gone, or busy) gets the copy sent there first
// (checkpoint_uploaded), so it resumes instead of starting afresh.
//
// Where each part lives:
//   study_runner.cpp            lifecycle, agents and their clients, the journal (record,
//                               crash injection), the tick that drives everything, finishing
//   study_runner_requests.cpp   createStudy and the requests any process may journal
//                               (cancel, retry, continue)
//   study_runner_placement.cpp  the agents' capacity (nodes_seen) and placing pending runs
//   study_runner_attempts.cpp   starting and following attempts, their events, stalls, and
//                               how an attempt ends (by the rules of attempt_outcome.h)
//   study_runner_tune.cpp       a tune's trial decisions and ASHA promotions (the scheduler
//                               is in tune_decisions.h)
//   checkpoint_courier.h        CheckpointCourier: the copy queue, its worker thread and the
//                               uploads before a retry (by the rules of checkpoint_shuttle.h)
//   learning_rate_finder.h      LearningRateFinder: the range test of a learningRateAuto plan
//   network_survey.h            NetworkSurvey: the network between the hosts, before the runs
// The runner owns the courier, the finder and the survey; they reach the study through RunnerContext
// (runner_context.h), which the runner implements. The rest are StudyRunner's own member
// functions, split by job: they share its whole state (the study, the watches, the capacity).
//
// Blocking gRPC calls (with deadlines) run on the runner's thread: give it a thread of
// its own in a GUI (moveToThread), or use it from a console program's event loop.
// Only one process drives a study at a time (a lock file beside the journal).
#pragma once

#include "agent_client.h"
#include "agent_endpoint.h"
#include "attempt_outcome.h"
#include "journal.h"
#include "runner_context.h"
#include "study_state.h"

#include <QLockFile>
#include <QObject>
#include <QSet>
#include <QTimer>

#include <map>
#include <memory>
#include <set>

namespace scalelab::core {

class CheckpointCourier;
class LearningRateFinder;
class NetworkSurvey;
class RunWatch;

class StudyRunner : public QObject, private RunnerContext {
    Q_OBJECT
public:
    // `journal` must be open and outlive the runner.
    explicit StudyRunner(Journal *journal, QObject *parent = nullptr);
    ~StudyRunner() override;

    void setAgents(const QList<AgentEndpoint> &agents);

    // Records a new study for `plan` (which must be valid) on the current agents: its id.
    // The modules it names by file (relative to `planDir`; empty: the current folder) are
    // copied into modelStore() and named by their sums (plan_models.h).
    Result<QString> createStudy(const v1::StudyPlan &plan, const QString &planDir = {});

    // Takes charge of a study: replays its journal, reattaches to runs that kept going
    // and drives it until finished() (at once if it had already ended).
    Status drive(const QString &studyId);

    // Cancels the whole study (runId empty) or one run. Safe from any process: a
    // runner driving the study elsewhere picks the request up from the journal.
    static Status requestCancel(Journal *journal, const QString &studyId, const QString &runId);
    // Asks for one more attempt of a FAILED or CANCELLED run (it resumes from its last
    // checkpoint); the process that drives the study, or the next one to, starts it.
    // `addAgents` (names) join the study first: the retry may go there when the agents
    // it ran on are gone for good (it is sent the console's copy of its checkpoint).
    static Status requestRetry(
        Journal *journal, const QString &studyId, const QString &runId, const QStringList &addAgents = {});

    // A tune's finished, stopped or paused trial trains on to `moreEpochs` more epochs than
    // it has, resumed from its last checkpoint (its learning-rate schedule stretched to the
    // new length); the tune runs again until it is done.
    static Status requestContinue(
        Journal *journal, const QString &studyId, const QString &runId, int moreEpochs);

    // Runner thread only; valid until the runner handles its next journal event.
    const StudyState &state() const { return m_state; }
    StudySnapshot snapshot() const { return buildSnapshot(m_state, *m_journal); }
    void setTickInterval(int ms) { m_timer.setInterval(ms); }

    // For fault tests: act as if the process died right after committing its n-th
    // journal event (n >= 1): stop at once, drop the streams, release the study,
    // and emit crashed(). A new runner then continues from the journal.
    void setCrashAfterEvents(int n) { m_crashAfter = n; }

    // Where the console keeps its copies of run checkpoints.
    QString checkpointRoot() const;
    // Where the console keeps the TorchScript modules its studies train (<state>/models).
    QString modelStore() const override;

Q_SIGNALS:
    void stateChanged(const scalelab::core::JournalEvent &event); // after a journal event is applied
    void runEvents(const QString &runId, int attempt, const std::vector<scalelab::v1::RunEvent> &events);
    void message(const QString &line); // what happens, in words
    void finished(const QString &studyState); // SUCCEEDED, FAILED or CANCELLED
    void fatal(const QString &error); // the journal cannot be written: nothing is safe to do
    void crashed(); // see setCrashAfterEvents()

private:
    // What a portion has come to (attempt_outcome.h decides from it), and its stream.
    struct PortionWatch : PortionState {
        std::unique_ptr<RunWatch> watch;
        int attempt = 0;
        bool stopSent = false;
    };

    // study_runner.cpp
    void tick();
    bool record(const v1::StudyEvent &event) override;
    void syncJournal();
    void finishIfDone();
    AgentClient *client(const QString &agent) override;
    // After an attempt ended: a run now terminal is copied no more (CheckpointCourier::runEnded).
    void afterAttemptEnded(const QString &runId);
    // "agent 10.0.0.2:7450 (hostB)"
    QString agentLabel(const QString &agent) const override;
    // The rest of RunnerContext, for the courier and the learning-rate finder.
    const StudyState &study() const override;
    bool driving() const override;
    const AgentEndpoint *endpoint(const QString &agent) const override;
    void say(const QString &line) override;
    void tickSoon() override;

    // study_runner_requests.cpp
    static Status knownStudy(const Journal &journal, const QString &studyId);

    // study_runner_placement.cpp
    QList<NodeCapacity> refreshCapacity(bool force);
    void placePending(QList<NodeCapacity> &nodes);
    // A spread run's first attempt, placed now, would leave out `waitFor` (spreadWaitsFor):
    // true while it waits for them, up to kSpreadWaitMs, with the reason journaled.
    bool waitsToSpread(const RunProgress &run, const QStringList &waitFor);

    // study_runner_attempts.cpp
    void startAttempt(const RunProgress &run);
    // Sends the modules `spec` names by sum (model, initial weights) from modelStore() to
    // every agent of the attempt that lacks them; a failure says why one cannot be sent, its
    // code whether a later attempt may do better (FailedPrecondition: it may not).
    [[nodiscard]] Status sendModels(const RunProgress &run, const v1::RunSpec &spec);
    void followAttempt(const RunProgress &run);
    void onEvents(const QString &runId, int portion);
    // An elastic run below its planned size, at a checkpoint it committed: when the agents
    // can take the planned size now, its attempt is stopped, to start again at that size.
    void growAtCheckpoint(const RunProgress &run, int epoch);
    PortionWatch watchPortion(const RunProgress &run, int i);
    std::optional<QList<NodeCapacity>> candidateNodes(
        const RunProgress &run, const QList<NodeCapacity> &nodes);
    // Rank 0 reported a stall (or its end): journal it with the unreachable ranks named.
    void onStall(const QString &runId, int portion, const v1::Stall &stall);
    // "rank 1 on hostB (agent …) unreachable since 16:03:12", for the other portions.
    QString unreachableRanks(const QString &runId, bool probe);
    // Ends the attempt as FAILED with the reason; LOST portions make it not count.
    void endFailedAttempt(const RunProgress &run, const QString &reason, const QStringList &unreachable,
        qint64 unreachableSinceMs, bool retryable, const QString &spaceShortOn = {}, qint64 spaceNeeded = 0);

    // study_runner_tune.cpp
    // A tune: journals the scheduler's decision for every trial whose attempt ended at
    // its target, in the order they ended.
    void decideTrials();
    // A tune with ASHA promotion: resumes the paused trials Algorithm 2 picks while
    // trials fit; when nothing runs or can be promoted, stops the paused ones.
    void promoteTrials();
    // The newest completed epoch the trial reported and its metric then (NaN: none).
    std::pair<int, double> trialResult(const RunProgress &run) const;

    Journal *m_journal;
    QString m_studyId;
    StudyState m_state;
    std::unique_ptr<QLockFile> m_lock;
    QTimer m_timer;
    QMap<QString, AgentEndpoint> m_agents;
    std::map<QString, std::unique_ptr<AgentClient>> m_clients;
    std::vector<std::unique_ptr<AgentClient>> m_retiredClients; // replaced by setAgents(), maybe still in use
    // Watches of the open attempt of each run, one per portion.
    std::map<QString, std::vector<PortionWatch>> m_watches;
    QList<NodeCapacity> m_capacity;
    qint64 m_capacityAtMs = 0;
    std::set<QString> m_nodesRecorded;
    std::map<QString, qint64> m_stallMessageMs; // last "still stalled" message per run
    std::map<QString, qint64> m_spreadWaitSinceMs; // per run, see waitsToSpread()
    QSet<QString> m_modelsSent; // "agent|sha256:HEX" known to be on the agent
    bool m_finished = false;
    bool m_busy = false; // re-entrancy guard for tick()
    int m_crashAfter = 0;
    int m_recorded = 0;
    bool m_crashed = false;
    // Checkpoint copies: one in flight at a time, the newest checkpoint queued per run.
    std::unique_ptr<CheckpointCourier> m_courier;
    // The learning-rate range test of a learningRateAuto plan: one at a time, on a thread.
    std::unique_ptr<LearningRateFinder> m_lrFinder;
    // The network between the study's hosts, probed once before its runs.
    std::unique_ptr<NetworkSurvey> m_networkSurvey;
};

} // namespace scalelab::core
