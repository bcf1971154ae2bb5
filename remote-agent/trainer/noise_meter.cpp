#include "noise_meter.h"

#include <utility>

namespace scalelab::trainer {

namespace {

torch::TensorOptions doublesOn(const torch::Device &device)
{
    return torch::TensorOptions(torch::kDouble).device(device);
}

// The parameters' gradients copied into `flat` (one float vector, reused between steps).
bool flatten(const std::vector<torch::Tensor> &parameters, torch::Tensor &flat)
{
    std::vector<torch::Tensor> grads;
    for (const auto &p : parameters)
        if (p.grad().defined())
            grads.push_back(p.grad().detach().reshape({ -1 }).to(torch::kFloat));
    if (grads.empty())
        return false;
    if (!flat.defined())
        flat = torch::empty({ 0 }, grads[0].options().dtype(torch::kFloat));
    torch::cat_out(flat, grads);
    return true;
}

// The all-reduced gradient's |G|², one double: from `gradNorm` when the caller has it.
torch::Tensor bigSquared(
    const std::vector<torch::Tensor> &parameters, const torch::Tensor &gradNorm, const torch::Device &device)
{
    if (gradNorm.defined())
        return gradNorm.to(torch::kDouble).square().reshape({ 1 });
    std::vector<torch::Tensor> grads;
    for (const auto &p : parameters)
        if (p.grad().defined())
            grads.push_back(p.grad().detach().to(torch::kFloat));
    return grads.empty()
        ? torch::zeros({ 1 }, doublesOn(device))
        : torch::stack(at::_foreach_norm(grads)).to(torch::kDouble).square().sum().reshape({ 1 });
}

} // namespace

void NoiseMeter::addLocal(const at::TensorBase &gradient)
{
    torch::NoGradGuard noGrad;
    // One kernel a parameter; squared and summed at the step's end, with the others.
    m_localNorms.push_back(at::linalg_vector_norm(at::Tensor(gradient).detach()).reshape({ 1 }));
}

void NoiseMeter::endStep(DataParallel *parallel, const std::vector<torch::Tensor> &parameters,
    std::int64_t localBatch, const torch::Tensor &gradNorm, bool keeps)
{
    torch::NoGradGuard noGrad;
    const torch::Device device = parameters.empty() ? torch::Device(torch::kCPU) : parameters[0].device();
    keeps = keeps || m_everyRank;
    if (m_batches > 1) {
        // Every rank takes part in the all-reduce, with 0 where no hook ran.
        // The hooks saw each micro-batch's gradient times the loss scale W/K (training.cpp);
        // K/W times their squares' sum, averaged over the W ranks, is the mean over the K
        // micro-batches of their own |g|².
        const int world = parallel ? parallel->worldSize() : 1;
        torch::Tensor local = m_localNorms.empty()
            ? torch::zeros({ 1 }, doublesOn(device))
            : torch::cat(m_localNorms).to(torch::kDouble).square().sum().reshape({ 1 })
                * (double(m_batches) / double(world));
        m_localNorms.clear();
        if (m_everyRank)
            local = torch::cat({ local, bigSquared(parameters, gradNorm, device) });
        if (parallel) {
            parallel->allReduceSum(local);
            local /= double(parallel->worldSize());
        }
        if (!keeps)
            return;
        m_pending.push_back(
            m_everyRank ? local : torch::cat({ local, bigSquared(parameters, gradNorm, device) }));
        m_pendingBatches.push_back(double(localBatch));
    } else {
        if (!keeps)
            return;
        std::swap(m_current, m_previous);
        if (!flatten(parameters, m_current))
            return;
        if (m_previous.defined() && m_previous.numel() == m_current.numel()) {
            // |g − g_prev|, squared on the host.
            m_pending.push_back(
                torch::stack({ torch::dot(m_current, m_previous), torch::dist(m_current, m_previous) }));
            m_pendingBatches.push_back(double(localBatch));
        }
    }
    if (m_pending.size() >= kFlushEvery)
        flush();
}

void NoiseMeter::flush()
{
    if (m_pending.empty())
        return;
    const torch::Tensor sums = torch::stack(m_pending).to(torch::kCPU, torch::kDouble).contiguous();
    m_pending.clear();
    const auto rows = sums.accessor<double, 2>();
    for (std::int64_t i = 0; i < rows.size(0); ++i) {
        const double batch = m_pendingBatches[std::size_t(i)];
        const std::optional<NoiseSample> sample = m_batches > 1
            ? twoBatchSample(rows[i][0], batch, rows[i][1], batch * m_batches)
            : differencedSample(rows[i][0], rows[i][1] * rows[i][1], batch);
        if (sample)
            m_average.add(*sample);
    }
    m_pendingBatches.clear();
}

NoiseReport NoiseMeter::report()
{
    flush();
    NoiseReport r;
    r.samples = m_average.samples();
    if (r.samples == 0)
        return r;
    r.bSimple = m_average.bSimple().value_or(0.0);
    r.gradSquared = m_average.gradSquared();
    r.traceSigma = m_average.traceSigma();
    r.batchesPerStep = m_batches;
    r.differenced = m_batches == 1;
    return r;
}

} // namespace scalelab::trainer
