#include "training_support.h"

#include "checkpoint.h"

#include "blas_kernel.h"
#include "cifar10.h"
#include "net_address.h"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <iostream>
#include <stdexcept>

namespace scalelab::trainer {

// OpenBLAS keeps its own pool; size it like torch's so ranks never oversubscribe.
void setBlasThreads(int threads)
{
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
        set(threads);
}

// Gradients are dropped, not zeroed (PyTorch's zero_grad(set_to_none=True)): backward then
// writes each gradient fresh instead of adding it to a tensor of zeros, 13 MB written and
// 26 MB read less per step for the seed CNN. 0 + g is g, so results are unchanged.
void dropGradients(torch::optim::Optimizer &optimizer)
{
    for (auto &group : optimizer.param_groups())
        for (auto &p : group.params())
            p.mutable_grad().reset();
}

// The process group for a data-parallel config, or null for a single rank.
std::unique_ptr<DataParallel> connectRanks(const TrainingConfig &config)
{
    if (config.worldSize <= 1)
        return nullptr;
    const auto colon = config.rendezvous.rfind(':');
    DataParallelOptions options;
    options.host = config.rendezvous.substr(0, colon);
    if (options.host.size() > 2 && options.host.front() == '[')
        options.host = options.host.substr(1, options.host.size() - 2);
    options.port = std::atoi(config.rendezvous.c_str() + colon + 1);
    options.rank = config.rank;
    options.worldSize = config.worldSize;
    options.backend = !config.backend.empty() ? config.backend : config.device == "cuda" ? "nccl" : "gloo";
    options.bucketBytes = std::size_t(config.bucketMb) << 20;
    options.timeout = std::chrono::seconds(config.collectiveTimeoutSeconds);

    // Our address: the agent's, else the one the kernel routes towards the rendezvous
    // host from (rank 0: the rendezvous address itself), never the host name's.
    std::string error; // why no address was found, when none is
    const char *glooInterfaces = std::getenv("GLOO_SOCKET_IFNAME");
    options.interfaces = net::splitInterfaces(!config.interfaces.empty() ? config.interfaces
            : glooInterfaces                                             ? glooInterfaces
                                                                         : "");
    options.bindAddress = config.bindAddress;
    if (options.bindAddress.empty() && !options.interfaces.empty()) {
        const auto address = net::addressOfInterface(options.interfaces.front());
        options.bindAddress = address.valueOr({});
        error = address.error();
    }
    // An address no interface here holds (a NAT'ed or floating one the agent advertises)
    // cannot be bound: Gloo then uses the one on the route to the rendezvous host.
    if (!options.bindAddress.empty() && options.interfaces.empty() && !net::isLoopback(options.bindAddress)
        && net::interfaceOfAddress(options.bindAddress).empty()) {
        std::cerr << "scalelab-worker: rank " << config.rank << ": no interface here holds "
                  << options.bindAddress << "; Gloo uses the address on the route to the rendezvous instead"
                  << std::endl;
        options.bindAddress.clear();
    }
    if (options.bindAddress.empty()) {
        const auto address = net::localAddressTowards(options.host, options.port);
        options.bindAddress = address.valueOr({});
        error = address.error();
    }
    if (options.bindAddress.empty())
        throw std::runtime_error("rank " + std::to_string(config.rank)
            + " has no address to reach the rendezvous " + options.host + ": " + error
            + " (pass --bind-address or --iface)");
    if (net::isLoopback(options.bindAddress) && !net::isLoopback(options.host))
        throw std::runtime_error("rank " + std::to_string(config.rank) + " would use loopback address "
            + options.bindAddress + " for a rendezvous at " + options.host
            + ", which other hosts cannot reach: pass --bind-address or --iface (the agent's "
              "--advertise-host / --iface)");
    // Rank 0 hosts the store on its own address only (when that address is this host's).
    if (config.rank == 0) {
        const std::string storeAddress = net::resolveNumeric(options.host).valueOr({});
        if (!storeAddress.empty()
            && (net::isLoopback(storeAddress) || !net::interfaceOfAddress(storeAddress).empty()))
            options.storeAddress = storeAddress;
    }
    std::string where = options.bindAddress;
    if (!options.interfaces.empty() && options.backend == "gloo") {
        where = "interface(s)";
        for (const auto &name : options.interfaces)
            where += " " + name;
    }
    std::cerr << "scalelab-worker: rank " << config.rank << " of " << config.worldSize << ": rendezvous "
              << options.host << ":" << options.port << ", " << options.backend << " on " << where
              << (options.storeAddress.empty() ? std::string()
                                               : ", store listening on " + options.storeAddress)
              << std::endl;
    return std::make_unique<DataParallel>(options);
}

void toMemoryFormat(torch::nn::Module &net, at::MemoryFormat format)
{
    if (format == at::MemoryFormat::Contiguous)
        return;
    for (auto &p : net.parameters())
        if (p.dim() == 4)
            p.set_data(p.contiguous(format));
}

TrainableModel buildConfiguredModel(const TrainingConfig &config, double blockDropout, double denseDropout)
{
    TrainableModel net = buildModel(config.model, blockDropout, denseDropout);
    if (!config.initialWeights.empty())
        std::cerr << "scalelab-worker: " << copyInitialWeights(net, config.initialWeights) << std::endl;
    return net;
}

common::Result<FinetuneHead> finetuneHead(torch::nn::Module &net, const std::string &head)
{
    const auto named = net.named_parameters(/*recurse=*/true);
    if (named.is_empty())
        return common::Status::failure("the model has no parameters to fine-tune");
    FinetuneHead found;
    found.name = head;
    if (found.name.empty()) {
        // The classifier: the module of the last weight with one row per class (a Linear's
        // [10, in], a 1x1 convolution's [10, in, 1, 1]); else that of the last parameter.
        // Registration order is not forward order (a ResNet registers fc before its layers).
        std::string last = named.keys().back();
        for (const auto &item : named)
            if (item.value().dim() >= 2 && item.value().size(0) == cifar::kClasses)
                last = item.key();
        const auto dot = last.rfind('.');
        found.name = dot == std::string::npos ? last : last.substr(0, dot);
    }
    for (const auto &item : named)
        if (item.key() == found.name || item.key().rfind(found.name + ".", 0) == 0)
            found.parameters.push_back(item.value());
    if (found.parameters.empty()) {
        // The modules nearest the output, where a head is: the owners of the last parameters.
        std::vector<std::string> modules;
        const std::vector<std::string> keys = named.keys();
        for (auto key = keys.rbegin(); key != keys.rend() && modules.size() < 6; ++key) {
            const auto dot = key->rfind('.');
            const std::string owner = dot == std::string::npos ? *key : key->substr(0, dot);
            if (std::find(modules.begin(), modules.end(), owner) == modules.end())
                modules.push_back(owner);
        }
        std::string list;
        for (const auto &m : modules)
            list += (list.empty() ? "" : ", ") + m;
        return common::Status::failure("--head '" + head + "' names no module with parameters in the model; "
            + "the modules nearest its output are " + list + " (a module's name includes its parents', as in "
            + "state_dict keys without .weight)");
    }
    return found;
}

std::vector<torch::Tensor> trainOnly(torch::nn::Module &net, const FinetuneHead *head)
{
    std::vector<torch::Tensor> training;
    for (auto &p : net.parameters()) {
        const bool trains = !head
            || std::any_of(head->parameters.begin(), head->parameters.end(),
                [&](const torch::Tensor &h) { return h.is_same(p); });
        p.requires_grad_(trains);
        if (trains)
            training.push_back(p);
    }
    return training;
}

TrainableModel trainingModel(
    const TrainingConfig &config, const torch::Device &device, double blockDropout, double denseDropout)
{
    TrainableModel net = buildConfiguredModel(config, blockDropout, denseDropout);
    if (device.is_cuda())
        net->to(device);
    toMemoryFormat(*net, memoryFormatOf(config));
    net->train();
    return net;
}

// The BLAS library libtorch's linear layers end up in (OpenBLAS, or the slow reference).
std::string blasInUse()
{
    return describeBlas(chooseBlasKernel());
}

std::string compilerName()
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown compiler";
#endif
}

