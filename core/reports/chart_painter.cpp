#include "chart_painter.h"

#include "chart_layout.h"
#include "study_model.h"

#include <QBuffer>
#include <QPainter>
#include <QPainterPath>
#include <QSvgGenerator>

#include <algorithm>
#include <cmath>

namespace scalelab::core {

namespace {

const QColor kAxisColor(0x44, 0x44, 0x44);
const QColor kGridColor(0xE4, 0xE4, 0xE4);
const QColor kTextColor(0x22, 0x22, 0x22);

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
void drawColorScale(QPainter &p, const ChartColorScale &scale, QPointF at, qreal rowH, const QFont &font,
    const QFontMetricsF &fm, qreal u)
{
    p.setFont(font);
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

// The draw passes, in the order they are painted: each reads the layout, none changes it.

// A chart's white ground; the painter is save()d, and restored by the caller at the end.
void drawGround(QPainter &p, const QRectF &rect)
{
    p.save();
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(Qt::NoPen);
    p.setBrush(Qt::white);
    p.drawRect(rect);
}

void drawTitle(QPainter &p, const ChartLayout &l, const ChartSpec &chart, const ChartFonts &f)
{
    p.setPen(kTextColor);
    p.setFont(f.titleFont);
    p.drawText(l.title, Qt::AlignLeft | Qt::AlignVCenter, chart.title);
}

// Grid, ticks and tick labels, the axes, and their labels.
void drawAxes(QPainter &p, const ChartLayout &l, const ChartSpec &chart, const ChartFonts &f,
    const QRectF &rect, qreal u)
{
    const QRectF &plot = l.plot;
    p.setFont(f.tickFont);
    for (const ChartTick &t : l.yTicks) {
        const qreal y = l.mapY(t.value);
        p.setPen(QPen(kGridColor, 0.8 * u));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(QPen(kAxisColor, 0.8 * u));
        p.drawLine(QPointF(plot.left() - 4 * u, y), QPointF(plot.left(), y));
        p.setPen(kTextColor);
        p.drawText(QRectF(plot.left() - 6 * u - l.yTickWidth, y - f.tickFm.height() / 2, l.yTickWidth,
                       f.tickFm.height()),
            Qt::AlignRight | Qt::AlignVCenter, t.label);
    }
    for (const ChartTick &t : l.xTicks) {
        const qreal x = l.mapX(t.value);
        p.setPen(QPen(kAxisColor, 0.8 * u));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4 * u));
        p.setPen(kTextColor);
        const qreal w = f.tickFm.horizontalAdvance(t.label) + 2 * u;
        p.drawText(QRectF(x - w / 2, plot.bottom() + 5 * u, w, f.tickFm.height()), Qt::AlignCenter, t.label);
    }
    p.setPen(QPen(kAxisColor, 1.0 * u));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());

    p.setFont(f.labelFont);
    p.setPen(kTextColor);
    p.drawText(QRectF(plot.left(), plot.bottom() + 6 * u + f.tickFm.height(), plot.width(),
                   f.labelFm.height() + 2 * u),
        Qt::AlignCenter, chart.xLabel);
    p.save();
    p.translate(rect.left() + f.pad, plot.center().y());
    p.rotate(-90);
    p.drawText(
        QRectF(-plot.height() / 2, 0, plot.height(), f.labelFm.height()), Qt::AlignCenter, chart.yLabel);
    p.restore();
}

