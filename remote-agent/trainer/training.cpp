#include "training.h"

#include "checkpoint.h"
#include "cifar10.h"
#include "data_parallel.h"
#include "device.h"
#include "event_writer.h"
#include "fused_ops.h"
#include "lr_schedule.h"
#include "net_address.h"
#include "seed_model.h"
#include "seed_model_impl.h"
#include "torch_compat.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <dlfcn.h>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

namespace scalelab::trainer {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kEvalBatch = 500;
constexpr int kCropPadding = 4;
constexpr std::size_t kPrefetchBatches = 4;

double secondsSince(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// OpenBLAS keeps its own pool; size it like torch's so ranks never oversubscribe.
void setBlasThreads(int threads)
{
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
        set(threads);
}

// Per-channel mean and standard deviation of pixels in [0, 1]: given, or measured on the
// training images this rank loaded (every rank loads the same ones, so all agree).
struct Normalization {
    float mean[3];
    float std[3];
    bool measured;
};

Normalization normalizationFor(const TrainingConfig &config, const cifar::Images &train)
{
    Normalization n {};
    if (!config.normalizeMean.empty()) {
        for (int c = 0; c < 3; ++c) {
            n.mean[c] = float(config.normalizeMean[std::size_t(c)]);
            n.std[c] = float(config.normalizeStd[std::size_t(c)]);
        }
        return n;
    }
    const auto stats = cifar::channelStatistics(train);
    for (int c = 0; c < 3; ++c) {
        n.mean[c] = float(stats.mean[c]);
        n.std[c] = float(stats.std[c]);
    }
    n.measured = true;
    return n;
}

struct Batch {
    torch::Tensor images; // float [B, 3, 32, 32], normalised (and augmented)
    torch::Tensor labels; // int64 [B]
};

// Gradients are dropped, not zeroed (PyTorch's zero_grad(set_to_none=True)): backward then
// writes each gradient fresh instead of adding it to a tensor of zeros, 13 MB written and
// 26 MB read less per step for the seed CNN. 0 + g is g, so results are unchanged.
void dropGradients(torch::optim::Optimizer &optimizer)
{
    for (auto &group : optimizer.param_groups())
        for (auto &p : group.params())
            p.mutable_grad().reset();
}

// Ranks on other nodes hold no copy of the checkpoint that rank 0 resumed from: they
// take rank 0's position and SGD momentum, so every rank continues one run.
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
    parallel.broadcastFromRankZero(header);
    position->epoch = int(header[0][0].item<std::int64_t>());
    position->step = header[0][1].item<std::int64_t>();
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

// Turns a list of image indices into normalised, augmented batches on its own thread,
// a few batches ahead of training. Augmentation draws from an RNG seeded by (seed,
// epoch, rank), so a resumed run sees exactly the batches it would have seen. For a GPU
// the batches are in pinned memory, so their copies to the GPU can overlap its work.
class BatchProducer {
public:
    BatchProducer(const cifar::Images &images, const Normalization &normalization, std::vector<std::int64_t> indices,
        int batchSize, bool augment, std::uint64_t seed, bool pinMemory)
        : m_images(images)
        , m_normalization(normalization)
        , m_indices(std::move(indices))
        , m_batchSize(batchSize)
        , m_augment(augment)
        , m_pinMemory(pinMemory)
        , m_rng(seed)
        , m_thread([this] { run(); })
    { }
    ~BatchProducer()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_changed.notify_all();
        m_thread.join();
    }

    std::int64_t batches() const { return (std::int64_t(m_indices.size()) + m_batchSize - 1) / m_batchSize; }

    // Blocks until the next batch is ready; empty tensors at the end.
    Batch next()
    {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [this] { return !m_queue.empty() || m_done; });
        if (m_queue.empty())
            return {};
        Batch batch = std::move(m_queue.front());
        m_queue.pop_front();
        m_changed.notify_all();
        return batch;
    }

private:
    void run()
    {
        std::uniform_int_distribution<int> shift(-kCropPadding, kCropPadding);
        std::bernoulli_distribution flip(0.5);
        for (std::size_t begin = 0; begin < m_indices.size(); begin += std::size_t(m_batchSize)) {
            const std::size_t end = std::min(m_indices.size(), begin + std::size_t(m_batchSize));
            const auto n = std::int64_t(end - begin);
            Batch batch { torch::empty({ n, 3, 32, 32 },
                              torch::TensorOptions(torch::kFloat).pinned_memory(m_pinMemory)),
                torch::empty({ n }, torch::TensorOptions(torch::kLong).pinned_memory(m_pinMemory)) };
            float *out = batch.images.data_ptr<float>();
            std::int64_t *labels = batch.labels.data_ptr<std::int64_t>();
            for (std::int64_t i = 0; i < n; ++i) {
                const auto index = std::size_t(m_indices[begin + std::size_t(i)]);
                labels[i] = m_images.labels[index];
                const std::uint8_t *src = m_images.pixels.data() + index * cifar::kPixelBytes;
                const int dx = m_augment ? shift(m_rng) : 0;
                const int dy = m_augment ? shift(m_rng) : 0;
                const bool mirror = m_augment && flip(m_rng);
                for (int c = 0; c < 3; ++c) {
                    const float scale = 1.0f / (255.0f * m_normalization.std[c]);
                    const float offset = m_normalization.mean[c] / m_normalization.std[c];
                    float *plane = out + (i * 3 + c) * 1024;
                    const std::uint8_t *in = src + c * 1024;
                    for (int y = 0; y < 32; ++y) {
                        const int sy = y + dy;
                        for (int x = 0; x < 32; ++x) {
                            const int sx = (mirror ? 31 - x : x) + dx;
                            // Zero padding, as torchvision's RandomCrop(padding=4): the
                            // padded pixel is 0 before normalisation.
                            const bool inside = sy >= 0 && sy < 32 && sx >= 0 && sx < 32;
                            plane[y * 32 + x] = (inside ? float(in[sy * 32 + sx]) : 0.0f) * scale - offset;
                        }
                    }
                }
            }
            std::unique_lock lock(m_mutex);
            m_changed.wait(lock, [this] { return m_queue.size() < kPrefetchBatches || m_stop; });
            if (m_stop)
                return;
            m_queue.push_back(std::move(batch));
            m_changed.notify_all();
        }
        std::lock_guard lock(m_mutex);
        m_done = true;
        m_changed.notify_all();
    }

