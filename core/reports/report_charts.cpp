#include "report_charts.h"

#include "downsample.h"
#include "report_tune.h"
#include "tune_plan.h"

#include <QBuffer>
#include <QFont>
#include <QFontMetricsF>
#include <QHash>
#include <QPainter>
#include <QPainterPath>
#include <QSvgGenerator>

#include <algorithm>
#include <cmath>
#include <vector>

namespace scalelab::core {

namespace {

// Okabe–Ito: distinguishable with colour-blindness and in greyscale print (yellow left out).
const QList<QColor> &palette()
{
    static const QList<QColor> colors { QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00),
        QColor(0x00, 0x9E, 0x73), QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00),
        QColor(0x56, 0xB4, 0xE9), QColor(0x33, 0x33, 0x33) };
    return colors;
}

const QColor kIdealColor(0x88, 0x88, 0x88);
const QColor kTargetColor(0xB0, 0x30, 0x30);
const QColor kAxisColor(0x44, 0x44, 0x44);
const QColor kGridColor(0xE4, 0xE4, 0xE4);
const QColor kTextColor(0x22, 0x22, 0x22);
// Step curves are thinned to what a chart's width can show.
constexpr int kMaxPointsPerCurve = 400;
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

// 1, 2 or 5 times a power of ten, about range / wanted.
double niceStep(double range, int wanted)
{
    const double raw = range / std::max(1, wanted);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double fraction = raw / magnitude;
    const double nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
    return nice * magnitude;
}

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
    double step = niceStep(max - min, 5);
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
    axis.decimals = shownStep >= 1 ? 0 : int(std::ceil(-std::log10(shownStep) - 1e-9));
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
    const ChartSeries *series;
};

QList<LegendEntry> legendEntries(const ChartSpec &chart)
{
    QList<LegendEntry> entries;
    for (const ChartSeries &s : chart.series) {
        if (s.name.isEmpty())
            continue;
        const bool listed = std::any_of(
            entries.cbegin(), entries.cend(), [&](const LegendEntry &e) { return e.name == s.name; });
        if (!listed)
            entries.append({ s.name, &s });
    }
    return entries;
}

void drawMarker(QPainter &p, QPointF at, const QColor &color, qreal u)
{
    p.setPen(QPen(Qt::white, 0.8 * u));
    p.setBrush(color);
    p.drawEllipse(at, 3.0 * u, 3.0 * u);
}

void drawSwatch(QPainter &p, const ChartSeries &s, const QRectF &box, qreal u)
{
    const qreal y = box.center().y();
    if (s.line) {
        QPen pen(s.color, std::max(s.width, 1.5) * u, s.style, Qt::FlatCap);
        p.setPen(pen);
        p.drawLine(QPointF(box.left(), y), QPointF(box.right(), y));
    }
    if (s.markers)
        drawMarker(p, QPointF(box.center().x(), y), s.color, u);
}

// The colour scale's row of a legend at `at` (its top-left): "label  from ▬▬▬ to".
void drawColorScale(
    QPainter &p, const ChartColorScale &scale, QPointF at, qreal rowH, const QFontMetricsF &fm, qreal u)
{
    p.setFont(chartFont(10.5 * u));
    p.setPen(kTextColor);
    qreal x = at.x();
    const auto text = [&](const QString &t) {
        if (t.isEmpty())
            return;
        const qreal w = fm.horizontalAdvance(t) + 2 * u;
        p.drawText(QRectF(x, at.y(), w, rowH), Qt::AlignLeft | Qt::AlignVCenter, t);
        x += w + 5 * u;
    };
    text(scale.label);
    text(scale.fromText);
    const qreal barW = 110 * u, barH = std::min(rowH * 0.6, 9 * u);
    const QRectF bar(x, at.y() + (rowH - barH) / 2, barW, barH);
    const int steps = 40;
    p.setPen(Qt::NoPen);
    for (int i = 0; i < steps && !scale.colors.isEmpty(); ++i) {
        // Each step's colour interpolated between the two stops around it.
        const double f = (i + 0.5) / steps * (scale.colors.size() - 1);
        const int k = std::min(int(f), int(scale.colors.size()) - 1);
        const QColor a = scale.colors[k], b = scale.colors[std::min(k + 1, int(scale.colors.size()) - 1)];
        const double w = f - k;
        const QColor c = QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * w),
            float(a.greenF() + (b.greenF() - a.greenF()) * w),
            float(a.blueF() + (b.blueF() - a.blueF()) * w));
        p.setBrush(c);
        // A hair wider than the step, so no seam shows between steps.
        p.drawRect(
            QRectF(bar.left() + bar.width() * i / steps, bar.top(), bar.width() / steps + 0.3 * u, barH));
    }
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(kAxisColor, 0.6 * u));
    p.drawRect(bar);
    x += barW + 5 * u;
    p.setPen(kTextColor);
    text(scale.toText);
}

// Ticks of a parallel-coordinates axis: (value on the axis, label).
QList<QPair<double, QString>> parallelTicks(const ChartParallelAxis &a)
{
    QList<QPair<double, QString>> ticks;
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
    const double step = niceStep(a.hi - a.lo, 4);
    for (double t = std::ceil(a.lo / step - 1e-9) * step; t <= a.hi + step * 1e-9; t += step)
        ticks.append({ std::abs(t) < step * 1e-9 ? 0.0 : t, label(std::abs(t) < step * 1e-9 ? 0.0 : t) });
    return ticks;
}

