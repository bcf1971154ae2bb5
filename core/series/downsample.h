// Reducing a series to what a plot can show. A plot of W pixel columns can draw at most
// the lowest and highest value in each column, so that is all we hand it: spikes
// survive, and the cost of a frame is bounded by the plot's width, not by the number of
// samples received.
//
// - minMaxDownsample(): one pass over a whole series (first, min, max, last per bucket).
// - MinMaxIndex + minMaxPerPixel(): for live series that only grow. The index keeps a
//   min/max pyramid as values are appended (amortized O(1) each), and a frame asks it
//   for each pixel column's extremes in O(log n), so a 1,000,000-point series is not
//   rescanned 25 times a second.
//
// Plain values, no Qt objects; not thread-safe (one owner, usually the GUI thread).
#pragma once

#include "stable_array.h"

#include <QList>
#include <QPointF>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace scalelab::core {

// Per bucket of x: the first, min, max and last point, in x order (<= 4 × buckets points).
// Series of at most 4 × buckets points are returned unchanged.
QList<QPointF> minMaxDownsample(const std::vector<QPointF> &points, int buckets);

// An append-only sequence of finite values that answers "where are the smallest and the
// largest value of [first, last)" in O(log n).
class MinMaxIndex {
public:
    struct Extremes {
        std::size_t min = 0;
        std::size_t max = 0;
    };

    void append(double value); // value must be finite
    // Replaces the values by f(source[0]), f(source[1]), ... (f is called in order and may
    // keep state; each result finite) and builds the index append() would have built;
    // returns f, as std::for_each does, with the state it ends in. Storage of that size
    // already is rewritten in place: a series re-smoothed with a new weight touches no
    // fresh memory, which cost more than the smoothing itself (page faults of ~30 MB per
    // million samples).
    //
    // One pass, nothing read back: each value is compared with its lowest-level block's
    // extremes as it is made (the comparisons run beside f's own work, such as a moving
    // average's multiply-add chain), and each block it completes on the levels above is
    // merged at once, as append() does, while the values it compares are still in cache.
    // f is a local copy, so its state stays in registers: a member or a captured reference
    // would be stored at every value, since the values written might alias it.
    template <typename F> F rebuild(const StableArray<double> &source, F f)
    {
        const std::size_t count = source.size();
        if (count != m_values.size()) {
            clear();
            for (std::size_t i = 0; i < count; ++i)
                m_values.push_back(0.0);
        }
        constexpr std::size_t width = std::size_t(1) << kFirstLevel;
        const std::size_t blocks = count >> kFirstLevel;
        for (std::size_t j = 0; j < blocks; ++j) {
            const std::size_t first = j << kFirstLevel;
            // Contiguous: width divides StableArray's blocks.
            const double *in = source.data(first);
            double *out = m_values.data(first);
            double low = f(in[0]), high = low;
            out[0] = low;
            std::size_t lowAt = 0, highAt = 0;
            for (std::size_t k = 1; k < width; ++k) {
                const double v = f(in[k]);
                out[k] = v;
                lowAt = v < low ? k : lowAt; // leftmost extremes, as merge() keeps them
                low = v < low ? v : low;
                highAt = v > high ? k : highAt;
                high = v > high ? v : high;
            }
            storeBlock(0, j,
                { static_cast<std::uint32_t>(first + lowAt), static_cast<std::uint32_t>(first + highAt), low,
                    high });
            // Block j + 1 of level 0 completes a block on each level L where 2^L divides j + 1.
            for (std::size_t level = 1, done = j + 1; (done & 1) == 0; ++level) {
                done >>= 1;
                const std::size_t b = done - 1;
                storeBlock(level, b, merge(m_levels[level - 1][2 * b], m_levels[level - 1][2 * b + 1]));
            }
        }
        if (const std::size_t tail = count & (width - 1); tail > 0) {
            const double *in = source.data(blocks << kFirstLevel);
            double *out = m_values.data(blocks << kFirstLevel);
            for (std::size_t k = 0; k < tail; ++k)
                out[k] = f(in[k]);
        }
        return f;
    }
    void clear();
    std::size_t size() const { return m_values.size(); }
    bool empty() const { return m_values.empty(); }
    double operator[](std::size_t i) const { return m_values[i]; }
    const StableArray<double> &values() const { return m_values; }

