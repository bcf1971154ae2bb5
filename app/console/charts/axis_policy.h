// How a MetricChart's axes are chosen from what it draws: the x range (the data, a zoom,
// padding for markers and single points, headroom so a live run moves the axis in steps),
// the y range (padding, included and empty ranges, a log scale drawn at log10(y)), when an
// axis holds still, and its ticks (round 1-2-5 intervals on value axes; decades and the
// digits between them on a log axis). Pure decisions on plain values, no widgets or Qt
// Charts objects, so each is tested by itself (tst_axis_policy); MetricChart applies them.
#pragma once

#include <QList>
#include <QPointF>
#include <QString>

#include <limits>
#include <optional>
#include <utility>

namespace scalelab::app {

// About how many tick intervals a value axis shows: 6 along x (usually wider), 5 up y.
inline constexpr int kXTickIntervals = 6;
inline constexpr int kYTickIntervals = 5;

// A round tick interval (1, 2 or 5 × 10^k) giving about `ticks` intervals over `span`:
// labels read as round numbers whatever the data. core::niceStep() (nice_ticks.h) with
// midpoint rounding (3.2 → 2, 3.5 → 5). A span that is not positive and finite gets 1.
double niceInterval(double span, int ticks);

// The printf format of a value axis' labels ("%.2f"): as many decimals as `interval`
// needs to tell its ticks apart (core::tickDecimals(), capped to 0 to 6), no more.
QString labelFormat(double interval);

// A value axis as it is set: its range and dynamic ticks (anchored at 0).
struct ValueTicks {
    double from = 0;
    double to = 1;
    double interval = 1;
    QString labelFormat;
};

// The range and ticks of a value axis asked to show [from, to] with about `intervals`
// tick intervals. Qt Charts lays dynamic ticks out by adding the interval to the first
// tick until it passes the maximum: a range it cannot step through (not finite, or so
// narrow for its magnitude that adding the interval changes nothing, as around a single
// sample) would never end, so such a range is widened to its middle ± 5 % of that value,
// at least ± 0.5 (0 ± 0.5 when the middle is not finite). `wholeSteps` (an axis counting
// workers) keeps the interval at 1 or more: no tick at 1.2 workers.
ValueTicks valueAxisTicks(double from, double to, int intervals, bool wholeSteps = false);

// The x span to show for data on [x0, x1] while the axis shows [shownFrom, shownTo]:
// unchanged while the data starts where the axis does and fits with at most 20 % of its
// span to spare, else the data plus 10 % of headroom. A live run so moves the axis every
// few seconds rather than every frame (each move re-strokes every line: the console's
// most expensive frame).
double grownSpan(double shownFrom, double shownTo, double x0, double x1);

// The x range of a chart whose visible series span [dataFrom, dataTo] on its x axis
// (dataFrom > dataTo: none has a sample), shown now as [shownFrom, shownTo]. A zoom is
// shown as it is. Otherwise nothing gives [0, 1]; series drawn with markers get 4 % of
// room at each end, and a single x ± 0.5, so no point sits on the frame; then the right
// end follows the data in steps (grownSpan()).
std::pair<double, double> xRange(double dataFrom, double dataTo, bool markers,
    const std::optional<std::pair<double, double>> &zoom, double shownFrom, double shownTo);

// The y values drawn inside an x range, which the y range must hold, and how many points
// were drawn in all (whether antialiasing is worth it). Points outside [x0, x1] are drawn
// (lines leave the plot toward them) but do not stretch the y axis; nor does a y that is
// NaN or infinite (a range bar's open end): the axis keeps showing the data. Empty: lo > hi.
struct YExtent {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -std::numeric_limits<double>::infinity();
    qsizetype points = 0;

    bool empty() const { return lo > hi; }
    void add(const QList<QPointF> &drawn, double x0, double x1);
    void merge(const YExtent &other);
};

// Points as a log scale draws them: y → log10(y), against a value axis. Values that are
// not positive (and NaN) have no place on it and are dropped.
void toLogPlot(QList<QPointF> &points);

// A y range to set, and whether the axis must move to it (else it keeps its range).
struct YRange {
    double from = 0;
    double to = 1;
    bool changes = false;
};

// The linear y axis for drawn values on [lo, hi] (lo > hi: nothing drawn) while the axis
// shows [shownMin, shownMax]: the values, widened to hold `include` (0–100 % for
// utilization, so a flat 2 % does not fill the plot), or `empty` when that leaves none,
// plus 5 % of their span at each end (all equal: 5 % of the value, at least 0.5). The axis
// moves only when it no longer holds the values or wastes more than about a quarter of
// the height (its span above 1.3 × the padded one), so a live line does not rescale it
// every frame.
YRange linearYRange(double lo, double hi, const std::optional<std::pair<double, double>> &include,
    std::pair<double, double> empty, double shownMin, double shownMax);

// The log-scale y axis, in log10(y) as drawn, for drawn values on [lo, hi] (lo > hi:
// nothing positive drawn, which shows 0.1 to 1) while it shows [shownMin, shownMax]:
// 5 % of the span at each end, at least 0.02 (under 5 % of a value), moving by the same
// rule as linearYRange().
YRange logYRange(double lo, double hi, double shownMin, double shownMax);

// A log axis' label and where it sits, in log10(y).
struct LogTick {
    QString label;
    double at = 0;
};

// The labels of a log axis showing [from, to] in log10(y), bottom to top. Decades always;
// their 2 and 5 multiples too over 3 decades or fewer, 3 times them too over 1.5 or fewer,
// every digit over half a decade or less: a short range still reads (Qt's QLogValueAxis
// labels decades only, so a loss between 0.3 and 3 had one label). A range with fewer than
// two of those (a loss from 1.2 to 1.8) gets up to five labels evenly spaced in log space
// instead, at their values rounded to 3 digits, none repeated. Each label is unique and
// above the previous one, as QCategoryAxis requires of its categories.
QList<LogTick> logTicks(double from, double to);

} // namespace scalelab::app
