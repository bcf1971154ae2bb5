// TensorBoard's smoothing (its scalar card), as every line and band of a MetricChart draws
// it: an exponential moving average, debiased so the first points are not pulled toward its
// zero start. Weight 0 = the raw values, 0.999 = very smooth.
#pragma once

#include <cmath>

namespace scalelab::app {

// accumulator = accumulator · w + (1 − w) · y, shown divided by 1 − wⁿ after n samples.
//
// The multiply-add is fused (std::fma, rounded once): it is the one dependency chain of a
// whole series re-smoothed for a new weight, 4 cycles a value as one instruction where a
// multiply then an add take 6–8, and std::fma gives the same bits on every CPU (the FMA
// instruction, or glibc's exact fallback), so a series re-smoothed in one pass equals the
// series smoothed as it grew (MetricSeries::setSmoothing).
struct Ema {
    double weight = 0;
    double accumulator = 0;
    double power = 1; // weight^n after n samples

    double next(double y)
    {
        accumulator = std::fma(accumulator, weight, (1 - weight) * y);
        // Once wⁿ no longer changes 1 − wⁿ it is 0: left to shrink it became subnormal
        // (for most weights stuck at the smallest one), which made every later
        // multiplication ~100 times slower; a million samples took 0.2 s, not 5 ms.
        power = power < 1e-20 ? 0.0 : power * weight;
        return accumulator / (1 - power);
    }
    double operator()(double y) { return next(y); } // a whole series: MinMaxIndex::rebuild
};

} // namespace scalelab::app