    // Requires first < last <= size().
    Extremes extremes(std::size_t first, std::size_t last) const;

private:
    // A block's extremes: where they are and what they are. The values ride along so that a
    // merge compares what it holds: a query over a column of a long series touches ~20
    // blocks, and looking their extremes up in the values was a cache miss each.
    struct Block {
        std::uint32_t min;
        std::uint32_t max;
        double low;
        double high;
    };
    // Of a and b (b to the right of a), the smallest and the largest, the leftmost on ties.
    static Block merge(Block a, Block b)
    {
        if (b.low < a.low) {
            a.min = b.min;
            a.low = b.low;
        }
        if (b.high > a.high) {
            a.max = b.max;
            a.high = b.high;
        }
        return a;
    }
    Block single(std::size_t i) const
    {
        const auto at = static_cast<std::uint32_t>(i);
        return { at, at, m_values[i], m_values[i] };
    }
    // Block b of level `level` (0: blocks of 2^kFirstLevel values), rewritten in place or
    // appended: levels are stored in order, so b is at most the level's size.
    void storeBlock(std::size_t level, std::size_t b, Block block)
    {
        if (m_levels.size() <= level)
            m_levels.emplace_back();
        if (b < m_levels[level].size())
            m_levels[level].set(b, block);
        else
            m_levels[level].push_back(block);
    }
    // The lowest level's block of the values at `values` (2^kFirstLevel of them), the
    // first of which is value `first`: leftmost extremes, as merge() keeps them.
    static Block scanBlock(const double *values, std::size_t first)
    {
        Block block { static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(first), values[0],
            values[0] };
        for (std::size_t i = 1; i < (std::size_t(1) << kFirstLevel); ++i) {
            if (values[i] < block.low) {
                block.low = values[i];
                block.min = static_cast<std::uint32_t>(first + i);
            }
            if (values[i] > block.high) {
                block.high = values[i];
                block.max = static_cast<std::uint32_t>(first + i);
            }
        }
        return block;
    }

    // Blocks of fewer than 2^kFirstLevel values are not kept: a query reads at most that
    // many values in order at each end, and a rebuild (a new smoothing weight) writes and
    // merges a 32nd of the blocks a full tree would. Blocks of 8 made a rebuild ~30 % slower
    // and a query in cache ~40 % faster; a new weight is the slower interaction
    // (docs/benchmarks.md, "the moving average fused").
    static constexpr std::size_t kFirstLevel = 5;

    // Stable storage: a live series never pauses to copy itself (see StableArray).
    StableArray<double> m_values;
    // m_levels[k - kFirstLevel][j]: extremes of the complete block j of 2^k values.
    std::vector<StableArray<Block>> m_levels;
};

// The points (x[i], y[i]) with x in [x0, x1], reduced to `buckets` equal columns of x:
// each non-empty column contributes its minimum and maximum, at most 2 × buckets points
// (+ 2) in all. Of a column's two points the one nearer (in y) to the point before comes
// first, so neighbouring columns join at their near ends: the line covers the same pixels
// as in index order, but paints each column's span once instead of up to twice.
// The nearest point outside the range on each side is kept so the line runs on to the
// plot's edges. x must be nondecreasing and as long as y.
//
// Columns [firstColumn, lastColumn) of the same grid can be asked for alone (a live line
// drawn as finished columns plus a tail that still grows): such a part starts with the
// last sample before its first column and ends with its last column, or with the first
// sample after x1 when it is the grid's last part.
QList<QPointF> minMaxPerPixel(const StableArray<double> &x, const MinMaxIndex &y, double x0, double x1,
    int buckets, int firstColumn = 0, int lastColumn = -1);

// The column of the grid above that x falls in (a sample on a boundary belongs to the
// column on its left), clamped to [0, buckets - 1].
int pixelColumn(double x, double x0, double x1, int buckets);

} // namespace scalelab::core
