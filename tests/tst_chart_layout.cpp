// The report charts' layout (core/reports/chart_painter.h): where the plot, axes, ticks,
// reference lines and legend go, asserted on layoutChart()'s value rather than on the SVG
// that paintChart() draws from it.
#include "chart_layout.h"

#include <QTest>

#include <cmath>

using namespace scalelab::core;

namespace {

const QRectF kRect(0, 0, 580, 350);

ChartSeries series(const QString &name, const QList<QPointF> &points)
{
    ChartSeries s;
    s.name = name;
    s.points = points;
    s.color = Qt::blue;
    s.markers = true;
    return s;
}

// An accuracy chart whose every point is at or above `target`, with the target's line.
ChartSpec accuracyAbove(double target)
{
    ChartSpec c;
    c.title = QStringLiteral("Test accuracy by epoch");
    c.yPercent = true;
    c.xIntegerTicks = true;
    c.series << series(
        QStringLiteral("1 worker"), { { 1, target }, { 2, target + 0.1 }, { 3, target + 0.2 } });
    c.referenceLines.append({ target, QStringLiteral("target"), Qt::red });
    return c;
}

bool inside(const QRectF &rect, QPointF p)
{
    const double e = 1e-6;
    return p.x() >= rect.left() - e && p.x() <= rect.right() + e && p.y() >= rect.top() - e
        && p.y() <= rect.bottom() + e;
}

} // namespace

