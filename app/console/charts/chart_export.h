// Pictures of a chart for documents and slides: what a QChart's scene shows, painted on a
// background colour, as a PNG at twice the chart's size (crisp on high-density screens and
// in documents) or as an SVG. MetricChart::exportPng() and exportSvg() are these, with the
// chart brought up to date first.
//
// Ownership: the chart is borrowed for the call; only the file at `path` is written.
// Thread: GUI thread only (the chart's scene is painted).
#pragma once

#include "core_status.h"

#include <QString>

#include <functional>

class QChart;
class QColor;

namespace scalelab::app {

// `beforeRender` runs once the file is ready to take the picture, just before the chart is
// painted (MetricChart redraws there: what is exported is the latest data, not the last
// frame). Fails, saying so, when the file cannot be written.
core::Status exportChartPng(
    QChart *chart, const QColor &background, const QString &path, const std::function<void()> &beforeRender);
core::Status exportChartSvg(
    QChart *chart, const QColor &background, const QString &path, const std::function<void()> &beforeRender);

} // namespace scalelab::app
