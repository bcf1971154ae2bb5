// Reduces a series to what a plot of `buckets` pixels can show: per bucket of x, the
// first, min, max and last point, in x order. Spikes survive; cost is bounded by the
// plot's width, not by the number of samples.
#pragma once

#include <QList>
#include <QPointF>

#include <vector>

namespace scalelab::core {

QList<QPointF> minMaxDownsample(const std::vector<QPointF> &points, int buckets);

} // namespace scalelab::core