// A chart's white ground and its type, at scale u, for the painter's device.
struct ChartPaint {
    ChartPaint(QPainter &p, const QRectF &rect, qreal u)
        : titleFont(chartFont(13 * u, true))
        , labelFont(chartFont(11 * u))
        , tickFont(chartFont(10 * u))
        , legendFont(chartFont(10.5 * u))
        , titleFm(titleFont, p.device())
        , labelFm(labelFont, p.device())
        , tickFm(tickFont, p.device())
        , legendFm(legendFont, p.device())
        , pad(8 * u)
    {
        p.save();
        p.setRenderHint(QPainter::Antialiasing);
        p.setPen(Qt::NoPen);
        p.setBrush(Qt::white);
        p.drawRect(rect);
    }
    const QFont titleFont, labelFont, tickFont, legendFont;
    const QFontMetricsF titleFm, labelFm, tickFm, legendFm;
    const qreal pad;
};

// A parallel-coordinates chart: one vertical axis per entry of chart.parallelAxes, evenly
// spaced, each series a line across them. Title on top, legend (colour scale first) below.
void paintParallelChart(QPainter &p, const QRectF &rect, const ChartSpec &chart, qreal u)
{
    const ChartPaint cp(p, rect, u); // p.save()d: restored at the end
    const QFont &titleFont = cp.titleFont, &labelFont = cp.labelFont, &tickFont = cp.tickFont,
                &legendFont = cp.legendFont;
    const QFontMetricsF &titleFm = cp.titleFm, &labelFm = cp.labelFm, &tickFm = cp.tickFm, &legendFm = cp.legendFm;
    const qreal pad = cp.pad;

    // Each axis' range, widened to hold every value on it.
    QList<ChartParallelAxis> axes = chart.parallelAxes;
    bool any = false;
    for (const ChartSeries &s : chart.series) {
        for (const QPointF &pt : s.points) {
            const int i = int(std::lround(pt.x()));
            if (!finite(pt) || i < 0 || i >= axes.size() || (axes[i].log && pt.y() <= 0))
                continue;
            any = true;
            if (axes[i].categories.isEmpty()) {
                axes[i].lo = std::min(axes[i].lo, pt.y());
                axes[i].hi = std::max(axes[i].hi, pt.y());
            }
        }
    }
    const auto position = [&](const ChartParallelAxis &a, double v) -> double { // 0 bottom, 1 top
        if (!a.categories.isEmpty())
            return (v + 0.5) / a.categories.size();
        if (a.log) {
            if (!(v > 0) || !(a.lo > 0) || !(a.hi > a.lo))
                return v > 0 ? 0.5 : kNotMeasured;
            return (std::log10(v) - std::log10(a.lo)) / (std::log10(a.hi) - std::log10(a.lo));
        }
        return a.hi > a.lo ? (v - a.lo) / (a.hi - a.lo) : 0.5;
    };

    // Legend rows.
    const QList<LegendEntry> legend = legendEntries(chart);
    const qreal swatchW = 22 * u, gap = 14 * u, rowH = legendFm.height() + 4 * u;
    const qreal legendWidth = rect.width() - 2 * pad;
    QList<QPair<QPointF, const LegendEntry *>> legendSlots;
    qreal lx = 0, ly = 0;
    for (const LegendEntry &e : legend) {
        const qreal w = swatchW + 5 * u + legendFm.horizontalAdvance(e.name);
        if (lx > 0 && lx + w > legendWidth) {
            lx = 0;
            ly += rowH;
        }
        legendSlots.append({ QPointF(lx, ly), &e });
        lx += w + gap;
    }
    const qreal scaleH = chart.colorScale ? rowH : 0;
    const qreal legendH = (legend.isEmpty() ? 0 : ly + rowH) + scaleH;

    // The plot: axis names over it, tick labels right of each axis.
    QList<QList<QPair<double, QString>>> ticks;
    for (const ChartParallelAxis &a : std::as_const(axes))
        ticks << parallelTicks(a);
    const auto widest = [&](int i) {
        qreal w = 0;
        for (const auto &t : ticks[i])
            w = std::max(w, tickFm.horizontalAdvance(t.second));
        return w;
    };
    const int n = int(axes.size());
    const qreal firstName = labelFm.horizontalAdvance(axes.first().name);
    const qreal lastName = labelFm.horizontalAdvance(axes.last().name);
    const QRectF plot(QPointF(rect.left() + pad + std::max(firstName / 2, 4 * u),
                          rect.top() + pad + titleFm.height() + 10 * u + labelFm.height() + 8 * u),
        QPointF(rect.right() - pad - std::max(widest(n - 1) + 8 * u, lastName / 2),
            rect.bottom() - pad - legendH - (legendH > 0 ? 10 * u : 0) - tickFm.height() / 2));
    const auto axisX
        = [&](int i) { return n == 1 ? plot.center().x() : plot.left() + plot.width() * i / (n - 1); };
    const auto axisY = [&](int i, double v) { return plot.bottom() - position(axes[i], v) * plot.height(); };

    p.setPen(kTextColor);
    p.setFont(titleFont);
    p.drawText(QRectF(rect.left() + pad, rect.top() + pad, rect.width() - 2 * pad, titleFm.height()),
        Qt::AlignLeft | Qt::AlignVCenter, chart.title);

    if (!any) {
        p.setFont(labelFont);
        p.setPen(QColor(0x77, 0x77, 0x77));
        p.drawText(plot, Qt::AlignCenter, chart.emptyText);
    }

    // Lines, in the order given (the last on top); a value missing on an axis is a gap.
    for (const ChartSeries &s : chart.series) {
        QPainterPath path;
        bool open = false;
        QList<QPointF> alone; // a value with no neighbour on either side: a marker shows it
        for (int k = 0; k < s.points.size(); ++k) {
            const QPointF pt = s.points[k];
            const int i = int(std::lround(pt.x()));
            const double y = finite(pt) && i >= 0 && i < n ? axisY(i, pt.y()) : kNotMeasured;
            if (!std::isfinite(y)) {
                open = false;
                continue;
            }
            const QPointF at(axisX(i), y);
            if (open) {
                path.lineTo(at);
            } else {
                path.moveTo(at);
                const bool nextOk = k + 1 < s.points.size() && finite(s.points[k + 1]);
                if (!nextOk)
                    alone << at;
            }
            open = true;
        }
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(s.color, s.width * u, s.style, Qt::RoundCap, Qt::RoundJoin));
        p.drawPath(path);
        for (const QPointF &at : std::as_const(alone))
            drawMarker(p, at, s.color, u);
    }

    // Axes, their names and ticks over the lines; each label on a white ground, so lines do
    // not run through it.
    for (int i = 0; i < n; ++i) {
        const qreal x = axisX(i);
        p.setPen(QPen(kAxisColor, 1.0 * u));
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
        p.setFont(labelFont);
        p.setPen(kTextColor);
        const qreal nameW = labelFm.horizontalAdvance(axes[i].name) + 2 * u;
        p.drawText(QRectF(x - nameW / 2, plot.top() - 8 * u - labelFm.height(), nameW, labelFm.height()),
            Qt::AlignCenter, axes[i].name);
        p.setFont(tickFont);
        for (const auto &[value, text] : std::as_const(ticks[i])) {
            const qreal y = axisY(i, value);
            if (!std::isfinite(y))
                continue;
            p.setPen(QPen(kAxisColor, 0.8 * u));
            p.drawLine(QPointF(x, y), QPointF(x + 4 * u, y));
            const QRectF box(
                x + 5 * u, y - tickFm.height() / 2, tickFm.horizontalAdvance(text) + 3 * u, tickFm.height());
            p.fillRect(box, QColor(255, 255, 255, 215));
            p.setPen(kTextColor);
            p.drawText(box.adjusted(1 * u, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, text);
        }
    }
    // Legend.
    if (chart.colorScale)
        drawColorScale(p, *chart.colorScale, QPointF(rect.left() + pad, rect.bottom() - pad - legendH), rowH,
            legendFm, u);
    p.setFont(legendFont);
    const QPointF legendOrigin(rect.left() + pad, rect.bottom() - pad - legendH + scaleH);
    for (const auto &[offset, entry] : std::as_const(legendSlots)) {
        const QPointF at = legendOrigin + offset;
        drawSwatch(p, *entry->series, QRectF(at.x(), at.y(), swatchW, rowH), u);
        p.setPen(kTextColor);
        p.drawText(QRectF(at.x() + swatchW + 5 * u, at.y(), legendWidth, rowH),
            Qt::AlignLeft | Qt::AlignVCenter, entry->name);
    }
    p.restore();
}

} // namespace