class TestChartLayout : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // Issue 21: the target's line sat on the x axis when every point was at or above it.
    void targetLineIsClearOfTheAxis()
    {
        for (const double target : { 0.5, 0.7 }) {
            const ChartLayout l = layoutChart(accuracyAbove(target), kRect);
            QVERIFY(!l.empty);
            QVERIFY(l.yLo < target && target < l.yHi);
            const qreal y = l.mapY(target);
            QVERIFY2(l.plot.bottom() - y >= 10, qPrintable(QString::number(l.plot.bottom() - y)));
            // The y ticks go up from the x axis, in round steps, and read as percents.
            QVERIFY(l.yTicks.size() >= 2);
            QCOMPARE(l.yTicks.first().value, l.yLo);
            QCOMPARE(l.mapY(l.yLo), l.plot.bottom());
            for (const ChartTick &t : l.yTicks)
                QVERIFY2(t.label.endsWith(QLatin1Char('%')), qPrintable(t.label));
        }
    }

    // The ranges hold every point, error bar and line: nothing is drawn outside the plot.
    void everythingDrawnIsInsideThePlot()
    {
        ChartSpec c;
        ChartSeries s = series(QStringLiteral("a"), { { 1, 10 }, { 2, qQNaN() }, { 8, 55 } });
        s.errorBars = { { 5, 12 }, { 0, 0 }, { 50, 90 } };
        c.series << s;
        c.referenceLines.append({ 100, QStringLiteral("ideal"), Qt::gray });
        c.verticalLines.append({ 12, QStringLiteral("rung"), Qt::gray });
        const ChartLayout l = layoutChart(c, kRect);
        for (const QPointF p :
            { QPointF(1, 5), QPointF(1, 12), QPointF(8, 90), QPointF(8, 50), QPointF(12, 100) })
            QVERIFY2(inside(l.plot, QPointF(l.mapX(p.x()), l.mapY(p.y()))),
                qPrintable(QStringLiteral("%1,%2").arg(p.x()).arg(p.y())));
        // The reference line keeps a margin from the frame.
        QVERIFY(l.mapY(100) > l.plot.top());
        QVERIFY(l.plot.top() >= l.title.bottom());
        QVERIFY(inside(kRect, l.plot.topLeft()) && inside(kRect, l.plot.bottomRight()));
    }

    // Workers and epochs: whole-number ticks, and a margin so the end points are off the frame.
    void integerAxisHasWholeTicksAndMargins()
    {
        ChartSpec c;
        c.xIntegerTicks = true;
        c.series << series(QStringLiteral("a"), { { 1, 1 }, { 2, 1.9 }, { 4, 3.5 }, { 8, 6 } });
        const ChartLayout l = layoutChart(c, kRect);
        QVERIFY(l.xLo < 1 && l.xHi > 8);
        QVERIFY(!l.xTicks.isEmpty());
        for (const ChartTick &t : l.xTicks) {
            QCOMPARE(t.value, std::round(t.value));
            QCOMPARE(t.label, QString::number(int(t.value)));
        }
    }

    void emptyChartKeepsAUsableAxis()
    {
        ChartSpec c;
        c.series << series(QStringLiteral("nothing"), { { qQNaN(), 1 } });
        const ChartLayout l = layoutChart(c, kRect);
        QVERIFY(l.empty);
        QCOMPARE(l.yLo, 0.0);
        QCOMPARE(l.yHi, 1.0);
        QVERIFY(l.plot.width() > 0 && l.plot.height() > 0);
    }

    // One entry per name, in rows that wrap inside the chart, under the plot; the colour
    // scale takes the first row.
    void legendWrapsUnderThePlot()
    {
        ChartSpec c;
        for (int i = 0; i < 10; ++i)
            c.series << series(QStringLiteral("configuration number %1").arg(i), { { double(i), 1.0 } });
        c.series << series(QStringLiteral("configuration number 0"), { { 3, 2 } }); // a repeat
        c.series << series(QString(), { { 4, 2 } }); // not listed
        c.colorScale = ChartColorScale { QStringLiteral("final"), QStringLiteral("0.1"),
            QStringLiteral("0.9"), { Qt::red, Qt::blue } };
        const ChartLayout l = layoutChart(c, kRect);
        QCOMPARE(l.legendEntries.size(), 10);
        QCOMPARE(l.legendScaleHeight, l.legendRowHeight);
        QCOMPARE(l.legendEntries.first().at.y(), l.legend.top() + l.legendRowHeight);
        QVERIFY(l.legendEntries.last().at.y() > l.legendEntries.first().at.y()); // wrapped
        for (const ChartLegendEntry &e : l.legendEntries) {
            QVERIFY(inside(l.legend, e.at));
            QCOMPARE(c.series[e.series].name, e.name);
        }
        QVERIFY(l.plot.bottom() < l.legend.top());
        QCOMPARE(l.legend.bottom(), kRect.bottom() - 8);
    }

    // Parallel coordinates: evenly spaced axes, each range widened to hold its values,
    // categories spread evenly, log axes ticked by decades.
    void parallelAxesAreSpacedAndWidened()
    {
        ChartSpec c;
        ChartParallelAxis lr;
        lr.name = QStringLiteral("learning rate");
        lr.log = true;
        lr.lo = 0.01;
        lr.hi = 0.1;
        ChartParallelAxis model;
        model.name = QStringLiteral("model");
        model.categories = { QStringLiteral("resnet"), QStringLiteral("vit") };
        ChartParallelAxis accuracy;
        accuracy.name = QStringLiteral("accuracy");
        accuracy.percent = true;
        accuracy.lo = 0.5;
        accuracy.hi = 0.9;
        c.parallelAxes = { lr, model, accuracy };
        c.series << series(QStringLiteral("trial 1"), { { 0, 0.001 }, { 1, 1 }, { 2, 0.95 } });
        const ChartLayout l = layoutChart(c, kRect);
        QVERIFY(!l.empty);
        QCOMPARE(l.parallelAxes.size(), 3);
        QCOMPARE(l.parallelAxes[0].lo, 0.001);
        QCOMPARE(l.parallelAxes[2].hi, 0.95);
        QCOMPARE(l.parallelX(0), l.plot.left());
        QCOMPARE(l.parallelX(2), l.plot.right());
        QVERIFY(std::abs(l.parallelX(1) - l.plot.center().x()) < 1e-9);
        QCOMPARE(l.parallelY(0, 0.001), l.plot.bottom());
        QCOMPARE(l.parallelY(2, 0.95), l.plot.top());
        QVERIFY(std::abs(l.parallelY(1, 0) - (l.plot.bottom() - 0.25 * l.plot.height())) < 1e-9);
        QVERIFY(std::isnan(l.parallelY(0, -1))); // no place on a log axis
        QStringList decades;
        for (const ChartTick &t : l.parallelTicks[0])
            decades << t.label;
        QCOMPARE(decades,
            (QStringList { QStringLiteral("0.001"), QStringLiteral("0.01"), QStringLiteral("0.1") }));
        QCOMPARE(l.parallelTicks[1].size(), 2);
        QCOMPARE(l.parallelTicks[1][1].label, QStringLiteral("vit"));
    }
};

QTEST_MAIN(TestChartLayout)
#include "tst_chart_layout.moc"
