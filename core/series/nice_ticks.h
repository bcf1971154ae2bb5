// Round tick steps for value axes, shared by the report charts (chart_painter.cpp) and the
// console's axis policy (app/console/charts/axis_policy.cpp), so that both label their axes
// by one rule: a step of 1, 2 or 5 × 10^k near the span over the wanted number of intervals,
// and as many decimals as that step needs.
//
//   const double step = niceStep(hi - lo, 5, NiceRounding::Heckbert);
//   const int decimals = tickDecimals(step);
//
// The two callers round the step's leading digits at different points (NiceRounding); each
// keeps its own, so neither's ticks changed when the rule was shared.
//
// Thread: any (pure functions of plain values). Standard library only.
#pragma once

namespace scalelab::core {

// Where the leading digits r (1 ≤ r < 10) of a raw step r × 10^k round up to the next of
// 1, 2, 5 and 10.
enum class NiceRounding {
    // Heckbert's "nice numbers" (Graphics Gems, 1990): r below 1.5 → 1, below 3 → 2,
    // below 7 → 5, else 10. The report charts' rule.
    Heckbert,
    // The midpoints between them: r below 1.5 → 1, below 3.5 → 2, below 7.5 → 5, else 10.
    // The console's rule (a 3.2 step reads 2, not 5).
    Midpoint,
};

// A round step, 1, 2 or 5 × 10^k, near span / intervals (fewer than 1 interval counts as 1).
// Defined for a positive, finite span / intervals; for any other the arithmetic's result
// comes back unchecked (0, infinity or NaN), so a caller that may meet one checks first.
double niceStep(double span, int intervals, NiceRounding rounding);

// How many decimals tick labels `step` apart need to be told apart: 0 for a step of 1 or
// more, else ceil(-log10(step)) (0.5 → 1, 0.01 → 2, with no extra digit for log10's
// rounding). Not capped: a caller that wants at most so many clamps.
int tickDecimals(double step);

} // namespace scalelab::core
