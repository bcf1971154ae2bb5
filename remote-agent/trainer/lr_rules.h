// The learning rate a step takes under its run's rule (worker_contract.h, kLrRules) for a
// global batch S times the base batch the rate was given for:
//   none      the rate as given;
//   linear    rate x S (Goyal et al. 2017);
//   sqrt      rate x sqrt(S) (Krizhevsky 2014; Hoffer et al. 2017);
//   adascale  rate x r, AdaScale SGD's gain (Johnson, Agarwal, Xu, Dhillon, Sra, "AdaScale
//             SGD: A User-Friendly Algorithm for Distributed Training", ICML 2020; as AdaptDL
//             implements it, adaptdl/torch/scaling_rules.py and gradient_noise_scale.py).
// AdaScale measures r at every step from the gradient noise (noise_meter.h): about S while
// the noise dominates the gradient (a big batch is worth S small ones), about 1 once the
// gradient dominates (a big batch is worth little more than one small one). The warm-up and
// decay follow the run's progress, the base-batch steps its steps were worth (the sum of the
// gains), not its step count. Pure and std-only, so that the arithmetic is unit-tested
// without libtorch (tests/tst_lr_schedule.cpp).
#pragma once

#include "lr_schedule.h"
#include "worker_contract.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace scalelab::trainer {

// The rate a run of `rule` starts its schedule from (its peak): scaled from `baseBatch` to
// `globalBatch` by the fixed rules; adascale's is the rate as given, since its gain scales
// each step's rate.
inline double scheduledLearningRate(
    std::string_view rule, double learningRate, std::int64_t baseBatch, std::int64_t globalBatch)
{
    if (rule == "linear")
        return worker::linearRuleLearningRate(learningRate, baseBatch, globalBatch);
    if (rule == "sqrt")
        return worker::sqrtRuleLearningRate(learningRate, baseBatch, globalBatch);
    return learningRate;
}

// AdaScale's gain for a step of `scale` (S) base batches of `baseBatch` examples, from the
// moving averages of |G|² (`gradSquared`) and of tr(Σ) per example (`traceSigma`), as
// NoiseMeter::report() gives them: with var = tr(Σ) / baseBatch, the variance of one base
// batch's gradient, r = (var + |G|²) / (var / S + |G|²). `samples`: the steps averaged; with
// none, r = 1. The estimates are unclipped averages and may be negative early: each is taken
// as at least 0 (AdaptDL clips them too), and r is clamped to [1, S], the range the formula
// spans for non-negative var and |G|². Below the base batch (S < 1) the same formula spans
// [S, 1].
inline double adaScaleGain(
    double gradSquared, double traceSigma, std::int64_t samples, std::int64_t baseBatch, double scale)
{
    if (samples <= 0 || baseBatch <= 0 || !(scale > 0) || !std::isfinite(scale) || !std::isfinite(gradSquared)
        || !std::isfinite(traceSigma))
        return 1.0;
    const double var = std::max(0.0, traceSigma / double(baseBatch));
    const double sqr = std::max(0.0, gradSquared);
    if (!(var + sqr > 0))
        return 1.0; // nothing measured yet: no claim on a larger step
    const double r = (var + sqr) / (var / scale + sqr);
    return std::clamp(r, std::min(1.0, scale), std::max(1.0, scale));
}

// A run's progress under AdaScale: P, the base-batch steps its steps were worth, the sum of
// their gains. The schedule (lr_schedule.h) is laid out over the run's own steps; AdaScale
// evaluates it at P / S of them, so that with r = S at every step (all noise) it is the
// linear rule's, step for step, and with smaller gains the warm-up and decay go slower.
// When the run's planned epochs end before P reaches the schedule's end, the run ends there,
// short of it: AdaScale would train on until it did, but a scale-up study keeps the epochs
// of the runs it compares fixed.
class AdaScaleProgress {
public:
    // `progress`: P so far (a resumed run's, from its checkpoint).
    explicit AdaScaleProgress(double scale, double progress = 0)
        : m_scale(scale)
        , m_progress(progress)
    { }

    double progress() const { return m_progress; }
    // The schedule's step for the next step: P / S of the run's steps, never past its end
    // (below the base batch, S < 1, P / S can outrun the steps).
    double scheduleStep(const LrSchedule &schedule) const
    {
        return std::min(m_progress / m_scale, double(schedule.totalSteps));
    }
    // The next step's learning rate at `gain`.
    double learningRate(const LrSchedule &schedule, double gain) const
    {
        return schedule.atStep(scheduleStep(schedule)) * gain;
    }
    // A step was taken at `gain`.
    void advance(double gain) { m_progress += gain; }

private:
    double m_scale;
    double m_progress;
};

} // namespace scalelab::trainer