    const cifar::Images &m_images;
    const Normalization m_normalization;
    std::vector<std::int64_t> m_indices;
    int m_batchSize;
    bool m_augment;
    bool m_pinMemory;
    std::mt19937_64 m_rng;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<Batch> m_queue;
    bool m_done = false;
    bool m_stop = false;
    std::thread m_thread;
};

// This rank's share of an epoch: the same seeded permutation on every rank, padded to
// a multiple of the world size (as DistributedSampler), then every world-th index.
std::vector<std::int64_t> shardForEpoch(std::int64_t size, std::uint64_t seed, int epoch, int rank, int world)
{
    std::vector<std::int64_t> order(std::size_t(size), 0);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed * 1'000'003ULL + std::uint64_t(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    const std::int64_t perRank = (size + world - 1) / world;
    for (std::int64_t i = 0; std::int64_t(order.size()) < perRank * world; ++i)
        order.push_back(order[std::size_t(i)]);
    std::vector<std::int64_t> shard;
    for (std::int64_t i = rank; i < perRank * world; i += world)
        shard.push_back(order[std::size_t(i)]);
    return shard;
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
    options.interfaces = net::splitInterfaces(
        !config.interfaces.empty() ? config.interfaces : glooInterfaces ? glooInterfaces : "");
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
        std::cerr << "scalelab-worker: rank " << config.rank << ": no interface here holds " << options.bindAddress
                  << "; Gloo uses the address on the route to the rendezvous instead" << std::endl;
        options.bindAddress.clear();
    }
    if (options.bindAddress.empty()) {
        const auto address = net::localAddressTowards(options.host, options.port);
        options.bindAddress = address.valueOr({});
        error = address.error();
    }
    if (options.bindAddress.empty())
        throw std::runtime_error("rank " + std::to_string(config.rank) + " has no address to reach the rendezvous "
            + options.host + ": " + error + " (pass --bind-address or --iface)");
    if (net::isLoopback(options.bindAddress) && !net::isLoopback(options.host))
        throw std::runtime_error("rank " + std::to_string(config.rank) + " would use loopback address "
            + options.bindAddress + " for a rendezvous at " + options.host
            + ", which other hosts cannot reach: pass --bind-address or --iface (the agent's "
              "--advertise-host / --iface)");
    // Rank 0 hosts the store on its own address only (when that address is this host's).
    if (config.rank == 0) {
        const std::string storeAddress = net::resolveNumeric(options.host).valueOr({});
        if (!storeAddress.empty() && (net::isLoopback(storeAddress) || !net::interfaceOfAddress(storeAddress).empty()))
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
              << (options.storeAddress.empty() ? std::string() : ", store listening on " + options.storeAddress)
              << std::endl;
    return std::make_unique<DataParallel>(options);
}

void toMemoryFormat(SeedNet &net, at::MemoryFormat format)
{
    if (format == at::MemoryFormat::Contiguous)
        return;
    for (auto &p : net->parameters())
        if (p.dim() == 4)
            p.set_data(p.contiguous(format));
}

torch::Tensor normalise(const torch::Tensor &pixels, const Normalization &n)
{
    const auto mean = torch::tensor({ n.mean[0], n.mean[1], n.mean[2] }).view({ 1, 3, 1, 1 });
    const auto std = torch::tensor({ n.std[0], n.std[1], n.std[2] }).view({ 1, 3, 1, 1 });
    return (pixels.to(torch::kFloat).div_(255.0f) - mean) / std;
}

// The BLAS library libtorch's linear layers end up in (OpenBLAS, or the slow reference).
std::string blasInUse()
{
    using Config = char *(*)();
    if (auto config = reinterpret_cast<Config>(dlsym(RTLD_DEFAULT, "openblas_get_config")))
        return std::string("OpenBLAS ") + config();
    return "reference BLAS (install libopenblas0-pthread: ~30x faster linear layers)";
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

// Says when a run has diverged: a non-finite loss at once, or a loss above `factor` x its
// reference for `steps` steps in a row. The reference is the first loss this process saw,
// and at least ln 10, the loss of a uniform guess over the 10 classes, so a resumed run
// whose loss is already low is not held to a tighter bound than a fresh one.
class DivergenceWatch {
public:
    DivergenceWatch(double factor, int steps)
        : m_factor(factor)
        , m_steps(steps)
    { }

    // Empty while the run is healthy, else "diverged at step N (...)".
    std::string observe(std::int64_t step, double loss)
    {
        if (!std::isfinite(loss))
            return "diverged at step " + std::to_string(step) + " (loss " + (std::isnan(loss) ? "nan" : "inf")
                + "): lower the learning rate or lengthen the warm-up";
        if (m_reference == 0)
            m_reference = std::max(loss, std::log(10.0));
        m_above = loss > m_factor * m_reference ? m_above + 1 : 0;
        if (m_above >= m_steps)
            return "diverged at step " + std::to_string(step) + " (loss " + EventWriter::number(loss) + ", above "
                + EventWriter::number(m_factor) + " x the starting " + EventWriter::number(m_reference) + " for "
                + std::to_string(m_steps) + " steps): lower the learning rate or lengthen the warm-up";
        return {};
    }

private:
    double m_factor;
    int m_steps;
    double m_reference = 0;
    int m_above = 0;
};

// Autocast to bf16 on `device` for the scope, when asked. CPU and CUDA autocast are
// separate switches in libtorch.
class AutocastScope {
public:
    AutocastScope(bool enabled, const torch::Device &device)
        : m_enabled(enabled)
        , m_device(device.type())
    {
        if (m_enabled)
            setAutocast(m_device, true, at::kBFloat16);
    }
    ~AutocastScope()
    {
        if (!m_enabled)
            return;
        setAutocast(m_device, false);
        at::autocast::clear_cache();
    }

private:
    bool m_enabled;
    c10::DeviceType m_device;
};

} // namespace

namespace {
// What is wrong with `c`, or empty.
std::string configProblem(const TrainingConfig &c)
{
    if (c.dataDir.empty())
        return "--data-dir is required: the folder with the CIFAR-10 .bin files";
    if (c.batchSize <= 0)
        return "--batch-size must be at least 1 (got " + std::to_string(c.batchSize) + ")";
    if (c.epochs <= 0)
        return "--epochs must be at least 1 (got " + std::to_string(c.epochs) + ")";
    if (!(c.learningRate > 0) || !std::isfinite(c.learningRate))
        return "--lr must be a finite number greater than 0";
    if (!(c.momentum >= 0 && c.momentum < 1))
        return "--momentum must be in [0, 1)";
    if (!(c.weightDecay >= 0) || !std::isfinite(c.weightDecay))
        return "--weight-decay must be a finite number, 0 or more";
    if (c.lrScaling != "none" && c.lrScaling != "linear")
        return "--lr-scaling must be 'none' or 'linear'";
    if (c.baseBatch <= 0)
        return "--base-batch must be at least 1";
    if (c.schedule != "cosine" && c.schedule != "constant")
        return "--schedule must be 'cosine' or 'constant'";
    if (!(c.warmupEpochs < 0 || c.warmupEpochs <= c.epochs) || std::isnan(c.warmupEpochs))
        return "--warmup-epochs must be between 0 and --epochs";
    if (!(c.labelSmoothing >= 0 && c.labelSmoothing < 1))
        return "--label-smoothing must be in [0, 1)";
    if (!(c.blockDropout >= 0 && c.blockDropout < 1))
        return "--block-dropout must be in [0, 1)";
    if (!(c.denseDropout >= 0 && c.denseDropout < 1))
        return "--dense-dropout must be in [0, 1)";
    if (c.normalizeMean.size() != c.normalizeStd.size()
        || (!c.normalizeMean.empty() && c.normalizeMean.size() != 3))
        return "--normalize-mean and --normalize-std take three comma-separated values each (red, green, blue)";
    for (std::size_t i = 0; i < c.normalizeMean.size(); ++i)
        if (!(c.normalizeMean[i] >= 0 && c.normalizeMean[i] <= 1) || !(c.normalizeStd[i] > 0 && c.normalizeStd[i] <= 1))
            return "--normalize-mean values must be in [0, 1] and --normalize-std values in (0, 1]";
    if (!(c.divergenceFactor > 1) || !std::isfinite(c.divergenceFactor))
        return "--divergence-factor must be a number greater than 1";
    if (c.divergenceSteps < 1)
        return "--divergence-steps must be at least 1";
    if (c.precision != "fp32" && c.precision != "bf16")
        return "--precision must be 'fp32' or 'bf16'";
    if (auto problem = checkDevice(c.device).error(); !problem.empty())
        return problem;
    if (!c.backend.empty() && c.backend != "gloo" && c.backend != "nccl")
        return "--backend must be 'gloo' or 'nccl'";
    if (c.backend == "nccl" && c.device != "cuda")
        return "--backend nccl needs --device cuda (NCCL runs collectives on GPUs)";
    if (c.precision == "bf16")
        if (auto problem = checkBf16(c.device).error(); !problem.empty())
            return problem;
    if (c.threads < 0)
        return "--threads must be 0 (automatic) or more";
    if (c.worldSize < 1 || c.rank < 0 || c.rank >= c.worldSize)
        return "--rank must be in [0, --world-size)";
    if (c.worldSize > 1 && c.rendezvous.find(':') == std::string::npos)
        return "--rendezvous HOST:PORT is required when --world-size > 1 (rank 0 hosts the TCPStore there)";
    if (c.bucketMb < 1)
        return "--bucket-mb must be at least 1";
    if (c.collectiveTimeoutSeconds < 1)
        return "--collective-timeout-s must be at least 1";
    if (c.checkpointEvery < 1)
        return "--checkpoint-every must be at least 1";
    if (c.keepCheckpoints < 1 || c.keepCheckpoints > 1000)
        return "--keep-checkpoints must be between 1 and 1000";
    if (c.resume && c.checkpointDir.empty())
        return "--resume needs --checkpoint-dir";
    if (c.stopAfterEpoch < 0 || c.stopAfterEpoch > c.epochs)
        return "--stop-after-epoch must be 0 (train every epoch) or between 1 and --epochs";
    return {};
}
} // namespace

common::Status validate(const TrainingConfig &config)
{
    return common::Status::failureIf(configProblem(config));
}

int runTraining(const TrainingConfig &config, EventWriter &events)
{
    const auto fail = [&](const std::string &message) {
        events.error(message);
        return 1;
    };
    const auto failNoSpace = [&](const std::string &message, std::uint64_t needed) { // the disk failed, not the run
        events.noSpace(message, std::int64_t(needed));
        std::cerr << "scalelab-worker: " << message << std::endl;
        return kNoSpaceExitCode;
    };
    if (const common::Status valid = validate(config); !valid)
        return fail(valid.error());
    const bool reports = config.rank == 0; // one voice per run: rank 0 reports metrics

    // A loopback rendezvous means every rank shares this node's cores.
    const std::string rendezvousHost = config.rendezvous.substr(0, config.rendezvous.rfind(':'));
    const bool allRanksHere
        = config.worldSize == 1 || rendezvousHost.rfind("127.", 0) == 0 || rendezvousHost == "localhost";
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads
        = config.threads > 0 ? config.threads : std::max(1, cores / (allRanksHere ? config.worldSize : 1));
    torch::set_num_threads(threads);
    setBlasThreads(threads);
    torch::manual_seed(config.seed);

    const auto summary = cifar::inspectDataset(config.dataDir);
    if (!summary)
        return fail(summary.error());
    auto train = cifar::readSplit(config.dataDir, cifar::Split::Train, std::size_t(config.maxTrainImages));
    if (!train)
        return fail(train.error());
    auto test = cifar::readSplit(config.dataDir, cifar::Split::Test, std::size_t(config.maxTestImages));
    if (!test)
        return fail(test.error());
    const Normalization normalization = normalizationFor(config, *train);
    const auto testCount = std::int64_t(test->size());
    const auto testPixels = torch::from_blob(test->pixels.data(), { testCount, 3, 32, 32 }, torch::kUInt8);
    const auto testLabels
        = torch::from_blob(test->labels.data(), { testCount }, torch::kUInt8).to(torch::kLong);

    // Weights are drawn on the CPU, so a seed gives the same initial model on every device.
    const torch::Device device = torchDevice(config.device);
    SeedNet net(config.blockDropout, config.denseDropout);
    if (device.is_cuda())
        net->to(device);
    const auto memoryFormat
        = config.channelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    toMemoryFormat(net, memoryFormat);
    net->train();

    std::unique_ptr<DataParallel> parallel = connectRanks(config);

    const std::int64_t globalBatch = std::int64_t(config.batchSize) * config.worldSize;
    const double peakLr = config.lrScaling == "linear"
        ? config.learningRate * double(globalBatch) / double(config.baseBatch)
        : config.learningRate;
    torch::optim::SGD optimizer(net->parameters(),
        torch::optim::SGDOptions(peakLr).momentum(config.momentum).weight_decay(config.weightDecay));

    CheckpointPosition position;
    std::string resumedFrom;
    if (config.resume) {
        auto loaded = loadLatestCheckpoint(
            config.checkpointDir, device, *net, optimizer,
            [&](const std::string &warning) {
                events.warning(warning);
            },
            &resumedFrom);
        if (loaded)
            position = *loaded;
    }
    // A checkpoint that cannot fit fails the run now, not after an epoch of training.
    if (!config.checkpointDir.empty() && config.rank == 0) {
        const std::uint64_t needed = estimateCheckpointBytes(*net);
        if (const auto available = freeBytes(config.checkpointDir); available && *available < needed)
            return failNoSpace(noSpaceMessage(needed, config.checkpointDir, *available), needed);
    }
    // After loading: every rank starts from rank 0's state (weights and buffers).
    if (parallel) {
        parallel->attach(*net);
        adoptRankZeroProgress(*parallel, optimizer, &position);
    }

    const std::int64_t perRank = (std::int64_t(train->size()) + config.worldSize - 1) / config.worldSize;
    const std::int64_t stepsPerEpoch = (perRank + config.batchSize - 1) / config.batchSize;
    const std::int64_t totalSteps = stepsPerEpoch * config.epochs;
    const double warmupEpochs = warmupEpochsOf(config);
    const auto warmupSteps = std::int64_t(std::llround(warmupEpochs * double(stepsPerEpoch)));
    const LrSchedule schedule { .peak = peakLr,
        .warmupSteps = warmupSteps,
        .totalSteps = totalSteps,
        .constant = config.schedule == "constant" };

    // Counted on the live model: building another one would draw from the generator a
    // checkpoint just restored, and a resumed run would no longer match.
    std::int64_t parameterCount = 0;
    for (const auto &p : net->parameters())
        parameterCount += p.numel();
    if (reports)
        events.started(config,
            { .synthetic = summary->synthetic,
                .trainImages = std::int64_t(train->size()),
                .testImages = testCount,
                .parameters = parameterCount,
                .threads = threads,
                .device = device.str(),
                .stepsPerEpoch = stepsPerEpoch,
                .globalBatch = globalBatch,
                .peakLr = peakLr,
                .resumedEpoch = position.epoch,
                .resumedFrom = resumedFrom,
                .warmupEpochs = warmupEpochs,
                .warmupSteps = warmupSteps,
                .normalizeMean = { normalization.mean[0], normalization.mean[1], normalization.mean[2] },
                .normalizeStd = { normalization.std[0], normalization.std[1], normalization.std[2] },
                .normalizeMeasured = normalization.measured,
                .torchVersion = TORCH_VERSION,
                .blas = blasInUse(),
                .compiler = compilerName() });

    DivergenceWatch divergence(config.divergenceFactor, config.divergenceSteps);
    const auto runStart = Clock::now();
    std::int64_t step = position.step;
    std::int64_t imagesSeen = 0;
    double trainSeconds = 0;
    double bestAccuracy = 0, lastAccuracy = 0;
    const bool bf16 = config.precision == "bf16";
    // Where rank 0's step time goes (as bench's breakdown): the all-reduce time backward's
    // compute did not hide is from the last gradient produced to backward's return.
    std::atomic<Clock::rep> lastGradient { 0 };
    if (reports && parallel)
        for (auto &p : net->parameters())
            p.register_hook([&lastGradient](const at::TensorBase &) {
                const Clock::rep now = Clock::now().time_since_epoch().count();
                Clock::rep seen = lastGradient.load();
                while (seen < now && !lastGradient.compare_exchange_weak(seen, now)) { }
            });
    // A run told to stop early trains its schedule's first epochs only; one resumed at or
    // past that point has nothing left to train and finishes at once.
    const int lastEpoch = lastEpochOf(config);
    for (int epoch = position.epoch + 1; epoch <= lastEpoch; ++epoch) {
        const auto epochStart = Clock::now();
        BatchProducer batches(*train, normalization,
            shardForEpoch(std::int64_t(train->size()), config.seed, epoch, config.rank, config.worldSize),
            config.batchSize, config.augment,
            config.seed ^ (std::uint64_t(epoch) << 32) ^ (std::uint64_t(config.rank) << 48),
            device.is_cuda());
        // Statistics stay on the model's device: NCCL reduces CUDA tensors only.
        torch::Tensor lossSum = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
        torch::Tensor correct = torch::zeros({}, torch::TensorOptions(torch::kLong).device(device));
        std::int64_t seen = 0;
        for (Batch batch = batches.next(); batch.images.defined(); batch = batches.next()) {
            const auto stepStart = Clock::now();
            const double lr = schedule.at(step);
            for (auto &group : optimizer.param_groups())
                static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
            // The same tensors on the CPU; asynchronous copies from pinned memory on a GPU.
            const auto images = batch.images.to(device, /*non_blocking=*/true);
            const auto labels = batch.labels.to(device, /*non_blocking=*/true);
            const auto x = config.channelsLast ? images.contiguous(memoryFormat) : images;
            dropGradients(optimizer);
            if (parallel)
                parallel->beforeForward();
            torch::Tensor out, loss;
            {
                AutocastScope autocast(bf16, device);
                out = net->forward(x);
                loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), labels,
                    torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(config.labelSmoothing));
            }
            if (parallel)
                parallel->beforeBackward();
            loss.backward();
            const auto backwardEnd = Clock::now();
            // The gradients' norm is queued before the optimizer step changes nothing it reads,
            // and read with the loss: one wait for the device per step, as before.
            torch::Tensor gradNorm;
            if (reports) {
                torch::NoGradGuard noGrad;
                std::vector<torch::Tensor> norms;
                for (const auto &p : net->parameters())
                    if (p.grad().defined())
                        norms.push_back(p.grad().detach().to(torch::kFloat).norm());
                if (!norms.empty())
                    gradNorm = torch::stack(norms).norm();
            }
            sgdStep(optimizer);
            const auto n = images.size(0);
            const double lossValue = loss.item<double>();
            if (const auto why = divergence.observe(step + 1, lossValue); !why.empty()) {
                events.diverged(why, step + 1);
                std::cerr << "scalelab-worker: " << why << std::endl;
                return kDivergedExitCode;
            }
            lossSum += lossValue * double(n);
            correct += out.argmax(1).eq(labels).sum();
            seen += n;
            ++step;
            imagesSeen += n * config.worldSize;
            if (reports) {
                const double stepSeconds = secondsSince(stepStart);
                const auto lastGradientAt = Clock::time_point(Clock::duration(lastGradient.load()));
                events.step({ .epoch = epoch,
                    .step = step,
                    .loss = lossValue,
                    .lr = lr,
                    .imagesPerSecond = double(n * config.worldSize) / stepSeconds,
                    .elapsedSeconds = secondsSince(runStart),
                    .gradNorm = gradNorm.defined() ? gradNorm.item<double>() : 0.0,
                    .stepSeconds = stepSeconds,
                    .exposedAllReduceSeconds = parallel && lastGradientAt > stepStart
                        ? std::max(0.0, std::chrono::duration<double>(backwardEnd - lastGradientAt).count())
                        : 0.0 });
            }
        }
        const double epochTrainSeconds = secondsSince(epochStart);
        trainSeconds += epochTrainSeconds;

        // Train statistics over all ranks, then the test split, each image exactly once.
        const auto statsOptions = torch::TensorOptions(torch::kDouble).device(device);
        torch::Tensor trainStats = torch::stack(
            { lossSum, correct.to(torch::kDouble), torch::tensor(double(seen), statsOptions) });
        torch::Tensor testStats = torch::zeros({ 3 }, statsOptions);
        if (parallel)
            parallel->syncBuffers();
        {
            torch::NoGradGuard noGrad;
            net->eval();
            // Rank 0 says it is alive while it evaluates: the agent takes a run with no
            // event for a while as stalled.
            auto lastProgress = Clock::now();
            for (std::int64_t begin = config.rank * kEvalBatch; begin < testCount;
                 begin += kEvalBatch * config.worldSize) {
                if (reports && secondsSince(lastProgress) >= 2.0) {
                    lastProgress = Clock::now();
                    events.evaluating(epoch, begin / config.worldSize, testCount / config.worldSize);
                }
                const auto end = std::min(begin + kEvalBatch, testCount);
                auto xs = normalise(testPixels.slice(0, begin, end), normalization).to(device);
                if (config.channelsLast)
                    xs = xs.contiguous(memoryFormat);
                const auto ys = testLabels.slice(0, begin, end).to(device);
                AutocastScope autocast(bf16, device);
                const auto logits = net->forward(xs).to(torch::kFloat);
                testStats[0] += torch::nn::functional::cross_entropy(
                    logits, ys, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                                    .item<double>();
                testStats[1] += logits.argmax(1).eq(ys).sum().item<std::int64_t>();
                testStats[2] += double(end - begin);
            }
            net->train();
        }
        if (parallel) {
            parallel->allReduceSum(trainStats);
            parallel->allReduceSum(testStats);
        }
        const double trainN = std::max(1.0, trainStats[2].item<double>());
        const double testN = std::max(1.0, testStats[2].item<double>());
        lastAccuracy = testStats[1].item<double>() / testN;
        bestAccuracy = std::max(bestAccuracy, lastAccuracy);
        if (reports)
            events.epoch({ .epoch = epoch,
                .trainLoss = trainStats[0].item<double>() / trainN,
                .trainAccuracy = trainStats[1].item<double>() / trainN,
                .testLoss = testStats[0].item<double>() / testN,
                .testAccuracy = lastAccuracy,
                .testImages = std::int64_t(testN),
                .epochSeconds = secondsSince(epochStart),
                .imagesPerSecond = trainN / epochTrainSeconds,
                .elapsedSeconds = secondsSince(runStart) });

        // The last epoch always leaves a checkpoint: where a stopped run is resumed from.
        const bool checkpointNow = !config.checkpointDir.empty()
            && (epoch % config.checkpointEvery == 0 || epoch == lastEpoch);
        if (checkpointNow && config.rank == 0) {
            const SavedCheckpoint saved
                = saveCheckpoint(config.checkpointDir, { epoch, step }, device, *net, optimizer, config.keepCheckpoints);
            if (!saved.ok())
                return saved.noSpace ? failNoSpace(saved.error, saved.bytesNeeded) : fail(saved.error);
            events.checkpoint(epoch, step, saved.path);
        }
        if (checkpointNow && parallel)
            parallel->barrier(); // nobody runs ahead of a checkpoint that may be resumed
    }
    events.finished({ .finalTestAccuracy = lastAccuracy,
        .bestTestAccuracy = bestAccuracy,
        .wallSeconds = secondsSince(runStart),
        .imagesPerSecond = trainSeconds > 0 ? double(imagesSeen) / trainSeconds : 0.0,
        .epochsCompleted = std::max(position.epoch, lastEpoch),
        .weightsSha256 = weightsDigest(*net) });
    return 0;
}

} // namespace scalelab::trainer

