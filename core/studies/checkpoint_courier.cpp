#include "checkpoint_courier.h"

#include "journal_events.h"

#include "checkpoint_copy.h"
#include "runner_context.h"

#include <QDir>
#include <QJsonObject>
#include <QMetaObject>
#include <QObject>

namespace scalelab::core {
namespace {

constexpr int kKeepCopies = 2; // checkpoint copies kept per run

} // namespace

CheckpointCourier::CheckpointCourier(RunnerContext &runner, QObject *context, QString root)
    : m_runner(runner)
    , m_context(context)
    , m_root(std::move(root))
{ }

CheckpointCourier::~CheckpointCourier()
{
    if (m_transfer)
        m_transfer->cancel();
    if (m_thread.joinable())
        m_thread.join();
}

void CheckpointCourier::queue(const CopyRequest &job)
{
    const auto queued = m_queue.find(job.runId);
    if (!wantCopy(m_runner.study().run(job.runId), job, m_copying,
            queued == m_queue.end() ? nullptr : &queued->second, m_gaveUp.value(job.runId)))
        return;
    m_queue[job.runId] = job;
    startNext();
}

bool CheckpointCourier::pending(const QString &runId) const
{
    return m_queue.count(runId) > 0 || (m_copying && m_copying->runId == runId);
}

int CheckpointCourier::gaveUpAt(const QString &runId) const
{
    return m_gaveUp.value(runId);
}

void CheckpointCourier::startNext()
{
    if (m_copying || m_queue.empty() || !m_runner.driving())
        return;
    const CopyRequest job = m_queue.begin()->second;
    m_queue.erase(m_queue.begin());
    const AgentEndpoint *endpoint = m_runner.endpoint(job.agent);
    if (!endpoint)
        return startNext();
    if (m_thread.joinable())
        m_thread.join();
    // A channel of its own: the runner's clients may be replaced (setAgents) meanwhile.
    m_client
        = std::make_unique<AgentClient>(endpoint->address, endpoint->token, endpoint->tls.orEnvironment());
    m_transfer = std::make_unique<CheckpointTransfer>(m_client.get());
    m_copying = job;
    m_thread = std::thread([this, job, transfer = m_transfer.get(), root = m_root, context = m_context] {
        CheckpointCopy copy;
        const Status result = transfer->download(job.runId, job.epoch, root, kKeepCopies, &copy);
        QMetaObject::invokeMethod(
            context, [this, job, result, dir = copy.dir] { finished(job, result, dir); },
            Qt::QueuedConnection);
    });
}

void CheckpointCourier::finished(const CopyRequest &job, const Status &result, const QString &dir)
{
    if (m_thread.joinable())
        m_thread.join();
    m_copying.reset();
    m_transfer.reset();
    m_client.reset();
    if (!m_runner.driving())
        return;
    switch (copyLanding(m_runner.study().run(job.runId), result.ok())) {
    case CopyLanding::Discard:
        QDir(m_root + QLatin1Char('/') + job.runId).removeRecursively();
        break;
    case CopyLanding::Record:
        if (!m_runner.record(
                journal_events::checkpointCopied(job.runId, job.attempt, job.epoch, job.agent, dir)))
            return;
        m_runner.say(QStringLiteral("%1: checkpoint of epoch %2 copied from agent %3")
                         .arg(job.runId)
                         .arg(job.epoch)
                         .arg(job.agent));
        break;
    case CopyLanding::GiveUp:
        m_gaveUp[job.runId] = std::max(m_gaveUp.value(job.runId), job.epoch); // not asked again
        m_runner.say(QStringLiteral("%1: could not copy the checkpoint of epoch %2 from agent %3 (%4); a "
                                    "retry elsewhere resumes from the last copy")
                         .arg(job.runId)
                         .arg(job.epoch)
                         .arg(job.agent, result.error()));
        break;
    }
    startNext();
}

void CheckpointCourier::runEnded(const RunProgress &run)
{
    const QString &runId = run.planned.runId;
    // Nothing newer will be written until the user retries it.
    m_queue.erase(runId);
    // A FAILED or CANCELLED run keeps the newest copy: `study retry` resumes from it even
    // when the agent that wrote the checkpoint is gone for good. A run that succeeded
    // will not start again, so its copies are of no use any more.
    if (run.phase == RunPhase::Succeeded && (!m_copying || m_copying->runId != runId))
        QDir(m_root + QLatin1Char('/') + runId).removeRecursively(); // else finished() does
}

Status CheckpointCourier::sendBeforeStart(const RunProgress &run)
{
    const auto upload = uploadBeforeStart(run);
    if (!upload)
        return Status::success();
    const CopiedCheckpoint &copy = run.checkpoint;
    const QString &target = upload->target;
    AgentClient *c = m_runner.client(target);
    if (!c)
        return Status::success(); // StartWorkers says why
    v1::CheckpointManifest manifest;
    if (const Status verified = CheckpointTransfer::verifyCopy(copy.dir, &manifest); !verified) {
        const QString &problem = verified.error();
        m_runner.say(
            QStringLiteral("%1: the console's copy of the checkpoint of epoch %2 cannot be used (%3); "
                           "attempt %4 starts without it")
                .arg(run.planned.runId)
                .arg(copy.epoch)
                .arg(problem)
                .arg(run.attempt));
        return Status::success();
    }
    CheckpointTransfer transfer(c);
    v1::WriteCheckpointResponse response;
    const Status result = transfer.upload(run.planned.runId, copy.dir, &response);
    if (!result.ok())
        return Status::failure(
            uploadRetryable(result) ? Status::Code::Unavailable : Status::Code::FailedPrecondition,
            QStringLiteral("could not send the checkpoint of epoch %1 (copied from agent %2) to agent %3: %4")
                .arg(copy.epoch)
                .arg(copy.agent, target, result.error()));
    const QString runId = run.planned.runId;
    const int attempt = run.attempt;
    if (!m_runner.record(journal_events::checkpointUploaded(runId, attempt, copy.epoch, target, copy.agent)))
        return Status::failure(
            Status::Code::Cancelled, QStringLiteral("the journal did not keep the upload"));
    m_runner.say(QStringLiteral("%1: attempt %2 resumes from epoch %3 on agent %4, checkpoint copied from "
                                "agent %5 (%6 MiB sent)")
                     .arg(runId)
                     .arg(attempt)
                     .arg(m_runner.study().run(runId)->checkpoint.epoch)
                     .arg(target, m_runner.study().run(runId)->checkpoint.agent)
                     .arg(double(response.bytes()) / (1 << 20), 0, 'f', 1));
    return Status::success();
}

} // namespace scalelab::core
