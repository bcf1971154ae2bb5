// The learning rate at each optimizer step: a linear warm-up from a tenth of the peak,
// then cosine decay to 0 at the last step (or the peak held, "constant"). Pure and
// std-only, so the rule is unit-tested without libtorch (tests/tst_lr_schedule.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace scalelab::trainer {

struct LrSchedule {
    double peak = 0.02;
    std::int64_t warmupSteps = 0;
    std::int64_t totalSteps = 1; // of the whole run, every epoch
    bool constant = false; // hold the peak after the warm-up instead of cosine decay

    // `step` is 0-based: the rate the step's update is taken with.
    double at(std::int64_t step) const { return atStep(double(step)); }

    // The same at a fractional step: AdaScale's progress in the run's steps (lr_rules.h).
    double atStep(double step) const
    {
        if (step < double(warmupSteps))
            return peak * (0.1 + 0.9 * step / double(warmupSteps));
        if (constant)
            return peak;
        const double progress
            = (step - double(warmupSteps)) / double(std::max<std::int64_t>(1, totalSteps - warmupSteps));
        return peak * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
};

} // namespace scalelab::trainer
