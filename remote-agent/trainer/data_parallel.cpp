#include "data_parallel.h"

#include "c10d_compat.h"
#include "device.h"
#include "net_address.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sched.h>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace scalelab::trainer {

namespace {
// DDP's defaults for the first bucket: small, so the first all-reduce starts early.
constexpr std::size_t kFirstBucketBytes = 1 << 20;
constexpr std::size_t kBroadcastBucketBytes = 250 << 20;

// The CPU quota of this process's cgroup and its ancestors, in cores (the tightest; cgroup v2
// cpu.max or v1 cpu.cfs_quota_us / cpu.cfs_period_us), and the cgroup that sets it; 0 and ""
// without a quota. A container or a Kubernetes pod with a CPU limit is a machine of that many
// cores, whatever the host has.
std::pair<double, std::string> cgroupQuota()
{
    double best = 0;
    std::string where;
    std::ifstream self("/proc/self/cgroup");
    std::string line;
    while (std::getline(self, line)) {
        // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1)
        const auto first = line.find(':'), second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos)
            continue;
        const std::string controllers = line.substr(first + 1, second - first - 1);
        std::string path = line.substr(second + 1);
        const bool v2 = controllers.empty();
        bool cpu = v2;
        std::istringstream list(controllers);
        for (std::string c; std::getline(list, c, ',');)
            cpu = cpu || c == "cpu";
        if (!cpu)
            continue;
        // (Where the cgroup file system is not mounted, as under `ip netns exec`, which mounts
        // a sysfs of its own, there is no quota to read: tests/cluster/netns-cluster.sh
        // mounts it for its hosts.)
        const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/" + controllers;
        for (;;) {
            double cores = 0;
            if (v2) {
                std::ifstream in(root + path + "/cpu.max");
                std::string quota;
                double period = 0;
                if (in >> quota >> period && quota != "max" && period > 0)
                    cores = std::atof(quota.c_str()) / period;
            } else {
                std::ifstream quota(root + path + "/cpu.cfs_quota_us"),
                    period(root + path + "/cpu.cfs_period_us");
                double q = -1, t = 0;
                if (quota >> q && period >> t && q > 0 && t > 0)
                    cores = q / t;
            }
            if (cores > 0 && (best == 0 || cores < best)) {
                best = cores;
                where = path;
            }
            if (path.empty() || path == "/")
                break;
            path = path.substr(0, path.rfind('/'));
        }
    }
    return { best, where };
}

// This machine, as the kernel names it for this boot (one per machine or virtual machine;
// the same in every network namespace and container on it), with the cgroup whose CPU quota
// this process runs under, if any: ranks under different quotas do not share cores.
std::string machineId()
{
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    if (id.empty()) {
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        id = name;
    }
    if (const auto [cores, cgroup] = cgroupQuota(); cores > 0)
        id += " " + cgroup;
    return id;
}

// The cores this process may run on: its CPU affinity, or its cgroup's quota when lower.
double usableCores()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    double cores = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0
        ? CPU_COUNT(&set)
        : std::max(1u, std::thread::hardware_concurrency());
    if (const double quota = cgroupQuota().first; quota > 0)
        cores = std::min(cores, quota);
    return cores;
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
        // libtorch 1.13's store server listens on every address; keep it on ours.
        std::optional<net::WildcardBindRedirect> redirect;
        if (store.isServer && !options.storeAddress.empty())
            redirect.emplace(options.storeAddress);
        m_store = c10::make_intrusive<c10d::TCPStore>(options.host, store);
    } catch (const std::exception &e) {
        throw std::runtime_error("rendezvous at " + options.host + ":" + std::to_string(options.port)
            + " failed for rank " + std::to_string(options.rank) + " of " + std::to_string(options.worldSize)
            + (options.rank == 0 && !options.storeAddress.empty()
                    ? " (store listening on " + options.storeAddress + ")"
                    : std::string())
            + ": " + std::string(e.what()).substr(0, 300));
    }
    if (options.backend == "nccl") {
        // NCCL's bootstrap and rings pick an interface by themselves unless told; tell it
        // the one that holds our address (an operator's NCCL_SOCKET_IFNAME wins).
        if (!std::getenv("NCCL_SOCKET_IFNAME")) {
            const std::string interface = !options.interfaces.empty() ? options.interfaces.front()
                : options.bindAddress.empty()                         ? std::string()
                                              : net::interfaceOfAddress(options.bindAddress);
            if (!interface.empty())
                ::setenv("NCCL_SOCKET_IFNAME", interface.c_str(), 1);
        }
        m_group = makeNcclGroup(m_store, options.rank, options.worldSize, options.timeout);
        return;
    }
    auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
    // Gloo's pairs listen and connect on our address: never the one the host name
    // resolves to (createDefaultDevice), which is 127.0.1.1 on a stock Debian install.
    try {
        if (!options.interfaces.empty()) {
            for (const auto &interface : options.interfaces) // as PyTorch does for GLOO_SOCKET_IFNAME
                gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
        } else {
            gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
                options.bindAddress.empty() ? options.host : options.bindAddress));
        }
    } catch (const std::exception &e) {
        throw std::runtime_error("rank " + std::to_string(options.rank) + " cannot open Gloo on "
            + (options.interfaces.empty() ? "address " + options.bindAddress : "interface(s) given") + ": "
            + std::string(e.what()).substr(0, 300));
    }
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
    reduceGradientsOf(parameters);
}

