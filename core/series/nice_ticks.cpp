#include "nice_ticks.h"

#include <algorithm>
#include <cmath>

namespace scalelab::core {

double niceStep(double span, int intervals, NiceRounding rounding)
{
    const double raw = span / std::max(1, intervals);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double r = raw / magnitude;
    const bool heckbert = rounding == NiceRounding::Heckbert;
    const double nice = r < 1.5 ? 1 : r < (heckbert ? 3 : 3.5) ? 2 : r < (heckbert ? 7 : 7.5) ? 5 : 10;
    return nice * magnitude;
}

int tickDecimals(double step)
{
    return step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
}

} // namespace scalelab::core
