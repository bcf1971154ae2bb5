// The finished part of every line of a MetricChart (each Trace's body: the pixel columns its
// samples have left behind), painted by one graphics item instead of a QLineSeries each.
//
// Qt Charts re-computes a series' hit-test outline whenever its points or the axes change
// (about 1 µs per point): with eight runs, a smoothed and a raw body of ~2,400 points
// each, every step of the x axis's growth and every new smoothing weight cost ~40 ms
// before anything was painted, and every frame re-stroked those bodies in the regions
// the live tails dirtied. Here the bodies are mapped to the plot by the axes' ranges when
// they are painted, and the item keeps its pixels (DeviceCoordinateCache): a live frame
// blits them, and a change of axes or bodies paints ~40,000 points once, with no outline.
//
// The body's QLineSeries stays, empty: it carries the legend entry, the pen and whether
// the line is shown, as before; only lines with markers keep their points in it.
// Ownership: a child item of the QChart. Thread: GUI thread only.
#pragma once

#include <QGraphicsObject>
#include <QRectF>

#include <memory>
#include <vector>

class QChart;

namespace scalelab::app {

struct ChartLine;

class LineBodies : public QGraphicsObject {
    Q_OBJECT
public:
    // Paints the bodies of `lines` (MetricChart's, which outlive the item), in their order.
    LineBodies(QChart *chart, const std::vector<std::unique_ptr<ChartLine>> *lines);

    // Where the plot is and the ranges of its axes; repainted when any of them changed.
    void setFrame(const QRectF &plotArea, double x0, double x1, double y0, double y1);
    // A body's points or pen changed: paint them again.
    void invalidate() { update(); }
    // The number of times the bodies were painted (tests: a live frame paints none).
    int paints() const { return m_paints; }

    QRectF boundingRect() const override { return m_plot; }
    void paint(QPainter *painter, const QStyleOptionGraphicsItem *option, QWidget *widget) override;

private:
    const std::vector<std::unique_ptr<ChartLine>> *m_lines;
    QRectF m_plot;
    double m_x0 = 0, m_x1 = 1, m_y0 = 0, m_y1 = 1;
    int m_paints = 0;
};

} // namespace scalelab::app
