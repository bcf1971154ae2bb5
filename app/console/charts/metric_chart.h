// A live line chart of training metrics (Qt Charts), built to stay interactive with
// several runs of a million points each:
// - named series, several runs overlaid; clicking a legend entry hides or shows its line;
// - x axis by optimizer step, epoch, wall-clock time (or workers, for scaling charts);
// - TensorBoard-style smoothing (debiased EMA, weight in [0, 0.999]) with the raw line
//   kept faintly behind, and a logarithmic y axis;
// - reference lines y = a·x + b (the ideal speedup or efficiency);
// - vertical markers at points of the x axis (epoch boundaries, a run's start and end,
//   dotted; an elastic run's change of size, dashed), in groups that are added and
//   removed together, each with a short label at the top;
// - hover read-out of the nearest sample; horizontal rubber-band zoom, double-click to
//   reset; export as PNG or SVG (context menu or exportPng()/exportSvg()).
// Redraws are coalesced: append() schedules one redraw within 40 ms, and a redraw
// reduces every series to the plot's pixel width (min/max per column). Each line is two
// parts: the columns its samples have left behind (its body), untouched while the axes
// hold still, and a short tail, a Qt series, that takes the new samples, so a live frame
// re-strokes ~100 points per line instead of thousands. The bodies of all lines are
// painted by one cached item (LineBodies, line_bodies.h) rather than by Qt Charts, whose
// series re-compute an outline of every point when the axes move: a live frame blits
// them, and moving the axes (in steps, 10 % headroom) or a new smoothing weight paints
// them once. Lines with markers (few points) are Qt series throughout.
// Colours come from the widget's palette, so light and dark themes both read.
//
// The widget holds the axes, the coalesced redraw, the hover, zoom and context menu, and
// hands the rest to its parts: each line is a ChartLine (chart_line.h), what is drawn
// over and under the lines (markers, range bars, bands, the reference line) is its
// ChartOverlays (chart_overlays.h), axis ranges and ticks are decided in axis_policy.h,
// the read-out's nearest sample in chart_readout.h, and files written by chart_export.h.
// Ownership: the chart owns its lines and overlays; their Qt Charts series and graphics
// items belong to its QChart, which its QChartView (a child widget) owns.
// GUI thread only; feed it from other threads through ChartFeed.
#pragma once

#include "chart_line.h"
#include "chart_readout.h"
#include "core_status.h"
#include "metric_series.h"

#include <QColor>
#include <QList>
#include <QPointF>
#include <QString>
#include <QTimer>
#include <QWidget>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

