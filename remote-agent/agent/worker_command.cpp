#include "worker_command.h"

#include "checkpoint_transfer.h"
#include "spec_rules.h"
#include "worker_channel.h"
#include "worker_contract.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace scalelab::agent {

void placeOnDevice(v1::WorkerLaunch *worker, const v1::RunSpec &spec, int worldSize, bool rankHasGpus)
{
    if (!rankHasGpus)
        return;
    worker->set_device("cuda");
    if (worldSize > 1 && spec.gpus_per_worker() < 1)
        worker->set_backend("gloo");
}

namespace {

// A probe-only run: the rank, its group and how it reaches the others; nothing to train.
v1::WorkerLaunch probeLaunch(const RunLaunch &launch, const v1::RunSpec &spec, int rank)
{
    const int worldSize = launch.request.world_size();
    v1::WorkerLaunch w;
    w.set_command("probe");
    w.set_seed(spec.seed());
    w.set_threads(launch.threadsPerRank);
    w.set_rank(rank);
    w.set_world_size(worldSize);
    w.set_event_fd(3);
    const auto &r = launch.request.rendezvous();
    w.set_rendezvous(r.host() + ":" + std::to_string(r.port()));
    if (!launch.bindAddress.empty())
        w.set_bind_address(launch.bindAddress);
    w.set_collective_timeout_s(spec.collective_timeout_seconds());
    const auto gpus = launch.gpus.find(rank);
    placeOnDevice(&w, spec, worldSize, gpus != launch.gpus.end() && !gpus->second.empty());
    return w;
}

} // namespace

v1::WorkerLaunch workerLaunch(const RunLaunch &launch, int rank)
{
    const v1::RunSpec spec = rules::withDefaults(launch.request.spec());
    const int worldSize = launch.request.world_size();
    if (spec.probe_only())
        return probeLaunch(launch, spec, rank);
    v1::WorkerLaunch w;
    w.set_command("train");
    w.set_data_dir(launch.datasetDir);
    w.set_batch_size(spec.batch_size());
    if (spec.accumulation_steps() > 1)
        w.set_accumulation_steps(spec.accumulation_steps());
    if (spec.batches_per_step() > 0)
        w.set_batches_per_step(spec.batches_per_step());
    w.set_epochs(spec.epochs());
    w.set_seed(spec.seed());
    w.set_threads(launch.threadsPerRank);
    w.set_rank(rank);
    w.set_world_size(worldSize);
    w.set_event_fd(3);
    w.set_lr(spec.learning_rate());
    w.set_momentum(spec.momentum());
    w.set_weight_decay(spec.weight_decay());
    w.set_lr_scaling(spec.lr_scaling());
    w.set_schedule(spec.schedule());
    w.set_warmup_epochs(spec.warmup_epochs());
    w.set_label_smoothing(spec.label_smoothing());
    w.set_block_dropout(spec.block_dropout());
    w.set_dense_dropout(spec.dense_dropout());
    w.set_divergence_factor(spec.divergence_factor());
    w.set_divergence_steps(spec.divergence_steps());
    w.set_augment(!spec.no_augment());
    w.set_channels_last(spec.channels_last());
    w.set_precision(spec.precision() == v1::BF16 ? "bf16" : "fp32");
    if (!launch.modelFile.empty())
        w.set_model(std::string(worker::kModelFilePrefix) + launch.modelFile.string());
    else if (!spec.model().empty())
        w.set_model(spec.model());
    if (!launch.initialWeightsFile.empty())
        w.set_initial_weights(launch.initialWeightsFile.string());
    if (spec.finetune().head_epochs() > 0) {
        w.set_head_epochs(spec.finetune().head_epochs());
        if (spec.finetune().has_head_learning_rate())
            w.set_head_lr(spec.finetune().head_learning_rate());
        if (!spec.finetune().head().empty())
            w.set_head(spec.finetune().head());
    }
    if (spec.max_train_images() > 0)
        w.set_max_train_images(spec.max_train_images());
    if (spec.max_test_images() > 0)
        w.set_max_test_images(spec.max_test_images());
    const auto &dataset = launch.dataset;
    if (dataset.channel_mean_size() == 3 && dataset.channel_std_size() == 3) {
        *w.mutable_normalize_mean() = dataset.channel_mean();
        *w.mutable_normalize_std() = dataset.channel_std();
    }
    if (worldSize > 1) {
        const auto &r = launch.request.rendezvous();
        w.set_rendezvous(r.host() + ":" + std::to_string(r.port()));
        if (!launch.bindAddress.empty())
            w.set_bind_address(launch.bindAddress);
        w.set_collective_timeout_s(spec.collective_timeout_seconds());
        if (spec.skip_network_probe())
            w.set_network_probe(false);
    }
    // Checkpoints live with the run, shared by its attempts: attempt N > 1 resumes from
    // the newest one that verifies.
    w.set_checkpoint_dir(checkpointsOf(launch.runDir.parent_path()).string());
    w.set_checkpoint_every(std::max(1, spec.checkpoint_every_epochs()));
    w.set_keep_checkpoints(spec.keep_checkpoints());
    w.set_resume(launch.request.attempt() > 1);
    // A paused run (a tuning trial at a rung) ends after this epoch of its schedule; the
    // attempt that continues it resumes from the checkpoint this one leaves.
    if (spec.stop_after_epochs() > 0)
        w.set_stop_after_epoch(spec.stop_after_epochs());
    const auto gpus = launch.gpus.find(rank);
    placeOnDevice(&w, spec, worldSize, gpus != launch.gpus.end() && !gpus->second.empty());
    return w;
}

