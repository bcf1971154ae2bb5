#include "chart_layout.h"

#include "nice_ticks.h"
#include "study_model.h"

#include <algorithm>
#include <cmath>

namespace scalelab::core {

namespace {

// Room kept between a reference line and the plot's frame, as a fraction of the y span.
constexpr double kReferenceMargin = 0.08;

QFont chartFont(qreal pixelSize, bool bold = false)
{
    QFont font(QStringLiteral("DejaVu Sans"));
    font.setStyleHint(QFont::SansSerif);
    font.setPixelSize(std::max(1, qRound(pixelSize)));
    font.setBold(bold);
    return font;
}

bool finite(QPointF p)
{
    return std::isfinite(p.x()) && std::isfinite(p.y());
}

// A value axis: the range it spans and where its ticks sit.
struct Axis {
    double lo = 0;
    double hi = 1;
    QList<double> ticks;
    int decimals = 0;

    double map(double v, double from, double to) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

Axis makeAxis(double min, double max, bool integers, bool percent)
{
    if (!std::isfinite(min) || !std::isfinite(max)) {
        min = 0;
        max = 1;
    }
    if (max - min < 1e-12) {
        const double pad = integers ? 1.0 : std::max(std::abs(min) * 0.1, percent ? 0.05 : 1.0);
        min -= pad;
        max += pad;
    }
    Axis axis;
    double step = niceStep(max - min, 5, NiceRounding::Heckbert);
    if (integers) {
        step = std::max(1.0, std::ceil(step));
        // Whole-number axes (workers, epochs) keep a margin so end points are not on the frame.
        axis.lo = std::floor(min) - 0.25 * step;
        axis.hi = std::ceil(max) + 0.25 * step;
        for (double t = std::ceil(min / step) * step; t <= max + 1e-9; t += step)
            axis.ticks.append(t);
    } else {
        axis.lo = std::floor(min / step + 1e-9) * step;
        axis.hi = std::ceil(max / step - 1e-9) * step;
        for (double t = axis.lo; t <= axis.hi + step * 1e-6; t += step)
            axis.ticks.append(std::abs(t) < step * 1e-9 ? 0.0 : t);
    }
    const double shownStep = percent ? step * 100 : step;
    axis.decimals = tickDecimals(shownStep);
    return axis;
}

QString tickText(double v, const Axis &axis, bool percent)
{
    if (percent)
        return QString::number(v * 100, 'f', axis.decimals) + QLatin1Char('%');
    return QString::number(v, 'f', axis.decimals);
}

struct LegendEntry {
    QString name;
    int series; // index into chart.series
};

QList<LegendEntry> legendEntries(const ChartSpec &chart)
{
    QList<LegendEntry> entries;
    for (int i = 0; i < chart.series.size(); ++i) {
        const ChartSeries &s = chart.series[i];
        if (s.name.isEmpty())
            continue;
        const bool listed = std::any_of(
            entries.cbegin(), entries.cend(), [&](const LegendEntry &e) { return e.name == s.name; });
        if (!listed)
            entries.append({ s.name, i });
    }
    return entries;
}

// The legend's entries wrap at the chart's width; the legend is laid out before the plot,
// whose height it takes.
void layOutLegend(ChartLayout &l, const ChartSpec &chart, const QRectF &rect, const ChartFonts &f, qreal u)
{
    const QList<LegendEntry> entries = legendEntries(chart);
    const qreal swatchW = 22 * u, gap = 14 * u, rowH = f.legendFm.height() + 4 * u,
                width = rect.width() - 2 * f.pad;
    QList<QPointF> offsets; // top-left relative to the legend's entries
    qreal lx = 0, ly = 0;
    for (const LegendEntry &e : entries) {
        const qreal w = swatchW + 5 * u + f.legendFm.horizontalAdvance(e.name);
        if (lx > 0 && lx + w > width) {
            lx = 0;
            ly += rowH;
        }
        offsets.append(QPointF(lx, ly));
        lx += w + gap;
    }
    // A colour scale takes the legend's first row.
    const qreal scaleH = chart.colorScale ? rowH : 0;
    const qreal height = (entries.isEmpty() ? 0 : ly + rowH) + scaleH;
    l.legend = QRectF(rect.left() + f.pad, rect.bottom() - f.pad - height, width, height);
    l.legendRowHeight = rowH;
    l.legendSwatchWidth = swatchW;
    l.legendScaleHeight = scaleH;
    const QPointF origin(rect.left() + f.pad, rect.bottom() - f.pad - height + scaleH);
    for (int i = 0; i < entries.size(); ++i)
        l.legendEntries.append({ origin + offsets[i], entries[i].name, entries[i].series });
}

// The ranges of a line or point chart, over everything that is drawn; false when nothing is.
bool dataRanges(const ChartSpec &chart, double &xMin, double &xMax, double &yMin, double &yMax)
{
    xMin = INFINITY, xMax = -INFINITY, yMin = INFINITY, yMax = -INFINITY;
    bool any = false;
    const auto include = [&](QPointF pt) {
        if (!finite(pt))
            return;
        any = true;
        xMin = std::min(xMin, pt.x());
        xMax = std::max(xMax, pt.x());
        yMin = std::min(yMin, pt.y());
        yMax = std::max(yMax, pt.y());
    };
    for (const ChartSeries &s : chart.series) {
        for (int i = 0; i < s.points.size(); ++i) {
            include(s.points[i]);
            if (i < s.errorBars.size() && finite(s.points[i])) {
                include({ s.points[i].x(), s.errorBars[i].x() });
                include({ s.points[i].x(), s.errorBars[i].y() });
            }
        }
    }
    if (!any)
        return false;
    // A reference line (the target accuracy) below or above every point would sit on the
    // frame, where the x axis hides it: keep a margin on both sides of it, never crossing
    // zero (or 100% on a percent axis) that the line itself does not cross.
    double refMin = INFINITY, refMax = -INFINITY;
    for (const ChartReferenceLine &r : chart.referenceLines) {
        refMin = std::min(refMin, r.y);
        refMax = std::max(refMax, r.y);
    }
    if (std::isfinite(refMin)) {
        const double margin = kReferenceMargin * (std::max(yMax, refMax) - std::min(yMin, refMin));
        double below = refMin - margin, above = refMax + margin;
        if (refMin >= 0 && yMin >= 0)
            below = std::max(below, 0.0);
        if (chart.yPercent && refMax <= 1 && yMax <= 1)
            above = std::min(above, 1.0);
        yMin = std::min(yMin, below);
        yMax = std::max(yMax, above);
    }
    for (const ChartVerticalLine &v : chart.verticalLines) {
        xMin = std::min(xMin, v.x);
        xMax = std::max(xMax, v.x);
    }
    if (chart.yFloor)
        yMin = std::min(yMin, *chart.yFloor);
    if (chart.yCeiling)
        yMax = std::max(yMax, *chart.yCeiling);
    return true;
}

QList<ChartTick> ticksOf(const Axis &axis, bool percent)
{
    QList<ChartTick> ticks;
    for (double t : axis.ticks)
        ticks.append({ t, tickText(t, axis, percent) });
    return ticks;
}

// A line or point chart: title on top, the plot with its axes' ticks and labels, legend below.
void layOutXyChart(ChartLayout &l, const ChartSpec &chart, const QRectF &rect, const ChartFonts &f, qreal u)
{
    double xMin, xMax, yMin, yMax;
    l.empty = !dataRanges(chart, xMin, xMax, yMin, yMax);
    const bool any = !l.empty;
    const Axis xAxis = makeAxis(any ? xMin : 0, any ? xMax : 1, chart.xIntegerTicks, false);
    const Axis yAxis = makeAxis(any ? yMin : 0, any ? yMax : 1, false, chart.yPercent);
    l.xLo = xAxis.lo;
    l.xHi = xAxis.hi;
    l.yLo = yAxis.lo;
    l.yHi = yAxis.hi;
    l.xTicks = ticksOf(xAxis, false);
    l.yTicks = ticksOf(yAxis, chart.yPercent);

    layOutLegend(l, chart, rect, f, u);
    const qreal legendH = l.legend.height();
    for (const ChartTick &t : std::as_const(l.yTicks))
        l.yTickWidth = std::max(l.yTickWidth, f.tickFm.horizontalAdvance(t.label));
    const qreal lastXTickW = l.xTicks.isEmpty() ? 0 : f.tickFm.horizontalAdvance(l.xTicks.last().label);
    l.plot = QRectF(QPointF(rect.left() + f.pad + f.labelFm.height() + 8 * u + l.yTickWidth + 6 * u,
                        rect.top() + f.pad + f.titleFm.height() + 10 * u),
        QPointF(rect.right() - f.pad - std::max(lastXTickW / 2, 4 * u),
            rect.bottom() - f.pad - legendH - (legendH > 0 ? 8 * u : 0) - f.labelFm.height()
                - f.tickFm.height() - 10 * u));
}

// Ticks of a parallel-coordinates axis.
QList<ChartTick> parallelTicks(const ChartParallelAxis &a)
{
    QList<ChartTick> ticks;
    if (!a.categories.isEmpty()) {
        for (int i = 0; i < a.categories.size(); ++i)
            ticks.append({ double(i), a.categories[i] });
        return ticks;
    }
    const auto label = [&](double v) {
        return a.percent ? QString::number(v * 100, 'g', 3) + QLatin1Char('%') : QString::number(v, 'g', 3);
    };
    if (a.log && a.lo > 0) {
        // Decades; with fewer than three in range, 1-3-10 or 1-2-5 steps.
        const QList<QList<double>> steps { { 1.0 }, { 1.0, 3.0 }, { 1.0, 2.0, 5.0 } };
        for (const QList<double> &multiples : steps) {
            ticks.clear();
            for (double d = std::pow(10.0, std::floor(std::log10(a.lo))); d <= a.hi * (1 + 1e-9); d *= 10)
                for (const double f : multiples)
                    if (d * f >= a.lo * (1 - 1e-9) && d * f <= a.hi * (1 + 1e-9))
                        ticks.append({ d * f, label(d * f) });
            if (ticks.size() >= 3)
                break;
        }
        if (ticks.size() < 2)
            ticks = { { a.lo, label(a.lo) }, { a.hi, label(a.hi) } };
        return ticks;
    }
    if (!(a.hi > a.lo))
        return { { a.lo, label(a.lo) } };
    const double step = niceStep(a.hi - a.lo, 4, NiceRounding::Heckbert);
    for (double t = std::ceil(a.lo / step - 1e-9) * step; t <= a.hi + step * 1e-9; t += step)
        ticks.append({ std::abs(t) < step * 1e-9 ? 0.0 : t, label(std::abs(t) < step * 1e-9 ? 0.0 : t) });
    return ticks;
}

// A parallel-coordinates chart: one vertical axis per entry of chart.parallelAxes, evenly
// spaced, axis names over the plot, tick labels right of each axis.
void layOutParallelChart(
    ChartLayout &l, const ChartSpec &chart, const QRectF &rect, const ChartFonts &f, qreal u)
{
    // Each axis' range, widened to hold every value on it.
    l.parallelAxes = chart.parallelAxes;
    QList<ChartParallelAxis> &axes = l.parallelAxes;
    for (const ChartSeries &s : chart.series) {
        for (const QPointF &pt : s.points) {
            const int i = int(std::lround(pt.x()));
            if (!finite(pt) || i < 0 || i >= axes.size() || (axes[i].log && pt.y() <= 0))
                continue;
            l.empty = false;
            if (axes[i].categories.isEmpty()) {
                axes[i].lo = std::min(axes[i].lo, pt.y());
                axes[i].hi = std::max(axes[i].hi, pt.y());
            }
        }
    }
    layOutLegend(l, chart, rect, f, u);
    const qreal legendH = l.legend.height();
    for (const ChartParallelAxis &a : std::as_const(axes))
        l.parallelTicks << parallelTicks(a);
    const int n = int(axes.size());
    qreal lastTicks = 0;
    for (const ChartTick &t : std::as_const(l.parallelTicks[n - 1]))
        lastTicks = std::max(lastTicks, f.tickFm.horizontalAdvance(t.label));
    const qreal firstName = f.labelFm.horizontalAdvance(axes.first().name);
    const qreal lastName = f.labelFm.horizontalAdvance(axes.last().name);
    l.plot = QRectF(QPointF(rect.left() + f.pad + std::max(firstName / 2, 4 * u),
                        rect.top() + f.pad + f.titleFm.height() + 10 * u + f.labelFm.height() + 8 * u),
        QPointF(rect.right() - f.pad - std::max(lastTicks + 8 * u, lastName / 2),
            rect.bottom() - f.pad - legendH - (legendH > 0 ? 10 * u : 0) - f.tickFm.height() / 2));
}

} // namespace

ChartFonts::ChartFonts(qreal u, const QPaintDevice *device)
    : titleFont(chartFont(13 * u, true))
    , labelFont(chartFont(11 * u))
    , tickFont(chartFont(10 * u))
    , legendFont(chartFont(10.5 * u))
    , titleFm(titleFont, device)
    , labelFm(labelFont, device)
    , tickFm(tickFont, device)
    , legendFm(legendFont, device)
    , pad(8 * u)
{ }

ChartLayout layoutChart(const ChartSpec &chart, const QRectF &rect, const ChartFonts &f, qreal u)
{
    ChartLayout l;
    l.title = QRectF(rect.left() + f.pad, rect.top() + f.pad, rect.width() - 2 * f.pad, f.titleFm.height());
    if (chart.parallelAxes.isEmpty())
        layOutXyChart(l, chart, rect, f, u);
    else
        layOutParallelChart(l, chart, rect, f, u);
    return l;
}

qreal ChartLayout::mapX(double x) const
{
    return plot.left() + (x - xLo) / (xHi - xLo) * (plot.right() - plot.left());
}

qreal ChartLayout::mapY(double y) const
{
    return plot.bottom() + (y - yLo) / (yHi - yLo) * (plot.top() - plot.bottom());
}

qreal ChartLayout::parallelX(int axis) const
{
    const qsizetype n = parallelAxes.size();
    return n == 1 ? plot.center().x() : plot.left() + plot.width() * axis / (n - 1);
}

qreal ChartLayout::parallelY(int axis, double v) const
{
    const ChartParallelAxis &a = parallelAxes[axis];
    double position; // 0 bottom, 1 top
    if (!a.categories.isEmpty())
        position = (v + 0.5) / a.categories.size();
    else if (a.log && (!(v > 0) || !(a.lo > 0) || !(a.hi > a.lo)))
        position = v > 0 ? 0.5 : kNotMeasured;
    else if (a.log)
        position = (std::log10(v) - std::log10(a.lo)) / (std::log10(a.hi) - std::log10(a.lo));
    else
        position = a.hi > a.lo ? (v - a.lo) / (a.hi - a.lo) : 0.5;
    return plot.bottom() - position * plot.height();
}

ChartLayout layoutChart(const ChartSpec &chart, const QRectF &rect, qreal unit, const QPaintDevice *device)
{
    return layoutChart(chart, rect, ChartFonts(unit, device), unit);
}

bool isDrawnPoint(QPointF point)
{
    return finite(point);
}

} // namespace scalelab::core