namespace scalelab::trainer {

int runGradientCheck(const TrainingConfig &config, EventWriter &events)
{
    if (const common::Status valid = validate(config); !valid) {
        events.error(valid.error());
        return 1;
    }
    torch::set_num_threads(config.threads > 0 ? config.threads : 1);
    torch::manual_seed(config.seed);
    const auto total = std::int64_t(config.batchSize) * config.worldSize;
    auto images = cifar::readSplit(config.dataDir, cifar::Split::Train, std::size_t(total));
    if (!images || std::int64_t(images->size()) < total) {
        events.error(images ? "need " + std::to_string(total) + " training images" : images.error());
        return 1;
    }
    const torch::Device device = torchDevice(config.device);
    const auto x = normalise(torch::from_blob(images->pixels.data(), { total, 3, 32, 32 }, torch::kUInt8),
        normalizationFor(config, *images))
                       .to(device);
    const auto y
        = torch::from_blob(images->labels.data(), { total }, torch::kUInt8).to(torch::kLong).to(device);

    SeedNet net;
    if (device.is_cuda())
        net->to(device);
    net->eval(); // no dropout, BatchNorm on running statistics: per-image loss terms
    std::unique_ptr<DataParallel> parallel = connectRanks(config);
    if (parallel)
        parallel->attach(*net);
    // The reference replica: rank 0's weights, the whole batch, no communication.
    SeedNet reference;
    if (device.is_cuda())
        reference->to(device);
    reference->eval();
    {
        torch::NoGradGuard noGrad;
        auto from = net->parameters();
        auto to = reference->parameters();
        for (std::size_t i = 0; i < from.size(); ++i)
            to[i].copy_(from[i]);
        auto fromBuffers = net->buffers();
        auto toBuffers = reference->buffers();
        for (std::size_t i = 0; i < fromBuffers.size(); ++i)
            toBuffers[i].copy_(fromBuffers[i]);
    }

    const auto begin = std::int64_t(config.rank) * config.batchSize;
    if (parallel)
        parallel->beforeForward();
    const auto loss
        = torch::nn::functional::cross_entropy(net->forward(x.slice(0, begin, begin + config.batchSize)),
            y.slice(0, begin, begin + config.batchSize));
    if (parallel)
        parallel->beforeBackward();
    loss.backward();
    if (config.rank == 0) {
        torch::nn::functional::cross_entropy(reference->forward(x), y).backward();
        double maxDiff = 0, maxGrad = 0;
        const auto averaged = net->parameters();
        const auto whole = reference->parameters();
        for (std::size_t i = 0; i < averaged.size(); ++i) {
            maxDiff = std::max(maxDiff, (averaged[i].grad() - whole[i].grad()).abs().max().item<double>());
            maxGrad = std::max(maxGrad, whole[i].grad().abs().max().item<double>());
        }
        events.gradientCheck(maxDiff, maxGrad, int(averaged.size()), config.worldSize);
    }
    if (parallel)
        parallel->barrier();
    return 0;
}

} // namespace scalelab::trainer

