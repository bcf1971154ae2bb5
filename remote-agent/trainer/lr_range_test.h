// What a learning-rate range test (Smith 2017, "Cyclical Learning Rates for Training Neural
// Networks", §3.3; fast.ai's lr_find) concludes from its sweep: each rate tried, in rising
// order, and the bias-corrected moving average of the loss after it. Pure and std-only, so
// that the verdict is unit-tested without libtorch (tests/tst_lr_schedule.cpp).
//
// The average is still settling over the sweep's first tenth (its first value is one batch's
// loss), so the minimum and the steepest descent are looked for after it, and the fall is
// measured from there. The suggestion is the rate at the lowest average / 10. A test whose
// average hardly fell (less than 5% from where it settled) cannot tell a good rate from a
// bad one; nor can one whose minimum is so near the sweep's start that a tenth of it lies
// below the rates tried. Either is reported as inconclusive, with what to do.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace scalelab::trainer {

struct LrRangeVerdict {
    double suggestedLr = 0;
    double minLossLr = 0;
    double minSmoothedLoss = 0;
    double steepestLr = 0;
    bool conclusive = false;
    std::string note; // why it is not conclusive, and what to do; empty when it is
};

namespace detail {

// 2.3456 -> "2.346": three decimals, the shortest text that reads back as that value.
inline std::string threeDecimals(double value)
{
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, std::round(value * 1000) / 1000);
    return std::string(buf, result.ptr);
}

} // namespace detail

// `lrs` and `smoothed` are of one size, at least 2.
inline LrRangeVerdict judgeLrSweep(const std::vector<double> &lrs, const std::vector<double> &smoothed)
{
    LrRangeVerdict v;
    const std::size_t n = std::min(lrs.size(), smoothed.size());
    if (n < 2)
        return v;
    const std::size_t settled = std::min(n - 1, std::max<std::size_t>(1, n / 10));
    std::size_t best = settled;
    for (std::size_t i = settled; i < n; ++i)
        if (smoothed[i] < smoothed[best])
            best = i;
    v.minLossLr = lrs[best];
    v.minSmoothedLoss = smoothed[best];
    v.suggestedLr = v.minLossLr / 10;
    // Steepest descent against log(lr) before the minimum. Reported, not used: on a noisy
    // start it is the least stable number of the test.
    double steepest = 0;
    v.steepestLr = v.minLossLr;
    for (std::size_t i = settled; i <= best; ++i) {
        if (i == 0)
            continue;
        const double slope = (smoothed[i] - smoothed[i - 1]) / (std::log(lrs[i]) - std::log(lrs[i - 1]));
        if (slope < steepest) {
            steepest = slope;
            v.steepestLr = lrs[i];
        }
    }
    const double start = smoothed[settled];
    const bool fell = v.minSmoothedLoss < 0.95 * start;
    const bool inRange = v.suggestedLr >= lrs.front();
    v.conclusive = fell && inRange;
    if (!fell)
        v.note = "the smoothed loss hardly fell (" + detail::threeDecimals(start) + " -> lowest "
            + detail::threeDecimals(v.minSmoothedLoss)
            + "), so the test cannot tell: keep the default learning rate, or run more steps or a larger "
              "batch";
    else if (!inRange)
        v.note = "the smoothed loss was lowest near the start of the sweep, so a tenth of that rate lies "
                 "below the rates tried: run it again from a lower --min-lr";
    return v;
}

} // namespace scalelab::trainer
