#include "line_bodies.h"

#include "chart_line.h"

#include <QChart>
#include <QLineSeries>
#include <QPainter>
#include <QPolygonF>

namespace scalelab::app {

LineBodies::LineBodies(QChart *chart, const std::vector<std::unique_ptr<ChartLine>> *lines)
    : QGraphicsObject(chart)
    , m_lines(lines)
{
    // Above the markers (z 1) and bands, below the range bars (z 3), as the series are.
    setZValue(2);
    setCacheMode(QGraphicsItem::DeviceCoordinateCache);
    setAcceptedMouseButtons(Qt::NoButton); // the chart view's zoom and read-out see through it
}

void LineBodies::setFrame(const QRectF &plotArea, double x0, double x1, double y0, double y1)
{
    if (plotArea == m_plot && x0 == m_x0 && x1 == m_x1 && y0 == m_y0 && y1 == m_y1)
        return;
    if (plotArea != m_plot)
        prepareGeometryChange();
    m_plot = plotArea;
    m_x0 = x0;
    m_x1 = x1;
    m_y0 = y0;
    m_y1 = y1;
    update();
}

void LineBodies::paint(QPainter *painter, const QStyleOptionGraphicsItem *, QWidget *)
{
    if (!(m_x1 > m_x0) || !(m_y1 > m_y0) || m_plot.isEmpty())
        return;
    ++m_paints;
    painter->setClipRect(m_plot);
    // As Qt Charts maps a point of a value axis (XYDomain::calculateGeometryPoint).
    const double sx = m_plot.width() / (m_x1 - m_x0), sy = m_plot.height() / (m_y1 - m_y0);
    QPolygonF mapped;
    for (const auto &line : *m_lines)
        for (const Trace *trace : { &line->raw, &line->line }) {
            if (trace->painted.size() < 2 || !trace->body->isVisible())
                continue;
            mapped.resize(trace->painted.size());
            for (qsizetype i = 0; i < mapped.size(); ++i) {
                const QPointF &p = trace->painted[i];
                mapped[i] = QPointF(m_plot.left() + (p.x() - m_x0) * sx, m_plot.top() + (m_y1 - p.y()) * sy);
            }
            painter->setPen(trace->body->pen());
            painter->drawPolyline(mapped);
        }
}

} // namespace scalelab::app
