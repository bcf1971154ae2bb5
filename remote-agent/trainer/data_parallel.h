// Data-parallel plumbing on PyTorch's own c10d, the engine DistributedDataParallel
// uses: a TCPStore rendezvous (hosted by rank 0), a Gloo or NCCL process group, and c10d's
// Reducer, which averages gradients in buckets with all-reduces launched from autograd
// hooks as each bucket fills, so communication overlaps the rest of backward.
// Only trainer sources include this header (it pulls in libtorch). One instance per rank,
// used from that rank's training thread (c10d's own threads run the collectives).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class ProcessGroup;
class Reducer;
class Store;
} // namespace c10d

namespace scalelab::trainer {

struct DataParallelOptions {
    std::string host; // TCPStore host (rank 0's node)
    int port = 0;
    // Where this rank's own sockets live (see connectRanks in training.cpp): Gloo's pairs
    // on `interfaces` when given (GLOO_SOCKET_IFNAME's list), else on `bindAddress`; rank
    // 0's store listens on `storeAddress` only ("" = every address, as libtorch does).
    std::string bindAddress;
    std::vector<std::string> interfaces;
    std::string storeAddress;
    int rank = 0;
    int worldSize = 1;
    // "gloo" (CPU tensors, or GPUs that ranks share) or "nccl" (a GPU per rank; needs a
    // CUDA build). The model's tensors must be on the matching device.
    std::string backend = "gloo";
    std::size_t bucketBytes = 4 << 20;
    std::chrono::milliseconds timeout { std::chrono::seconds(120) };
};

class DataParallel {
public:
    // Rendezvous and process group. Throws std::runtime_error with a message a person
    // can act on when peers do not arrive within the timeout.
    explicit DataParallel(const DataParallelOptions &options);
    ~DataParallel();

    int rank() const { return m_options.rank; }
    int worldSize() const { return m_options.worldSize; }
    const std::string &backend() const { return m_options.backend; }

    // Makes every rank start from rank 0's weights and buffers, then builds the reducer
    // over `parameters` (buckets in reverse registration order, as DDP does).
    void attach(torch::nn::Module &module);
    // A new reducer over `parameters` only (fine-tuning's phases: the head, then all): a
    // frozen parameter's gradient is never produced, and a reducer waiting for it would
    // wait forever. Every rank calls it at the same step.
    void reduceGradientsOf(const std::vector<torch::Tensor> &parameters);

    // Call right before forward (DDP: prepare_for_forward) and right after it
    // (prepare_for_backward); backward then all-reduces the gradients.
    // Unlike DDP's default (broadcast_buffers), buffers are not broadcast every step:
    // in training mode BatchNorm normalises with batch statistics and never reads its
    // running ones, and rank 0's running statistics depend only on rank 0's batches, so
    // rank 0's model is bit for bit the same either way. That saves two collectives and
    // a synchronisation of all ranks per step; syncBuffers() makes every rank hold rank
    // 0's buffers where they are read (evaluation) or kept (checkpoints).
    void beforeForward();
    void beforeBackward();

    // Copies rank 0's buffers (BatchNorm statistics) to every rank.
    void syncBuffers();

    // Rank 0's values of `tensors` on every rank, in place. Here and in allReduceSum the
    // tensors live on the model's device: NCCL takes CUDA tensors only.
    void broadcastFromRankZero(std::vector<torch::Tensor> &tensors);

    // Sum of `tensor` over ranks, in place.
    void allReduceSum(torch::Tensor &tensor);

    // All-reduce times of this group by message size (4 KB, x4, up to 64 MB): a warm-up,
    // then `repeats` timed all-reduces each, the mean over ranks of each. Sizes go on until
    // one is at least `targetBytes` (a step's gradients: where the run's all-reduces are)
    // and took more than `slowSeconds`, or the probe has run `budgetSeconds`. On a slow link
    // the small sizes fit in socket buffers and a shaper's burst, and look faster than the
    // link: stopping at the first slow size overestimated a 100 Mbit/s link twofold.
    // Every rank calls it with the same arguments; all get the same result.
    struct ProbeSample {
        std::int64_t bytes = 0;
        std::vector<double> seconds;
    };
    std::vector<ProbeSample> probeAllReduce(
        std::int64_t targetBytes, int repeats = 3, double slowSeconds = 0.25, double budgetSeconds = 15);
    // How many distinct hosts the ranks run on (by host name, exchanged through the store).
    int hosts();
    // How the ranks share machines' cores (RunStarted.core_share): each rank sends through
    // the store its machine (the kernel's boot id, which network namespaces and containers of
    // one machine share, and the cgroup whose CPU quota it runs under, if any), the cores it
    // may run on (its CPU affinity, or that quota when lower) and the threads it computes
    // with. Every rank calls it; each gets the whole group's answer.
    struct CoreShare {
        int machines = 0;
        int threads = 0; // on the busiest machine (most threads per core)
        double cores = 0;
    };
    CoreShare coreShare(int threads);
    // The same for a run of one rank.
    static CoreShare coreShareAlone(int threads);
    void barrier();

private:
    DataParallelOptions m_options;
    c10::intrusive_ptr<c10d::Store> m_store;
    c10::intrusive_ptr<c10d::ProcessGroup> m_group;
    std::unique_ptr<c10d::Reducer> m_reducer;
    std::vector<torch::Tensor> m_buffers; // BatchNorm running stats, kept equal to rank 0's
};

} // namespace scalelab::trainer
