#include "chart_export.h"

#include <QChart>
#include <QColor>
#include <QCoreApplication>
#include <QFile>
#include <QGraphicsScene>
#include <QImage>
#include <QPainter>
#include <QSvgGenerator>

namespace scalelab::app {

namespace {

// The messages are MetricChart's, in its translation context.
QString tr(const char *text)
{
    return QCoreApplication::translate("scalelab::app::MetricChart", text);
}

bool renderTo(QChart *chart, const QColor &background, QPaintDevice *device, const QSize &size,
    const std::function<void()> &beforeRender)
{
    beforeRender();
    QCoreApplication::sendPostedEvents(chart, QEvent::LayoutRequest);
    QPainter painter;
    if (!painter.begin(device))
        return false;
    painter.setRenderHint(QPainter::Antialiasing);
    painter.fillRect(QRect(QPoint(), size), background);
    chart->scene()->render(&painter, QRectF(QPoint(), size), chart->geometry());
    return painter.end();
}

} // namespace

core::Status exportChartPng(
    QChart *chart, const QColor &background, const QString &path, const std::function<void()> &beforeRender)
{
    const QSize size = chart->size().toSize().expandedTo(QSize(1, 1));
    constexpr qreal scale = 2; // crisp on high-density screens and in documents
    QImage image(size * scale, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(scale);
    if (!renderTo(chart, background, &image, size, beforeRender) || !image.save(path, "PNG"))
        return core::Status::failure(tr("Could not write %1").arg(path));
    return core::Status::success();
}

core::Status exportChartSvg(
    QChart *chart, const QColor &background, const QString &path, const std::function<void()> &beforeRender)
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return core::Status::failure(tr("Could not write %1: %2").arg(path, file.errorString()));
    const QSize size = chart->size().toSize().expandedTo(QSize(1, 1));
    QSvgGenerator svg;
    svg.setOutputDevice(&file);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(), size));
    svg.setTitle(chart->title());
    svg.setDescription(tr("ScaleLab chart"));
    if (!renderTo(chart, background, &svg, size, beforeRender))
        return core::Status::failure(tr("Could not render the chart to %1").arg(path));
    return core::Status::success();
}

} // namespace scalelab::app
