// The data behind one line of a MetricChart: samples that only grow, each placed on up to
// four x axes (optimizer step, epoch, wall-clock seconds, workers), their TensorBoard-style
// smoothed values, and min/max indexes so a frame of a long series costs O(pixels × log n).
// Plain value type, GUI thread only (MetricChart owns it; ChartFeed brings samples in).
#pragma once

#include "downsample.h"
#include "smoothing.h"

#include <QList>
#include <QPointF>

#include <array>
#include <cstddef>
#include <limits>
#include <vector>

namespace scalelab::app {

// What a chart's x axis counts. A series has the axes its first sample gave values for.
enum class XAxis { Step, Epoch, WallClock, Workers };
inline constexpr int kXAxisCount = 4;

struct MetricPoint {
    static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    std::array<double, kXAxisCount> x { kNone, kNone, kNone, kNone };
    double y = kNone;

    // A training-time sample: where it lies by step, by (fractional) epoch and by time.
    static MetricPoint timeline(double step, double epoch, double seconds, double y)
    {
        MetricPoint p;
        p.x = { step, epoch, seconds, kNone };
        p.y = y;
        return p;
    }
    static MetricPoint at(XAxis axis, double x, double y)
    {
        MetricPoint p;
        p.x[static_cast<int>(axis)] = x;
        p.y = y;
        return p;
    }
};

class MetricSeries {
public:
    // Accepts the sample unless y is not finite or it would move x backwards on one of the
    // series' axes (a series is a function of each of its x axes). On an axis the series
    // has but the sample lacks, the sample sits at the previous x.
    bool append(const MetricPoint &point);
    void clear();

    std::size_t size() const { return m_raw.size(); }
    std::size_t rejected() const { return m_rejected; }
    bool hasAxis(XAxis axis) const { return !column(axis).empty(); }
    const core::StableArray<double> &column(XAxis axis) const { return m_x[static_cast<int>(axis)]; }
    double rawValue(std::size_t i) const { return m_raw[i]; }
    // Equal to rawValue() while smoothing is 0.
    double shownValue(std::size_t i) const { return smoothing() > 0 ? m_smoothed[i] : m_raw[i]; }

    // Exponential moving average as TensorBoard draws it, debiased so the first points are
    // not pulled toward 0: weight 0 = raw values, 0.999 = very smooth.
    void setSmoothing(double weight);
    double smoothing() const { return m_weight; }

    // The raw or smoothed values with x (on `axis`) in [x0, x1], min/max per pixel column;
    // columns [firstColumn, lastColumn) of that grid alone when asked (see minMaxPerPixel).
    QList<QPointF> downsample(XAxis axis, double x0, double x1, int pixels, bool smoothed,
        int firstColumn = 0, int lastColumn = -1) const;
    // The sample whose x on `axis` is closest to `x`; size() when empty or axis missing.
    std::size_t nearest(XAxis axis, double x) const;

private:
    std::array<core::StableArray<double>, kXAxisCount> m_x;
    core::MinMaxIndex m_raw;
    core::MinMaxIndex m_smoothed; // maintained only while m_weight > 0
    double m_weight = 0;
    Ema m_ema; // after the last sample
    std::size_t m_rejected = 0;
};

// One step of repeats' spread: their mean (x: the step, the epoch and seconds averaged;
// y: the mean value) and their lowest and highest value.
struct BandPoint {
    MetricPoint mean;
    double low = 0;
    double high = 0;
};

// The spread of runs repeated with the same configuration, step by step (aligned on
// XAxis::Step): at each step two runs or more reached, their mean, lowest and highest raw
// value. A run may be drawn as several series (one per attempt, in order): a later
// attempt's samples replace an earlier one's from its first step on (it resumed from a
// checkpoint). Runs without samples on the step axis count for nothing.
std::vector<BandPoint> repeatBand(const std::vector<std::vector<const MetricSeries *>> &runs);

} // namespace scalelab::app
