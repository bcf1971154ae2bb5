// The data loader: CIFAR images in memory to normalised, augmented batches, on a thread
// of its own a few batches ahead of training (the part of torch.utils.data.DataLoader
// with CIFAR-10's transforms a data-parallel run needs). Which images a rank gets is
// data_shard.h's rule.
#pragma once

#include "cifar10.h"
#include "training.h"

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace scalelab::trainer {

inline constexpr int kCropPadding = 4; // RandomCrop(32, padding=4)
inline constexpr std::size_t kPrefetchBatches = 4;

// Per-channel mean and standard deviation of pixels in [0, 1]: given, or measured on the
// training images this rank loaded (every rank loads the same ones, so all agree).
struct Normalization {
    float mean[3];
    float std[3];
    bool measured;
};

// The config's --normalize-mean/--normalize-std, or the statistics of `train`.
Normalization normalizationFor(const TrainingConfig &config, const cifar::Images &train);

// uint8 pixels [N, 3, 32, 32] to normalised floats, without augmentation (evaluation).
torch::Tensor normalise(const torch::Tensor &pixels, const Normalization &n);

struct Batch {
    torch::Tensor images; // float [B, 3, 32, 32], normalised (and augmented)
    torch::Tensor labels; // int64 [B]
};

// Turns a list of image indices into normalised, augmented batches on its own thread,
// a few batches ahead of training. Augmentation draws from an RNG seeded by (seed,
// epoch, rank), so a resumed run sees exactly the batches it would have seen. For a GPU
// the batches are in pinned memory, so their copies to the GPU can overlap its work.
// One consumer thread calls next(); `images` must outlive the producer (it reads them on
// its thread until destroyed, which stops and joins it).
class BatchProducer {
public:
    BatchProducer(const cifar::Images &images, const Normalization &normalization,
        std::vector<std::int64_t> indices, int batchSize, bool augment, std::uint64_t seed, bool pinMemory)
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
    void run(); // the producer thread: builds batches, at most kPrefetchBatches ahead

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

} // namespace scalelab::trainer
