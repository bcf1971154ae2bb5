#include "downsample.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

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

// ---- MinMaxIndex ------------------------------------------------------------------

void MinMaxIndex::append(double value)
{
    m_values.push_back(value);
    const std::size_t n = m_values.size();
    // The new value completes one block on each level k where 2^k divides n.
    for (std::size_t k = kFirstLevel; (n & ((std::size_t(1) << k) - 1)) == 0; ++k) {
        const std::size_t level = k - kFirstLevel;
        if (m_levels.size() <= level)
            m_levels.emplace_back();
        const std::size_t j = (n >> k) - 1; // the completed block
        m_levels[level].push_back(level == 0
                ? scanBlock(m_values.data(j << k), j << k)
                : merge(m_levels[level - 1][2 * j], m_levels[level - 1][2 * j + 1]));
    }
}

void MinMaxIndex::clear()
{
    m_values.clear();
    m_levels.clear();
}

MinMaxIndex::Extremes MinMaxIndex::extremes(std::size_t first, std::size_t last) const
{
    assert(first < last && last <= m_values.size());
    Block best = single(first);
    std::size_t i = first;
    while (i < last) {
        // The largest complete block that starts at i and ends inside [i, last); below the
        // lowest level, one value.
        std::size_t k = std::bit_width(last - i) - 1;
        if (i != 0)
            k = std::min<std::size_t>(k, std::countr_zero(i));
        k = std::min(k, kFirstLevel + m_levels.size() - 1);
        if (k < kFirstLevel) {
            best = merge(best, single(i));
            ++i;
        } else {
            best = merge(best, m_levels[k - kFirstLevel][i >> k]);
            i += std::size_t(1) << k;
        }
    }
    return { best.min, best.max };
}

// ---- minMaxPerPixel -----------------------------------------------------------------

QList<QPointF> minMaxPerPixel(const StableArray<double> &x, const MinMaxIndex &y, double x0, double x1,
    int buckets, int firstColumn, int lastColumn)
{
    QList<QPointF> out;
    const std::size_t n = std::min(x.size(), y.size());
    if (lastColumn < 0 || lastColumn > buckets)
        lastColumn = buckets;
    firstColumn = std::max(firstColumn, 0);
    if (n == 0 || buckets <= 0 || !(x1 >= x0) || firstColumn >= lastColumn)
        return out;
    const double width = (x1 - x0) / buckets;
    // Column b holds the samples with x in (x0 + width·b, x0 + width·(b + 1)], the first
    // column also x0 itself, the last column up to x1 whatever the rounding.
    auto boundary = [&](int b) { return x0 + width * b; };
    const auto begin = x.begin(), end = x.begin() + static_cast<std::ptrdiff_t>(n);
    auto from = firstColumn == 0 ? std::lower_bound(begin, end, x0)
                                 : std::upper_bound(begin, end, boundary(firstColumn));
    const auto to = lastColumn == buckets ? std::upper_bound(from, end, x1)
                                          : std::upper_bound(from, end, boundary(lastColumn));
    auto point = [&](std::size_t i) { return QPointF(x[i], y[i]); };
    out.reserve(2 * (lastColumn - firstColumn) + 2);
    if (from != begin)
        out.append(point(std::size_t(from - begin) - 1));
    for (int b = firstColumn; b < lastColumn && from != to; ++b) {
        const auto columnEnd = b == buckets - 1 ? to : std::upper_bound(from, to, boundary(b + 1));
        if (columnEnd == from)
            continue;
        const auto e = y.extremes(std::size_t(from - begin), std::size_t(columnEnd - begin));
        std::size_t first = std::min(e.min, e.max), second = std::max(e.min, e.max);
        if (!out.isEmpty() && std::abs(y[second] - out.back().y()) < std::abs(y[first] - out.back().y()))
            std::swap(first, second);
        out.append(point(first));
        if (first != second)
            out.append(point(second));
        from = columnEnd;
    }
    if (lastColumn == buckets && to != end)
        out.append(point(std::size_t(to - begin)));
    return out;
}

int pixelColumn(double x, double x0, double x1, int buckets)
{
    if (buckets <= 0 || !(x1 > x0))
        return 0;
    const double column = std::ceil((x - x0) / ((x1 - x0) / buckets)) - 1;
    return int(std::clamp(column, 0.0, double(buckets - 1)));
}

} // namespace scalelab::core
