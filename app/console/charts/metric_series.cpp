#include "metric_series.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace scalelab::app {

namespace {

// A whole series smoothed with a new weight: MinMaxIndex::rebuild with Ema inlined. On
// x86-64 it is compiled twice, for CPUs with FMA (Ema's chain one fused instruction) and
// for those without (std::fma a call); the loader picks one. Both give the same bits.
#if defined(__x86_64__) && defined(__clang__)
[[gnu::target_clones("fma", "default")]] // clang 14 takes no flatten beside it
#elif defined(__x86_64__) && defined(__GNUC__)
[[gnu::flatten, gnu::target_clones("fma", "default")]] // flatten: rebuild() inlined in each
#endif
Ema resmooth(core::MinMaxIndex &smoothed, const core::StableArray<double> &raw, Ema ema)
{
    return smoothed.rebuild(raw, ema);
}

} // namespace

bool MetricSeries::append(const MetricPoint &point)
{
    if (!std::isfinite(point.y)) {
        ++m_rejected;
        return false;
    }
    const bool first = m_raw.empty();
    std::array<double, kXAxisCount> x = point.x;
    for (int a = 0; a < kXAxisCount; ++a) {
        const auto &c = m_x[a];
        if (first || c.empty())
            continue;
        if (!std::isfinite(x[a]))
            x[a] = c.back();
        else if (x[a] < c.back()) {
            ++m_rejected;
            return false;
        }
    }
    bool anyAxis = false;
    for (int a = 0; a < kXAxisCount; ++a) {
        if (first ? std::isfinite(x[a]) : !m_x[a].empty()) {
            m_x[a].push_back(x[a]);
            anyAxis = true;
        }
    }
    if (!anyAxis) {
        ++m_rejected;
        return false;
    }
    m_raw.append(point.y);
    if (m_weight > 0)
        m_smoothed.append(m_ema.next(point.y));
    return true;
}

void MetricSeries::clear()
{
    for (auto &c : m_x)
        c.clear();
    m_raw.clear();
    m_smoothed.clear();
    m_ema = Ema { m_weight };
    m_rejected = 0;
}

void MetricSeries::setSmoothing(double weight)
{
    weight = std::clamp(std::isfinite(weight) ? weight : 0.0, 0.0, 0.999);
    if (weight == m_weight)
        return;
    m_weight = weight;
    m_ema = Ema { weight };
    if (m_weight == 0) {
        m_smoothed.clear();
        return;
    }
    // The whole series in one pass over the storage of the last weight: a new weight for
    // runs of millions of samples is a frame, not a second.
    m_ema = resmooth(m_smoothed, m_raw.values(), m_ema);
}

QList<QPointF> MetricSeries::downsample(
    XAxis axis, double x0, double x1, int pixels, bool smoothed, int firstColumn, int lastColumn) const
{
    const bool useSmoothed = smoothed && m_weight > 0;
    return core::minMaxPerPixel(
        column(axis), useSmoothed ? m_smoothed : m_raw, x0, x1, pixels, firstColumn, lastColumn);
}

std::size_t MetricSeries::nearest(XAxis axis, double x) const
{
    const auto &c = column(axis);
    if (c.empty())
        return size();
    const auto it = std::lower_bound(c.begin(), c.end(), x);
    if (it == c.end())
        return c.size() - 1;
    if (it == c.begin())
        return 0;
    const std::size_t after = std::size_t(it - c.begin());
    return x - c[after - 1] <= c[after] - x ? after - 1 : after;
}

namespace {

struct StepSample {
    double step, epoch, seconds, y;
};

// A run's samples in step order, later attempts replacing earlier ones from their first step.
std::vector<StepSample> mergedAttempts(const std::vector<const MetricSeries *> &attempts)
{
    std::vector<StepSample> merged;
    for (const MetricSeries *series : attempts) {
        if (!series || series->size() == 0 || !series->hasAxis(XAxis::Step))
            continue;
        const auto &steps = series->column(XAxis::Step);
        const double first = steps[0];
        while (!merged.empty() && merged.back().step >= first)
            merged.pop_back();
        const bool epochs = series->hasAxis(XAxis::Epoch), seconds = series->hasAxis(XAxis::WallClock);
        for (std::size_t i = 0; i < series->size(); ++i)
            merged.push_back({ steps[i], epochs ? series->column(XAxis::Epoch)[i] : MetricPoint::kNone,
                seconds ? series->column(XAxis::WallClock)[i] : MetricPoint::kNone, series->rawValue(i) });
    }
    return merged;
}

} // namespace

std::vector<BandPoint> repeatBand(const std::vector<std::vector<const MetricSeries *>> &runs)
{
    // Every run's samples by step; a step counts once two runs or more have reached it, so a
    // repeat that started late (or ended early) does not hold the others back.
    struct Sum {
        int runs = 0;
        double y = 0, low = 0, high = 0, epoch = 0, seconds = 0;
    };
    std::map<double, Sum> steps;
    for (const auto &attempts : runs)
        for (const StepSample &s : mergedAttempts(attempts)) {
            Sum &sum = steps[s.step];
            sum.low = sum.runs == 0 ? s.y : std::min(sum.low, s.y);
            sum.high = sum.runs == 0 ? s.y : std::max(sum.high, s.y);
            ++sum.runs;
            sum.y += s.y;
            sum.epoch += s.epoch;
            sum.seconds += s.seconds;
        }
    std::vector<BandPoint> band;
    for (const auto &[step, sum] : steps) {
        if (sum.runs < 2)
            continue;
        BandPoint p;
        p.mean = MetricPoint::timeline(step, sum.epoch / sum.runs, sum.seconds / sum.runs, sum.y / sum.runs);
        p.low = sum.low;
        p.high = sum.high;
        band.push_back(p);
    }
    return band;
}

} // namespace scalelab::app
