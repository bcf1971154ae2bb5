// How the live charts choose their axes (app/console/charts/axis_policy.h), value by value:
// round tick intervals and label decimals, ranges Qt Charts could not step through, the x
// range (nothing, a single point, markers, negative x, a zoom) and the follow-the-latest
// headroom, which drawn values count toward y (outside the x range, NaN, infinity), the
// linear y range (padding, all-equal and negative values, included and empty ranges, when
// the axis holds still), the log scale (non-positive values dropped, values spanning
// decades) and its labels (decades, 1-2-5 and every digit, evenly spaced when no digit
// falls inside). Expected values are worked by hand in the comments.
#include "axis_policy.h"

#include <QTest>

#include <cmath>
#include <limits>

using namespace scalelab::app;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::pair<double, double> kEmptyDefault { 0, 1 }; // MetricChart's empty y range unless set

// Log-axis labels at these values, written as the axis writes them.
QList<LogTick> ticks(std::initializer_list<double> values)
{
    QList<LogTick> out;
    for (double v : values)
        out.append({ QString::number(v, 'g', 6), std::log10(v) });
    return out;
}

QStringList labelsOf(const QList<LogTick> &ticks)
{
    QStringList labels;
    for (const LogTick &t : ticks)
        labels << t.label;
    return labels;
}

} // namespace

// The same labels, at the same places (to double rounding: 3 × 0.1 is not quite 0.3).
#define COMPARE_TICKS(actual, expected)                                                                      \
    do {                                                                                                     \
        const QList<LogTick> actual_ = (actual), expected_ = (expected);                                     \
        QCOMPARE(labelsOf(actual_), labelsOf(expected_));                                                    \
        for (qsizetype i_ = 0; i_ < actual_.size(); ++i_)                                                    \
            QCOMPARE(actual_[i_].at, expected_[i_].at);                                                      \
    } while (false)

