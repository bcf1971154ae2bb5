#include "noise_meter.h"

namespace scalelab::trainer {

void NoiseMeter::addLocal(const at::TensorBase &gradient)
{
    torch::NoGradGuard noGrad;
    const torch::Tensor squared = at::Tensor(gradient).detach().to(torch::kDouble).square().sum();
    m_localSquared = m_localSquared.defined() ? m_localSquared + squared : squared;
}

void NoiseMeter::endStep(DataParallel *parallel, const std::vector<torch::Tensor> &parameters,
    std::int64_t localBatch, const torch::Tensor &gradNorm, bool keeps)
{
    torch::NoGradGuard noGrad;
    std::optional<NoiseSample> sample;
    if (m_batches > 1) {
        // Every rank takes part in the all-reduce, with 0 where no hook ran.
        torch::Tensor local = m_localSquared.defined()
            ? m_localSquared.reshape({ 1 })
            : torch::zeros({ 1 },
                torch::TensorOptions(torch::kDouble)
                    .device(parameters.empty() ? torch::Device(torch::kCPU) : parameters[0].device()));
        m_localSquared = torch::Tensor();
        if (parallel) {
            parallel->allReduceSum(local);
            local /= double(parallel->worldSize());
        }
        if (!keeps)
            return;
        double totalSquared = 0;
        if (gradNorm.defined()) {
            const double norm = gradNorm.item<double>();
            totalSquared = norm * norm;
        } else {
            for (const auto &p : parameters)
                if (p.grad().defined())
                    totalSquared += p.grad().detach().to(torch::kDouble).square().sum().item<double>();
        }
        sample = twoBatchSample(
            local.item<double>(), double(localBatch), totalSquared, double(localBatch) * m_batches);
    } else {
        if (!keeps)
            return;
        std::vector<torch::Tensor> current;
        for (const auto &p : parameters)
            if (p.grad().defined())
                current.push_back(p.grad().detach().to(torch::kFloat).clone());
        if (m_previous.size() == current.size() && !current.empty()) {
            torch::Tensor dot
                = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(current[0].device()));
            torch::Tensor difference = torch::zeros_like(dot);
            for (std::size_t i = 0; i < current.size(); ++i) {
                dot += (current[i] * m_previous[i]).sum().to(torch::kDouble);
                difference += (current[i] - m_previous[i]).square().sum().to(torch::kDouble);
            }
            sample = differencedSample(dot.item<double>(), difference.item<double>(), double(localBatch));
        }
        m_previous = std::move(current);
    }
    if (sample)
        m_average.add(*sample);
}

NoiseReport NoiseMeter::report() const
{
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