// Reference lines and vertical lines (a tune's rungs), labelled, under the data.
void drawGuides(QPainter &p, const ChartLayout &l, const ChartSpec &chart, const ChartFonts &f, qreal u)
{
    if (l.empty)
        return;
    const QRectF &plot = l.plot;
    for (const ChartReferenceLine &r : chart.referenceLines) {
        const qreal y = l.mapY(r.y);
        p.setPen(QPen(r.color, 1.0 * u, Qt::DashLine, Qt::FlatCap));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setFont(f.tickFont);
        p.setPen(r.color);
        p.drawText(
            QRectF(plot.left(), y - f.tickFm.height() - 1 * u, plot.width() - 4 * u, f.tickFm.height()),
            Qt::AlignRight | Qt::AlignBottom, r.label);
    }
    for (const ChartVerticalLine &v : chart.verticalLines) {
        const qreal x = l.mapX(v.x);
        p.setPen(QPen(v.color, 1.0 * u, Qt::DashLine, Qt::FlatCap));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.top()));
        p.setFont(f.tickFont);
        p.setPen(v.color);
        p.drawText(
            QRectF(x + 3 * u, plot.top(), f.tickFm.horizontalAdvance(v.label) + 2 * u, f.tickFm.height()),
            Qt::AlignLeft | Qt::AlignTop, v.label);
    }
}

// Series: error bars, then lines, then markers on top.
void drawSeries(QPainter &p, const ChartLayout &l, const ChartSpec &chart, qreal u)
{
    for (const ChartSeries &s : chart.series) {
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(s.color, 1.0 * u));
        for (int i = 0; i < s.points.size() && i < s.errorBars.size(); ++i) {
            const QPointF bar = s.errorBars[i];
            if (!isDrawnPoint(s.points[i]) || !isDrawnPoint(bar))
                continue;
            const qreal x = l.mapX(s.points[i].x());
            p.drawLine(QPointF(x, l.mapY(bar.x())), QPointF(x, l.mapY(bar.y())));
            p.drawLine(QPointF(x - 3 * u, l.mapY(bar.x())), QPointF(x + 3 * u, l.mapY(bar.x())));
            p.drawLine(QPointF(x - 3 * u, l.mapY(bar.y())), QPointF(x + 3 * u, l.mapY(bar.y())));
        }
        if (s.line) {
            QPainterPath path;
            bool open = false;
            for (const QPointF &pt : s.points) {
                if (!isDrawnPoint(pt)) {
                    open = false; // a gap in the measurements is a gap in the line
                    continue;
                }
                const QPointF at(l.mapX(pt.x()), l.mapY(pt.y()));
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
            if (isDrawnPoint(pt))
                drawMarker(p, QPointF(l.mapX(pt.x()), l.mapY(pt.y())), s.color, u);
        }
    }
}

