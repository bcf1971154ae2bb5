#include "data_loader.h"

namespace scalelab::trainer {

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

torch::Tensor normalise(const torch::Tensor &pixels, const Normalization &n)
{
    const auto mean = torch::tensor({ n.mean[0], n.mean[1], n.mean[2] }).view({ 1, 3, 1, 1 });
    const auto std = torch::tensor({ n.std[0], n.std[1], n.std[2] }).view({ 1, 3, 1, 1 });
    return (pixels.to(torch::kFloat).div_(255.0f) - mean) / std;
}

void BatchProducer::run()
{
    std::uniform_int_distribution<int> shift(-kCropPadding, kCropPadding);
    std::bernoulli_distribution flip(0.5);
    for (std::size_t begin = 0; begin < m_indices.size(); begin += std::size_t(m_batchSize)) {
        const std::size_t end = std::min(m_indices.size(), begin + std::size_t(m_batchSize));
        const auto n = std::int64_t(end - begin);
        Batch batch { torch::empty(
                          { n, 3, 32, 32 }, torch::TensorOptions(torch::kFloat).pinned_memory(m_pinMemory)),
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

} // namespace scalelab::trainer