class QAbstractAxis;
class QPainterPath;
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace scalelab::app {

class ChartOverlays;
class LineBodies;
struct OverlayFrame;

class MetricChart : public QWidget {
    Q_OBJECT
public:
    static constexpr int kRedrawIntervalMs = 40; // ~25 frames/s at most

    MetricChart(const QString &title, const QString &yTitle, QWidget *parent = nullptr);
    ~MetricChart() override;

    // Series, identified by `id`; `label` is what the legend and the read-out say.
    void addSeries(const QString &id, const QString &label, const SeriesStyle &style = {});
    bool hasSeries(const QString &id) const;
    void removeSeries(const QString &id);
    void removeAllSeries();
    QStringList seriesIds() const;
    std::size_t pointCount(const QString &id) const;
    const MetricSeries *data(const QString &id) const;

    // Samples for a series added before; schedules a redraw. Returns how many were kept.
    std::size_t append(const QString &id, const MetricPoint &point);
    std::size_t append(const QString &id, const std::vector<MetricPoint> &points);

    // A dashed line y = slope·x + intercept across the x range (e.g. ideal speedup).
    void setReferenceLine(const QString &label, double slope, double intercept);

    // A vertical line at `at` (on each x axis it gives), labelled at the top, in `group`;
    // dotted unless `style` says otherwise.
    void addVerticalMarker(
        const QString &group, const MetricPoint &at, const QString &label, const MarkerStyle &style = {});
    void removeVerticalMarkers(const QString &group);
    // Where markers are drawn now (x in the axis' units) and what they say, left to right.
    QList<std::pair<double, QString>> shownVerticalMarkers() const;
    // A vertical bar from `low` to `high` (y units) at `at`, with caps: the spread of a point
    // (the slowest and fastest of its runs). Removed with its group.
    void addRangeBar(
        const QString &group, const MetricPoint &at, double low, double high, const QColor &color);
    // The bars drawn now: x and their y span, left to right.
    QList<std::tuple<double, double, double>> shownRangeBars() const;
    // A shaded band from each point's low to its high along x (the spread of repeated runs),
    // in `color` made translucent, under the lines and smoothed as they are; its ends count
    // towards the y range. Replaces the band of that id.
    void setBand(const QString &id, std::vector<BandPoint> points, const QColor &color);
    void removeBand(const QString &id);
    // The band's outline as drawn (chart coordinates): empty when there is none in view.
    QPainterPath bandPath(const QString &id) const;

    void setXAxis(XAxis axis);
    XAxis xAxis() const { return m_xAxis; }
    void setSmoothing(double weight); // clamped to [0, 0.999]
    double smoothing() const { return m_smoothing; }
    void setLogScale(bool on);
    bool logScale() const { return m_logScale; }
    // Hidden series keep their data; the legend entry stays, dimmed, unless `inLegend` is
    // false (a line another stands for, as a repeated run under its mean).
    void setSeriesVisible(const QString &id, bool visible, bool inLegend = true);
    bool isSeriesVisible(const QString &id) const;
    // The linear y axis always spans at least [low, high] (0–100 for a percentage).
    void setYInclude(double low, double high);
    // The linear y range while nothing is drawn (0–1 unless set): 0–100 for a percentage.
    void setYEmptyRange(double low, double high);
    void setXRange(double from, double to); // zoom; resetZoom() follows the data again
    void resetZoom();

    // The nearest sample to a point of the chart view (viewport coordinates).
    std::optional<ReadOut> readOutAt(const QPoint &viewPosition) const;

    core::Status exportPng(const QString &path);
    core::Status exportSvg(const QString &path);

    void scheduleRedraw();
    // A redraw is scheduled and has not run yet (tests and screenshots wait for it to be false).
    bool redrawPending() const { return m_redrawTimer.isActive(); }
    // Redraws now: one replace() per line. The coalescing timer calls this.
    void redraw();

    QChart *chart() const { return m_chart; }
    QChartView *view() const { return m_view; }
    QAbstractAxis *xAxisItem() const;
    QAbstractAxis *yAxisItem() const { return m_yAxis; }
    // The series that carries a line's legend entry and style. A line is drawn as two
    // series (finished pixel columns, then a live tail); drawnPoints() is all of it.
    QLineSeries *line(const QString &id) const;
    // What is drawn for a series (smoothed while smoothing is on), in order.
    QList<QPointF> drawnPoints(const QString &id) const;
    // The same where it is plotted: at log10(y) on a log scale.
    QList<QPointF> plottedPoints(const QString &id) const;
    // The item that paints the lines' finished columns.
    LineBodies *bodies() const { return m_bodies; }
    // The faint raw line behind a smoothed one (empty while smoothing is off).
    QList<QPointF> drawnRawPoints(const QString &id) const;

    static QColor cycleColor(int index);

Q_SIGNALS:
    void redrawn();

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    ChartLine *find(const QString &id) const;
    // Where the overlays go: the x axis' choice, the y axis and its scale, the smoothing.
    OverlayFrame overlayFrame() const;
    void placeVerticalMarkers();
    void placeBands();
    // Tells the bodies where the plot and the axes are now.
    void placeBodies();
    core::Status exportWith(const std::function<core::Status()> &write);
    void rebuildYAxis();
    void applyPalette();
    void showContextMenu(const QPoint &position);
    void showReadOut(const QPoint &position);
    void setAxisRange(QValueAxis *axis, double from, double to);
    // Log scale: the y range [from, to] in log10(y), labelled at decades (and between them
    // over a short range).
    void setLogTicks(double from, double to);
    // Drawn points back in the data's units (10^y on a log scale).
    QList<QPointF> fromPlot(QList<QPointF> points) const;

    QString m_yTitle;
    QChart *m_chart = nullptr;
    QChartView *m_view = nullptr;
    QValueAxis *m_x = nullptr;
    QAbstractAxis *m_yAxis = nullptr;
    QScatterSeries *m_hover = nullptr;
    std::vector<std::unique_ptr<ChartLine>> m_entries;
    std::unique_ptr<ChartOverlays> m_overlays; // markers, range bars, bands, the reference line
    LineBodies *m_bodies = nullptr; // a child item of m_chart
    int m_nextColor = 0;
    XAxis m_xAxis = XAxis::Step;
    double m_smoothing = 0;
    bool m_logScale = false;
    bool m_dense = false; // more points drawn than antialiasing is worth: thin, aliased lines
    std::optional<std::pair<double, double>> m_zoom;
    std::optional<std::pair<double, double>> m_yInclude;
    std::pair<double, double> m_yEmpty { 0, 1 };
    bool m_applyingRange = false;
    bool m_rubberBandReleased = false;
    QTimer m_redrawTimer;
};

} // namespace scalelab::app
