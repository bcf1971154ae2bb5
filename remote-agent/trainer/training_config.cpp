// TrainingConfig's checks: what a run refuses before it starts, each in words that say what
// to pass instead (training.h). libtorch only for the device checks (device.h).
#include "training.h"

#include "device.h"
#include "lr_rules.h"

#include <cmath>
#include <string>

namespace scalelab::trainer {

common::Status validate(const TrainingConfig &c)
{
    using common::Status;
    if (c.dataDir.empty())
        return Status::failure("--data-dir is required: the folder with the CIFAR-10 .bin files");
    if (c.batchSize <= 0)
        return Status::failure("--batch-size must be at least 1 (got " + std::to_string(c.batchSize) + ")");
    if (c.accumulationSteps < 1 || c.accumulationSteps > 1024) // rules::kMaxAccumulationSteps
        return Status::failure("--accumulation-steps must be between 1 (no accumulation) and 1024 (got "
            + std::to_string(c.accumulationSteps) + ")");
    if (c.batchesPerStep != 0 && (c.batchesPerStep < c.worldSize || c.batchesPerStep > 65536))
        return Status::failure("--batches-per-step must be at least --world-size (each rank takes one "
                               "micro-batch or more; got "
            + std::to_string(c.batchesPerStep) + " for " + std::to_string(c.worldSize) + " ranks)");
    if (c.epochs <= 0)
        return Status::failure("--epochs must be at least 1 (got " + std::to_string(c.epochs) + ")");
    if (!(c.learningRate > 0) || !std::isfinite(c.learningRate))
        return Status::failure("--lr must be a finite number greater than 0");
    if (!(c.momentum >= 0 && c.momentum < 1))
        return Status::failure("--momentum must be in [0, 1)");
    if (!(c.weightDecay >= 0) || !std::isfinite(c.weightDecay))
        return Status::failure("--weight-decay must be a finite number, 0 or more");
    if (!worker::isLrRule(c.lrScaling))
        return Status::failure(
            "--lr-scaling must be " + worker::lrRulesText() + " (got '" + c.lrScaling + "')");
    if (c.baseBatch <= 0)
        return Status::failure("--base-batch must be at least 1");
    if (c.schedule != "cosine" && c.schedule != "constant")
        return Status::failure("--schedule must be 'cosine' or 'constant'");
    if (c.headEpochs < 0 || c.headEpochs > c.epochs)
        return Status::failure("--head-epochs must be between 0 (no fine-tuning phases) and --epochs (got "
            + std::to_string(c.headEpochs) + ")");
    if (c.headLr && !(*c.headLr > 0 && *c.headLr <= 10))
        return Status::failure("--head-lr must be a number greater than 0, at most 10");
    if ((c.headLr || !c.head.empty()) && c.headEpochs == 0)
        return Status::failure(
            "--head-lr and --head need --head-epochs K: the epochs that train the head alone");
    if (!(c.warmupEpochs < 0 || c.warmupEpochs <= c.epochs - c.headEpochs) || std::isnan(c.warmupEpochs))
        return Status::failure(c.headEpochs > 0 ? "--warmup-epochs must be between 0 and --epochs minus "
                                                  "--head-epochs (the whole-model epochs)"
                                                : "--warmup-epochs must be between 0 and --epochs");
    if (!(c.labelSmoothing >= 0 && c.labelSmoothing < 1))
        return Status::failure("--label-smoothing must be in [0, 1)");
    if (!(c.blockDropout >= 0 && c.blockDropout < 1))
        return Status::failure("--block-dropout must be in [0, 1)");
    if (!(c.denseDropout >= 0 && c.denseDropout < 1))
        return Status::failure("--dense-dropout must be in [0, 1)");
    if (c.normalizeMean.size() != c.normalizeStd.size()
        || (!c.normalizeMean.empty() && c.normalizeMean.size() != 3))
        return Status::failure(
            "--normalize-mean and --normalize-std take three comma-separated values each (red, green, blue)");
    for (std::size_t i = 0; i < c.normalizeMean.size(); ++i)
        if (!(c.normalizeMean[i] >= 0 && c.normalizeMean[i] <= 1)
            || !(c.normalizeStd[i] > 0 && c.normalizeStd[i] <= 1))
            return Status::failure(
                "--normalize-mean values must be in [0, 1] and --normalize-std values in (0, 1]");
    if (!(c.divergenceFactor > 1) || !std::isfinite(c.divergenceFactor))
        return Status::failure("--divergence-factor must be a number greater than 1");
    if (c.divergenceSteps < 1)
        return Status::failure("--divergence-steps must be at least 1");
    if (c.precision != "fp32" && c.precision != "bf16")
        return Status::failure("--precision must be 'fp32' or 'bf16'");
    if (const Status device = checkDevice(c.device); !device)
        return device;
    if (!c.backend.empty() && c.backend != "gloo" && c.backend != "nccl")
        return Status::failure("--backend must be 'gloo' or 'nccl'");
    if (c.backend == "nccl" && c.device != "cuda")
        return Status::failure("--backend nccl needs --device cuda (NCCL runs collectives on GPUs)");
    if (c.precision == "bf16")
        if (const Status bf16 = checkBf16(c.device); !bf16)
            return bf16;
    if (c.threads < 0)
        return Status::failure("--threads must be 0 (automatic) or more");
    if (c.worldSize < 1 || c.rank < 0 || c.rank >= c.worldSize)
        return Status::failure("--rank must be in [0, --world-size)");
    if (c.worldSize > 1 && c.rendezvous.find(':') == std::string::npos)
        return Status::failure(
            "--rendezvous HOST:PORT is required when --world-size > 1 (rank 0 hosts the TCPStore there)");
    if (c.bucketMb < 1)
        return Status::failure("--bucket-mb must be at least 1");
    if (c.collectiveTimeoutSeconds < 1)
        return Status::failure("--collective-timeout-s must be at least 1");
    if (c.checkpointEvery < 1)
        return Status::failure("--checkpoint-every must be at least 1");
    if (c.keepCheckpoints < 1 || c.keepCheckpoints > 1000)
        return Status::failure("--keep-checkpoints must be between 1 and 1000");
    if (c.resume && c.checkpointDir.empty())
        return Status::failure("--resume needs --checkpoint-dir");
    if (c.stopAfterEpoch < 0 || c.stopAfterEpoch > c.epochs)
        return Status::failure("--stop-after-epoch must be 0 (train every epoch) or between 1 and --epochs");
    return Status::success();
}

} // namespace scalelab::trainer
