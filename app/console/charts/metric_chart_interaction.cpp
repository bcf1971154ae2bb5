// MetricChart, what a user does with a chart: hover for a reading, zoom with the rubber band
// and double-click back, the context menu and the PNG/SVG export. The chart itself (its lines,
// axes and redraw) is metric_chart.cpp; the contract is metric_chart.h.
#include "metric_chart.h"

#include "chart_export.h"
#include "chart_readout.h"
#include "line_bodies.h"

#include <QChartView>
#include <QContextMenuEvent>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QMouseEvent>
#include <QScatterSeries>
#include <QTimer>
#include <QToolTip>

namespace scalelab::app {
namespace {

constexpr int kHoverRadius = 24; // pixels around the plot area that still read out

} // namespace

bool MetricChart::eventFilter(QObject *watched, QEvent *event)
{
    if (watched != m_view->viewport())
        return QWidget::eventFilter(watched, event);
    switch (event->type()) {
    case QEvent::MouseMove:
        showReadOut(static_cast<QMouseEvent *>(event)->position().toPoint());
        break;
    case QEvent::Leave:
        QToolTip::hideText();
        m_hover->clear();
        break;
    case QEvent::ToolTip:
        // The mouse rests: over a point, its read-out stays (the view's hint about zooming
        // would replace it); elsewhere the hint shows.
        if (readOutAt(static_cast<QHelpEvent *>(event)->pos())) {
            showReadOut(static_cast<QHelpEvent *>(event)->pos());
            return true;
        }
        break;
    case QEvent::MouseButtonDblClick:
        resetZoom();
        return true;
    case QEvent::MouseButtonRelease:
        // QChartView zooms out on a right click; the context menu is ours instead.
        if (static_cast<QMouseEvent *>(event)->button() == Qt::RightButton)
            return true;
        // QChartView zooms when it handles this release, right after us.
        m_rubberBandReleased = true;
        QTimer::singleShot(0, this, [this] { m_rubberBandReleased = false; });
        break;
    case QEvent::ContextMenu:
        showContextMenu(static_cast<QContextMenuEvent *>(event)->pos());
        return true;
    default:
        break;
    }
    return QWidget::eventFilter(watched, event);
}

std::optional<ReadOut> MetricChart::readOutAt(const QPoint &viewPosition) const
{
    const QPointF at = m_chart->mapFromScene(m_view->mapToScene(viewPosition));
    const QRectF area = m_chart->plotArea();
    if (!area.adjusted(-kHoverRadius, -kHoverRadius, kHoverRadius, kHoverRadius).contains(at))
        return std::nullopt;
    const QPointF value = m_chart->mapToValue(at, m_hover);
    return nearestSample(m_entries, m_xAxis, m_logScale, value.x(), at,
        [this](const QPointF &drawn) { return m_chart->mapToPosition(drawn, m_hover); });
}

void MetricChart::showReadOut(const QPoint &position)
{
    const auto r = readOutAt(position);
    if (!r) {
        QToolTip::hideText();
        m_hover->clear();
        return;
    }
    const ChartLine *e = find(r->seriesId);
    m_hover->setBorderColor(e->color);
    m_hover->replace({ QPointF(r->point.x[int(m_xAxis)], m_logScale ? std::log10(r->shown) : r->shown) });
    QToolTip::showText(m_view->viewport()->mapToGlobal(position), r->text(), m_view->viewport());
}

void MetricChart::showContextMenu(const QPoint &position)
{
    QMenu menu(this);
    const QString title = m_chart->title().isEmpty() ? tr("chart") : m_chart->title();
    menu.addAction(tr("Export as PNG…"), this, [this, title] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export chart"), title + QStringLiteral(".png"), tr("PNG image (*.png)"));
        if (path.isEmpty())
            return;
        if (const core::Status written = exportPng(path); !written)
            QMessageBox::warning(this, tr("Export chart"), written.error());
    });
    menu.addAction(tr("Export as SVG…"), this, [this, title] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export chart"), title + QStringLiteral(".svg"), tr("SVG image (*.svg)"));
        if (path.isEmpty())
            return;
        if (const core::Status written = exportSvg(path); !written)
            QMessageBox::warning(this, tr("Export chart"), written.error());
    });
    menu.addSeparator();
    menu.addAction(tr("Reset zoom"), this, &MetricChart::resetZoom)->setEnabled(m_zoom.has_value());
    menu.exec(m_view->viewport()->mapToGlobal(position));
}

core::Status MetricChart::exportWith(const std::function<core::Status()> &write)
{
    // Painted afresh into the file (vectors in an SVG), not copied from the screen's cache.
    const QGraphicsItem::CacheMode cache = m_bodies->cacheMode();
    m_bodies->setCacheMode(QGraphicsItem::NoCache);
    core::Status written = write();
    m_bodies->setCacheMode(cache);
    return written;
}

core::Status MetricChart::exportPng(const QString &path)
{
    return exportWith(
        [&] { return exportChartPng(m_chart, palette().color(QPalette::Base), path, [this] { redraw(); }); });
}

core::Status MetricChart::exportSvg(const QString &path)
{
    return exportWith(
        [&] { return exportChartSvg(m_chart, palette().color(QPalette::Base), path, [this] { redraw(); }); });
}

} // namespace scalelab::app