v1::WorkerLaunch lrFindLaunch(const RunLaunch &launch, double minLr, double maxLr, int steps)
{
    const v1::WorkerLaunch run = workerLaunch(launch, 0);
    v1::WorkerLaunch w;
    w.set_command("lr-find");
    w.set_data_dir(run.data_dir());
    w.set_batch_size(run.batch_size());
    w.set_seed(run.seed());
    w.set_threads(run.threads());
    w.set_event_fd(run.event_fd());
    w.set_momentum(run.momentum());
    w.set_weight_decay(run.weight_decay());
    w.set_label_smoothing(run.label_smoothing());
    w.set_block_dropout(run.block_dropout());
    w.set_dense_dropout(run.dense_dropout());
    w.set_augment(run.augment());
    w.set_channels_last(run.channels_last());
    w.set_precision(run.precision());
    if (run.has_max_train_images())
        w.set_max_train_images(run.max_train_images());
    *w.mutable_normalize_mean() = run.normalize_mean();
    *w.mutable_normalize_std() = run.normalize_std();
    if (run.has_device())
        w.set_device(run.device());
    w.set_min_lr(minLr);
    w.set_max_lr(maxLr);
    w.set_steps(steps);
    return w;
}

std::vector<std::string> workerCommand(const RunLaunch &launch, const v1::WorkerLaunch &worker)
{
    std::vector<std::string> argv = { launch.workerBinary };
    const auto arguments = worker::launchArguments(worker);
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    return argv;
}

std::vector<std::string> workerEnvironment(const RunLaunch &launch, int rank)
{
    const std::string threads = std::to_string(launch.threadsPerRank);
    // The rank sees only its GPUs (none for a CPU rank), numbered from 0.
    std::string visible;
    if (auto it = launch.gpus.find(rank); it != launch.gpus.end())
        for (int gpu : it->second)
            visible += (visible.empty() ? "" : ",") + std::to_string(gpu);
    std::vector<std::string> environment = { "OMP_NUM_THREADS=" + threads, "OPENBLAS_NUM_THREADS=" + threads,
        "CUDA_VISIBLE_DEVICES=" + visible };
    if (!launch.networkInterface.empty() && !std::getenv("NCCL_SOCKET_IFNAME"))
        environment.push_back("NCCL_SOCKET_IFNAME=" + launch.networkInterface);
    if (!std::getenv("OMP_WAIT_POLICY"))
        environment.push_back("OMP_WAIT_POLICY=PASSIVE");
    if (std::string tunables = workerMallocTunables(); !tunables.empty())
        environment.push_back(std::move(tunables));
    return environment;
}

std::string workerMallocTunables()
{
    constexpr std::string_view kHugePages = "glibc.malloc.hugetlb=1";
    const char *own = std::getenv("GLIBC_TUNABLES");
    const std::string_view current = own ? own : "";
    if (current.find("glibc.malloc.hugetlb=") != std::string_view::npos)
        return {}; // the agent's environment chose
    std::string entry = "GLIBC_TUNABLES=";
    if (!current.empty())
        entry.append(current).append(":");
    entry.append(kHugePages);
    return entry;
}

} // namespace scalelab::agent
