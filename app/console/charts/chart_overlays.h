// What a MetricChart draws over and under its lines, apart from the lines themselves:
// - vertical markers at points of the x axis (epoch boundaries, a run's start and end),
//   dotted (or dashed, for a change to the run: an elastic run's new size), in groups that
//   are added and removed together, each with a short label at the top (a label that would
//   overlap the one before it is left out);
// - range bars: an I-beam from a low to a high y at a point (the slowest and fastest of
//   its runs), in the point's colour, over the lines; removed with their group;
// - bands: a translucent area from each point's low to its high along x (the spread of
//   repeated runs), under the lines, smoothed as they are and reduced to the plot's pixel
//   width; a band is hidden while the line of the same id is;
// - a dashed reference line y = slope·x + intercept (the ideal speedup or efficiency).
// The reference line, the bands and the range bars count towards the y range: the
// chart's redraw asks for referencePoints() and extent(). The chart places markers, bars
// and bands after each redraw and whenever its plot area or x range moves
// (placeMarkers(), placeBands()), and recolours them with its palette (applyPalette()).
//
// Ownership: markers, range bars and bands are QGraphicsItems whose parent is the QChart,
// which owns them; ChartOverlays deletes those it removes and leaves the rest to the
// chart. The reference line is a QLineSeries added to the chart, which owns it. The
// MetricChart owns both the chart and its ChartOverlays.
// Thread: GUI thread only.
#pragma once

#include "axis_policy.h"
#include "chart_line.h"
#include "metric_series.h"

#include <QColor>
#include <QList>
#include <QPointF>
#include <QString>

#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

class QAbstractAxis;
class QChart;
class QFont;
class QGraphicsPathItem;
class QGraphicsSimpleTextItem;
class QLineSeries;
class QPainterPath;
class QValueAxis;

namespace scalelab::app {

// How the chart draws now, which is where its overlays go.
struct OverlayFrame {
    XAxis axis = XAxis::Step; // which x of a point counts
    bool log = false; // y drawn at log10(y)
    double smoothing = 0; // bands are smoothed as the lines are
    const QAbstractAxis *y = nullptr; // a QValueAxis, or a QCategoryAxis on a log scale
};

class ChartOverlays {
public:
    // Overlays of `chart`, placed along its x axis `x`. `lineHidden(id)`: whether the chart
    // has a line of that id and it is hidden (its band is hidden with it).
    ChartOverlays(QChart *chart, QValueAxis *x, std::function<bool(const QString &id)> lineHidden);
    ChartOverlays(const ChartOverlays &) = delete;
    ChartOverlays &operator=(const ChartOverlays &) = delete;

    // A vertical line at `at`, labelled at the top in a smaller `font`, in `group`; styled by
    // the next applyPalette(), dotted or dashed as `style` says.
    void addVerticalMarker(const QString &group, const MetricPoint &at, const QString &label,
        const QFont &font, const MarkerStyle &style = {});
    // A vertical bar from `low` to `high` (y units) at `at`, with caps, in `color`.
    void addRangeBar(
        const QString &group, const MetricPoint &at, double low, double high, const QColor &color);
    // Removes the group's markers and range bars.
    void removeGroup(const QString &group);
    // Where markers are drawn now (x on `axis`) and what they say, left to right.
    QList<std::pair<double, QString>> shownVerticalMarkers(XAxis axis) const;
    // The bars drawn now: x on `axis` and their y span, left to right.
    QList<std::tuple<double, double, double>> shownRangeBars(XAxis axis) const;

    // Replaces the band of that id; `color` is made translucent.
    void setBand(const QString &id, std::vector<BandPoint> points, const QColor &color);
    // Whether there was a band of that id to remove.
    bool removeBand(const QString &id);
    // The band's outline as drawn (chart coordinates): empty when there is none in view.
    QPainterPath bandPath(const QString &id) const;

    // The reference line, created on the first call attached to `x` and `y`.
    void setReferenceLine(const QString &label, double slope, double intercept, QAbstractAxis *y);
    QLineSeries *referenceLine() const { return m_reference; }
    // Its two ends at x0 and x1, as drawn (log10(y) on a log scale).
    QList<QPointF> referencePoints(double x0, double x1, bool log) const;

    // The y values of the bands and range bars that the y range must hold when x spans
    // [x0, x1]: they are seen whole, their ends drawn as the lines are.
    YExtent extent(const OverlayFrame &frame, double x0, double x1) const;

    // Markers and range bars at their places in the plot area now, or hidden outside it.
    void placeMarkers(const OverlayFrame &frame);
    // Bands' outlines in the plot area now.
    void placeBands(const OverlayFrame &frame);
    // Reference line and markers in `text`'s colour (range bars keep their own).
    void applyPalette(const QColor &text);

private:
    struct VerticalMarker {
        QString group;
        MetricPoint at;
        QGraphicsPathItem *line = nullptr; // owned by the chart's scene
        QGraphicsSimpleTextItem *label = nullptr; // none for a range bar
        std::optional<std::pair<double, double>> span; // a range bar's y span; none: full height
        QColor color; // a range bar's; markers take the palette's
        Qt::PenStyle pen = Qt::DotLine; // a marker's
    };
    struct Band {
        std::vector<BandPoint> points;
        QGraphicsPathItem *item = nullptr; // owned by the chart's scene
    };

    QChart *m_chart = nullptr;
    QValueAxis *m_x = nullptr;
    std::function<bool(const QString &id)> m_lineHidden;
    std::vector<VerticalMarker> m_markers;
    std::map<QString, Band> m_bands;
    QLineSeries *m_reference = nullptr;
    double m_referenceSlope = 0, m_referenceIntercept = 0;
};

} // namespace scalelab::app
