// What the pointer is over on a MetricChart: the nearest sample of the nearest visible
// line, measured where the lines are drawn (smoothed values when smoothing is on, log10(y)
// on a log scale), and the tooltip text that reads it out. MetricChart::readOutAt() asks
// nearestSample() with the chart's mapping from values to positions; the hover marker and
// the tooltip stay the chart's.
//
// Ownership: values only; the lines are borrowed for the call.
// Thread: GUI thread only (the lines are).
#pragma once

#include "chart_line.h"
#include "metric_series.h"

#include <QPointF>
#include <QString>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace scalelab::app {

// What the pointer is over: the nearest sample of the nearest visible line.
struct ReadOut {
    QString seriesId;
    QString label;
    std::size_t index = 0;
    MetricPoint point; // as appended (raw y)
    double shown = 0; // the y drawn (smoothed when smoothing is on)
    QString text() const; // "label\nstep 120 · epoch 1.50 · 12.3 s\nvalue 0.4321 (raw 0.4500)"
};

// The sample nearest to `at` (chart coordinates) among the visible `lines` that have
// values on `axis`: of each line, the sample whose x on `axis` is nearest `x`, placed by
// `toPosition` (which takes x and y as drawn; on a log scale, `log`, values that are not
// positive have no place). None when no line has such a sample.
std::optional<ReadOut> nearestSample(const std::vector<std::unique_ptr<ChartLine>> &lines, XAxis axis,
    bool log, double x, const QPointF &at, const std::function<QPointF(const QPointF &drawn)> &toPosition);

} // namespace scalelab::app
