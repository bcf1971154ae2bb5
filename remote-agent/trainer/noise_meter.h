// The gradient noise scale of a run's steps, measured from gradients the step computes anyway
// (the estimators and their averaging: noise_scale.h). With several ranks, each rank's own
// gradient (its squared norm summed in the parameters' gradient hooks, before the all-reduce)
// is a small batch, and the averaged gradient the big batch; the ranks' squared norms are
// averaged with one all-reduce of a scalar a step, as AdaptDL does (K times less variance
// than one rank's alone). On one rank, the previous step's gradient is the second sample (the
// differenced estimator). Rank 0 keeps the averages (every rank, for AdaScale). libtorch; no Qt.
//
// Cost: a step's sums stay on the gradients' device; the host reads them only when a report
// asks (report()) or after kFlushEvery steps, in one copy, so the meter adds no wait for the
// device to a step (a wait before the optimizer step left a GPU idle while its kernels were
// queued: 31 % of the seed CNN's step on an H200). The one-rank estimator works on the
// gradients copied into one flat buffer (a few kernels, not several per parameter).
#pragma once

#include "data_parallel.h"
#include "event_writer.h"
#include "noise_scale.h"

#include <torch/torch.h>

#include <vector>

namespace scalelab::trainer {

class NoiseMeter {
public:
    // `batchesPerStep`: K, the batches of `localBatch` examples a step's gradient averages
    // (ranks × accumulation).
    // `smoothing`: the moving averages' weight per step (NoiseScaleAverage).
    // `everyRank`: every rank keeps the averages, the same on each (AdaScale's gain sets
    // every rank's learning rate, lr_rules.h): the big batch's |G|² then travels in the
    // all-reduce with the small batches', so that every rank averages the same numbers.
    explicit NoiseMeter(int batchesPerStep, double smoothing = 0.99, bool everyRank = false)
        : m_batches(batchesPerStep)
        , m_everyRank(everyRank)
        , m_average(smoothing)
    { }

    // From a parameter's gradient hook, before the all-reduce: this rank's own gradient.
    // Kept on the gradient's device (no wait for it).
    void addLocal(const at::TensorBase &gradient);

    // After backward, the gradients averaged over the ranks in `parameters`' grad: one sample
    // from this step of `localBatch` examples per rank. Every rank calls it at every step
    // (with several ranks it all-reduces over `parallel`); only `keeps` (rank 0) samples,
    // or every rank with `everyRank`.
    // `gradNorm` is the averaged gradient's norm when the caller has it (one multi-tensor
    // norm, shared with the step's report).
    void endStep(DataParallel *parallel, const std::vector<torch::Tensor> &parameters,
        std::int64_t localBatch, const torch::Tensor &gradNorm, bool keeps);

    // The averages up to the last endStep (reads what the device still holds).
    NoiseReport report();

    // The averages' state for a checkpoint (after reading what the device holds), and back.
    std::array<double, 4> averages()
    {
        flush();
        return m_average.state();
    }
    void restoreAverages(const std::array<double, 4> &state) { m_average.restore(state); }

    // Steps whose sums may wait on the device before the host reads them.
    static constexpr std::size_t kFlushEvery = 128;

private:
    // Reads the steps' sums from the device and adds them to the averages, in step order.
    void flush();

    int m_batches;
    bool m_everyRank;
    NoiseScaleAverage m_average;
    std::vector<torch::Tensor> m_localNorms; // this rank's, this step, one per hook
    // Per step, on the device: K > 1: (this rank's |g|² averaged over the ranks, the averaged
    // gradient's |G|²), double; K = 1: (g·g_prev, |g − g_prev|), float. And its local batch.
    std::vector<torch::Tensor> m_pending;
    std::vector<double> m_pendingBatches;
    torch::Tensor m_current, m_previous; // K = 1: this and the last step's gradient, flat
};

} // namespace scalelab::trainer