void paintChart(QPainter &p, const QRectF &rect, const ChartSpec &chart, qreal u)
{
    if (!chart.parallelAxes.isEmpty()) {
        paintParallelChart(p, rect, chart, u);
        return;
    }
    const ChartPaint cp(p, rect, u); // p.save()d: restored at the end
    const QFont &titleFont = cp.titleFont, &labelFont = cp.labelFont, &tickFont = cp.tickFont,
                &legendFont = cp.legendFont;
    const QFontMetricsF &titleFm = cp.titleFm, &labelFm = cp.labelFm, &tickFm = cp.tickFm, &legendFm = cp.legendFm;
    const qreal pad = cp.pad;

    // Ranges over everything that is drawn.
    double xMin = INFINITY, xMax = -INFINITY, yMin = INFINITY, yMax = -INFINITY;
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
    if (any) {
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
    }
    const Axis xAxis = makeAxis(any ? xMin : 0, any ? xMax : 1, chart.xIntegerTicks, false);
    const Axis yAxis = makeAxis(any ? yMin : 0, any ? yMax : 1, false, chart.yPercent);

    // Legend rows, laid out first because they take height from the plot.
    const QList<LegendEntry> legend = legendEntries(chart);
    const qreal swatchW = 22 * u, gap = 14 * u, rowH = legendFm.height() + 4 * u;
    const qreal legendWidth = rect.width() - 2 * pad;
    QList<QPair<QPointF, const LegendEntry *>> legendSlots; // top-left relative to the legend box
    qreal lx = 0, ly = 0;
    for (const LegendEntry &e : legend) {
        const qreal w = swatchW + 5 * u + legendFm.horizontalAdvance(e.name);
        if (lx > 0 && lx + w > legendWidth) {
            lx = 0;
            ly += rowH;
        }
        legendSlots.append({ QPointF(lx, ly), &e });
        lx += w + gap;
    }
    // A colour scale takes the legend's first row.
    const qreal scaleH = chart.colorScale ? rowH : 0;
    const qreal legendH = (legend.isEmpty() ? 0 : ly + rowH) + scaleH;

    qreal yTickW = 0;
    for (double t : yAxis.ticks)
        yTickW = std::max(yTickW, tickFm.horizontalAdvance(tickText(t, yAxis, chart.yPercent)));
    const qreal lastXTickW
        = xAxis.ticks.isEmpty() ? 0 : tickFm.horizontalAdvance(tickText(xAxis.ticks.last(), xAxis, false));
    const QRectF plot(QPointF(rect.left() + pad + labelFm.height() + 8 * u + yTickW + 6 * u,
                          rect.top() + pad + titleFm.height() + 10 * u),
        QPointF(rect.right() - pad - std::max(lastXTickW / 2, 4 * u),
            rect.bottom() - pad - legendH - (legendH > 0 ? 8 * u : 0) - labelFm.height() - tickFm.height()
                - 10 * u));
    const auto px = [&](double x) { return xAxis.map(x, plot.left(), plot.right()); };
    const auto py = [&](double y) { return yAxis.map(y, plot.bottom(), plot.top()); };

    // Title.
    p.setPen(kTextColor);
    p.setFont(titleFont);
    p.drawText(QRectF(rect.left() + pad, rect.top() + pad, rect.width() - 2 * pad, titleFm.height()),
        Qt::AlignLeft | Qt::AlignVCenter, chart.title);

    // Grid, ticks and tick labels.
    p.setFont(tickFont);
    for (double t : yAxis.ticks) {
        const qreal y = py(t);
        p.setPen(QPen(kGridColor, 0.8 * u));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(QPen(kAxisColor, 0.8 * u));
        p.drawLine(QPointF(plot.left() - 4 * u, y), QPointF(plot.left(), y));
        p.setPen(kTextColor);
        p.drawText(QRectF(plot.left() - 6 * u - yTickW, y - tickFm.height() / 2, yTickW, tickFm.height()),
            Qt::AlignRight | Qt::AlignVCenter, tickText(t, yAxis, chart.yPercent));
    }
    for (double t : xAxis.ticks) {
        const qreal x = px(t);
        p.setPen(QPen(kAxisColor, 0.8 * u));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4 * u));
        p.setPen(kTextColor);
        const QString text = tickText(t, xAxis, false);
        const qreal w = tickFm.horizontalAdvance(text) + 2 * u;
        p.drawText(QRectF(x - w / 2, plot.bottom() + 5 * u, w, tickFm.height()), Qt::AlignCenter, text);
    }
    p.setPen(QPen(kAxisColor, 1.0 * u));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());

    // Axis labels.
    p.setFont(labelFont);
    p.setPen(kTextColor);
    p.drawText(
        QRectF(plot.left(), plot.bottom() + 6 * u + tickFm.height(), plot.width(), labelFm.height() + 2 * u),
        Qt::AlignCenter, chart.xLabel);
    p.save();
    p.translate(rect.left() + pad, plot.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-plot.height() / 2, 0, plot.height(), labelFm.height()), Qt::AlignCenter, chart.yLabel);
    p.restore();

    if (!any) {
        p.setPen(QColor(0x77, 0x77, 0x77));
        p.drawText(plot, Qt::AlignCenter, chart.emptyText);
    }

    // Reference lines under the data.
    for (const ChartReferenceLine &r : chart.referenceLines) {
        if (!any)
            break;
        const qreal y = py(r.y);
        p.setPen(QPen(r.color, 1.0 * u, Qt::DashLine, Qt::FlatCap));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setFont(tickFont);
        p.setPen(r.color);
        p.drawText(QRectF(plot.left(), y - tickFm.height() - 1 * u, plot.width() - 4 * u, tickFm.height()),
            Qt::AlignRight | Qt::AlignBottom, r.label);
    }

    // Vertical lines (a tune's rungs), labelled at the top, under the data.
    for (const ChartVerticalLine &v : chart.verticalLines) {
        if (!any)
            break;
        const qreal x = px(v.x);
        p.setPen(QPen(v.color, 1.0 * u, Qt::DashLine, Qt::FlatCap));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.top()));
        p.setFont(tickFont);
        p.setPen(v.color);
        p.drawText(QRectF(x + 3 * u, plot.top(), tickFm.horizontalAdvance(v.label) + 2 * u, tickFm.height()),
            Qt::AlignLeft | Qt::AlignTop, v.label);
    }

    // Series: error bars, then lines, then markers on top.
    for (const ChartSeries &s : chart.series) {
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(s.color, 1.0 * u));
        for (int i = 0; i < s.points.size() && i < s.errorBars.size(); ++i) {
            const QPointF bar = s.errorBars[i];
            if (!finite(s.points[i]) || !finite(bar))
                continue;
            const qreal x = px(s.points[i].x());
            p.drawLine(QPointF(x, py(bar.x())), QPointF(x, py(bar.y())));
            p.drawLine(QPointF(x - 3 * u, py(bar.x())), QPointF(x + 3 * u, py(bar.x())));
            p.drawLine(QPointF(x - 3 * u, py(bar.y())), QPointF(x + 3 * u, py(bar.y())));
        }
        if (s.line) {
            QPainterPath path;
            bool open = false;
            for (const QPointF &pt : s.points) {
                if (!finite(pt)) {
                    open = false; // a gap in the measurements is a gap in the line
                    continue;
                }
                const QPointF at(px(pt.x()), py(pt.y()));
                if (open)
                    path.lineTo(at);
                else
                    path.moveTo(at);
                open = true;
            }
            p.setPen(QPen(s.color, s.width * u, s.style, Qt::RoundCap, Qt::RoundJoin));
            p.drawPath(path);
        }
    }
    for (const ChartSeries &s : chart.series) {
        if (!s.markers)
            continue;
        for (const QPointF &pt : s.points) {
            if (finite(pt))
                drawMarker(p, QPointF(px(pt.x()), py(pt.y())), s.color, u);
        }
    }

    // Legend.
    p.setFont(legendFont);
    if (chart.colorScale)
        drawColorScale(p, *chart.colorScale, QPointF(rect.left() + pad, rect.bottom() - pad - legendH), rowH,
            legendFm, u);
    const QPointF legendOrigin(rect.left() + pad, rect.bottom() - pad - legendH + scaleH);
    for (const auto &[offset, entry] : std::as_const(legendSlots)) {
        const QPointF at = legendOrigin + offset;
        drawSwatch(p, *entry->series, QRectF(at.x(), at.y(), swatchW, rowH), u);
        p.setPen(kTextColor);
        p.drawText(QRectF(at.x() + swatchW + 5 * u, at.y(), legendWidth, rowH),
            Qt::AlignLeft | Qt::AlignVCenter, entry->name);
    }
    p.restore();
}