void DataParallel::reduceGradientsOf(const std::vector<torch::Tensor> &parameters)
{
    m_reducer.reset();
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

std::vector<DataParallel::ProbeSample> DataParallel::probeAllReduce(
    std::int64_t targetBytes, int repeats, double slowSeconds, double budgetSeconds)
{
    const auto probeStart = std::chrono::steady_clock::now();
    torch::NoGradGuard noGrad;
    const auto options
        = torch::TensorOptions(torch::kFloat)
              .device(m_options.backend == "nccl" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU));
    const auto timed = [&](torch::Tensor &t) {
        std::vector<torch::Tensor> tensors = { t };
        if (t.is_cuda())
            synchronize(t.device());
        const auto start = std::chrono::steady_clock::now();
        m_group->allreduce(tensors)->wait();
        if (t.is_cuda())
            synchronize(t.device());
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<ProbeSample> samples;
    for (std::int64_t bytes = 4 << 10; bytes <= (64 << 20); bytes *= 4) {
        torch::Tensor data = torch::zeros({ bytes / 4 }, options);
        timed(data); // warm-up: connections, buffers
        torch::Tensor seconds = torch::zeros({ repeats }, torch::kDouble);
        for (int i = 0; i < repeats; ++i)
            seconds[i] = timed(data);
        // Every rank takes the same means, and so the same decision to go on.
        if (options.device().is_cuda())
            seconds = seconds.to(options.device());
        allReduceSum(seconds);
        seconds = (seconds / double(m_options.worldSize)).to(torch::kCPU);
        ProbeSample sample { bytes, {} };
        for (int i = 0; i < repeats; ++i)
            sample.seconds.push_back(seconds[i].item<double>());
        samples.push_back(std::move(sample));
        // The same decision on every rank: from the means over ranks, and the elapsed time
        // rounded to whole sizes (rank 0's clock decides, through the broadcast below).
        const bool slow
            = *std::max_element(samples.back().seconds.begin(), samples.back().seconds.end()) > slowSeconds;
        torch::Tensor overBudget = torch::tensor(
            { std::chrono::duration<double>(std::chrono::steady_clock::now() - probeStart).count()
                        > budgetSeconds
                    ? 1.0
                    : 0.0 },
            torch::kDouble);
        if (options.device().is_cuda())
            overBudget = overBudget.to(options.device());
        std::vector<torch::Tensor> flag = { overBudget };
        broadcastFromRankZero(flag);
        if ((slow && bytes >= targetBytes) || flag[0].item<double>() > 0)
            break;
    }
    return samples;
}

int DataParallel::hosts()
{
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    const std::string prefix = "scalelab/host/";
    m_store->set(
        prefix + std::to_string(m_options.rank), std::vector<uint8_t>(name, name + std::strlen(name)));
    std::set<std::vector<uint8_t>> distinct;
    for (int r = 0; r < m_options.worldSize; ++r)
        distinct.insert(m_store->get(prefix + std::to_string(r)));
    return int(distinct.size());
}

DataParallel::CoreShare DataParallel::coreShareAlone(int threads)
{
    return { 1, threads, usableCores() };
}

DataParallel::CoreShare DataParallel::coreShare(int threads)
{
    const std::string prefix = "scalelab/machine/";
    std::ostringstream mine;
    mine.precision(17);
    mine << machineId() << '\n' << usableCores() << '\n' << threads;
    const std::string text = mine.str();
    m_store->set(prefix + std::to_string(m_options.rank), std::vector<uint8_t>(text.begin(), text.end()));
    struct Machine {
        int threads = 0;
        double cores = 0;
    };
    std::map<std::string, Machine> machines;
    for (int r = 0; r < m_options.worldSize; ++r) {
        const std::vector<uint8_t> value = m_store->get(prefix + std::to_string(r));
        std::istringstream in(std::string(value.begin(), value.end()));
        std::string id;
        double cores = 0;
        int rankThreads = 0;
        std::getline(in, id);
        in >> cores >> rankThreads;
        Machine &m = machines[id];
        m.threads += rankThreads;
        m.cores = std::max(m.cores, cores);
    }
    CoreShare share { int(machines.size()), 0, 0 };
    for (const auto &[id, m] : machines)
        if (share.cores <= 0 || m.threads / std::max(m.cores, 1e-3) > share.threads / share.cores) {
            share.threads = m.threads;
            share.cores = std::max(m.cores, 1e-3);
        }
    return share;
}

} // namespace scalelab::trainer
