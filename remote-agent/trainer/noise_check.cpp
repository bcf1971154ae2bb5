// The known-noise check (training.h, runNoiseCheck).
#include "noise_meter.h"
#include "training.h"
#include "training_support.h"

#include "worker_contract.h"

#include <iostream>

namespace scalelab::trainer {

namespace {

constexpr int kDims = 100;
constexpr double kDeltaSquared = 1.0; // |Δ|²
constexpr double kNoiseVariance = 1.0; // σ²

} // namespace

int runNoiseCheck(const TrainingConfig &config, int steps)
{
    torch::set_num_threads(config.threads > 0 ? config.threads : 1);
    torch::manual_seed(config.seed);
    const torch::Tensor truth = torch::randn({ kDims }, torch::kDouble) / std::sqrt(double(kDims)); // w*
    torch::Tensor delta = torch::randn({ kDims }, torch::kDouble);
    delta *= std::sqrt(kDeltaSquared) / delta.norm().item<double>();
    torch::nn::Linear model(torch::nn::LinearOptions(kDims, 1).bias(false));
    model->to(torch::kDouble);
    {
        torch::NoGradGuard noGrad;
        model->weight.copy_((truth + delta).view({ 1, kDims }));
    }
    std::unique_ptr<DataParallel> parallel = connectRanks(config);
    if (parallel)
        parallel->attach(*model);
    // Each rank its own draws, the same on every run.
    torch::manual_seed(config.seed * 7919 + std::uint64_t(config.rank) + 1);
    const bool reports = config.rank == 0;
    // As good as a plain mean over the steps: the check wants the estimator's bias, not its
    // moving average's lag.
    NoiseMeter noise(config.worldSize, 1.0 - 1.0 / (4.0 * steps));
    if (parallel)
        model->weight.register_hook([&noise](const at::TensorBase &gradient) { noise.addLocal(gradient); });
    const std::int64_t b = config.batchSize;
    for (int step = 0; step < steps; ++step) {
        model->weight.mutable_grad() = torch::Tensor(); // frozen: no update, a fresh gradient
        const torch::Tensor x = torch::randn({ b, kDims }, torch::kDouble);
        const torch::Tensor y
            = x.matmul(truth) + std::sqrt(kNoiseVariance) * torch::randn({ b }, torch::kDouble);
        if (parallel)
            parallel->beforeForward();
        const torch::Tensor loss = 0.5 * (model->forward(x).view({ b }) - y).square().mean();
        if (parallel)
            parallel->beforeBackward();
        loss.backward();
        noise.endStep(parallel.get(), model->parameters(), b, model->weight.grad().norm(), reports);
    }
    if (parallel)
        parallel->barrier();
    if (reports) {
        const NoiseReport r = noise.report();
        const double exact = (kDims * (kDeltaSquared + kNoiseVariance) + kDeltaSquared) / kDeltaSquared;
        std::cout << "{\"ranks\":" << config.worldSize << ",\"batchSize\":" << b << ",\"steps\":" << steps
                  << ",\"samples\":" << r.samples << ",\"bSimple\":" << r.bSimple << ",\"exact\":" << exact
                  << ",\"gradSquared\":" << r.gradSquared << ",\"traceSigma\":" << r.traceSigma
                  << ",\"batchesPerStep\":" << r.batchesPerStep
                  << ",\"differenced\":" << (r.differenced ? "true" : "false") << "}" << std::endl;
    }
    return worker::kExitFinished;
}

} // namespace scalelab::trainer