QByteArray chartSvg(const ChartSpec &chart, const QSizeF &size)
{
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size.toSize());
    generator.setViewBox(QRectF(QPointF(0, 0), size));
    generator.setTitle(chart.title);
    {
        QPainter painter(&generator);
        paintChart(painter, QRectF(QPointF(0, 0), size), chart);
    }
    const QByteArray svg = buffer.data();
    const qsizetype start = svg.indexOf("<svg");
    return start >= 0 ? svg.mid(start) : svg;
}

// ---- The study's charts -------------------------------------------------------------------

namespace {

// The axes of a configuration other than workers, each as (varies?, text).
QStringList variantParts(const RunConfig &c, const QList<ConfigResult> &configs)
{
    const auto varies = [&](auto field) {
        return std::any_of(configs.cbegin(), configs.cend(),
            [&](const ConfigResult &o) { return field(o.config) != field(c); });
    };
    QStringList parts;
    if (varies([](const RunConfig &x) { return x.batchSize; }))
        parts << QStringLiteral("batch %1").arg(c.batchSize);
    if (varies([](const RunConfig &x) { return x.epochs; }))
        parts << QStringLiteral("%1 epochs").arg(c.epochs);
    if (varies([](const RunConfig &x) { return x.gpusPerWorker; }))
        parts << (c.gpusPerWorker > 0 ? QStringLiteral("%1 GPU/worker").arg(c.gpusPerWorker)
                                      : QStringLiteral("CPU"));
    if (varies([](const RunConfig &x) { return x.threadsPerWorker; }))
        parts << (c.threadsPerWorker > 0 ? QStringLiteral("%1 threads").arg(c.threadsPerWorker)
                                         : QStringLiteral("auto threads"));
    if (varies([](const RunConfig &x) { return x.precision; }))
        parts << c.precision;
    if (varies([](const RunConfig &x) { return x.lrRule; }))
        parts << QStringLiteral("LR %1").arg(c.lrRule);
    return parts;
}

QString variantKey(RunConfig c)
{
    c.workers = 1;
    c.baseline = false;
    return c.key();
}

// Curves of every run, one colour per configuration.
struct CurveSet {
    const StudySnapshot &snapshot;
    const StudyResults &results;

