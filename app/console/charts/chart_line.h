// One line of a MetricChart as Qt Charts draws it: the samples (MetricSeries), how the line
// looks, and the four QLineSeries that draw it. The shown values (smoothed, or raw while
// smoothing is off) are one Trace and the raw values, faintly behind a smoothed line,
// another; each Trace is a body that draws the pixel columns the samples have left
// behind (untouched while the axes hold still) and a tail of a few dozen columns that
// takes the new samples, so a live frame re-strokes ~100 points per line, not thousands.
// draw() reduces the samples to the plot's pixel width (min/max per column) and, on a log
// scale, to log10(y); MetricChart decides the axes and applies the staged points.
//
// Ownership: the constructor adds the four series to the QChart it is given, which owns
// them from then on; removing a line from the chart (and deleting its series) is
// MetricChart's. A ChartLine is MetricChart's, one per series id.
// Thread: GUI thread only.
#pragma once

#include "axis_policy.h"
#include "metric_series.h"

#include <QColor>
#include <QList>
#include <QPointF>
#include <QString>

#include <array>
#include <cstddef>
#include <functional>

class QAbstractAxis;
class QAbstractSeries;
class QChart;
class QLegendMarker;
class QLineSeries;

namespace scalelab::app {

struct SeriesStyle {
    QColor color; // invalid: the chart picks the next colour of its cycle
    Qt::PenStyle pen = Qt::SolidLine;
    bool markers = false; // draw the samples too (per-epoch series with few points)
    bool smoothable = true; // smoothing applies to this series
};

// How a vertical marker looks: dotted, for a boundary the run passes (an epoch's end, a
// phase, a run's start and end); dashed and stronger, for a change to the run itself (an
// elastic run's new size). `toolTip` says more than the short label does, on hover.
struct MarkerStyle {
    Qt::PenStyle pen = Qt::DotLine;
    QString toolTip;
};

// The legend entry of a series (none when the legend has no entry for it).
QLegendMarker *markerOf(QChart *chart, QAbstractSeries *series);

// The grid a line was last drawn on; while it holds, finished pixel columns keep their points.
struct DrawKey {
    XAxis axis = XAxis::Step;
    double x0 = 0, x1 = 0;
    int pixels = 0;
    double smoothing = 0;
    bool log = false;
    bool visible = false;
    bool operator==(const DrawKey &) const = default;
};

// One drawn line: finished columns and the live tail, same pen. The finished columns of a
// line without markers are painted by the chart's LineBodies (`painted`, in plot
// coordinates); the body series then stays empty and carries the legend entry and pen.
struct Trace {
    QLineSeries *body = nullptr; // owns the legend entry
    QLineSeries *tail = nullptr;
    bool layered = true; // the body's points are `painted` by LineBodies, not in `body`
    QList<QPointF> painted;
    QList<QPointF> points() const;
};

// Gives a series the points a redraw computed for it (MetricChart applies them all at once).
using StagePoints = std::function<void(QLineSeries *line, QList<QPointF> points)>;

struct ChartLine {
    // Adds the line's series to `chart` on axes `x` and `y`, raw ones first (drawn behind the
    // smoothed ones); only the shown body keeps a legend entry, named `label`.
    ChartLine(QChart *chart, QAbstractAxis *x, QAbstractAxis *y, const QString &id, const QString &label,
        const SeriesStyle &style, const QColor &color);
    ChartLine(const ChartLine &) = delete;
    ChartLine &operator=(const ChartLine &) = delete;

    std::array<QLineSeries *, 4> series() const { return { raw.body, raw.tail, line.body, line.tail }; }

    // Stages new points for whatever changed since the last draw (the grid, or samples
    // appended): the tail only while the grid holds and the tail stays short, else the
    // bodies too; bodyExtent and tailExtent then hold what each draws inside [x0, x1].
    // `smoothing` is the chart's weight: a line that is not smoothable is drawn raw.
    // True when a body LineBodies paints changed (it is to be painted again).
    // `reduceBudget`: whether this draw may reduce bodies it could keep. When only the x
    // axis grew, the bodies' points (data coordinates, drawn where they lie) stay correct,
    // only denser than the new grid asks: without the budget a line keeps them, `stale`,
    // and its tail starts where they end; with it, it reduces them again and spends it.
    [[nodiscard]] bool draw(XAxis axis, double x0, double x1, int pixels, double smoothing, bool log,
        const StagePoints &stage, bool &reduceBudget);
    // Pens: thin (`dense`), or bolder with markers; the raw line mixed with `base`, the background.
    void applyStyle(bool dense, const QColor &base);
    // The legend entry shown unless `inLegend` is false, dimmed while hidden; labels in `text`.
    void updateLegendMarker(QChart *chart, const QColor &text);

    QString id;
    QString label;
    SeriesStyle style;
    QColor color;
    MetricSeries data;
    Trace line; // smoothed (or raw while smoothing is off)
    Trace raw; // faint raw values behind a smoothed line
    DrawKey drawnFor;
    std::size_t drawnSamples = static_cast<std::size_t>(-1);
    int split = 0; // columns [0, split) are drawn by the bodies, the rest by the tails
    bool stale = false; // the bodies are of an earlier, narrower grid (see draw())
    YExtent bodyExtent, tailExtent; // what each draws: the y range holds both
    bool visible = true;
    bool inLegend = true; // a hidden line keeps its (dimmed) legend entry unless told not to
};

} // namespace scalelab::app
