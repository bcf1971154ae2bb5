// Carries a study's checkpoints between its agents and the console, by the rules of
// checkpoint_shuttle.h (this is their I/O): downloads each committed checkpoint worth
// keeping from the agent of rank 0 into <root>/<run_id>/epoch-NNNN (CheckpointTransfer,
// the newest copies kept) and journals it (checkpoint_copied); before a retry starts on an
// agent that did not write the checkpoint, sends it the console's copy first
// (checkpoint_uploaded), so it resumes instead of starting afresh. The StudyRunner:
//
//   on a checkpoint rank 0 committed     courier.queue(request);
//   placing a trial that goes on         courier.pending(runId), courier.gaveUpAt(runId)
//   once a run is terminal               courier.runEnded(run);
//   before an attempt starts             if (Status sent = courier.sendBeforeStart(run); !sent) …
//
// One download at a time, on a thread of the courier's own with a channel of its own; the
// newest request per run waits in the queue (a newer one replaces it). What a download
// came to is handled on the runner's thread (posted to `context`). A run whose download
// failed is not asked again for that epoch or an older one.
//
// Owned by the StudyRunner, whose RunnerContext and `context` outlive it. Thread: the
// runner's. The destructor cancels a download in flight and waits for its thread.
#pragma once

#include "agent_client.h"
#include "checkpoint_shuttle.h"
#include "study_state.h"

#include <QMap>
#include <QString>

#include <map>
#include <memory>
#include <optional>
#include <thread>

class QObject;

namespace scalelab::core {

class CheckpointTransfer;
class RunnerContext;

class CheckpointCourier {
public:
    // `root`: where the console keeps its copies (StudyRunner::checkpointRoot()).
    CheckpointCourier(RunnerContext &runner, QObject *context, QString root);
    ~CheckpointCourier();
    CheckpointCourier(const CheckpointCourier &) = delete;
    CheckpointCourier &operator=(const CheckpointCourier &) = delete;

    // Downloads the checkpoint when wantCopy() says it is worth it: at once when nothing
    // is in flight, else after the downloads before it.
    void queue(const CopyRequest &job);
    // Whether a download of `runId` waits or is in flight.
    [[nodiscard]] bool pending(const QString &runId) const;
    // The newest epoch of `runId` whose download failed (0: none).
    [[nodiscard]] int gaveUpAt(const QString &runId) const;
    // A terminal run: nothing newer of it is downloaded; the copies of one that succeeded
    // are removed (a FAILED or CANCELLED run keeps its newest for `study retry`).
    void runEnded(const RunProgress &run);
    // Before a retry starts: sends the console's copy of the run's checkpoint to rank 0's
    // agent when that agent did not write it (a blocking call). A failure when the attempt
    // must not start: Cancelled when the journal refused the record (the runner said so
    // already), else the reason, FailedPrecondition when a later attempt may not do better.
    [[nodiscard]] Status sendBeforeStart(const RunProgress &run);

private:
    void startNext();
    void finished(const CopyRequest &job, const Status &result, const QString &dir);

    RunnerContext &m_runner;
    QObject *m_context;
    const QString m_root;
    std::map<QString, CopyRequest> m_queue; // the newest request per run
    std::optional<CopyRequest> m_copying;
    QMap<QString, int> m_gaveUp; // the newest epoch whose copy failed, per run
    std::unique_ptr<AgentClient> m_client; // of the copy in flight (its own channel)
    std::unique_ptr<CheckpointTransfer> m_transfer;
    std::thread m_thread;
};

} // namespace scalelab::core
