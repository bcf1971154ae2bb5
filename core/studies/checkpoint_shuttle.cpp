#include "checkpoint_shuttle.h"

namespace scalelab::core {

bool wantCopy(const RunProgress *run, const CopyRequest &request, const std::optional<CopyRequest> &inFlight,
    const CopyRequest *queued, int gaveUpAtEpoch)
{
    if (!run || request.epoch <= run->checkpoint.epoch || request.epoch <= gaveUpAtEpoch)
        return false;
    if (inFlight && inFlight->runId == request.runId && inFlight->epoch >= request.epoch)
        return false;
    return !queued || request.epoch > queued->epoch; // an older one waiting is not worth copying any more
}

bool copyWorthwhile(const RunProgress &run, int checkpointEpoch)
{
    return checkpointEpoch > 0 && checkpointEpoch < run.planned.config.epochs;
}

CopyLanding copyLanding(const RunProgress *run, bool downloaded)
{
    if (run && run->phase == RunPhase::Succeeded)
        return CopyLanding::Discard;
    return downloaded ? CopyLanding::Record : CopyLanding::GiveUp; // FAILED or CANCELLED keep it for a retry
}

std::optional<Upload> uploadBeforeStart(const RunProgress &run)
{
    const CopiedCheckpoint &copy = run.checkpoint;
    if (copy.epoch == 0 || run.portions.isEmpty() || run.attempts.isEmpty())
        return std::nullopt;
    const QString target = run.portions.first().agent; // hosts rank 0, which resumes
    if (copy.agent == target || run.attempts.last().transferredEpoch > 0)
        return std::nullopt; // it wrote the checkpoint itself, or has been sent it already
    return Upload { target, copy.epoch, copy.agent };
}

bool uploadRetryable(const Status &refusal)
{
    return !refusal.isInvalidArgument();
}

} // namespace scalelab::core
