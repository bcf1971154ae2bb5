// The console's copies of run checkpoints, so that a run whose agent is gone resumes on
// another agent: agents share no storage, so the checkpoint goes agent → console →
// agent (ReadCheckpoint, WriteCheckpoint in proto/scalelab/v1/agent.proto).
//
// Layout: <root>/<run_id>/epoch-NNNN/{the trainer's files, MANIFEST}. A copy is
// committed the way the trainer commits a checkpoint: written into a temporary folder,
// every file checked against the sha256 in the agent's manifest, fsync'ed, renamed
// into place; MANIFEST ("<sha256>  <name>" per line) is written last. A folder with a
// MANIFEST is therefore complete and verified.
//
// One CheckpointTransfer per call in progress; cancel() is safe from any other thread
// (the blocking call then fails with code Cancelled). `client` must outlive it.
#pragma once

#include "agent_client.h"
#include "core_status.h"

#include <QString>

#include <atomic>
#include <mutex>

namespace grpc {
class ClientContext;
}

namespace scalelab::core {

struct CheckpointCopy {
    int epoch = 0;
    QString dir; // <root>/<run_id>/epoch-NNNN
    qint64 bytes = 0;
};

class CheckpointTransfer {
public:
    explicit CheckpointTransfer(AgentClient *client);

    // Copies checkpoint `epoch` (0 = the newest committed) of `runId` from the agent into
    // <root>/<runId>/ and keeps only the newest `keep` copies of that run.
    Status download(const QString &runId, int epoch, const QString &root, int keep, CheckpointCopy *copy);

    // Sends the committed copy in `dir` to the agent as checkpoint of `runId`; the
    // agent's next attempt of that run resumes from it. Call verifyCopy() first: a
    // local problem is the caller's to handle, not the agent's.
    Status upload(const QString &runId, const QString &dir, v1::WriteCheckpointResponse *response);

    void cancel();

    // Whether `dir` holds a committed copy whose files match its MANIFEST (then
    // `manifest` describes it), and if not what is wrong.
    static Status verifyCopy(const QString &dir, v1::CheckpointManifest *manifest);

private:
    void setContext(grpc::ClientContext *context);

    AgentClient *m_client;
    std::mutex m_mutex;
    grpc::ClientContext *m_context = nullptr; // the call in progress; guarded by m_mutex
    std::atomic<bool> m_cancelled = false;
};

} // namespace scalelab::core
