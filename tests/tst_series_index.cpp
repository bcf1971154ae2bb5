// The series index under the console's charts (core/series): StableArray's storage, the
// min/max index (append and rebuild) and the reduction of a series to pixel columns. Pure,
// no display.
#include "downsample.h"
#include "stable_array.h"

#include <QTest>

#include <cmath>
#include <random>

using namespace scalelab;

class TestSeriesIndex : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void stableArrayNeverMovesWhatItHolds()
    {
        using Array = core::StableArray<double>;
        Array a;
        for (std::size_t i = 0; i <= Array::kBlock; ++i)
            a.push_back(double(i));
        const double *inSecondBlock = &a[Array::kBlock];
        const std::size_t n = 3 * Array::kBlock + 5;
        for (std::size_t i = a.size(); i < n; ++i)
            a.push_back(double(i));
        QCOMPARE(&a[Array::kBlock], inSecondBlock); // a live series never pauses to copy itself
        QCOMPARE(a.size(), n);
        QCOMPARE(a.back(), double(n - 1));
        QCOMPARE(a[2 * Array::kBlock + 3], double(2 * Array::kBlock + 3));
        QCOMPARE(std::lower_bound(a.begin(), a.end(), 150'000.5) - a.begin(), 150'001);
        QCOMPARE(std::upper_bound(a.begin(), a.end(), 7.0) - a.begin(), 8);
        a.clear();
        QVERIFY(a.empty());
    }

    void minMaxIndexAgreesWithAScan()
    {
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> value(-1, 1);
        core::MinMaxIndex index;
        std::vector<double> values;
        for (int i = 0; i < 5000; ++i) {
            values.push_back(value(rng));
            index.append(values.back());
        }
        std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
        for (int trial = 0; trial < 2000; ++trial) {
            std::size_t a = pick(rng), b = pick(rng);
            if (a > b)
                std::swap(a, b);
            ++b;
            const auto e = index.extremes(a, b);
            const auto [lo, hi] = std::minmax_element(values.begin() + a, values.begin() + b);
            QCOMPARE(values[e.min], *lo);
            QCOMPARE(values[e.max], *hi);
            QVERIFY(e.min >= a && e.min < b && e.max >= a && e.max < b);
        }
    }

    // Among equal extremes the index names the leftmost, at every level of its blocks (which
    // carry their extreme values) and at the ends of a query.
    void minMaxIndexNamesTheLeftmostOfEqualExtremes()
    {
        std::mt19937 rng(5);
        std::uniform_int_distribution<int> value(-3, 3);
        core::MinMaxIndex index;
        std::vector<double> values;
        for (int i = 0; i < 20'000; ++i) {
            values.push_back(value(rng));
            index.append(values.back());
        }
        std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
        for (int trial = 0; trial < 3000; ++trial) {
            std::size_t a = pick(rng), b = pick(rng);
            if (a > b)
                std::swap(a, b);
            ++b;
            const auto e = index.extremes(a, b);
            QCOMPARE(e.min,
                std::size_t(std::min_element(values.begin() + a, values.begin() + b) - values.begin()));
            QCOMPARE(e.max,
                std::size_t(std::max_element(values.begin() + a, values.begin() + b) - values.begin()));
        }
    }

    // rebuild() makes the index append() makes, afresh or over storage of the same size
    // (a new smoothing weight), and over another size.
    void rebuiltIndexIsTheAppendedOne()
    {
        std::mt19937 rng(11);
        std::uniform_real_distribution<double> value(-1, 1);
        core::MinMaxIndex rebuilt;
        for (const std::size_t n :
            { std::size_t(5003), std::size_t(5003), std::size_t(777), std::size_t(1) }) {
            core::MinMaxIndex appended;
            core::StableArray<double> values;
            for (std::size_t i = 0; i < n; ++i) {
                values.push_back(std::round(value(rng) * 8)); // ties too
                appended.append(values.back());
            }
            struct Counted { // the identity, counting its calls
                std::size_t calls = 0;
                double operator()(double v)
                {
                    ++calls;
                    return v;
                }
            };
            // f comes back in the state it ended in: called once a value, in order.
            QCOMPARE(rebuilt.rebuild(values, Counted {}).calls, n);
            QCOMPARE(rebuilt.size(), n);
            for (std::size_t a = 0; a < n; a += 1 + a / 3)
                for (const std::size_t b : { a + 1, (a + n) / 2 + 1, n }) {
                    QCOMPARE(rebuilt.extremes(a, b).min, appended.extremes(a, b).min);
                    QCOMPARE(rebuilt.extremes(a, b).max, appended.extremes(a, b).max);
                }
            rebuilt.append(0.5); // and it grows on as an appended one does
            appended.append(0.5);
            QCOMPARE(rebuilt.extremes(0, n + 1).max, appended.extremes(0, n + 1).max);
            rebuilt.rebuild(values, Counted {});
        }
    }

    void downsamplingKeepsExtremesAndBoundsThePointCount()
    {
        const int n = 1'000'000, pixels = 800;
        std::mt19937 rng(3);
        std::normal_distribution<double> noise(0, 1);
        core::StableArray<double> x;
        core::MinMaxIndex y;
        for (int i = 0; i < n; ++i) {
            x.push_back(i);
            y.append(i == 123'457 ? 50.0 : i == 876'543 ? -40.0 : noise(rng)); // one spike, one dip
        }
        const QList<QPointF> drawn = core::minMaxPerPixel(x, y, 0, n - 1, pixels);
        QVERIFY2(drawn.size() <= 2 * pixels + 2, qPrintable(QString::number(drawn.size())));
        QVERIFY(drawn.size() >= pixels); // every column has samples
        QVERIFY(drawn.contains(QPointF(123'457, 50.0)));
        QVERIFY(drawn.contains(QPointF(876'543, -40.0)));
        for (qsizetype i = 1; i < drawn.size(); ++i) { // column by column, no duplicates
            QVERIFY(drawn[i - 1] != drawn[i]);
            QVERIFY(core::pixelColumn(drawn[i - 1].x(), 0, n - 1, pixels)
                <= core::pixelColumn(drawn[i].x(), 0, n - 1, pixels));
        }

        // Each column's min and max are those of a scan of that column.
        const double width = double(n - 1) / pixels;
        for (int column : { 0, 17, 399, pixels - 1 }) {
            const double from = column * width, to = (column + 1) * width;
            double lo = INFINITY, hi = -INFINITY;
            for (int i = int(std::ceil(from)); i < n && (i < to || (column == pixels - 1 && i <= to)); ++i) {
                if (column > 0 && i == int(from) && double(i) <= from)
                    continue; // belongs to the previous column
                lo = std::min(lo, y[std::size_t(i)]);
                hi = std::max(hi, y[std::size_t(i)]);
            }
            QList<double> inColumn;
            for (const QPointF &p : drawn)
                if (p.x() > from - (column == 0 ? 1 : 0) && p.x() <= to)
                    inColumn << p.y();
            QVERIFY(inColumn.contains(lo));
            QVERIFY(inColumn.contains(hi));
        }

        // A zoomed range draws its own columns, plus one neighbour on each side.
        const QList<QPointF> zoomed = core::minMaxPerPixel(x, y, 1000, 1100, 50);
        QCOMPARE(zoomed.front().x(), 999.0);
        QCOMPARE(zoomed.back().x(), 1101.0);
        QVERIFY(zoomed.size() >= 50 + 2 && zoomed.size() <= 2 * 50 + 2);
    }

    void columnsJoinAtTheirNearEnds()
    {
        // Two samples a column; each column after the first starts at the end nearer to
        // where the line is, so no column's span is painted twice.
        core::StableArray<double> x;
        for (int i = 0; i < 8; ++i)
            x.push_back(i);
        core::MinMaxIndex y;
        for (double v : { 0.0, 10.0, 0.0, 9.0, 8.0, 1.0, 2.0, 3.0 })
            y.append(v);
        const QList<QPointF> drawn = core::minMaxPerPixel(x, y, 0, 7, 4);
        const QList<QPointF> expected { { 0, 0 }, { 1, 10 }, { 3, 9 }, { 2, 0 }, { 5, 1 }, { 4, 8 }, { 7, 3 },
            { 6, 2 } };
        QCOMPARE(drawn, expected);
        double travelled = 0;
        for (qsizetype i = 1; i < drawn.size(); ++i)
            travelled += std::abs(drawn[i].y() - drawn[i - 1].y());
        QCOMPARE(travelled, 10.0 + 1 + 9 + 1 + 7 + 5 + 1); // index order would travel 57
    }
};

QTEST_GUILESS_MAIN(TestSeriesIndex)
#include "tst_series_index.moc"
