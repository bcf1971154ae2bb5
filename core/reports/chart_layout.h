// The report charts' layout: where paintChart() (chart_painter.h) puts a chart's title,
// plot, axes, ticks and legend inside its rectangle, worked out from the ChartSpec and the
// fonts' metrics before anything is drawn. A pure function of its arguments: the draw passes
// only read its value, and tests assert on it rather than on the SVG.
//
// Measuring text needs a QGuiApplication (QT_QPA_PLATFORM=offscreen is enough).
#pragma once

#include "chart_painter.h"

#include <QFont>
#include <QFontMetricsF>
#include <QList>
#include <QPointF>
#include <QRectF>
#include <QString>

class QPaintDevice;

namespace scalelab::core {

// One tick of an axis: where it sits, in the axis' values, and what it reads.
struct ChartTick {
    double value = 0;
    QString label;
};

// A named series' entry in the legend: its swatch's top-left, and the series it stands for.
struct ChartLegendEntry {
    QPointF at;
    QString name;
    int series = 0; // index into ChartSpec::series
};

// Where paintChart() puts each part of a chart: worked out from the spec and the fonts'
// metrics before anything is drawn, then only read by the draw passes.
struct ChartLayout {
    bool empty = true; // no point is drawn: the plot shows the spec's emptyText
    QRectF title;
    QRectF plot; // the frame the data is drawn in

    // A line or point chart: each axis' range (holding every point and line) and ticks.
    double xLo = 0, xHi = 1, yLo = 0, yHi = 1;
    QList<ChartTick> xTicks, yTicks;
    qreal yTickWidth = 0; // the widest y tick label

    // A parallel-coordinates chart: its axes as drawn (ranges widened to hold every value)
    // and each one's ticks.
    QList<ChartParallelAxis> parallelAxes;
    QList<QList<ChartTick>> parallelTicks;

    // The legend, under the plot: the colour scale's row first (legendScaleHeight; none when 0),
    // then the entries in rows that wrap at the chart's width.
    QRectF legend;
    qreal legendRowHeight = 0;
    qreal legendSwatchWidth = 0; // an entry's name follows its swatch
    qreal legendScaleHeight = 0;
    QList<ChartLegendEntry> legendEntries;

    // A value's place in the plot (a line or point chart).
    qreal mapX(double x) const;
    qreal mapY(double y) const;
    // A parallel-coordinates axis' x, and a value's y on it (NaN when it has no place).
    qreal parallelX(int axis) const;
    qreal parallelY(int axis, double value) const;
};

// A chart's four fonts at scale `unit`, and their metrics on the device it is drawn on
// (nullptr: at Qt's default resolution; a pixel-sized font measures the same).
struct ChartFonts {
    ChartFonts(qreal unit, const QPaintDevice *device);
    const QFont titleFont, labelFont, tickFont, legendFont;
    const QFontMetricsF titleFm, labelFm, tickFm, legendFm;
    const qreal pad; // around the chart
};

// The layout of `chart` in `rect` at `unit` (see paintChart()), with the fonts measured for
// `device` (nullptr: at Qt's default resolution; a pixel-sized font measures the same).
ChartLayout layoutChart(
    const ChartSpec &chart, const QRectF &rect, qreal unit = 1.0, const QPaintDevice *device = nullptr);
// The same with the fonts made already (paintChart's, for its painter's device).
ChartLayout layoutChart(const ChartSpec &chart, const QRectF &rect, const ChartFonts &fonts, qreal unit);

} // namespace scalelab::core
