// The gradient noise scale of a run, measured from the gradients it computes anyway
// (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", §2.2 and App. A.1;
// AdaptDL's adaptdl/torch/gradient_noise_scale.py). B_simple = tr(Σ) / |G|², where G is the
// true gradient and Σ the covariance of one example's gradient: about the batch past which a
// larger batch buys almost no fewer steps (the critical batch).
//
// Each step gives two squared norms of gradient estimates over batches of different sizes,
//   small: one rank's own gradient (before the all-reduce), over b examples,
//   big:   the all-reduced gradient, over B = K·b examples (K = ranks × accumulation),
// and E|g_b|² = |G|² + tr(Σ)/b, so that
//   |G|²  ≈ (B·|g_B|² − b·|g_b|²) / (B − b),
//   tr(Σ) ≈ (|g_b|² − |g_B|²) / (1/b − 1/B),
// both unbiased. One rank without accumulation (K = 1) has no second batch in a step: the
// "differenced" estimator then takes the previous step's gradient as the other sample,
//   |G|²  ≈ g_t · g_{t−1},   tr(Σ) ≈ b · |g_t − g_{t−1}|² / 2,
// which is biased while the gradient moves between the steps (flagged: `differenced`).
//
// Single estimates are noisy and may be negative; they are averaged unclipped, |G|² and tr(Σ)
// apart, in bias-corrected exponential moving averages, and B_simple is the ratio of the two
// averages (not an average of ratios). Pure and std-only, so that the arithmetic is
// unit-tested without libtorch (tests/tst_trainer_rules.cpp).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>

namespace scalelab::trainer {

// One step's pair of estimates.
struct NoiseSample {
    double gradSquared = 0; // of |G|²
    double traceSigma = 0; // of tr(Σ), per example
};

// From a small and a big batch's squared gradient norms (b < B examples); nullopt when the
// sizes cannot tell them apart (b ≥ B) or a norm is not finite.
inline std::optional<NoiseSample> twoBatchSample(
    double smallSquared, double smallBatch, double bigSquared, double bigBatch)
{
    if (!(smallBatch > 0) || !(bigBatch > smallBatch) || !std::isfinite(smallSquared)
        || !std::isfinite(bigSquared))
        return std::nullopt;
    return NoiseSample { .gradSquared
        = (bigBatch * bigSquared - smallBatch * smallSquared) / (bigBatch - smallBatch),
        .traceSigma = (smallSquared - bigSquared) / (1.0 / smallBatch - 1.0 / bigBatch) };
}

// From two consecutive steps' gradients over `batch` examples each: their dot product and
// the squared norm of their difference.
inline std::optional<NoiseSample> differencedSample(double dot, double differenceSquared, double batch)
{
    if (!(batch > 0) || !std::isfinite(dot) || !std::isfinite(differenceSquared))
        return std::nullopt;
    return NoiseSample { .gradSquared = dot, .traceSigma = batch * differenceSquared / 2.0 };
}

// The moving averages and the ratio of them.
class NoiseScaleAverage {
public:
    // `smoothing` is the weight an average keeps per step (0.99: about the last 100 steps).
    explicit NoiseScaleAverage(double smoothing = 0.99)
        : m_theta(smoothing)
    { }

    void add(const NoiseSample &s)
    {
        m_gradSquared = m_theta * m_gradSquared + (1 - m_theta) * s.gradSquared;
        m_traceSigma = m_theta * m_traceSigma + (1 - m_theta) * s.traceSigma;
        m_weight = m_theta * m_weight + (1 - m_theta);
        ++m_samples;
    }

    std::int64_t samples() const { return m_samples; }
    // The bias-corrected averages (0 before the first sample).
    double gradSquared() const { return m_weight > 0 ? m_gradSquared / m_weight : 0.0; }
    double traceSigma() const { return m_weight > 0 ? m_traceSigma / m_weight : 0.0; }
    // B_simple in examples; nullopt until there is a sample and while the averaged |G|² is not
    // positive (the gradient is lost in its noise: no finite critical batch can be said).
    std::optional<double> bSimple() const
    {
        const double g = gradSquared();
        if (m_samples == 0 || !(g > 0))
            return std::nullopt;
        return traceSigma() / g;
    }

    // The averages' whole state (|G|², tr(Σ), their weight, the samples), to carry them across
    // a checkpoint: a resumed run continues its averages instead of starting them again.
    std::array<double, 4> state() const
    {
        return { m_gradSquared, m_traceSigma, m_weight, double(m_samples) };
    }
    void restore(const std::array<double, 4> &s)
    {
        m_gradSquared = s[0];
        m_traceSigma = s[1];
        m_weight = s[2];
        m_samples = std::int64_t(s[3]);
    }

private:
    double m_theta;
    double m_gradSquared = 0;
    double m_traceSigma = 0;
    double m_weight = 0;
    std::int64_t m_samples = 0;
};

} // namespace scalelab::trainer