    QColor colorOf(const QString &key) const
    {
        for (int i = 0; i < results.configs.size(); ++i) {
            if (results.configs[i].key == key)
                return palette()[i % palette().size()];
        }
        return palette().last();
    }

    template <typename PointsOf> QList<ChartSeries> curves(PointsOf pointsOf, bool markers) const
    {
        QList<ChartSeries> out;
        for (const RunResult &run : snapshot.runs) {
            ChartSeries s;
            s.name = configLabel(run.config, results.configs);
            s.color = colorOf(run.config.key());
            s.points = pointsOf(run);
            s.markers = markers;
            s.width = 1.4;
            // A repeat is drawn dashed so it can be told apart from the first.
            s.style = run.repeat % 2 == 0 ? Qt::SolidLine : Qt::DashLine;
            if (!s.points.isEmpty())
                out.append(s);
        }
        return out;
    }
};

QList<QPointF> lossPoints(const RunResult &run)
{
    std::vector<QPointF> fromSteps;
    for (const StepPoint &s : run.steps) {
        if (std::isfinite(s.elapsedSeconds) && std::isfinite(s.loss))
            fromSteps.emplace_back(s.elapsedSeconds, s.loss);
    }
    if (!fromSteps.empty()) {
        if (fromSteps.size() <= size_t(kMaxPointsPerCurve))
            return QList<QPointF>(fromSteps.begin(), fromSteps.end());
        return minMaxDownsample(fromSteps, kMaxPointsPerCurve / 4);
    }
    QList<QPointF> fromEpochs;
    for (const EpochPoint &e : run.epochs)
        fromEpochs.append({ e.elapsedSeconds, e.trainLoss });
    return fromEpochs;
}

QString percentText(double fraction)
{
    return QStringLiteral("%1%").arg(fraction * 100, 0, 'f', 1);
}

} // namespace

