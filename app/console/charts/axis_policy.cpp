#include "axis_policy.h"

#include "nice_ticks.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

namespace scalelab::app {

double niceInterval(double span, int ticks)
{
    // The shared rule leaves a span it cannot round to its caller: here it gets 1.
    if (const double raw = span / std::max(1, ticks); !(raw > 0) || !std::isfinite(raw))
        return 1;
    return core::niceStep(span, ticks, core::NiceRounding::Midpoint);
}

QString labelFormat(double interval)
{
    const int decimals = std::clamp(core::tickDecimals(interval), 0, 6);
    return QStringLiteral("%.%1f").arg(decimals);
}

ValueTicks valueAxisTicks(double from, double to, int intervals, bool wholeSteps)
{
    if (const double magnitude = std::max(std::abs(from), std::abs(to));
        !std::isfinite(from) || !std::isfinite(to) || !(to - from > magnitude * 1e-9)) {
        const double at = std::isfinite(from + to) ? (from + to) / 2 : 0;
        const double pad = std::max(std::abs(at) * 0.05, 0.5);
        from = at - pad;
        to = at + pad;
    }
    double interval = niceInterval(to - from, intervals);
    if (wholeSteps)
        interval = std::max(1.0, interval);
    return { from, to, interval, labelFormat(interval) };
}

double grownSpan(double shownFrom, double shownTo, double x0, double x1)
{
    const double span = x1 - x0;
    if (shownFrom == x0 && shownTo >= x1 && shownTo - x1 <= span * 0.2)
        return shownTo - x0;
    return span * 1.10;
}

std::pair<double, double> xRange(double dataFrom, double dataTo, bool markers,
    const std::optional<std::pair<double, double>> &zoom, double shownFrom, double shownTo)
{
    if (zoom)
        return *zoom;
    double x0 = dataFrom, x1 = dataTo;
    if (x0 > x1) {
        x0 = 0;
        x1 = 1;
    } else if (markers || x1 - x0 <= 0) {
        const double pad = std::max((x1 - x0) * 0.04, x1 - x0 <= 0 ? 0.5 : 0.0);
        x0 -= pad;
        x1 += pad;
    }
    return { x0, x0 + grownSpan(shownFrom, shownTo, x0, x1) };
}

void YExtent::add(const QList<QPointF> &drawn, double x0, double x1)
{
    points += drawn.size();
    for (const QPointF &p : drawn) {
        // A range bar's infinite end (or NaN) has no place on an axis: it does not widen it.
        if (p.x() >= x0 && p.x() <= x1 && std::isfinite(p.y())) {
            lo = std::min(lo, p.y());
            hi = std::max(hi, p.y());
        }
    }
}

void YExtent::merge(const YExtent &other)
{
    lo = std::min(lo, other.lo);
    hi = std::max(hi, other.hi);
    points += other.points;
}

void toLogPlot(QList<QPointF> &points)
{
    points.removeIf([](const QPointF &p) { return !(p.y() > 0); });
    for (QPointF &p : points)
        p.setY(std::log10(p.y()));
}

namespace {

// Whether an axis showing [shownMin, shownMax] keeps its range for values on [y0, y1]
// padded by `pad`: it holds them, with at most 30 % more span than it needs.
bool holds(double shownMin, double shownMax, double y0, double y1, double pad)
{
    return shownMin <= y0 && shownMax >= y1 && shownMax - shownMin <= (y1 - y0 + 2 * pad) * 1.3;
}

} // namespace

YRange linearYRange(double lo, double hi, const std::optional<std::pair<double, double>> &include,
    std::pair<double, double> empty, double shownMin, double shownMax)
{
    double y0 = lo, y1 = hi;
    if (include) {
        y0 = std::min(y0, include->first);
        y1 = std::max(y1, include->second);
    }
    if (y0 > y1)
        std::tie(y0, y1) = empty;
    const double pad = y1 > y0 ? (y1 - y0) * 0.05 : std::max(std::abs(y0) * 0.05, 0.5);
    return { y0 - pad, y1 + pad, !holds(shownMin, shownMax, y0, y1, pad) };
}

YRange logYRange(double lo, double hi, double shownMin, double shownMax)
{
    double y0 = lo, y1 = hi;
    if (y0 > y1) {
        y0 = -1;
        y1 = 0;
    }
    const double pad = std::max(0.02, (y1 - y0) * 0.05);
    return { y0 - pad, y1 + pad, !holds(shownMin, shownMax, y0, y1, pad) };
}

QList<LogTick> logTicks(double from, double to)
{
    QList<LogTick> ticks;
    if (!std::isfinite(from) || !std::isfinite(to))
        return ticks; // nothing to step through (and ceil(inf) is no int)
    // QCategoryAxis::append() ignores a label it has already, or one not above the last.
    const auto append = [&ticks](const QString &label, double at) {
        if (std::any_of(ticks.cbegin(), ticks.cend(), [&](const LogTick &t) { return t.label == label; }))
            return;
        if (!ticks.isEmpty() && !(at > ticks.back().at))
            return;
        ticks.append({ label, at });
    };
    const double span = to - from;
    const std::vector<int> mantissas = span > 3 ? std::vector<int> { 1 }
        : span > 1.5                            ? std::vector<int> { 1, 2, 5 }
        : span > 0.5                            ? std::vector<int> { 1, 2, 3, 5 }
                                                : std::vector<int> { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    for (int decade = int(std::floor(from)); decade <= int(std::ceil(to)); ++decade)
        for (int m : mantissas) {
            const double value = m * std::pow(10.0, decade);
            const double at = std::log10(value);
            if (at >= from && at <= to)
                append(QString::number(value, 'g', 6), at);
        }
    if (ticks.size() < 2) {
        ticks.clear();
        double previous = -std::numeric_limits<double>::infinity();
        for (int i = 0; i <= 4; ++i) {
            const double at = from + (to - from) * (0.1 + 0.2 * i);
            const QString label = QString::number(std::pow(10.0, at), 'g', 3);
            const double labelled = std::log10(label.toDouble()); // where the rounded value lies
            if (labelled > previous && labelled >= from && labelled <= to
                && std::none_of(
                    ticks.cbegin(), ticks.cend(), [&](const LogTick &t) { return t.label == label; })) {
                append(label, labelled);
                previous = labelled;
            }
        }
    }
    return ticks;
}

} // namespace scalelab::app
