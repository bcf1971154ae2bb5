// The report charts' engine: line, point and parallel-coordinates charts painted with
// QPainter, so that one piece of code draws into SVG (inlined in the HTML report), into the
// PDF report and into any other paint device.
//
// A ChartSpec is a plain value: axes, series and reference lines; the builders that fill one
// from a study's or a tune's results are in report_charts.h. paintChart() lays it out inside
// a rectangle (layoutChart() in chart_layout.h, a pure function: title, plot with ticked and
// labelled axes in round steps from nice_ticks.h, legend below), then draws it in passes that
// only read the layout. The axis ranges always contain every point, so nothing needs clipping (the SVG
// engine does not clip), and every reference line with room around it, so none lies on the
// frame. The painter only reads the spec; the caller owns both it and the paint device.
//
// Painting text needs a QGuiApplication (QT_QPA_PLATFORM=offscreen is enough); the
// functions are not thread-safe beyond what QPainter is: paint from the GUI thread.
#pragma once

#include <QByteArray>
#include <QColor>
#include <QList>
#include <QPointF>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <QStringList>

#include <optional>

class QPainter;

namespace scalelab::core {

struct ChartSeries {
    QString name; // legend entry; empty = not listed (e.g. a run's repeat)
    QList<QPointF> points; // points with a NaN coordinate are skipped
    QList<QPointF> errorBars; // optional, one (low, high) per point, drawn as a vertical bar
    QColor color;
    Qt::PenStyle style = Qt::SolidLine;
    qreal width = 1.5; // pen width, in chart units (CSS px / PDF points)
    bool line = true;
    bool markers = false;
};

struct ChartReferenceLine {
    double y = 0;
    QString label; // drawn at the right end, above the line
    QColor color;
};

// A vertical line across the plot at x (a tune's rung), labelled at its top.
struct ChartVerticalLine {
    double x = 0;
    QString label;
    QColor color;
};

// A colour legend: `colors` spread evenly from left to right, `fromText` under the left end,
// `toText` under the right, `label` before them (e.g. how a parallel-coordinates chart's
// lines are coloured).
struct ChartColorScale {
    QString label;
    QString fromText;
    QString toText;
    QList<QColor> colors;
};

// One axis of a parallel-coordinates chart.
struct ChartParallelAxis {
    QString name; // over the axis
    bool log = false; // values spread in log space (all > 0)
    QStringList categories; // a category axis: values are indices into it, spread evenly
    double lo = 0; // numeric axes: the range shown (widened to hold every value)
    double hi = 1;
    bool percent = false; // ticks read "70%"
};

struct ChartSpec {
    QString title;
    QString xLabel; // with its unit, e.g. "Wall-clock (s)"
    QString yLabel;
    QList<ChartSeries> series;
    QList<ChartReferenceLine> referenceLines;
    bool xIntegerTicks = false; // workers, epochs
    bool yPercent = false; // y values are fractions, ticks read "70%"
    std::optional<double> yFloor; // include this value in the y range (e.g. 0)
    std::optional<double> yCeiling;
    QString emptyText = QStringLiteral("No measured values yet");
    QList<ChartVerticalLine> verticalLines; // under the data; the x range holds them
    std::optional<ChartColorScale> colorScale; // the legend's first row
    // Not empty: a parallel-coordinates chart. Each series is one line across the axes,
    // point i = (i, its value on axis i); a NaN value leaves a gap. x/y labels are unused.
    QList<ChartParallelAxis> parallelAxes;
};

// `unit` scales every length and font size: 1 for SVG (CSS pixels), the device units per
// point for a high-resolution PDF.
void paintChart(QPainter &painter, const QRectF &rect, const ChartSpec &chart, qreal unit = 1.0);

// The chart as a standalone SVG document of `size` CSS pixels (no XML prolog, so it can be
// inlined in HTML).
QByteArray chartSvg(const ChartSpec &chart, const QSizeF &size);

// Whether paintChart() draws a point (or counts it in an axis range): both coordinates
// finite. Any other point is a gap in its line.
bool isDrawnPoint(QPointF point);

} // namespace scalelab::core