QString configLabel(const RunConfig &config, const QList<ConfigResult> &configs)
{
    QString label
        = config.workers == 1 ? QStringLiteral("1 worker") : QStringLiteral("%1 workers").arg(config.workers);
    if (config.baseline)
        label += QStringLiteral(" (baseline)");
    const QStringList parts = variantParts(config, configs);
    return parts.isEmpty() ? label : label + QStringLiteral(" · ") + parts.join(QStringLiteral(" · "));
}

QList<ChartSpec> studyCharts(const StudySnapshot &snapshot, const StudyResults &results)
{
    const CurveSet curves { snapshot, results };
    const double target = results.targetAccuracy;
    QList<ChartReferenceLine> targetLine;
    if (std::isfinite(target))
        targetLine.append({ target, QStringLiteral("target %1").arg(percentText(target)), kTargetColor });

    QList<ChartSpec> charts;
    {
        ChartSpec c;
        c.title = QStringLiteral("Training loss");
        c.xLabel = QStringLiteral("Wall-clock since training start (s)");
        c.yLabel = QStringLiteral("Loss");
        c.series = curves.curves(lossPoints, false);
        c.yFloor = 0;
        charts.append(c);
    }
    // Test accuracy per epoch end, against the epoch number or against the wall-clock.
    const auto accuracyChart = [&](const QString &title, const QString &xLabel, bool byEpoch) {
        ChartSpec c;
        c.title = title;
        c.xLabel = xLabel;
        c.yLabel = QStringLiteral("Test accuracy");
        c.yPercent = true;
        c.xIntegerTicks = byEpoch;
        c.referenceLines = targetLine;
        c.series = curves.curves(
            [byEpoch](const RunResult &run) {
                QList<QPointF> pts;
                for (const EpochPoint &e : run.epochs)
                    pts.append({ byEpoch ? double(e.epoch) : e.elapsedSeconds, e.testAccuracy });
                return pts;
            },
            true);
        return c;
    };
    charts << accuracyChart(QStringLiteral("Test accuracy by epoch"), QStringLiteral("Epoch"), true)
           << accuracyChart(QStringLiteral("Test accuracy over time (time to accuracy)"),
                  QStringLiteral("Wall-clock since training start (s)"), false);

    // Versus workers: one series per variant (the configuration without its worker count).
    QStringList variants;
    for (const ConfigResult &c : results.configs) {
        if (!variants.contains(variantKey(c.config)))
            variants.append(variantKey(c.config));
    }
    const ConfigResult *base = results.baseline();
    const int baseWorkers = base ? std::max(1, base->config.workers) : 1;
    const auto seriesName = [&](const ConfigResult &first, const QString &what) {
        const QStringList parts = variantParts(first.config, results.configs);
        return parts.isEmpty() ? what : parts.join(QStringLiteral(" · ")) + QStringLiteral(" — ") + what;
    };
    const QString ttaName = std::isfinite(target) ? QStringLiteral("by time to %1").arg(percentText(target))
                                                  : QStringLiteral("by time to accuracy");

    ChartSpec throughput, speedup, efficiency;
    throughput.title = QStringLiteral("Throughput");
    throughput.yLabel = QStringLiteral("Images / second");
    speedup.title = QStringLiteral("Speedup over the baseline");
    speedup.yLabel = QStringLiteral("Speedup (×)");
    efficiency.title = QStringLiteral("Scaling efficiency");
    efficiency.yLabel = QStringLiteral("Efficiency");
    efficiency.yPercent = true;
    for (ChartSpec *c : { &throughput, &speedup, &efficiency }) {
        c->xLabel = QStringLiteral("Workers");
        c->xIntegerTicks = true;
        c->yFloor = 0;
    }
    const QString noBaseline
        = results.baselineNote.isEmpty() ? QStringLiteral("No speedup measured yet") : results.baselineNote;
    speedup.emptyText = noBaseline;
    efficiency.emptyText = noBaseline;

    int maxWorkers = baseWorkers;
    for (int v = 0; v < variants.size(); ++v) {
        const QColor color = palette()[v % palette().size()];
        ChartSeries rate, wall, tta;
        rate.color = wall.color = tta.color = color;
        rate.markers = wall.markers = tta.markers = true;
        tta.style = Qt::DashLine;
        const ConfigResult *first = nullptr;
        for (const ConfigResult &c : results.configs) {
            if (variantKey(c.config) != variants[v])
                continue;
            first = first ? first : &c;
            const double w = c.config.workers;
            maxWorkers = std::max(maxWorkers, c.config.workers);
            rate.points.append({ w, c.imagesPerSecond.mean });
            rate.errorBars.append({ c.imagesPerSecond.min, c.imagesPerSecond.max });
            wall.points.append({ w, c.byWallClock.speedup });
            tta.points.append({ w, c.byTimeToAccuracy.speedup });
        }
        rate.name = seriesName(*first, QStringLiteral("mean, bars min–max"));
        wall.name = seriesName(*first, QStringLiteral("by wall-clock"));
        tta.name = seriesName(*first, ttaName);
        ChartSeries wallEff = wall, ttaEff = tta;
        for (int i = 0; i < wall.points.size(); ++i) {
            const double w = wall.points[i].x() / baseWorkers;
            wallEff.points[i].setY(wall.points[i].y() / w);
            ttaEff.points[i].setY(tta.points[i].y() / w);
        }
        throughput.series.append(rate);
        speedup.series << wall << tta;
        efficiency.series << wallEff << ttaEff;
    }

    // Ideal lines, from the baseline (only where there is one).
    if (base && !speedup.series.isEmpty()) {
        ChartSeries ideal;
        ideal.name = QStringLiteral("ideal (linear)");
        ideal.color = kIdealColor;
        ideal.style = Qt::DashDotLine;
        ideal.width = 1.2;
        ChartSeries idealRate = ideal, idealSpeedup = ideal, idealEff = ideal;
        for (const double w : { double(baseWorkers), double(maxWorkers) }) {
            idealRate.points.append({ w, base->imagesPerSecond.mean * w / baseWorkers });
            idealSpeedup.points.append({ w, w / baseWorkers });
            idealEff.points.append({ w, 1.0 });
        }
        // The ideal line is only drawn next to measured points, so a chart of nothing stays empty.
        const auto hasData = [](const ChartSpec &c) {
            return std::any_of(c.series.cbegin(), c.series.cend(),
                [](const ChartSeries &s) { return std::any_of(s.points.cbegin(), s.points.cend(), finite); });
        };
        if (hasData(throughput))
            throughput.series.prepend(idealRate);
        if (hasData(speedup))
            speedup.series.prepend(idealSpeedup);
        if (hasData(efficiency))
            efficiency.series.prepend(idealEff);
    }
    charts << throughput << speedup << efficiency;
    if (snapshot.learningRateCurve.size() > 1) {
        ChartSpec c;
        c.title = QStringLiteral("Learning-rate range test");
        c.xLabel = QStringLiteral("log10 of the learning rate");
        c.yLabel = QStringLiteral("Smoothed training loss");
        ChartSeries curve;
        curve.name = QStringLiteral("smoothed loss");
        curve.color = palette().first();
        for (const auto &[lr, loss] : snapshot.learningRateCurve)
            if (lr > 0)
                curve.points << QPointF(std::log10(lr), loss);
        c.series << curve;
        charts.append(c);
    }
    return charts;
}