// A parallel-coordinates chart's lines, in the order given (the last on top); a value
// missing on an axis is a gap.
void drawParallelLines(QPainter &p, const ChartLayout &l, const ChartSpec &chart, qreal u)
{
    const int n = int(l.parallelAxes.size());
    for (const ChartSeries &s : chart.series) {
        QPainterPath path;
        bool open = false;
        QList<QPointF> alone; // a value with no neighbour on either side: a marker shows it
        for (int k = 0; k < s.points.size(); ++k) {
            const QPointF pt = s.points[k];
            const int i = int(std::lround(pt.x()));
            const double y = isDrawnPoint(pt) && i >= 0 && i < n ? l.parallelY(i, pt.y()) : kNotMeasured;
            if (!std::isfinite(y)) {
                open = false;
                continue;
            }
            const QPointF at(l.parallelX(i), y);
            if (open) {
                path.lineTo(at);
            } else {
                path.moveTo(at);
                const bool nextOk = k + 1 < s.points.size() && isDrawnPoint(s.points[k + 1]);
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
}

// A parallel-coordinates chart's axes, their names and ticks, over the lines; each label on
// a white ground, so lines do not run through it.
void drawParallelAxes(QPainter &p, const ChartLayout &l, const ChartFonts &f, qreal u)
{
    const QRectF &plot = l.plot;
    for (int i = 0; i < l.parallelAxes.size(); ++i) {
        const qreal x = l.parallelX(i);
        p.setPen(QPen(kAxisColor, 1.0 * u));
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
        p.setFont(f.labelFont);
        p.setPen(kTextColor);
        const QString &name = l.parallelAxes[i].name;
        const qreal nameW = f.labelFm.horizontalAdvance(name) + 2 * u;
        p.drawText(QRectF(x - nameW / 2, plot.top() - 8 * u - f.labelFm.height(), nameW, f.labelFm.height()),
            Qt::AlignCenter, name);
        p.setFont(f.tickFont);
        for (const ChartTick &t : std::as_const(l.parallelTicks[i])) {
            const qreal y = l.parallelY(i, t.value);
            if (!std::isfinite(y))
                continue;
            p.setPen(QPen(kAxisColor, 0.8 * u));
            p.drawLine(QPointF(x, y), QPointF(x + 4 * u, y));
            const QRectF box(x + 5 * u, y - f.tickFm.height() / 2,
                f.tickFm.horizontalAdvance(t.label) + 3 * u, f.tickFm.height());
            p.fillRect(box, QColor(255, 255, 255, 215));
            p.setPen(kTextColor);
            p.drawText(box.adjusted(1 * u, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, t.label);
        }
    }
}

// The text over an empty plot.
void drawEmptyText(QPainter &p, const ChartLayout &l, const ChartSpec &chart)
{
    if (!l.empty)
        return;
    p.setPen(QColor(0x77, 0x77, 0x77));
    p.drawText(l.plot, Qt::AlignCenter, chart.emptyText);
}

void drawLegendScale(QPainter &p, const ChartLayout &l, const ChartSpec &chart, const ChartFonts &f, qreal u)
{
    if (chart.colorScale)
        drawColorScale(
            p, *chart.colorScale, l.legend.topLeft(), l.legendRowHeight, f.legendFont, f.legendFm, u);
}

// The legend's entries (swatch and name), in the painter's current font.
void drawLegendEntries(QPainter &p, const ChartLayout &l, const ChartSpec &chart, qreal u)
{
    for (const ChartLegendEntry &entry : l.legendEntries) {
        drawSwatch(p, chart.series[entry.series],
            QRectF(entry.at.x(), entry.at.y(), l.legendSwatchWidth, l.legendRowHeight), u);
        p.setPen(kTextColor);
        p.drawText(QRectF(entry.at.x() + l.legendSwatchWidth + 5 * u, entry.at.y(), l.legend.width(),
                       l.legendRowHeight),
            Qt::AlignLeft | Qt::AlignVCenter, entry.name);
    }
}

void paintParallelChart(QPainter &p, const QRectF &rect, const ChartSpec &chart, qreal u)
{
    const ChartFonts f(u, p.device());
    const ChartLayout l = layoutChart(chart, rect, f, u);
    drawGround(p, rect);
    drawTitle(p, l, chart, f);
    if (l.empty)
        p.setFont(f.labelFont);
    drawEmptyText(p, l, chart);
    drawParallelLines(p, l, chart, u);
    drawParallelAxes(p, l, f, u);
    drawLegendScale(p, l, chart, f, u);
    p.setFont(f.legendFont);
    drawLegendEntries(p, l, chart, u);
    p.restore();
}

} // namespace

void paintChart(QPainter &p, const QRectF &rect, const ChartSpec &chart, qreal u)
{
    if (!chart.parallelAxes.isEmpty()) {
        paintParallelChart(p, rect, chart, u);
        return;
    }
    const ChartFonts f(u, p.device());
    const ChartLayout l = layoutChart(chart, rect, f, u);
    drawGround(p, rect);
    drawTitle(p, l, chart, f);
    drawAxes(p, l, chart, f, rect, u);
    drawEmptyText(p, l, chart);
    drawGuides(p, l, chart, f, u);
    drawSeries(p, l, chart, u);
    p.setFont(f.legendFont);
    drawLegendScale(p, l, chart, f, u);
    drawLegendEntries(p, l, chart, u);
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

} // namespace scalelab::core
