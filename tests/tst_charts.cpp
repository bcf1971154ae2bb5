// The live charts: what is drawn for smoothing, log scale and x-axis modes, per-pixel
// downsampling, hover read-outs, legend toggles and export (what runs feed them: tst_run_charts).
#include "downsample.h"
#include "line_bodies.h"
#include "metric_chart.h"
#include "verify_ok.h"

#include <QAbstractAxis>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QFile>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPen>
#include <QSvgRenderer>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

using namespace scalelab;
using app::MetricChart;
using app::MetricPoint;
using app::MetricSeries;
using app::repeatBand;
using app::XAxis;

namespace {

// A noisy falling loss curve: step i, 100 steps per epoch, 0.05 s per step.
std::vector<MetricPoint> lossCurve(int n, unsigned seed = 1)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0, 0.15);
    std::vector<MetricPoint> points;
    for (int i = 1; i <= n; ++i)
        points.push_back(
            MetricPoint::timeline(i, i / 100.0, i * 0.05, 2.3 * std::exp(-i / 300.0) + 0.2 + noise(rng)));
    return points;
}

QList<double> ys(const QList<QPointF> &points)
{
    QList<double> out;
    for (const QPointF &p : points)
        out << p.y();
    return out;
}

// A frame: the redraw, then the view painted now, the whole of it.
void paintFrame(MetricChart &chart)
{
    chart.redraw();
    QCoreApplication::sendPostedEvents();
    chart.view()->viewport()->repaint();
}

// Frames until the plot keeps its width (the y axis' labels take theirs from it).
void settle(MetricChart &chart)
{
    for (qreal width = -1; width != chart.chart()->plotArea().width();) {
        width = chart.chart()->plotArea().width();
        paintFrame(chart);
    }
}

// Points by x, then y: what a line draws, whatever the order within a pixel column.
QList<QPair<double, double>> sorted(const QList<QPointF> &points)
{
    QList<QPair<double, double>> out;
    for (const QPointF &p : points)
        out << qMakePair(p.x(), p.y());
    std::sort(out.begin(), out.end());
    return out;
}

// Where a value is drawn, in the chart view's viewport coordinates.
QPoint viewPosition(const MetricChart &chart, QPointF value)
{
    const QPointF inChart = chart.chart()->mapToPosition(value, chart.line(chart.seriesIds().front()));
    return chart.view()->mapFromScene(chart.chart()->mapToScene(inChart));
}

} // namespace