// ---- A tune's charts ----------------------------------------------------------------------

namespace {

// Viridis from its dark end to before its yellow (which is lost on white): the best trial
// dark, the worst light.
const QList<QColor> &metricScale()
{
    static const QList<QColor> colors { QColor(0xA0, 0xDA, 0x39), QColor(0x4A, 0xC1, 0x6D),
        QColor(0x1F, 0xA1, 0x87), QColor(0x27, 0x7F, 0x8E), QColor(0x36, 0x5C, 0x8D),
        QColor(0x46, 0x33, 0x7E), QColor(0x44, 0x01, 0x54) };
    return colors;
}

QColor scaleColor(double goodness)
{
    const QList<QColor> &c = metricScale();
    const double f = std::clamp(goodness, 0.0, 1.0) * (c.size() - 1);
    const int k = std::min(int(f), int(c.size()) - 2);
    const double w = f - k;
    return QColor::fromRgbF(float(c[k].redF() + (c[k + 1].redF() - c[k].redF()) * w),
        float(c[k].greenF() + (c[k + 1].greenF() - c[k].greenF()) * w),
        float(c[k].blueF() + (c[k + 1].blueF() - c[k].blueF()) * w));
}

// A stopped trial's colour: most of the way to white.
QColor faded(const QColor &c)
{
    constexpr double keep = 0.4;
    return QColor::fromRgbF(float(1 - (1 - c.redF()) * keep), float(1 - (1 - c.greenF()) * keep),
        float(1 - (1 - c.blueF()) * keep));
}

const QColor kUnmeasured(0x99, 0x99, 0x99);

bool stoppedEarly(const RunResult &run)
{
    return run.state == QLatin1String("STOPPED");
}

// How each trial is drawn in both charts: its colour by its final metric (the same trial the
// same colour in both), stopped ones faded, the best one thick and drawn last.
struct TrialLook {
    int run;
    QColor color;
    qreal width;
};

QList<TrialLook> trialLooks(const StudySnapshot &s, const TuneReport &t, double *worst, double *best)
{
    *worst = kNotMeasured;
    *best = kNotMeasured;
    for (int i = 0; i < s.runs.size(); ++i) {
        const double v = t.finalMetric.value(i, kNotMeasured);
        if (!s.runs[i].trial || !std::isfinite(v))
            continue;
        const bool better = t.maximize ? v > *best : v < *best;
        const bool worse = t.maximize ? v < *worst : v > *worst;
        if (!std::isfinite(*best) || better)
            *best = v;
        if (!std::isfinite(*worst) || worse)
            *worst = v;
    }
    QList<TrialLook> looks;
    for (const int pass : { 0, 1, 2 }) { // stopped, the others, the best
        for (int i = 0; i < s.runs.size(); ++i) {
            const RunResult &run = s.runs[i];
            const int want = i == t.best ? 2 : stoppedEarly(run) ? 0 : 1;
            if (!run.trial || want != pass)
                continue;
            const double v = t.finalMetric.value(i, kNotMeasured);
            QColor color = kUnmeasured;
            if (std::isfinite(v))
                color = scaleColor(*best == *worst ? 1.0 : (v - *worst) / (*best - *worst));
            looks.append({ i, pass == 0 ? faded(color) : color, pass == 2 ? 2.8 : pass == 0 ? 1.1 : 1.6 });
        }
    }
    return looks;
}

// The legend's entry for stopped trials, which are drawn without a name of their own.
ChartSeries stoppedLegendSeries()
{
    ChartSeries stopped;
    stopped.name = QStringLiteral("stopped early (faded)");
    stopped.color = faded(metricScale()[metricScale().size() / 2]);
    stopped.width = 1.1;
    return stopped;
}

QString capitalized(QString text)
{
    if (!text.isEmpty())
        text[0] = text[0].toUpper();
    return text;
}

} // namespace