class TestAxisPolicy : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void niceIntervalRoundsToOneTwoOrFive()
    {
        QCOMPARE(niceInterval(10, 5), 2.0); // 2 exactly
        QCOMPARE(niceInterval(7, 5), 1.0); // 1.4 → 1
        QCOMPARE(niceInterval(7.5, 5), 2.0); // 1.5 → 2
        QCOMPARE(niceInterval(16, 5), 2.0); // 3.2 → 2
        QCOMPARE(niceInterval(17.5, 5), 5.0); // 3.5 → 5
        QCOMPARE(niceInterval(35, 5), 5.0); // 7 → 5
        QCOMPARE(niceInterval(37.5, 5), 10.0); // 7.5 → 10
        QCOMPARE(niceInterval(40, 5), 10.0); // 8 → 10
        QCOMPARE(niceInterval(80, 5), 20.0); // 16 → 20
        QCOMPARE(niceInterval(1, 6), 0.2); // 0.167 → 0.2
        QCOMPARE(niceInterval(0.003, 5), 5e-4); // 6e-4 → 5e-4
        QCOMPARE(niceInterval(10, 0), 10.0); // at least one interval
        // Nothing to divide: 1.
        QCOMPARE(niceInterval(0, 5), 1.0);
        QCOMPARE(niceInterval(-3, 5), 1.0);
        QCOMPARE(niceInterval(kNaN, 5), 1.0);
        QCOMPARE(niceInterval(kInf, 5), 1.0);
    }

    void labelFormatShowsTheDecimalsTheIntervalNeeds()
    {
        QCOMPARE(labelFormat(200), QStringLiteral("%.0f"));
        QCOMPARE(labelFormat(2), QStringLiteral("%.0f"));
        QCOMPARE(labelFormat(1), QStringLiteral("%.0f"));
        QCOMPARE(labelFormat(0.5), QStringLiteral("%.1f"));
        QCOMPARE(labelFormat(0.2), QStringLiteral("%.1f"));
        QCOMPARE(labelFormat(0.05), QStringLiteral("%.2f"));
        QCOMPARE(labelFormat(0.01), QStringLiteral("%.2f")); // not 3 for log10's rounding
        QCOMPARE(labelFormat(1e-9), QStringLiteral("%.6f")); // 6 at most
    }

    void valueAxisTicksKeepsASteppableRange()
    {
        ValueTicks t = valueAxisTicks(0, 10, kYTickIntervals);
        QCOMPARE(t.from, 0.0);
        QCOMPARE(t.to, 10.0);
        QCOMPARE(t.interval, 2.0);
        QCOMPARE(t.labelFormat, QStringLiteral("%.0f"));

        t = valueAxisTicks(0, 100, kXTickIntervals); // 16.7 → 20
        QCOMPARE(t.interval, 20.0);
        QCOMPARE(t.labelFormat, QStringLiteral("%.0f"));

        t = valueAxisTicks(0, 1, kXTickIntervals); // 0.167 → 0.2
        QCOMPARE(t.interval, 0.2);
        QCOMPARE(t.labelFormat, QStringLiteral("%.1f"));

        // Negative values: 11 / 5 = 2.2 → 2.
        t = valueAxisTicks(-20.5, -9.5, kYTickIntervals);
        QCOMPARE(t.from, -20.5);
        QCOMPARE(t.to, -9.5);
        QCOMPARE(t.interval, 2.0);
    }

    // Ranges Qt Charts would step through forever are widened around their middle.
    void valueAxisTicksWidensARangeItCannotStepThrough()
    {
        // A single sample: 1e-14 wide at 54.5 → 54.5182 ± 5 % (2.726), interval 5.45 / 5 → 1.
        ValueTicks t = valueAxisTicks(54.5182, 54.5182 + 1e-14, kYTickIntervals);
        QCOMPARE(t.from, 54.5182 * 0.95);
        QCOMPARE(t.to, 54.5182 * 1.05);
        QCOMPARE(t.interval, 1.0);
        QCOMPARE(t.labelFormat, QStringLiteral("%.0f"));

        // Empty at 3: ± max(0.15, 0.5); at 0: ± 0.5. Interval 1 / 5 = 0.2.
        t = valueAxisTicks(3, 3, kYTickIntervals);
        QCOMPARE(t.from, 2.5);
        QCOMPARE(t.to, 3.5);
        QCOMPARE(t.interval, 0.2);
        QCOMPARE(t.labelFormat, QStringLiteral("%.1f"));
        t = valueAxisTicks(0, 0, kYTickIntervals);
        QCOMPARE(t.from, -0.5);
        QCOMPARE(t.to, 0.5);

        // Inverted: around its middle, 4.5 ± 0.5.
        t = valueAxisTicks(5, 4, kYTickIntervals);
        QCOMPARE(t.from, 4.0);
        QCOMPARE(t.to, 5.0);

        // Not finite: the middle is not either, so around 0.
        for (const auto &[from, to] :
            { std::pair { kNaN, 1.0 }, std::pair { -kInf, kInf }, std::pair { 0.0, kInf } }) {
            t = valueAxisTicks(from, to, kYTickIntervals);
            QCOMPARE(t.from, -0.5);
            QCOMPARE(t.to, 0.5);
            QCOMPARE(t.interval, 0.2);
        }
    }

    void workersAxisTicksWholeWorkers()
    {
        // 4 / 6 = 0.67 → 0.5, but no tick at 1.5 workers: 1.
        ValueTicks t = valueAxisTicks(0.5, 4.5, kXTickIntervals, true);
        QCOMPARE(t.interval, 1.0);
        QCOMPARE(t.labelFormat, QStringLiteral("%.0f"));
        t = valueAxisTicks(0.5, 4.5, kXTickIntervals, false);
        QCOMPARE(t.interval, 0.5);
        QCOMPARE(t.labelFormat, QStringLiteral("%.1f"));
        // Wide enough already: unchanged (64 / 6 = 10.7 → 10).
        QCOMPARE(valueAxisTicks(0, 64, kXTickIntervals, true).interval, 10.0);
    }

    // The x axis follows a live run in steps: held while the data fits with at most 20 %
    // of its span to spare, else the data plus 10 %.
    void grownSpanHoldsUntilTheDataOutgrowsIt()
    {
        QCOMPARE(grownSpan(0, 110, 0, 100), 110.0); // 10 to spare
        QCOMPARE(grownSpan(0, 110, 0, 105), 110.0); // 5 to spare
        QCOMPARE(grownSpan(0, 120, 0, 100), 120.0); // 20 to spare: still held
        QCOMPARE(grownSpan(0, 110, 0, 111), 122.1); // past the end: 111 + 10 %
        QCOMPARE(grownSpan(0, 121, 0, 100), 110.0); // 21 to spare: shrinks to 100 + 10 %
        QCOMPARE(grownSpan(0, 130, 0, 100), 110.0);
        QCOMPARE(grownSpan(5, 110, 0, 100), 110.0); // starts elsewhere: 100 + 10 %
        QCOMPARE(grownSpan(0, 1, 0, 1), 1.0);
    }

    void xRangeOfNothing()
    {
        using Range = std::pair<double, double>;
        // [0, 1], kept by an axis that shows it, else with its 10 % headroom.
        QCOMPARE(xRange(kInf, -kInf, false, std::nullopt, 0, 1), Range(0, 1));
        const auto [from, to] = xRange(kInf, -kInf, false, std::nullopt, 0, 0);
        QCOMPARE(from, 0.0);
        QCOMPARE(to, 1.1);
    }

    void xRangeOfASinglePoint()
    {
        // x = 5 ± 0.5, then 10 % headroom: [4.5, 5.6].
        auto [from, to] = xRange(5, 5, false, std::nullopt, 0, 1);
        QCOMPARE(from, 4.5);
        QCOMPARE(to, 5.6);
        // Shown so, it stays.
        std::tie(from, to) = xRange(5, 5, false, std::nullopt, 4.5, 5.6);
        QCOMPARE(from, 4.5);
        QCOMPARE(to, 5.6);
        // With markers too: ± 0.5 (4 % of nothing is less).
        std::tie(from, to) = xRange(3, 3, true, std::nullopt, 2.5, 3.6);
        QCOMPARE(from, 2.5);
        QCOMPARE(to, 3.6);
    }

    void xRangeLeavesRoomForMarkers()
    {
        // [1, 26] ± 4 % of 25 = [0, 27], then 10 %: 29.7.
        const auto [from, to] = xRange(1, 26, true, std::nullopt, 0, 1);
        QCOMPARE(from, 0.0);
        QCOMPARE(to, 29.7);
        // Without markers the data starts at the axis' left end.
        QCOMPARE(xRange(1, 26, false, std::nullopt, 0, 1).first, 1.0);
    }

    void xRangeOfNegativeValues()
    {
        // [-50, -10]: 40 + 10 % = 44 from -50.
        const auto [from, to] = xRange(-50, -10, false, std::nullopt, 0, 1);
        QCOMPARE(from, -50.0);
        QCOMPARE(to, -6.0);
    }

    // A live run: the window grows by 10 % when the data reaches its end, not every frame.
    void xRangeFollowsTheLatestInSteps()
    {
        using Range = std::pair<double, double>;
        Range shown { 0, 0 };
        shown = xRange(0, 100, false, std::nullopt, shown.first, shown.second);
        QCOMPARE(shown.first, 0.0);
        QCOMPARE(shown.second, 110.0);
        for (const double latest : { 101.0, 105.0, 110.0 }) { // inside the headroom: held
            shown = xRange(0, latest, false, std::nullopt, shown.first, shown.second);
            QCOMPARE(shown.second, 110.0);
        }
        shown = xRange(0, 115, false, std::nullopt, shown.first, shown.second); // past it
        QCOMPARE(shown.first, 0.0);
        QCOMPARE(shown.second, 126.5);
        shown = xRange(0, 120, false, std::nullopt, shown.first, shown.second);
        QCOMPARE(shown.second, 126.5);
    }

    void zoomIsShownAsItIs()
    {
        using Range = std::pair<double, double>;
        const std::optional<Range> zoom = Range(20, 40);
        QCOMPARE(xRange(0, 100, false, zoom, 0, 110), Range(20, 40)); // no headroom
        QCOMPARE(xRange(0, 100, true, zoom, 0, 110), Range(20, 40)); // no room for markers
        QCOMPARE(xRange(kInf, -kInf, false, zoom, 0, 1), Range(20, 40)); // nothing drawn
    }

    void extentCountsWhatIsDrawnInsideTheXRange()
    {
        YExtent e;
        QVERIFY(e.empty());
        QCOMPARE(e.lo, kInf);
        QCOMPARE(e.hi, -kInf);
        e.add({ { -1, -50 }, { 0, 1 }, { 5, -2 }, { 10, 7 }, { 11, 100 } }, 0, 10);
        QVERIFY(!e.empty());
        QCOMPARE(e.lo, -2.0); // -50 and 100 lie outside [0, 10]
        QCOMPARE(e.hi, 7.0);
        QCOMPARE(e.points, qsizetype(5)); // all drawn

        YExtent other;
        other.add({ { 3, 9 }, { 4, 0.5 } }, 0, 10);
        e.merge(other);
        QCOMPARE(e.lo, -2.0);
        QCOMPARE(e.hi, 9.0);
        QCOMPARE(e.points, qsizetype(7));
        e.merge(YExtent {}); // nothing: unchanged
        QCOMPARE(e.lo, -2.0);
        QCOMPARE(e.hi, 9.0);
        QCOMPARE(e.points, qsizetype(7));
    }

    void extentIgnoresNonFiniteValues()
    {
        YExtent e;
        e.add({ { kNaN, 50 }, { 1, kNaN }, { 2, 3 }, { kInf, -20 } }, 0, 10);
        QCOMPARE(e.lo, 3.0);
        QCOMPARE(e.hi, 3.0);
        QCOMPARE(e.points, qsizetype(4));
        // Series refuse non-finite values (MetricSeries::append); a range bar's infinite end
        // inside the x range does not widen the axis either: it keeps showing the data.
        e.add({ { 5, kInf }, { 6, -kInf }, { 7, 4 } }, 0, 10);
        QCOMPARE(e.lo, 3.0);
        QCOMPARE(e.hi, 4.0);
        const YRange y = linearYRange(e.lo, e.hi, std::nullopt, kEmptyDefault, 0, 1);
        QVERIFY(std::isfinite(y.from) && std::isfinite(y.to));
        QCOMPARE(y.from, 3.0 - 0.05);
        QCOMPARE(y.to, 4.0 + 0.05);
        // And a log axis asked for an infinite range has no ticks (not ceil(inf) as an int).
        QVERIFY(logTicks(0, kInf).isEmpty());
    }

    void toLogPlotDropsNonPositiveValues()
    {
        QList<QPointF> points { { 0, 100 }, { 1, 0 }, { 2, -3 }, { 3, 0.001 }, { 4, kNaN }, { 5, 1 } };
        toLogPlot(points);
        QCOMPARE(points, (QList<QPointF> { { 0, 2 }, { 3, -3 }, { 5, 0 } }));
        QList<QPointF> none { { 0, 0 }, { 1, -1 } };
        toLogPlot(none);
        QVERIFY(none.isEmpty());
    }

    void linearYRangeOfNothingIsTheEmptyRange()
    {
        // [0, 1] ± 5 %.
        YRange y = linearYRange(kInf, -kInf, std::nullopt, kEmptyDefault, 0, 0);
        QCOMPARE(y.from, -0.05);
        QCOMPARE(y.to, 1.05);
        QVERIFY(y.changes);
        // Already shown: held.
        y = linearYRange(kInf, -kInf, std::nullopt, kEmptyDefault, -0.05, 1.05);
        QVERIFY(!y.changes);
        // An empty range set for a percentage: [0, 100] ± 5.
        y = linearYRange(kInf, -kInf, std::nullopt, { 0, 100 }, 0, 1);
        QCOMPARE(y.from, -5.0);
        QCOMPARE(y.to, 105.0);
    }

    void linearYRangeOfEqualValues()
    {
        // A single value (or all equal): ± 5 % of it, at least ± 0.5.
        YRange y = linearYRange(3, 3, std::nullopt, kEmptyDefault, 0, 1);
        QCOMPARE(y.from, 2.5);
        QCOMPARE(y.to, 3.5);
        QVERIFY(y.changes);
        y = linearYRange(40, 40, std::nullopt, kEmptyDefault, 0, 1);
        QCOMPARE(y.from, 38.0);
        QCOMPARE(y.to, 42.0);
        y = linearYRange(-40, -40, std::nullopt, kEmptyDefault, 0, 1);
        QCOMPARE(y.from, -42.0);
        QCOMPARE(y.to, -38.0);
        y = linearYRange(0, 0, std::nullopt, kEmptyDefault, 0, 1);
        QCOMPARE(y.from, -0.5);
        QCOMPARE(y.to, 0.5);
        // Its ticks: 1 / 5 = 0.2, one decimal.
        const ValueTicks t = valueAxisTicks(2.5, 3.5, kYTickIntervals);
        QCOMPARE(t.interval, 0.2);
        QCOMPARE(t.labelFormat, QStringLiteral("%.1f"));
    }

    void linearYRangePadsBy5Percent()
    {
        YRange y = linearYRange(-20, -10, std::nullopt, kEmptyDefault, 0, 1); // ± 0.5
        QCOMPARE(y.from, -20.5);
        QCOMPARE(y.to, -9.5);
        y = linearYRange(-1, 3, std::nullopt, kEmptyDefault, 0, 1); // ± 0.2
        QCOMPARE(y.from, -1.2);
        QCOMPARE(y.to, 3.2);
    }

    void linearYRangeHoldsTheIncludedRange()
    {
        const std::optional<std::pair<double, double>> percent = std::pair { 0.0, 100.0 };
        // A flat 2–3 % does not fill the plot: [0, 100] ± 5.
        YRange y = linearYRange(2, 3, percent, kEmptyDefault, 0, 1);
        QCOMPARE(y.from, -5.0);
        QCOMPARE(y.to, 105.0);
        // Values beyond it widen it: [-10, 100] ± 5.5.
        y = linearYRange(-10, 50, percent, kEmptyDefault, 0, 1);
        QCOMPARE(y.from, -15.5);
        QCOMPARE(y.to, 105.5);
        // With nothing drawn the included range wins over the empty one.
        y = linearYRange(kInf, -kInf, percent, { 7, 8 }, 0, 1);
        QCOMPARE(y.from, -5.0);
        QCOMPARE(y.to, 105.0);
    }

    // Values on [0, 10] pad to [-0.5, 10.5]; an axis is kept while it holds [0, 10] and
    // spans at most 1.3 × 11 = 14.3.
    void linearYAxisMovesOnlyWhenItMust()
    {
        QVERIFY(!linearYRange(0, 10, std::nullopt, kEmptyDefault, -0.5, 10.5).changes);
        QVERIFY(!linearYRange(0, 10, std::nullopt, kEmptyDefault, -1, 12).changes); // 13
        QVERIFY(!linearYRange(0, 10, std::nullopt, kEmptyDefault, 0, 10).changes); // unpadded, still holds
        QVERIFY(linearYRange(0, 10, std::nullopt, kEmptyDefault, -1, 20).changes); // 21: wasteful
        QVERIFY(linearYRange(0, 10, std::nullopt, kEmptyDefault, 0.5, 12).changes); // misses 0
        QVERIFY(linearYRange(0, 10, std::nullopt, kEmptyDefault, -1, 9.9).changes); // misses 10
        // The range it would move to is the same either way.
        const YRange y = linearYRange(0, 10, std::nullopt, kEmptyDefault, -1, 12);
        QCOMPARE(y.from, -0.5);
        QCOMPARE(y.to, 10.5);
    }

    void logYRangeOfNothingShowsATenthToOne()
    {
        // log10: [-1, 0] ± max(0.02, 0.05).
        const YRange y = logYRange(kInf, -kInf, 0, 1);
        QCOMPARE(y.from, -1.05);
        QCOMPARE(y.to, 0.05);
        QVERIFY(y.changes);
        COMPARE_TICKS(logTicks(y.from, y.to), ticks({ 0.1, 0.2, 0.3, 0.5, 1 }));
    }

    void logYRangeOfValuesSpanningDecades()
    {
        // 0.01 to 100: log10 [-2, 2] ± 5 % of 4.
        QList<QPointF> drawn { { 0, 0.01 }, { 1, 0.5 }, { 2, 100 } };
        toLogPlot(drawn);
        YExtent e;
        e.add(drawn, 0, 2);
        YRange y = logYRange(e.lo, e.hi, 0, 1);
        QCOMPARE(y.from, -2.2);
        QCOMPARE(y.to, 2.2);
        QVERIFY(y.changes);
        // Held by an axis that holds [-2, 2] within 1.3 × 4.4 = 5.72.
        QVERIFY(!logYRange(e.lo, e.hi, -2.2, 2.2).changes);
        QVERIFY(!logYRange(e.lo, e.hi, -2.5, 2.5).changes);
        QVERIFY(logYRange(e.lo, e.hi, -3, 3).changes);
        QVERIFY(logYRange(e.lo, e.hi, -1.9, 2.5).changes);
        // Over 4.4 decades: the decades alone.
        COMPARE_TICKS(logTicks(y.from, y.to), ticks({ 0.01, 0.1, 1, 10, 100 }));
    }

    void logYRangeDropsNonPositiveValues()
    {
        // -1 and 0 are not drawn: the range is 0.01 to 100's, as above.
        QList<QPointF> drawn { { 0, -1 }, { 1, 0 }, { 2, 0.01 }, { 3, 100 } };
        toLogPlot(drawn);
        YExtent e;
        e.add(drawn, 0, 3);
        QCOMPARE(e.points, qsizetype(2));
        YRange y = logYRange(e.lo, e.hi, 0, 1);
        QCOMPARE(y.from, -2.2);
        QCOMPARE(y.to, 2.2);
        // Nothing positive at all: 0.1 to 1, as if empty.
        QList<QPointF> none { { 0, -5 }, { 1, 0 } };
        toLogPlot(none);
        YExtent nothing;
        nothing.add(none, 0, 1);
        QVERIFY(nothing.empty());
        y = logYRange(nothing.lo, nothing.hi, 0, 1);
        QCOMPARE(y.from, -1.05);
        QCOMPARE(y.to, 0.05);
    }

    void logYRangeOfEqualValues()
    {
        // One value: ± 0.02 in log10 (under 5 %).
        YRange y = logYRange(0, 0, 0, 1);
        QCOMPARE(y.from, -0.02);
        QCOMPARE(y.to, 0.02);
        // 1 alone is one label, too few: five evenly spaced in log space,
        // 10^(-0.016, -0.008, 0, 0.008, 0.016) to 3 digits.
        COMPARE_TICKS(logTicks(y.from, y.to), ticks({ 0.964, 0.982, 1, 1.02, 1.04 }));
        y = logYRange(3, 3, 0, 1);
        QCOMPARE(y.from, 2.98);
        QCOMPARE(y.to, 3.02);
    }

    void logTicksOverManyDecadesAreDecades()
    {
        COMPARE_TICKS(logTicks(-8.4, 1.2), ticks({ 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10 }));
        QCOMPARE(logTicks(-8.4, 1.2).first().label, QStringLiteral("1e-08"));
        QCOMPARE(logTicks(-8.4, 1.2).at(4).label, QStringLiteral("0.0001"));
    }

    void logTicksFillShorterRanges()
    {
        // 2.4 decades (≤ 3): 1, 2, 5.
        COMPARE_TICKS(logTicks(-1.2, 1.2), ticks({ 0.1, 0.2, 0.5, 1, 2, 5, 10 }));
        // 0.3 to 3 padded (1.1 decades, ≤ 1.5): 1, 2, 3, 5.
        const YRange y = logYRange(std::log10(0.3), std::log10(3.0), 0, 1);
        QCOMPARE(y.from, std::log10(0.3) - 0.05);
        QCOMPARE(y.to, std::log10(3.0) + 0.05);
        COMPARE_TICKS(logTicks(y.from, y.to), ticks({ 0.3, 0.5, 1, 2, 3 }));
        // At the bounds: 3 decades still 1, 2, 5; 1.45 (≤ 1.5) still 3s; 0.5 every digit.
        COMPARE_TICKS(logTicks(0, 3), ticks({ 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000 }));
        COMPARE_TICKS(logTicks(-1, 2.05), ticks({ 0.1, 1, 10, 100 })); // 3.05: decades alone
        COMPARE_TICKS(logTicks(-1, 0.45), ticks({ 0.1, 0.2, 0.3, 0.5, 1, 2 }));
        COMPARE_TICKS(logTicks(-0.25, 0.25), ticks({ 0.6, 0.7, 0.8, 0.9, 1 }));
        // 0.4 decades (≤ 0.5): every digit.
        COMPARE_TICKS(logTicks(0, 0.4), ticks({ 1, 2 }));
        COMPARE_TICKS(logTicks(0.2, 0.7), ticks({ 2, 3, 4, 5 }));
    }

    // 1.2 to 1.8 holds no digit: five labels at 1.2 × 1.5^(0.1, 0.3, 0.5, 0.7, 0.9), to 3
    // digits, placed where those rounded values lie.
    void logTicksBetweenTwoDigitsAreEvenlySpaced()
    {
        COMPARE_TICKS(logTicks(std::log10(1.2), std::log10(1.8)), ticks({ 1.25, 1.36, 1.47, 1.59, 1.73 }));
        // So narrow that every label rounds to 1: one, not five.
        COMPARE_TICKS(logTicks(0, 1e-4), ticks({ 1 }));
    }
};

QTEST_GUILESS_MAIN(TestAxisPolicy)
#include "tst_axis_policy.moc"