namespace scalelab::trainer {

int runBench(const TrainingConfig &config, int warmupSteps, int steps, EventWriter &events)
{
    const int threads = config.threads > 0 ? config.threads : 1;
    torch::set_num_threads(threads);
    setBlasThreads(threads);
    torch::manual_seed(config.seed);
    const torch::Device device = torchDevice(config.device);
    SeedNet net;
    if (device.is_cuda())
        net->to(device);
    const auto memoryFormat
        = config.channelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    toMemoryFormat(net, memoryFormat);
    net->train();
    std::unique_ptr<DataParallel> parallel = connectRanks(config);
    if (parallel)
        parallel->attach(*net);
    torch::optim::SGD optimizer(
        net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
    // Synthetic input: random pixels and labels, generated once (throughput only).
    auto x = torch::randn({ config.batchSize, 3, 32, 32 }).to(device).contiguous(memoryFormat);
    const auto y = torch::randint(0, 10, { config.batchSize }, torch::kLong).to(device);
    const bool bf16 = config.precision == "bf16";
    // Where a step's time goes, so a scaling efficiency below 1 can be explained: the
    // forward pass; backward until it has produced its last gradient; from then until
    // backward returns (with several ranks: the all-reduces that backward's compute did not
    // hide, the last bucket's at least, and the reducer's copy back); the optimizer step.
    // Host-side times: on a GPU the work is queued, so only the whole step is meaningful.
    std::atomic<Clock::rep> lastGradient { 0 };
    for (auto &p : net->parameters())
        p.register_hook([&lastGradient](const at::TensorBase &) {
            const Clock::rep now = Clock::now().time_since_epoch().count();
            Clock::rep seen = lastGradient.load();
            while (seen < now && !lastGradient.compare_exchange_weak(seen, now)) { }
        });
    std::vector<double> seconds, forward, backward, gradientWait, optimizerStep;
    for (int i = 0; i < warmupSteps + steps; ++i) {
        if (parallel)
            parallel->barrier(); // time the same step on every rank
        const auto start = Clock::now();
        dropGradients(optimizer);
        if (parallel)
            parallel->beforeForward();
        torch::Tensor loss;
        {
            AutocastScope autocast(bf16, device);
            loss = torch::nn::functional::cross_entropy(net->forward(x).to(torch::kFloat), y);
        }
        const auto forwardEnd = Clock::now();
        if (parallel)
            parallel->beforeBackward();
        loss.backward();
        const auto backwardEnd = Clock::now();
        sgdStep(optimizer);
        loss.item<float>();
        synchronize(device); // a GPU may still be running the optimizer step
        if (i < warmupSteps)
            continue;
        const auto end = Clock::now();
        const auto lastGradientAt = Clock::time_point(Clock::duration(lastGradient.load()));
        seconds.push_back(std::chrono::duration<double>(end - start).count());
        forward.push_back(std::chrono::duration<double>(forwardEnd - start).count());
        backward.push_back(std::chrono::duration<double>(lastGradientAt - forwardEnd).count());
        gradientWait.push_back(std::chrono::duration<double>(backwardEnd - lastGradientAt).count());
        optimizerStep.push_back(std::chrono::duration<double>(end - backwardEnd).count());
    }
    // Medians as Python's statistics.median takes them (the peer's): the mean of the
    // middle two of an even count.
    const auto median = [](std::vector<double> values) {
        std::sort(values.begin(), values.end());
        const std::size_t middle = values.size() / 2;
        return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2.0;
    };
    const double step = median(seconds);
    if (config.rank == 0) {
        BenchReport report { .imagesPerSecond = double(config.batchSize) * config.worldSize / step,
            .medianStepSeconds = step,
            .batchSize = config.batchSize,
            .threads = threads,
            .worldSize = config.worldSize,
            .precision = config.precision,
            .channelsLast = config.channelsLast,
            .device = device.str(),
            .steps = steps,
            .medianForwardSeconds = std::nullopt,
            .medianBackwardSeconds = std::nullopt,
            .medianGradientWaitSeconds = std::nullopt,
            .medianOptimizerSeconds = std::nullopt };
        if (!device.is_cuda()) {
            report.medianForwardSeconds = median(forward);
            report.medianBackwardSeconds = median(backward);
            report.medianGradientWaitSeconds = median(gradientWait);
            report.medianOptimizerSeconds = median(optimizerStep);
        }
        events.bench(report);
    }
    return 0;
}

} // namespace scalelab::trainer

namespace scalelab::trainer {

namespace {
std::string lrFindProblem(const LrFindOptions &o)
{
    if (!(o.minLr > 0) || !std::isfinite(o.minLr) || !(o.maxLr > o.minLr) || !std::isfinite(o.maxLr) || o.maxLr > 1e3)
        return "--min-lr and --max-lr must be finite, 0 < min < max <= 1000";
    if (o.steps < 10 || o.steps > 100000)
        return "--steps must be between 10 and 100000";
    return {};
}
} // namespace

common::Status validate(const LrFindOptions &options)
{
    return common::Status::failureIf(lrFindProblem(options));
}

int runLrFind(const TrainingConfig &config, const LrFindOptions &options, EventWriter &events)
{
    const auto fail = [&](const std::string &message) {
        events.error(message);
        return 1;
    };
    if (const common::Status valid = validate(config); !valid)
        return fail(valid.error());
    if (const common::Status valid = validate(options); !valid)
        return fail(valid.error());
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = config.threads > 0 ? config.threads : cores;
    torch::set_num_threads(threads);
    setBlasThreads(threads);
    torch::manual_seed(config.seed);
    auto train = cifar::readSplit(config.dataDir, cifar::Split::Train, std::size_t(config.maxTrainImages));
    if (!train)
        return fail(train.error());
    if (train->size() == 0)
        return fail("the training split is empty");
    const Normalization normalization = normalizationFor(config, *train);
    const torch::Device device = torchDevice(config.device);
    SeedNet net(config.blockDropout, config.denseDropout);
    if (device.is_cuda())
        net->to(device);
    net->train();
    torch::optim::SGD optimizer(net->parameters(),
        torch::optim::SGDOptions(options.minLr).momentum(config.momentum).weight_decay(config.weightDecay));
    const bool bf16 = config.precision == "bf16";

    constexpr double kBeta = 0.98; // smoothing of the loss, with bias correction
    double average = 0, bestSmoothed = std::numeric_limits<double>::infinity(), bestLr = options.minLr;
    std::vector<double> lrs, smoothed;
    bool stoppedEarly = false;
    int step = 0;
    for (int epoch = 1; step < options.steps && !stoppedEarly; ++epoch) {
        BatchProducer batches(*train, normalization,
            shardForEpoch(std::int64_t(train->size()), config.seed, epoch, 0, 1), config.batchSize, config.augment,
            config.seed ^ (std::uint64_t(epoch) << 32), device.is_cuda());
        for (Batch batch = batches.next(); batch.images.defined() && step < options.steps; batch = batches.next()) {
            const double lr = options.minLr
                * std::pow(options.maxLr / options.minLr, double(step) / double(std::max(1, options.steps - 1)));
            for (auto &group : optimizer.param_groups())
                static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
            dropGradients(optimizer);
            torch::Tensor loss;
            {
                AutocastScope autocast(bf16, device);
                const auto out = net->forward(batch.images.to(device));
                loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), batch.labels.to(device),
                    torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(config.labelSmoothing));
            }
            const double value = loss.item<double>();
            ++step;
            if (!std::isfinite(value)) {
                events.lrPoint(step, lr, value, value);
                stoppedEarly = true;
                break;
            }
            loss.backward();
            sgdStep(optimizer);
            average = kBeta * average + (1 - kBeta) * value;
            const double s = average / (1 - std::pow(kBeta, step));
            lrs.push_back(lr);
            smoothed.push_back(s);
            events.lrPoint(step, lr, value, s);
            if (s < bestSmoothed) {
                bestSmoothed = s;
                bestLr = lr;
            }
            if (step > 10 && s > 4 * bestSmoothed) {
                stoppedEarly = true;
                break;
            }
        }
    }
    if (lrs.size() < 5)
        return fail("the range test diverged within " + std::to_string(step)
            + " steps: lower --min-lr (the loss was not finite already at " + EventWriter::number(options.minLr) + ")");
    // Steepest descent of the smoothed loss against log(lr), over the part before its minimum
    // and after the first tenth (where the average is still settling). Reported, not used:
    // on a noisy start it is the least stable number of the test.
    double steepest = 0, steepestLr = bestLr;
    for (std::size_t i = std::max<std::size_t>(1, lrs.size() / 10); i < lrs.size() && lrs[i] <= bestLr; ++i) {
        const double slope = (smoothed[i] - smoothed[i - 1]) / (std::log(lrs[i]) - std::log(lrs[i - 1]));
        if (slope < steepest) {
            steepest = slope;
            steepestLr = lrs[i];
        }
    }
    const double suggested = bestLr / 10;
    // A test whose loss never clearly fell cannot tell a good lr from a bad one: its
    // minimum is noise. Said so, so that nobody takes the number for a finding.
    const double start = smoothed[std::min(smoothed.size() - 1, smoothed.size() / 10)];
    const bool conclusive = bestSmoothed < 0.95 * start;
    const std::string note = conclusive
        ? std::string()
        : "the smoothed loss hardly fell (" + EventWriter::number(std::round(start * 1000) / 1000) + " -> lowest "
            + EventWriter::number(std::round(bestSmoothed * 1000) / 1000)
            + "), so the test cannot tell: keep the default learning rate, or run more steps or a larger batch";
    events.lrFound({ .suggestedLr = suggested,
        .minLossLr = bestLr,
        .minSmoothedLoss = bestSmoothed,
        .steepestLr = steepestLr,
        .steps = int(step),
        .stoppedEarly = stoppedEarly,
        .conclusive = conclusive,
        .note = note,
        .batchSize = config.batchSize,
        .rule = "the lr at the lowest smoothed loss / 10 (Smith 2017; fast.ai)" });
    return 0;
}

} // namespace scalelab::trainer