QList<ChartSpec> tuneCharts(const StudySnapshot &s, const TuneReport &t)
{
    const bool fraction = tuneMetricIsFraction(t.metric);
    const QString metricName = tuneMetricName(t.metric);
    double worst = kNotMeasured, best = kNotMeasured;
    const QList<TrialLook> looks = trialLooks(s, t, &worst, &best);
    bool anyStopped = false;
    for (const RunResult &run : s.runs)
        anyStopped = anyStopped || (run.trial && stoppedEarly(run));

    std::optional<ChartColorScale> scale;
    if (std::isfinite(best)) {
        ChartColorScale c;
        c.label = QStringLiteral("final %1:").arg(metricName);
        c.fromText = metricText(t.metric, worst);
        c.toText = metricText(t.metric, best) + QStringLiteral(" (best)");
        c.colors = metricScale();
        scale = c;
    }
    const QString bestName
        = t.best >= 0 ? QStringLiteral("best trial (%1)").arg(s.runs[t.best].runId) : QString();

    ChartSpec curves;
    curves.title = QStringLiteral("%1 of every trial").arg(capitalized(metricName));
    curves.xLabel = QStringLiteral("Epochs completed");
    curves.yLabel = capitalized(metricName);
    curves.yPercent = fraction;
    curves.xIntegerTicks = true;
    curves.emptyText = QStringLiteral("No trial has completed an epoch yet");
    curves.colorScale = scale;
    for (int r = 0; r < t.rungEpochs.size(); ++r)
        curves.verticalLines.append(
            { double(t.rungEpochs[r]), QStringLiteral("rung %1").arg(r + 1), kIdealColor });
    if (anyStopped)
        curves.series << stoppedLegendSeries();
    for (const TrialLook &look : looks) {
        const RunResult &run = s.runs[look.run];
        ChartSeries series;
        series.name = look.run == t.best ? bestName : QString();
        series.color = look.color;
        series.width = look.width;
        series.markers = true;
        for (const EpochPoint &e : run.epochs)
            series.points.append({ double(e.epoch), trialMetric(s, e) });
        curves.series << series;
    }

    ChartSpec parallel;
    parallel.title = QStringLiteral("Hyperparameters of every trial, coloured by final %1").arg(metricName);
    parallel.emptyText = QStringLiteral("No trial has been drawn yet");
    parallel.colorScale = scale;
    const QStringList names = tuneParamNames(s, t);
    for (const QString &name : names) {
        ChartParallelAxis axis;
        axis.name = paramLabel(name);
        const TuneDimension *dim = nullptr;
        for (const TuneDimension &d : t.space)
            if (d.name == name)
                dim = &d;
        double lo = INFINITY, hi = -INFINITY;
        bool words = false;
        for (const RunResult &run : s.runs) {
            const QJsonValue v = run.params.value(name);
            words = words || v.isString();
            if (v.isDouble()) {
                lo = std::min(lo, v.toDouble());
                hi = std::max(hi, v.toDouble());
            }
        }
        if (dim && dim->choice()) {
            for (const QJsonValue &v : dim->values)
                axis.categories << paramValueText(v);
        } else if (words) {
            for (const RunResult &run : s.runs) {
                const QString v = paramValueText(run.params.value(name));
                if (!v.isEmpty() && !axis.categories.contains(v))
                    axis.categories << v;
            }
            std::sort(axis.categories.begin(), axis.categories.end());
        } else {
            axis.log = dim && dim->logScale;
            if (dim && std::isfinite(dim->low) && std::isfinite(dim->high)) {
                lo = std::min(lo, dim->low);
                hi = std::max(hi, dim->high);
            }
            axis.lo = std::isfinite(lo) ? lo : 0;
            axis.hi = std::isfinite(hi) ? hi : 1;
            if (axis.log && !(axis.lo > 0))
                axis.log = false;
        }
        if (axis.log)
            axis.name += QStringLiteral(" (log)");
        parallel.parallelAxes << axis;
    }
    {
        ChartParallelAxis axis;
        axis.name = QStringLiteral("final %1").arg(metricName);
        axis.percent = fraction;
        axis.lo = std::isfinite(best) ? std::min(best, worst) : 0;
        axis.hi = std::isfinite(best) ? std::max(best, worst) : 1;
        parallel.parallelAxes << axis;
    }
    if (anyStopped)
        parallel.series << stoppedLegendSeries();
    for (const TrialLook &look : looks) {
        const RunResult &run = s.runs[look.run];
        ChartSeries series;
        series.name = look.run == t.best ? bestName : QString();
        series.color = look.color;
        series.width = look.width;
        for (int i = 0; i < names.size(); ++i) {
            const ChartParallelAxis &axis = parallel.parallelAxes[i];
            const QJsonValue v = run.params.value(names[i]);
            double y = kNotMeasured;
            if (!axis.categories.isEmpty()) {
                const qsizetype k = axis.categories.indexOf(paramValueText(v));
                y = k >= 0 ? double(k) : kNotMeasured;
            } else if (v.isDouble()) {
                y = v.toDouble();
            }
            series.points.append({ double(i), y });
        }
        series.points.append({ double(names.size()), t.finalMetric.value(look.run, kNotMeasured) });
        parallel.series << series;
    }
    return { curves, parallel };
}

} // namespace scalelab::core
