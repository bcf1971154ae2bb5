#include "chart_painter.h"

#include "nice_ticks.h"
#include "study_model.h"

#include <QBuffer>
#include <QFont>
#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>
#include <QPair>
#include <QSvgGenerator>

#include <algorithm>
#include <cmath>

namespace scalelab::core {

namespace {

const QColor kAxisColor(0x44, 0x44, 0x44);
const QColor kGridColor(0xE4, 0xE4, 0xE4);
const QColor kTextColor(0x22, 0x22, 0x22);
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

// A chart's legend, under its plot: a colour scale's row first (if any), then an entry per
// named series, in rows that wrap at the chart's width. Laid out before the plot, whose
// height it takes. Not copyable: the places point into its entries.
struct Legend {
    Legend(const ChartSpec &chart, const QRectF &rect, const QFontMetricsF &legendFm, qreal pad, qreal u)
        : entries(legendEntries(chart))
        , swatchW(22 * u)
        , gap(14 * u)
        , rowH(legendFm.height() + 4 * u)
        , width(rect.width() - 2 * pad)
    {
        qreal lx = 0, ly = 0;
        for (const LegendEntry &e : entries) {
            const qreal w = swatchW + 5 * u + legendFm.horizontalAdvance(e.name);
            if (lx > 0 && lx + w > width) {
                lx = 0;
                ly += rowH;
            }
            places.append({ QPointF(lx, ly), &e });
            lx += w + gap;
        }
        // A colour scale takes the legend's first row.
        scaleH = chart.colorScale ? rowH : 0;
        height = (entries.isEmpty() ? 0 : ly + rowH) + scaleH;
    }
    Legend(const Legend &) = delete;
    Legend &operator=(const Legend &) = delete;

    // The entries (swatch and name) of a legend at the bottom of `rect`, under its colour
    // scale's row, in the painter's current font.
    void drawEntries(QPainter &p, const QRectF &rect, qreal pad, qreal u) const
    {
        const QPointF legendOrigin(rect.left() + pad, rect.bottom() - pad - height + scaleH);
        for (const auto &[offset, entry] : std::as_const(places)) {
            const QPointF at = legendOrigin + offset;
            drawSwatch(p, *entry->series, QRectF(at.x(), at.y(), swatchW, rowH), u);
            p.setPen(kTextColor);
            p.drawText(QRectF(at.x() + swatchW + 5 * u, at.y(), width, rowH),
                Qt::AlignLeft | Qt::AlignVCenter, entry->name);
        }
    }

    const QList<LegendEntry> entries;
    const qreal swatchW, gap, rowH, width;
    QList<QPair<QPointF, const LegendEntry *>> places; // top-left relative to the legend box
    qreal scaleH = 0; // the colour scale's row
    qreal height = 0; // every row
};

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
    const double step = niceStep(a.hi - a.lo, 4, NiceRounding::Heckbert);
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
    const QFontMetricsF &titleFm = cp.titleFm, &labelFm = cp.labelFm, &tickFm = cp.tickFm,
                        &legendFm = cp.legendFm;
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
    const Legend legend(chart, rect, legendFm, pad, u);
    const qreal rowH = legend.rowH, legendH = legend.height;

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
    legend.drawEntries(p, rect, pad, u);
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
    const QFontMetricsF &titleFm = cp.titleFm, &labelFm = cp.labelFm, &tickFm = cp.tickFm,
                        &legendFm = cp.legendFm;
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
    const Legend legend(chart, rect, legendFm, pad, u);
    const qreal rowH = legend.rowH, legendH = legend.height;

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
    legend.drawEntries(p, rect, pad, u);
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

bool isDrawnPoint(QPointF point)
{
    return finite(point);
}

} // namespace scalelab::core
