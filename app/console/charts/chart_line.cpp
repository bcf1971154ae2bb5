#include "chart_line.h"

#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPen>

#include <algorithm>

namespace scalelab::app {

namespace {

constexpr qreal kLineWidth = 1.6;
// Dense plots: lines of at most one pixel take the raster engine's fast path (a cosmetic
// stroker); wider ones are stroked segment by segment, several times slower for
// 2,000-point lines.
constexpr qreal kDenseLineWidth = 1.0;
constexpr qreal kMarkerLineWidth = 2.0; // few points (per epoch): worth a bolder line
constexpr qreal kRawAlpha = 0.28; // the raw line behind a smoothed one, as TensorBoard
// A live line is drawn as two series: the pixel columns its samples have left behind
// (unchanged until the axes move) and a tail of at most this many columns that takes the
// new samples. Qt Charts re-strokes a series whenever its points change (a hit-test
// outline: about 1 µs per point), so a frame costs ~100 points per live line, not 2,400.
constexpr int kTailColumns = 48;

} // namespace

QLegendMarker *markerOf(QChart *chart, QAbstractSeries *series)
{
    const auto markers = chart->legend()->markers(series);
    return markers.isEmpty() ? nullptr : markers.front();
}

QList<QPointF> Trace::points() const
{
    QList<QPointF> all = layered ? painted : body->points();
    // After a body, the tail opens with the last sample before its columns, which lies in
    // the body's last column: drawn there already.
    all.append(all.isEmpty() ? tail->points() : tail->points().mid(1));
    return all;
}

ChartLine::ChartLine(QChart *chart, QAbstractAxis *x, QAbstractAxis *y, const QString &lineId,
    const QString &lineLabel, const SeriesStyle &lineStyle, const QColor &lineColor)
    : id(lineId)
    , label(lineLabel)
    , style(lineStyle)
    , color(lineColor)
{
    for (Trace *trace : { &raw, &line }) {
        trace->body = new QLineSeries;
        trace->tail = new QLineSeries;
    }
    // Few points, each marked: Qt Charts draws those, markers and all.
    raw.layered = line.layered = !style.markers;
    line.body->setName(label);
    line.body->setObjectName(id);
    for (auto *drawn : series()) { // raw lines first: drawn behind the smoothed ones
        chart->addSeries(drawn);
        drawn->attachAxis(x);
        drawn->attachAxis(y);
        if (auto *marker = markerOf(chart, drawn); marker && drawn != line.body)
            marker->setVisible(false);
    }
}

bool ChartLine::draw(XAxis axis, double x0, double x1, int pixels, double smoothing, bool log,
    const StagePoints &stage, bool &reduceBudget)
{
    const bool smoothed = style.smoothable && smoothing > 0;
    const DrawKey key { axis, x0, x1, pixels, smoothed ? smoothing : 0.0, log, visible };
    const bool regrid = key != drawnFor;
    if (!regrid && data.size() == drawnSamples && !(stale && reduceBudget))
        return false;
    DrawKey narrower = key;
    narrower.x1 = drawnFor.x1;
    const bool grown = regrid && narrower == drawnFor && x1 > drawnFor.x1 && raw.layered && line.layered;
    bool bodiesChanged = false;
    auto place = [&](Trace &trace, bool body, QList<QPointF> points) {
        if (!body || !trace.layered) {
            stage(body ? trace.body : trace.tail, std::move(points));
        } else if (points != trace.painted) {
            trace.painted = std::move(points);
            bodiesChanged = true;
        }
    };
    const bool drawable = visible && data.hasAxis(axis);
    // Columns left of the newest sample's are complete: samples only append. One more
    // stays in the tail, against rounding at the boundary.
    const int complete
        = drawable ? std::max(0, core::pixelColumn(data.column(axis).back(), x0, x1, pixels) - 1) : 0;
    auto drawColumns = [&](int first, int last, YExtent &extent, bool body) {
        extent = {};
        QList<QPointF> shownPoints, rawPoints;
        if (drawable) {
            shownPoints = data.downsample(axis, x0, x1, pixels, smoothed, first, last);
            if (smoothed)
                rawPoints = data.downsample(axis, x0, x1, pixels, false, first, last);
            for (auto *points : { &shownPoints, &rawPoints }) {
                if (log)
                    toLogPlot(*points);
                extent.add(*points, x0, x1);
            }
        }
        place(line, body, std::move(shownPoints));
        place(raw, body, std::move(rawPoints));
    };
    // Where the bodies end on the new grid: the tail starts in that column (a kept body).
    const int keptSplit = grown && drawnFor.pixels > 0
        ? std::min(core::pixelColumn(
                       drawnFor.x0 + (drawnFor.x1 - drawnFor.x0) * split / drawnFor.pixels, x0, x1, pixels),
            complete)
        : split;
    if ((grown || stale) && !reduceBudget && drawable && complete - keptSplit <= kTailColumns) {
        split = keptSplit; // keep the bodies
        stale = true;
    } else if (regrid || stale || complete < split || complete - split > kTailColumns) {
        if (grown || stale)
            reduceBudget = false;
        split = complete;
        stale = false;
        drawColumns(0, split, bodyExtent, true);
    }
    drawColumns(split, pixels, tailExtent, false);
    drawnFor = key;
    drawnSamples = data.size();
    return bodiesChanged;
}

void ChartLine::applyStyle(bool dense, const QColor &base)
{
    // Default square caps and bevel joins: round ones make the stroker compute arcs at every
    // vertex, which costs more than everything else in a frame of 1,000-point lines.
    const qreal width = style.markers ? kMarkerLineWidth : dense ? kDenseLineWidth : kLineWidth;
    for (auto *drawn : { line.body, line.tail }) {
        drawn->setPen(QPen(color, width, style.pen));
        drawn->setColor(color);
        if (style.markers) {
            drawn->setPointsVisible(true);
            drawn->setMarkerSize(4); // Qt 6.4 draws it as the radius
        }
    }
    // Opaque, mixed with the background by hand: blending every pixel of a dense line costs
    // more than drawing it.
    const QColor faint = QColor::fromRgbF(color.redF() * kRawAlpha + base.redF() * (1 - kRawAlpha),
        color.greenF() * kRawAlpha + base.greenF() * (1 - kRawAlpha),
        color.blueF() * kRawAlpha + base.blueF() * (1 - kRawAlpha));
    for (auto *drawn : { raw.body, raw.tail })
        drawn->setPen(QPen(faint, kDenseLineWidth));
}

void ChartLine::updateLegendMarker(QChart *chart, const QColor &text)
{
    QLegendMarker *marker = markerOf(chart, line.body);
    if (!marker)
        return;
    marker->setVisible(inLegend); // hiding a series hides its marker; we keep it to click again
    const qreal alpha = visible ? 1.0 : 0.35;
    QColor labelColor = text;
    labelColor.setAlphaF(alpha);
    marker->setLabelBrush(labelColor);
    QColor swatch = color;
    swatch.setAlphaF(alpha);
    marker->setBrush(swatch);
    marker->setPen(QPen(swatch));
}

} // namespace scalelab::app
