#include "data_parallel.h"

#include "c10d_compat.h"
#include "device.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <stdexcept>

namespace scalelab::trainer {

namespace {
// DDP's defaults for the first bucket: small, so the first all-reduce starts early.
constexpr std::size_t kFirstBucketBytes = 1 << 20;
constexpr std::size_t kBroadcastBucketBytes = 250 << 20;

bool isLoopback(const std::string &host)
{
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}
} // namespace

DataParallel::DataParallel(const DataParallelOptions &options)
    : m_options(options)
{
    c10d::TCPStoreOptions store;
    store.port = static_cast<std::uint16_t>(options.port);
    store.isServer = options.rank == 0;
    store.numWorkers = static_cast<std::size_t>(options.worldSize);
    store.waitWorkers = true;
    store.timeout = options.timeout;
    try {
        m_store = c10::make_intrusive<c10d::TCPStore>(options.host, store);
    } catch (const std::exception &e) {
        throw std::runtime_error("rendezvous at " + options.host + ":" + std::to_string(options.port)
            + " failed for rank " + std::to_string(options.rank) + " of " + std::to_string(options.worldSize)
            + ": " + std::string(e.what()).substr(0, 300));
    }
    if (options.backend == "nccl") {
        m_group = makeNcclGroup(m_store, options.rank, options.worldSize, options.timeout);
        return;
    }
    auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
    // The transport binds to the address peers reach us at: loopback for a one-node
    // run, else the address our hostname resolves to.
    gloo->devices.push_back(isLoopback(options.host)
            ? c10d::ProcessGroupGloo::createDeviceForHostname(options.host)
            : c10d::ProcessGroupGloo::createDefaultDevice());
    m_group = processGroupOf(
        c10::make_intrusive<c10d::ProcessGroupGloo>(m_store, options.rank, options.worldSize, gloo), m_store,
        // Gloo also reduces CUDA tensors (through host memory): ranks that share a GPU.
        { c10::DeviceType::CPU, c10::DeviceType::CUDA });
}

DataParallel::~DataParallel() = default;

void DataParallel::broadcastFromRankZero(std::vector<torch::Tensor> &tensors)
{
    if (!tensors.empty())
        c10d::broadcast_coalesced(m_group, tensors, kBroadcastBucketBytes, 0);
}

void DataParallel::attach(torch::nn::Module &module)
{
    std::vector<torch::Tensor> parameters = module.parameters();
    m_buffers = module.buffers();
    std::vector<torch::Tensor> state = parameters;
    state.insert(state.end(), m_buffers.begin(), m_buffers.end());
    {
        torch::NoGradGuard noGrad;
        c10d::broadcast_coalesced(m_group, state, kBroadcastBucketBytes, 0);
    }
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(parameters,
        { kFirstBucketBytes, m_options.bucketBytes }, std::vector<bool>(parameters.size(), false));
    // Gradients become ready roughly in reverse order of registration.
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(limits.begin(), limits.end());
#if SCALELAB_TORCH_AT_LEAST(2, 11)
    // 2.11 takes no initial per-bucket limits; an empty list keeps DDP's rebuild rule
    // (the first bucket kFirstBucketBytes, the rest bucketBytes).
    (void)limits;
    m_reducer = std::make_unique<c10d::Reducer>(parameters, std::move(buckets), m_group,
        std::vector<bool>(parameters.size(), false), static_cast<int64_t>(m_options.bucketBytes),
        /*find_unused_parameters=*/false,
        /*gradient_as_bucket_view=*/false, std::unordered_map<size_t, std::string> {},
        static_cast<int64_t>(kFirstBucketBytes), /*skip_all_reduce_unused_params=*/false,
        /*use_python_reducer=*/false, /*bucket_bytes_cap_list=*/std::vector<int64_t> {});
#else
    m_reducer = std::make_unique<c10d::Reducer>(parameters, std::move(buckets), std::move(limits), m_group,
        std::vector<bool>(parameters.size(), false), static_cast<int64_t>(m_options.bucketBytes),
        /*find_unused_parameters=*/false,
        /*gradient_as_bucket_view=*/false, std::unordered_map<size_t, std::string> {},
        static_cast<int64_t>(kFirstBucketBytes));
#endif
}

void DataParallel::beforeForward()
{
    // As DDP's forward: after the first iteration, regroup the buckets in the order the
    // gradients actually became ready, so each all-reduce starts as early as it can.
    m_reducer->rebuild_buckets();
    m_reducer->prepare_for_forward();
}

void DataParallel::syncBuffers()
{
    if (!m_buffers.empty()) {
        torch::NoGradGuard noGrad;
        c10d::broadcast_coalesced(m_group, m_buffers, kBroadcastBucketBytes, 0);
    }
}

void DataParallel::beforeBackward()
{
    m_reducer->prepare_for_backward({});
}

void DataParallel::allReduceSum(torch::Tensor &tensor)
{
    std::vector<torch::Tensor> tensors = { tensor };
    m_group->allreduce(tensors)->wait();
}

void DataParallel::barrier()
{
    m_group->barrier()->wait();
}

} // namespace scalelab::trainer
