// The gradient noise scale of a run's steps, measured from gradients the step computes anyway
// (the estimators and their averaging: noise_scale.h). With several ranks, each rank's own
// gradient (its squared norm summed in the parameters' gradient hooks, before the all-reduce)
// is a small batch, and the averaged gradient the big batch; the ranks' squared norms are
// averaged with one all-reduce of a scalar a step, as AdaptDL does (K times less variance
// than one rank's alone). On one rank, the previous step's gradient is the second sample (the
// differenced estimator). Rank 0 keeps the averages. libtorch; no Qt.
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
    explicit NoiseMeter(int batchesPerStep, double smoothing = 0.99)
        : m_batches(batchesPerStep)
        , m_average(smoothing)
    { }

    // From a parameter's gradient hook, before the all-reduce: this rank's own gradient.
    // Kept on the gradient's device (no wait for it).
    void addLocal(const at::TensorBase &gradient);

    // After backward, the gradients averaged over the ranks in `parameters`' grad: one sample
    // from this step of `localBatch` examples per rank. Every rank calls it at every step
    // (with several ranks it all-reduces over `parallel`); only `keeps` (rank 0) samples.
    // `gradNorm` is the averaged gradient's norm when the caller has it (one multi-tensor
    // norm, shared with the step's report).
    void endStep(DataParallel *parallel, const std::vector<torch::Tensor> &parameters,
        std::int64_t localBatch, const torch::Tensor &gradNorm, bool keeps);

    NoiseReport report() const;

private:
    int m_batches;
    NoiseScaleAverage m_average;
    torch::Tensor m_localSquared; // this rank's, this step, from the hooks
    std::vector<torch::Tensor> m_previous; // K = 1: the previous step's gradient
};

} // namespace scalelab::trainer