// Ranks on other nodes hold no copy of the checkpoint that rank 0 resumed from: they
// take rank 0's position (AdaScale's progress too) and SGD momentum, so every rank
// continues one run.
void adoptRankZeroProgress(DataParallel &parallel, torch::optim::SGD &optimizer, CheckpointPosition *position)
{
    const auto &params = optimizer.param_groups().at(0).params();
    auto momentumOf = [&](const torch::Tensor &p) -> torch::optim::SGDParamState * {
        const auto it = optimizer.state().find(optimizerStateKey(p));
        return it == optimizer.state().end() ? nullptr
                                             : static_cast<torch::optim::SGDParamState *>(it->second.get());
    };
    std::vector<torch::Tensor> header { torch::tensor(
        { std::int64_t(position->epoch), position->step, std::int64_t(momentumOf(params.at(0)) != nullptr) })
                                            .to(params.at(0).device()) };
    const std::array<double, 4> noise = position->noiseAverages.value_or(std::array<double, 4> {});
    header.push_back(
        torch::tensor({ position->progress ? 1.0 : 0.0, position->progress.value_or(0.0),
                          position->noiseAverages ? 1.0 : 0.0, noise[0], noise[1], noise[2], noise[3] },
            torch::TensorOptions(torch::kDouble).device(params.at(0).device())));
    parallel.broadcastFromRankZero(header);
    position->epoch = int(header[0][0].item<std::int64_t>());
    position->step = header[0][1].item<std::int64_t>();
    const torch::Tensor received = header[1].to(torch::kCPU).contiguous();
    const double *h = received.data_ptr<double>();
    position->progress = h[0] != 0 ? std::optional(h[1]) : std::nullopt;
    position->noiseAverages
        = h[2] != 0 ? std::optional(std::array<double, 4> { h[3], h[4], h[5], h[6] }) : std::nullopt;
    if (header[0][2].item<std::int64_t>() == 0)
        return; // rank 0 has no momentum yet: a fresh start everywhere
    std::vector<torch::Tensor> momenta;
    for (const auto &p : params) {
        auto *state = momentumOf(p);
        if (!state) {
            auto created = std::make_unique<torch::optim::SGDParamState>();
            created->momentum_buffer(torch::zeros_like(p));
            state = created.get();
            optimizer.state()[optimizerStateKey(p)] = std::move(created);
        }
        momenta.push_back(state->momentum_buffer());
    }
    parallel.broadcastFromRankZero(momenta);
}

} // namespace scalelab::trainer
