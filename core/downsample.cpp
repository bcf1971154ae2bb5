#include "downsample.h"

#include <algorithm>

namespace scalelab::core {

QList<QPointF> minMaxDownsample(const std::vector<QPointF> &points, int buckets)
{
    QList<QPointF> out;
    if (buckets <= 0 || points.size() <= static_cast<std::size_t>(buckets) * 4) {
        out.reserve(static_cast<qsizetype>(points.size()));
        for (const auto &p : points)
            out.append(p);
        return out;
    }
    out.reserve(buckets * 4);
    const double x0 = points.front().x();
    const double span = std::max(points.back().x() - x0, 1e-12);
    std::size_t i = 0;
    for (int b = 0; b < buckets && i < points.size(); ++b) {
        const double limit = x0 + span * (b + 1) / buckets;
        const std::size_t first = i;
        std::size_t lo = i, hi = i;
        while (i < points.size() && (points[i].x() <= limit || b == buckets - 1)) {
            if (points[i].y() < points[lo].y())
                lo = i;
            if (points[i].y() > points[hi].y())
                hi = i;
            ++i;
        }
        if (i == first)
            continue; // empty bucket
        const std::size_t last = i - 1;
        std::size_t keep[4] = { first, std::min(lo, hi), std::max(lo, hi), last };
        std::size_t previous = static_cast<std::size_t>(-1);
        for (std::size_t k : keep) {
            if (k != previous)
                out.append(points[k]);
            previous = k;
        }
    }
    return out;
}

} // namespace scalelab::core