class TestCharts : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // Two samples a few ulps apart (a raw value and its smoothed twin) once made a y range
    // Qt Charts steps through forever, allocating labels until memory ran out.
    void nearlyEqualValuesGetAUsableAxis()
    {
        app::MetricChart chart(QStringLiteral("Throughput"), QStringLiteral("img/s"));
        chart.resize(400, 300);
        chart.show();
        chart.addSeries(QStringLiteral("t"), QStringLiteral("t"));
        chart.append(QStringLiteral("t"), app::MetricPoint::at(app::XAxis::Step, 1, 54.5182));
        chart.append(
            QStringLiteral("t"), app::MetricPoint::at(app::XAxis::Step, 2, std::nextafter(54.5182, 100.0)));
        chart.redraw();
        // The chart's layout runs in the event loop (it never ended before): the axis is usable
        // once it has.
        auto *y = static_cast<QValueAxis *>(chart.yAxisItem());
        QTRY_VERIFY2_WITH_TIMEOUT(y->max() - y->min() > 0.1,
            qPrintable(QStringLiteral("%1 .. %2").arg(y->min()).arg(y->max())), 10'000);
        QVERIFY(y->min() < 54.5182 && y->max() > 54.5182);
    }

    // A percentage chart keeps its 0–100 scale: a flat 2 % line does not fill the plot.
    void yIncludeKeepsTheWholeScale()
    {
        app::MetricChart chart(QStringLiteral("CPU"), QStringLiteral("%"));
        chart.resize(400, 300);
        chart.addSeries(QStringLiteral("cpu"), QStringLiteral("CPU"));
        for (int i = 0; i < 10; ++i)
            chart.append(QStringLiteral("cpu"), app::MetricPoint::at(app::XAxis::Step, i, 1 + (i % 3)));
        chart.redraw();
        auto *y = static_cast<QValueAxis *>(chart.yAxisItem());
        QVERIFY(y->max() < 10); // fitted to the data
        chart.setYInclude(0, 100);
        chart.redraw();
        QVERIFY(y->min() <= 0 && y->max() >= 100);
    }

    void columnRangesAddUpToTheWholeGrid()
    {
        std::mt19937 rng(5);
        std::normal_distribution<double> noise(0, 1);
        core::StableArray<double> x;
        core::MinMaxIndex y;
        for (int i = 0; i < 50'000; ++i) {
            x.push_back(i * 0.37);
            y.append(noise(rng));
        }
        const double x0 = 100, x1 = 15'000;
        const int pixels = 700;
        const QList<QPointF> whole = core::minMaxPerPixel(x, y, x0, x1, pixels);
        for (int split : { 0, 1, 333, 699 }) {
            QList<QPointF> parts = core::minMaxPerPixel(x, y, x0, x1, pixels, 0, split);
            const QList<QPointF> tail = core::minMaxPerPixel(x, y, x0, x1, pixels, split);
            QVERIFY(!tail.isEmpty());
            // The tail opens with the last sample before its columns: the body's last column.
            QVERIFY(tail.front().x() <= x0 + (x1 - x0) / pixels * split);
            if (!parts.isEmpty() || split == 0)
                parts.append(tail.mid(split == 0 ? 0 : 1));
            QCOMPARE(parts.size(), whole.size());
            // The same columns, the same extremes (only the seam column's order may differ).
            QCOMPARE(sorted(parts), sorted(whole));
        }
        QCOMPARE(core::pixelColumn(x0, x0, x1, pixels), 0);
        QCOMPARE(core::pixelColumn(x0 + (x1 - x0) / pixels * 1.5, x0, x1, pixels), 1);
        QCOMPARE(core::pixelColumn(x1, x0, x1, pixels), pixels - 1);
        QCOMPARE(core::pixelColumn(x1 * 2, x0, x1, pixels), pixels - 1);
    }

    void aLiveLineRedrawsOnlyItsTail()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(900, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        const auto points = lossCurve(20'000);
        chart.append(QStringLiteral("a"), std::vector<MetricPoint>(points.begin(), points.end() - 100));
        const auto frame = [&] { paintFrame(chart); };
        settle(chart);
        // The finished columns are the body's, painted by the chart's LineBodies: its series
        // holds none, Qt Charts strokes none of them.
        QVERIFY(chart.line(QStringLiteral("a"))->points().isEmpty());
        QVERIFY(chart.plottedPoints(QStringLiteral("a")).size() > 500);
        const int paints = chart.bodies()->paints();
        QVERIFY(paints > 0);
        const auto *x = static_cast<QValueAxis *>(chart.xAxisItem());
        const double x0 = x->min(), x1 = x->max();
        for (auto p = points.end() - 100; p != points.end(); p += 10) {
            chart.append(QStringLiteral("a"), std::vector<MetricPoint>(p, p + 10));
            frame();
        }
        QCOMPARE(x->min(), x0); // the axis held still: it grows in steps
        QCOMPARE(x->max(), x1);
        // Live frames repainted the tail over the bodies' cached pixels: no body painted again.
        QCOMPARE(chart.bodies()->paints(), paints);
        // What is drawn is still the whole grid's min/max line.
        const int pixels = int(chart.chart()->plotArea().width());
        QCOMPARE(sorted(chart.drawnPoints(QStringLiteral("a"))),
            sorted(chart.data(QStringLiteral("a"))->downsample(XAxis::Step, x0, x1, pixels, false)));

        // A new smoothing weight paints them again.
        chart.setSmoothing(0.5);
        frame();
        QCOMPARE(chart.bodies()->paints(), paints + 1);
    }

    void aGrownAxisReducesOneLineAFrame()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(900, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        const QStringList ids { QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c") };
        std::vector<std::vector<MetricPoint>> curves;
        for (int r = 0; r < ids.size(); ++r) {
            curves.push_back(lossCurve(40'000, unsigned(r + 1)));
            chart.addSeries(ids[r], ids[r]);
            chart.append(ids[r], std::vector<MetricPoint>(curves[r].begin(), curves[r].begin() + 20'000));
        }
        settle(chart);
        const int pixels = int(chart.chart()->plotArea().width());
        const auto *x = static_cast<QValueAxis *>(chart.xAxisItem());
        const auto onTheGrid = [&](const QString &id) {
            return sorted(chart.drawnPoints(id))
                == sorted(chart.data(id)->downsample(XAxis::Step, x->min(), x->max(), pixels, false));
        };
        // One run goes on: the x axis grows. Its frame reduces one line to the new grid; the
        // others keep their points, drawn where they lie, until a frame of their own.
        chart.append(ids[0], std::vector<MetricPoint>(curves[0].begin() + 20'000, curves[0].end()));
        chart.redraw();
        QVERIFY(x->max() >= 40'000);
        int reduced = 0;
        for (const QString &id : ids)
            reduced += onTheGrid(id) ? 1 : 0;
        QCOMPARE(reduced, 1);
        // The frames after it (no new samples needed) reduce the others, one each.
        QTRY_VERIFY_WITH_TIMEOUT(onTheGrid(ids[0]) && onTheGrid(ids[1]) && onTheGrid(ids[2]), 30'000);
    }

    void wholeSeriesDownsampleStillKeepsSpikes()
    {
        std::vector<QPointF> points;
        for (int i = 0; i < 100'000; ++i)
            points.emplace_back(i, i == 5000 ? 9.0 : 0.0);
        const auto drawn = core::minMaxDownsample(points, 200);
        QVERIFY(drawn.size() <= 4 * 200);
        QVERIFY(drawn.contains(QPointF(5000, 9.0)));
    }

    void smoothingChangesWhatIsDrawn()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        const auto points = lossCurve(200);
        QCOMPARE(chart.append(QStringLiteral("a"), points), points.size());
        chart.redraw();
        auto line = [&] { return chart.drawnPoints(QStringLiteral("a")); };
        QCOMPARE(line().size(), 200);
        QCOMPARE(line().at(0).y(), points[0].y);
        QCOMPARE(line().at(199).y(), points[199].y);
        QCOMPARE(chart.drawnRawPoints(QStringLiteral("a")).size(), 0); // no faint line without smoothing

        chart.setSmoothing(0.9);
        QCOMPARE(line().size(), 200);
        // TensorBoard's debiased EMA: the first point is the raw value itself.
        QCOMPARE(line().at(0).y(), points[0].y);
        const double ema2 = (0.9 * 0.1 * points[0].y + 0.1 * points[1].y) / (1 - 0.9 * 0.9);
        QVERIFY(qFuzzyCompare(line().at(1).y(), ema2));
        double spreadRaw = 0, spreadSmooth = 0;
        for (int i = 101; i < 200; ++i) {
            spreadRaw += std::abs(points[i].y - points[i - 1].y);
            spreadSmooth += std::abs(line().at(i).y() - line().at(i - 1).y());
        }
        QVERIFY(spreadSmooth < spreadRaw / 3); // visibly smoother
        QCOMPARE(ys(chart.drawnRawPoints(QStringLiteral("a"))).size(), 200); // raw kept faintly behind
        QCOMPARE(chart.drawnRawPoints(QStringLiteral("a")).at(50).y(), points[50].y);
        if (const QString shots = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !shots.isEmpty()) {
            chart.resize(900, 500); // to look at: the smoothed line over the faint raw one
            chart.redraw();
            QVERIFY(chart.grab().save(shots + QStringLiteral("/smoothed_loss.png")));
        }

        chart.setSmoothing(5); // clamped like TensorBoard's slider
        QCOMPARE(chart.smoothing(), 0.999);
        chart.setSmoothing(0);
        QCOMPARE(line().at(150).y(), points[150].y);
    }

    void logScaleSwapsTheAxisAndDropsNonPositiveValues()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"),
            { MetricPoint::at(XAxis::Step, 1, 2.0), MetricPoint::at(XAxis::Step, 2, 0.0),
                MetricPoint::at(XAxis::Step, 3, 0.5), MetricPoint::at(XAxis::Step, 4, 0.01) });
        chart.redraw();
        QCOMPARE(chart.yAxisItem()->type(), QAbstractAxis::AxisTypeValue);
        QCOMPARE(chart.drawnPoints(QStringLiteral("a")).size(), 4);

        chart.setLogScale(true);
        QCOMPARE(chart.yAxisItem()->type(), QAbstractAxis::AxisTypeCategory);
        const QList<double> drawn = ys(chart.drawnPoints(QStringLiteral("a"))); // in the data's units
        QCOMPARE(drawn.size(), 3);
        QVERIFY(
            qFuzzyCompare(drawn[0], 2.0) && qFuzzyCompare(drawn[1], 0.5) && qFuzzyCompare(drawn[2], 0.01));
        // Drawn at log10(y), labelled at the decades over this long range (0.01 to 2).
        QCOMPARE(chart.plottedPoints(QStringLiteral("a")).first().y(), std::log10(2.0));
        auto *log = static_cast<QCategoryAxis *>(chart.yAxisItem());
        QVERIFY(log->min() < -2 && log->max() > std::log10(2.0));
        QCOMPARE(log->categoriesLabels(),
            (QStringList { QStringLiteral("0.01"), QStringLiteral("0.02"), QStringLiteral("0.05"),
                QStringLiteral("0.1"), QStringLiteral("0.2"), QStringLiteral("0.5"), QStringLiteral("1"),
                QStringLiteral("2") }));
        QVERIFY(chart.line(QStringLiteral("a"))->attachedAxes().contains(chart.yAxisItem()));

        chart.setLogScale(false);
        QCOMPARE(chart.yAxisItem()->type(), QAbstractAxis::AxisTypeValue);
        QCOMPARE(chart.drawnPoints(QStringLiteral("a")).size(), 4);
    }

    // An empty percentage chart reads 0–100 %, not 0–1.
    void emptyChartShowsItsEmptyRange()
    {
        MetricChart chart(QStringLiteral("Accuracy"), QStringLiteral("accuracy %"));
        chart.setYEmptyRange(0, 100);
        chart.redraw();
        const auto *axis = static_cast<QValueAxis *>(chart.yAxisItem());
        QVERIFY(axis->min() <= 0 && axis->max() >= 100 && axis->max() < 110);
    }

    // A loss between 0.3 and 3 (less than a decade each side of 1) still has labels to read.
    void logScaleLabelsAShortRange()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"),
            { MetricPoint::at(XAxis::Step, 1, 2.9), MetricPoint::at(XAxis::Step, 2, 1.2),
                MetricPoint::at(XAxis::Step, 3, 0.31) });
        chart.setLogScale(true);
        chart.redraw();
        auto *axis = static_cast<QCategoryAxis *>(chart.yAxisItem());
        QCOMPARE(axis->categoriesLabels(),
            (QStringList { QStringLiteral("0.3"), QStringLiteral("0.5"), QStringLiteral("1"),
                QStringLiteral("2"), QStringLiteral("3") }));
        // Over less than half a decade, every digit.
        chart.removeAllSeries();
        chart.addSeries(QStringLiteral("b"), QStringLiteral("run b"));
        chart.append(QStringLiteral("b"),
            { MetricPoint::at(XAxis::Step, 1, 0.9), MetricPoint::at(XAxis::Step, 2, 0.45) });
        chart.redraw();
        QCOMPARE(static_cast<QCategoryAxis *>(chart.yAxisItem())->categoriesLabels(),
            (QStringList { QStringLiteral("0.5"), QStringLiteral("0.6"), QStringLiteral("0.7"),
                QStringLiteral("0.8"), QStringLiteral("0.9") }));
        // Between two whole digits (1.2 to 1.8): evenly spaced labels, not none.
        chart.removeAllSeries();
        chart.addSeries(QStringLiteral("c"), QStringLiteral("run c"));
        chart.append(QStringLiteral("c"),
            { MetricPoint::at(XAxis::Step, 1, 1.8), MetricPoint::at(XAxis::Step, 2, 1.2) });
        chart.redraw();
        auto *axis2 = static_cast<QCategoryAxis *>(chart.yAxisItem());
        QVERIFY2(axis2->count() >= 3, qPrintable(axis2->categoriesLabels().join(u',')));
        for (const QString &label : axis2->categoriesLabels()) {
            const double v = label.toDouble();
            QVERIFY2(v > 1.1 && v < 2.0, qPrintable(label));
        }
        // One value: labelled too.
        chart.removeAllSeries();
        chart.addSeries(QStringLiteral("d"), QStringLiteral("run d"));
        chart.append(QStringLiteral("d"),
            { MetricPoint::at(XAxis::Step, 1, 1.0), MetricPoint::at(XAxis::Step, 2, 1.0) });
        chart.redraw();
        QVERIFY(static_cast<QCategoryAxis *>(chart.yAxisItem())->count() >= 1);
    }

    void xAxisModesPlaceSamplesByStepEpochOrTime()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"), lossCurve(300));
        chart.redraw();
        auto line = [&] { return chart.drawnPoints(QStringLiteral("a")); };
        QCOMPARE(line().at(99).x(), 100.0);
        chart.setXAxis(XAxis::Epoch);
        QCOMPARE(line().at(99).x(), 1.0);
        QCOMPARE(static_cast<QAbstractAxis *>(chart.xAxisItem())->titleText(), QStringLiteral("epoch"));
        chart.setXAxis(XAxis::WallClock);
        QCOMPARE(line().at(99).x(), 5.0);
        chart.setXAxis(XAxis::Workers); // the series has no such axis: nothing to draw
        QCOMPARE(line().size(), 0);

        // Samples that would run backwards are refused, so the line stays a function of x.
        QCOMPARE(chart.append(QStringLiteral("a"), MetricPoint::timeline(10, 0.1, 0.5, 1.0)), 0u);
        QCOMPARE(chart.append(QStringLiteral("a"), MetricPoint::timeline(301, 3.01, NAN, 1.0)), 1u);
        QCOMPARE(chart.data(QStringLiteral("a"))->column(XAxis::WallClock).back(), 15.0);
    }

    // Epoch boundaries: vertical lines where each x axis puts them, labelled, removed as a group.
    void verticalMarkersFollowTheXAxis()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(640, 400);
        chart.show();
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"), lossCurve(300)); // 100 steps per epoch, 20 steps per second
        for (int epoch : { 1, 2, 3 })
            chart.addVerticalMarker(QStringLiteral("a/epochs"),
                MetricPoint::timeline(epoch * 100, epoch, epoch * 5, MetricPoint::kNone),
                QStringLiteral("epoch %1").arg(epoch));
        chart.addVerticalMarker(
            QStringLiteral("other"), MetricPoint::at(XAxis::WallClock, 7, 0), QStringLiteral("start"));
        chart.redraw();
        QTRY_COMPARE(chart.shownVerticalMarkers(),
            (QList<std::pair<double, QString>> { { 100, QStringLiteral("epoch 1") },
                { 200, QStringLiteral("epoch 2") },
                { 300, QStringLiteral("epoch 3") } })); // "start" has no step
        chart.setXAxis(XAxis::Epoch);
        QTRY_COMPARE(chart.shownVerticalMarkers().size(), 3);
        QCOMPARE(chart.shownVerticalMarkers().first().first, 1.0);
        chart.setXAxis(XAxis::WallClock);
        QTRY_COMPARE(chart.shownVerticalMarkers().size(), 4);
        QCOMPARE(chart.shownVerticalMarkers().at(1),
            (std::pair<double, QString> { 7.0, QStringLiteral("start") }));
        // Outside a zoomed range: not drawn.
        chart.setXRange(0, 6);
        chart.redraw();
        QTRY_COMPARE(chart.shownVerticalMarkers().size(), 1);
        chart.removeVerticalMarkers(QStringLiteral("a/epochs"));
        chart.resetZoom();
        chart.redraw();
        QTRY_COMPARE(chart.shownVerticalMarkers(),
            (QList<std::pair<double, QString>> { { 7.0, QStringLiteral("start") } }));
    }

    // A scaling point's spread: an I-beam from its slowest to its fastest run, at its x, within
    // the plot; removed with its group when the points are drawn again.
    void rangeBarsShowASpread()
    {
        MetricChart chart(QStringLiteral("Speedup"), QStringLiteral("speedup"));
        chart.resize(640, 400);
        chart.show();
        chart.setXAxis(XAxis::Workers);
        chart.addSeries(QStringLiteral("wall"), QStringLiteral("wall-clock"),
            { QColor(Qt::blue), Qt::SolidLine, true, false });
        chart.append(QStringLiteral("wall"),
            { MetricPoint::at(XAxis::Workers, 1, 1.0), MetricPoint::at(XAxis::Workers, 2, 1.7),
                MetricPoint::at(XAxis::Workers, 4, 3.0) });
        chart.addRangeBar(
            QStringLiteral("spread"), MetricPoint::at(XAxis::Workers, 2, 1.7), 1.5, 1.9, Qt::blue);
        chart.addRangeBar(
            QStringLiteral("spread"), MetricPoint::at(XAxis::Workers, 4, 3.0), 2.6, 3.3, Qt::blue);
        chart.redraw();
        QTRY_COMPARE(chart.shownRangeBars(),
            (QList<std::tuple<double, double, double>> { { 2.0, 1.5, 1.9 }, { 4.0, 2.6, 3.3 } }));
        QVERIFY(chart.shownVerticalMarkers().isEmpty()); // bars are not labelled markers
        // Drawn where the y axis puts those values: the bar's ends bracket its point.
        const auto *y = qobject_cast<const QValueAxis *>(chart.yAxisItem());
        QVERIFY(y && y->min() <= 1.5 && y->max() >= 3.3);
        chart.removeVerticalMarkers(QStringLiteral("spread"));
        QVERIFY(chart.shownRangeBars().isEmpty());
    }

    // A new weight re-smooths a series in one pass (MinMaxIndex::rebuild): its values, its
    // index and what is appended after it are those of the series smoothed as it grew, over
    // more than one block of storage (65,536 values each), in place or in fresh storage.
    void resmoothedSeriesIsTheOneSmoothedAsItGrew()
    {
        constexpr int kPoints = 150'001;
        std::vector<MetricPoint> points;
        for (int i = 0; i < kPoints; ++i)
            points.push_back(MetricPoint::timeline(
                i, i / 1000.0, i * 0.1, 1 + std::sin(i * 0.01) + 0.3 * ((i * 7919) % 13) / 13.0));
        MetricSeries grown, inPlace, fresh;
        grown.setSmoothing(0.9);
        inPlace.setSmoothing(0.5);
        for (int i = 0; i < kPoints - 1'000; ++i) {
            grown.append(points[i]);
            inPlace.append(points[i]);
            fresh.append(points[i]);
        }
        inPlace.setSmoothing(0.9); // the storage of weight 0.5, rewritten
        fresh.setSmoothing(0.9); // none before
        for (int i = kPoints - 1'000; i < kPoints; ++i)
            for (MetricSeries *s : { &grown, &inPlace, &fresh })
                s->append(points[i]);
        for (const MetricSeries *s : { &inPlace, &fresh }) {
            QCOMPARE(s->size(), grown.size());
            for (std::size_t i = 0; i < grown.size(); ++i)
                if (s->shownValue(i) != grown.shownValue(i))
                    QFAIL(qPrintable(QStringLiteral("value %1: %2, smoothed as it grew %3")
                                         .arg(i)
                                         .arg(s->shownValue(i), 0, 'g', 17)
                                         .arg(grown.shownValue(i), 0, 'g', 17)));
            for (const auto &[x0, x1, pixels] : { std::tuple { 0.0, double(kPoints), 800 },
                     std::tuple { 65'530.0, 65'600.0, 7 }, std::tuple { 1'234.0, 140'000.0, 333 } })
                QCOMPARE(s->downsample(XAxis::Step, x0, x1, pixels, true),
                    grown.downsample(XAxis::Step, x0, x1, pixels, true));
        }
    }

    // The smoothed values are smoothing.h's formula to the bit, as the series grows and
    // re-smoothed in one pass (on x86-64 the loader's choice of the FMA or the plain build
    // of MetricSeries's resmooth): one rounding of the multiply-add, the debiasing factor
    // 0 once w^n < 1e-20.
    void smoothedValuesAreTheDocumentedAverage()
    {
        constexpr int kPoints = 3'000; // w^n reaches 1e-20 at n = 437 for w = 0.9
        MetricSeries grown, resmoothed;
        grown.setSmoothing(0.9);
        for (int i = 0; i < kPoints; ++i) {
            const MetricPoint p = MetricPoint::timeline(i, i / 100.0, i * 0.1, std::cos(i * 0.37) + i * 1e-3);
            grown.append(p);
            resmoothed.append(p);
        }
        resmoothed.setSmoothing(0.9);
        double accumulator = 0, power = 1;
        for (int i = 0; i < kPoints; ++i) {
            accumulator = std::fma(accumulator, 0.9, (1 - 0.9) * grown.rawValue(std::size_t(i)));
            power = power < 1e-20 ? 0.0 : power * 0.9;
            const double expected = accumulator / (1 - power);
            for (const MetricSeries *s : { &grown, &resmoothed })
                if (s->shownValue(std::size_t(i)) != expected)
                    QFAIL(qPrintable(QStringLiteral("value %1: %2, the formula gives %3")
                                         .arg(i)
                                         .arg(s->shownValue(std::size_t(i)), 0, 'g', 17)
                                         .arg(expected, 0, 'g', 17)));
        }
    }

    // Repeats' spread: at the steps two runs or more reached, mean, lowest and highest; a
    // retried run's later attempt replaces its earlier samples from where it resumed.
    void repeatBandAlignsRunsByStep()
    {
        const auto series = [](std::initializer_list<std::pair<double, double>> stepAndY) {
            MetricSeries s;
            for (const auto &[step, y] : stepAndY)
                s.append(MetricPoint::timeline(step, step / 4, step * 10, y));
            return s;
        };
        const MetricSeries a = series({ { 1, 1 }, { 2, 2 }, { 3, 3 }, { 4, 4 } });
        const MetricSeries b = series({ { 1, 3 }, { 2, 2 }, { 3, 1 } });
        const MetricSeries c1 = series({ { 1, 5 }, { 2, 5 }, { 3, 5 } });
        const MetricSeries c2 = series({ { 3, 0 }, { 4, 0 } }); // attempt 2, resumed at step 3
        const auto band = repeatBand({ { &a }, { &b }, { &c1, &c2 } });
        QCOMPARE(band.size(), 4u); // step 4: a and c only (b stopped at 3)
        const double expected[][4] = { { 1, 3, 1, 5 }, { 2, 3, 2, 5 }, { 3, 4.0 / 3, 0, 3 }, { 4, 2, 0, 4 } };
        for (std::size_t i = 0; i < band.size(); ++i) {
            QCOMPARE(band[i].mean.x[0], expected[i][0]);
            QCOMPARE(band[i].mean.y, expected[i][1]);
            QCOMPARE(band[i].low, expected[i][2]);
            QCOMPARE(band[i].high, expected[i][3]);
            QCOMPARE(band[i].mean.x[2], expected[i][0] * 10); // seconds averaged
        }
        QVERIFY(repeatBand({ { &a } }).empty()); // one run has no spread
        const MetricSeries noSteps;
        QVERIFY(repeatBand({ { &a }, { &noSteps } }).empty());
    }

    void redrawBoundsLinesByThePlotWidth()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(900, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"), lossCurve(200'000));
        chart.setSmoothing(0.6);
        const int width = int(chart.chart()->plotArea().width());
        QVERIFY(width > 300);
        QVERIFY(chart.drawnPoints(QStringLiteral("a")).size() <= 2 * width + 2);
        QVERIFY(chart.drawnRawPoints(QStringLiteral("a")).size() <= 2 * width + 2);
        QVERIFY(chart.drawnPoints(QStringLiteral("a")).size() > width / 2);
    }

    void hoverReadOutGivesTheNearestPoint()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.addSeries(QStringLiteral("b"), QStringLiteral("run b"));
        for (int i = 1; i <= 50; ++i) {
            chart.append(QStringLiteral("a"), MetricPoint::timeline(i, i / 10.0, i * 2.0, 1.0));
            chart.append(QStringLiteral("b"), MetricPoint::timeline(i, i / 10.0, i * 2.0, 3.0));
        }
        chart.redraw();
        QCoreApplication::sendPostedEvents(); // let the chart lay out its plot area

        // A few pixels off sample 20 of run b.
        const QPoint at = viewPosition(chart, QPointF(20, 3.0)) + QPoint(3, 4);
        auto r = chart.readOutAt(at);
        QVERIFY(r.has_value());
        QCOMPARE(r->seriesId, QStringLiteral("b"));
        QCOMPARE(r->index, std::size_t(19));
        QCOMPARE(r->point.x[int(XAxis::Step)], 20.0);
        QCOMPARE(r->point.x[int(XAxis::WallClock)], 40.0);
        QCOMPARE(r->shown, 3.0);
        QVERIFY2(r->text().contains(QStringLiteral("run b")) && r->text().contains(QStringLiteral("step 20")),
            qPrintable(r->text()));

        // Near run a's line instead.
        r = chart.readOutAt(viewPosition(chart, QPointF(33.4, 1.0)));
        QVERIFY(r.has_value());
        QCOMPARE(r->seriesId, QStringLiteral("a"));
        QCOMPARE(r->index, std::size_t(32));

        // Far outside the plot: nothing.
        QVERIFY(!chart.readOutAt(QPoint(-500, -500)).has_value());
    }

    void legendToggleHidesASeries()
    {
        MetricChart chart(QStringLiteral("Accuracy"), QStringLiteral("%"));
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.addSeries(QStringLiteral("b"), QStringLiteral("run b"));
        chart.append(QStringLiteral("a"), lossCurve(100, 1));
        chart.append(QStringLiteral("b"), lossCurve(100, 2));
        chart.redraw();
        // The legend lays out its entries in the event loop. One entry per run: the faint raw
        // lines and the hover marker have none shown.
        QLineSeries *b = chart.line(QStringLiteral("b"));
        const auto shownMarkers = [&] {
            int shown = 0;
            for (auto *m : chart.chart()->legend()->markers())
                shown += m->isVisible() ? 1 : 0;
            return shown;
        };
        QTRY_COMPARE_WITH_TIMEOUT(shownMarkers(), 2, 10'000);
        const auto markers = chart.chart()->legend()->markers(b);
        QCOMPARE(markers.size(), 1);

        Q_EMIT markers.front()->clicked();
        QVERIFY(!chart.isSeriesVisible(QStringLiteral("b")));
        QVERIFY(!b->isVisible());
        QVERIFY(markers.front()->isVisible()); // still there to click again
        QVERIFY(chart.line(QStringLiteral("a"))->isVisible());
        QVERIFY(chart.drawnPoints(QStringLiteral("a")).size() > 0);

        Q_EMIT markers.front()->clicked();
        QVERIFY(chart.isSeriesVisible(QStringLiteral("b")));
        QVERIFY(b->isVisible());
        QCOMPARE(chart.drawnPoints(QStringLiteral("b")).size(), 100);
    }

    void speedupChartDrawsTheIdealLine()
    {
        MetricChart chart(QStringLiteral("Speedup"), QStringLiteral("speedup ×"));
        chart.setXAxis(XAxis::Workers);
        chart.addSeries(
            QStringLiteral("speedup"), QStringLiteral("measured"), { QColor(), Qt::SolidLine, true, false });
        chart.append(QStringLiteral("speedup"),
            { MetricPoint::at(XAxis::Workers, 1, 1.0), MetricPoint::at(XAxis::Workers, 2, 1.8),
                MetricPoint::at(XAxis::Workers, 4, 3.1) });
        chart.setReferenceLine(QStringLiteral("ideal"), 1, 0);
        chart.setSmoothing(0.9); // does not apply to a scaling series
        chart.redraw();
        QCOMPARE(ys(chart.drawnPoints(QStringLiteral("speedup"))), (QList<double> { 1.0, 1.8, 3.1 }));
        // Workers are whole: ticks at 1, 2, 3 … never at 1.5.
        const auto horizontal = chart.chart()->axes(Qt::Horizontal);
        QVERIFY(!horizontal.isEmpty());
        const auto *workers = qobject_cast<const QValueAxis *>(horizontal.first());
        QVERIFY(workers);
        QVERIFY2(
            workers->tickInterval() >= 1 && workers->tickInterval() == std::floor(workers->tickInterval()),
            qPrintable(QString::number(workers->tickInterval())));
        const auto *ideal = chart.chart()->findChild<QLineSeries *>(QStringLiteral("reference"));
        QVERIFY(ideal == nullptr || ideal->count() == 2); // found through the series list below
        QLineSeries *reference = nullptr;
        for (auto *s : chart.chart()->series())
            if (s->objectName() == QStringLiteral("reference"))
                reference = static_cast<QLineSeries *>(s);
        QVERIFY(reference);
        QCOMPARE(reference->count(), 2);
        for (const QPointF &p : reference->points())
            QCOMPARE(p.y(), p.x()); // y = x: perfect linear scaling
    }

    void exportWritesPngAndSvg()
    {
        QTemporaryDir dir;
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(640, 400);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"), lossCurve(1000));
        const QString png = dir.filePath(QStringLiteral("loss.png"));
        const QString svg = dir.filePath(QStringLiteral("loss.svg"));
        VERIFY_OK(chart.exportPng(png));
        VERIFY_OK(chart.exportSvg(svg));

        QImage image;
        QVERIFY(image.load(png, "PNG"));
        QVERIFY(image.width() >= 640 && image.height() >= 400);
        QVERIFY(image.pixelColor(image.width() / 2, image.height() / 2).isValid());
        QSet<QRgb> colors;
        for (int x = 0; x < image.width(); x += 7)
            colors.insert(image.pixel(x, image.height() / 2));
        QVERIFY(colors.size() > 2); // a drawing, not a blank page

        QSvgRenderer renderer(svg);
        QVERIFY(renderer.isValid());
        QVERIFY(renderer.defaultSize().width() > 0);
        QFile file(svg);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray text = file.readAll();
        QVERIFY(text.contains("<svg"));
        QVERIFY(text.contains("Loss"));

        const core::Status refused = chart.exportPng(dir.filePath(QStringLiteral("missing/folder/x.png")));
        QVERIFY(!refused);
        QVERIFY(refused.error().contains(QLatin1String("missing/folder/x.png")));
    }

    void colorsFollowThePalette()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(640, 400);
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.append(QStringLiteral("a"), lossCurve(500));
        QPalette dark;
        dark.setColor(QPalette::Base, QColor(0x1e1e1e));
        dark.setColor(QPalette::Window, QColor(0x2b2b2b));
        dark.setColor(QPalette::Text, QColor(0xe0e0e0));
        dark.setColor(QPalette::WindowText, QColor(0xe0e0e0));
        chart.setPalette(dark);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        QCOMPARE(chart.chart()->backgroundBrush().color(), QColor(0x1e1e1e));
        QCOMPARE(chart.yAxisItem()->labelsBrush().color(), QColor(0xe0e0e0));
        QCOMPARE(chart.chart()->titleBrush().color(), QColor(0xe0e0e0));
        const QString path = qEnvironmentVariable("SCALELAB_TEST_SCREENSHOT_DIR");
        if (!path.isEmpty())
            VERIFY_OK(chart.exportPng(path + QStringLiteral("/dark.png")));
        // On a log scale too: the axis made for it takes the palette.
        chart.setLogScale(true);
        chart.redraw();
        // Qt Charts removes the old axis's items from the scene on the event loop.
        QTRY_COMPARE_WITH_TIMEOUT(chart.chart()->axes(Qt::Vertical).size(), 1, 10'000);
        QCOMPARE(chart.yAxisItem()->labelsBrush().color(), QColor(0xe0e0e0));
        QVERIFY(!static_cast<QCategoryAxis *>(chart.yAxisItem())->categoriesLabels().isEmpty());
        if (!path.isEmpty())
            VERIFY_OK(chart.exportPng(path + QStringLiteral("/dark-log.png")));
    }
};

QTEST_MAIN(TestCharts)
#include "tst_charts.moc"
