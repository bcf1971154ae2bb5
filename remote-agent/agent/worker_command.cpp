#include "worker_command.h"

#include "checkpoint_transfer.h"
#include "spec_rules.h"

#include <algorithm>

namespace scalelab::agent {

std::vector<std::string> workerCommand(const RunLaunch &launch, int rank)
{
    using rules::exactNumber;
    const v1::RunSpec spec = rules::withDefaults(launch.request.spec());
    const int worldSize = launch.request.world_size();
    std::vector<std::string> argv = { launch.workerBinary, "train", "--data-dir", launch.datasetDir, "--batch-size",
        std::to_string(spec.batch_size()), "--epochs", std::to_string(spec.epochs()), "--seed",
        std::to_string(spec.seed()), "--threads", std::to_string(launch.threadsPerRank), "--rank",
        std::to_string(rank), "--world-size", std::to_string(worldSize), "--event-fd", "3", "--lr",
        exactNumber(spec.learning_rate()), "--momentum", exactNumber(spec.momentum()), "--weight-decay",
        exactNumber(spec.weight_decay()), "--lr-scaling", spec.lr_scaling(), "--schedule", spec.schedule(),
        "--warmup-epochs", exactNumber(spec.warmup_epochs()), "--label-smoothing",
        exactNumber(spec.label_smoothing()), "--divergence-factor", exactNumber(spec.divergence_factor()),
        "--divergence-steps", std::to_string(spec.divergence_steps()), "--augment",
        spec.no_augment() ? "off" : "on", "--channels-last", spec.channels_last() ? "on" : "off", "--precision",
        spec.precision() == v1::BF16 ? "bf16" : "fp32" };
    const auto add = [&](std::initializer_list<std::string> items) { argv.insert(argv.end(), items); };
    if (spec.max_train_images() > 0)
        add({ "--max-train-images", std::to_string(spec.max_train_images()) });
    if (spec.max_test_images() > 0)
        add({ "--max-test-images", std::to_string(spec.max_test_images()) });
    const auto &dataset = launch.dataset;
    if (dataset.channel_mean_size() == 3 && dataset.channel_std_size() == 3) {
        const auto triple = [](const auto &v) {
            return exactNumber(v.Get(0)) + "," + exactNumber(v.Get(1)) + "," + exactNumber(v.Get(2));
        };
        add({ "--normalize-mean", triple(dataset.channel_mean()), "--normalize-std", triple(dataset.channel_std()) });
    }
    if (worldSize > 1) {
        const auto &r = launch.request.rendezvous();
        add({ "--rendezvous", r.host() + ":" + std::to_string(r.port()) });
        if (!launch.bindAddress.empty())
            add({ "--bind-address", launch.bindAddress });
        add({ "--collective-timeout-s", std::to_string(spec.collective_timeout_seconds()) });
    }
    // Checkpoints live with the run, shared by its attempts: attempt N > 1 resumes from
    // the newest one that verifies.
    add({ "--checkpoint-dir", checkpointsOf(launch.runDir.parent_path()).string(), "--checkpoint-every",
        std::to_string(std::max(1, spec.checkpoint_every_epochs())), "--keep-checkpoints",
        std::to_string(spec.keep_checkpoints()), "--resume",
        launch.request.attempt() > 1 ? "on" : "off" });
    const bool hasGpus = launch.gpus.count(rank) > 0 && !launch.gpus.at(rank).empty();
    const auto device = workerDeviceArguments(spec, worldSize, hasGpus);
    argv.insert(argv.end(), device.begin(), device.end());
    return argv;
}

} // namespace scalelab::agent
