// What feeds the live charts: ChartFeed (samples from other threads, in batches), the Run
// tab's charts fed through it, and the study charts drawn from the journal (repeats as a
// mean and a band, an elastic run's changes of size). The charts themselves: tst_charts.
#include "chart_feed.h"
#include "journal.h"
#include "metric_chart.h"
#include "run_events.h"
#include "run_plot.h"
#include "run_tab_charts.h"
#include "study_charts.h"
#include "study_results.h"
#include "verify_ok.h"

#include <QChart>
#include <QCheckBox>
#include <QGraphicsPathItem>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

#include <thread>

using namespace scalelab;
using app::MetricChart;
using app::MetricPoint;
using app::XAxis;

namespace {

// Steps 1..n of a run of 10 steps per epoch, as the agent sends them.
std::vector<v1::RunEvent> stepsOfARun(int n)
{
    std::vector<v1::RunEvent> events { test::startedEvent(1, 10) };
    for (int step = 1; step <= n; ++step) {
        v1::RunEvent e = test::stepEvent(1, step, 2.0 - step * 0.01);
        e.mutable_step()->set_elapsed_seconds(step);
        e.mutable_step()->set_images_per_second(100);
        events.push_back(e);
    }
    return events;
}

} // namespace

class TestRunCharts : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void feedBringsSamplesFromAnotherThreadInBatches()
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.addSeries(QStringLiteral("a"), QStringLiteral("run a"));
        chart.addSeries(QStringLiteral("b"), QStringLiteral("run b"));
        app::ChartFeed feed;
        const auto a = feed.channel(&chart, QStringLiteral("a"));
        const auto b = feed.channel(&chart, QStringLiteral("b"));
        QSignalSpy frames(&feed, &app::ChartFeed::frameDone);
        constexpr int n = 20'000;
        std::thread producer([&] {
            for (int i = 1; i <= n; ++i) {
                feed.post(a, MetricPoint::at(XAxis::Step, i, 1.0 / i));
                feed.post(b, MetricPoint::at(XAxis::Step, i, 2.0 / i));
            }
        });
        producer.join();
        QTRY_COMPARE(chart.pointCount(QStringLiteral("a")), std::size_t(n));
        QCOMPARE(chart.pointCount(QStringLiteral("b")), std::size_t(n));
        QCOMPARE(feed.drained(), std::uint64_t(2 * n));
        QVERIFY2(frames.size() <= 3, qPrintable(QString::number(frames.size()))); // batches, not events
        QCOMPARE(chart.data(QStringLiteral("a"))->column(XAxis::Step).back(), double(n)); // in order
    }

    // The Run tab's charts take a run's samples through their ChartFeed: nothing reaches a
    // chart until the feed drains, then every chart has them at once, redrawn in one frame.
    void runTabChartsAreFedThroughTheFeed()
    {
        app::RunTabCharts charts(new QWidget); // the log's place: the panel owns it once laid out
        charts.resize(900, 600);
        charts.show();
        const app::RunCharts runCharts = charts.charts();
        QCOMPARE(runCharts.feed, charts.feed());
        charts.addRun(QStringLiteral("r"), QStringLiteral("run r"));
        app::RunPlotState state;
        const app::RunLines lines { QStringLiteral("r") };
        for (const v1::RunEvent &event : stepsOfARun(30))
            app::plotRunEvent(runCharts, lines, state, event);
        QCOMPARE(charts.lossChart()->pointCount(lines.loss()), std::size_t(0));
        QCOMPARE(charts.feed()->pending(), std::size_t(60)); // loss and throughput
        QSignalSpy frames(charts.feed(), &app::ChartFeed::frameDone);
        QTRY_COMPARE(charts.lossChart()->pointCount(lines.loss()), std::size_t(30));
        QCOMPARE(charts.throughputChart()->pointCount(lines.throughput()), std::size_t(30));
        QCOMPARE(frames.size(), 1);
        QCOMPARE(charts.feed()->drained(), std::uint64_t(60));
    }

    // Samples still in the feed when a run's lines are removed are not drawn into the lines
    // of the next run of that id (a run of the history drawn, then opened at once).
    void removedRunKeepsNoSamplesInTheFeed()
    {
        app::RunTabCharts charts(new QWidget); // the log's place: the panel owns it once laid out
        const app::RunLines lines { QStringLiteral("r") };
        charts.addRun(QStringLiteral("r"), QStringLiteral("run r"));
        app::RunPlotState state;
        for (const v1::RunEvent &event : stepsOfARun(20))
            app::plotRunEvent(charts.charts(), lines, state, event);
        charts.removeRun(QStringLiteral("r"));
        QCOMPARE(charts.feed()->pending(), std::size_t(0));
        charts.addRun(QStringLiteral("r"), QStringLiteral("run r"));
        state = {};
        for (const v1::RunEvent &event : stepsOfARun(10))
            app::plotRunEvent(charts.charts(), lines, state, event);
        QTRY_COMPARE(charts.lossChart()->pointCount(lines.loss()), std::size_t(10));
        QCOMPARE(charts.lossChart()->data(lines.loss())->column(XAxis::Step).back(), 10.0);
    }

    // The study charts draw a repeated configuration as its mean with a band, hiding its
    // runs' own lines, and give them back when "Mean of repeats" is cleared.
    void studyChartsDrawRepeatsAsMeanAndBand()
    {
        QTemporaryDir dir;
        core::Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("journal.sqlite"))));
        core::StudySnapshot snapshot;
        const auto addRun = [&](const QString &id, int workers, double lossOffset) {
            core::RunResult run;
            run.runId = id;
            run.config.workers = workers;
            run.config.epochs = 1;
            core::AttemptRecord attempt;
            attempt.agents = { QStringLiteral("a:1") };
            run.attempts << attempt;
            snapshot.runs << run;
            std::vector<v1::RunEvent> events;
            v1::RunEvent started;
            started.set_seq(1);
            started.mutable_started()->set_steps_per_epoch(10);
            events.push_back(started);
            for (int step = 1; step <= 10; ++step) {
                v1::RunEvent e;
                e.set_seq(step + 1);
                e.mutable_step()->set_step(step);
                e.mutable_step()->set_epoch(1);
                e.mutable_step()->set_loss(2.0 - step * 0.1 + lossOffset);
                e.mutable_step()->set_elapsed_seconds(step);
                e.mutable_step()->set_images_per_second(100);
                events.push_back(e);
            }
            VERIFY_OK(journal.appendRunEvents(QStringLiteral("st"), id, 1, QStringLiteral("a:1"), events));
        };
        addRun(QStringLiteral("st-r01"), 2, 0.0);
        addRun(QStringLiteral("st-r02"), 2, 0.2);
        addRun(QStringLiteral("st-r03"), 4, 0.5);
        core::RunResult pending; // a third repeat not started yet: it holds nothing back
        pending.runId = QStringLiteral("st-r04");
        pending.config = snapshot.runs[0].config;
        snapshot.runs << pending;
        app::StudyCharts charts;
        charts.resize(900, 600);
        charts.show();
        charts.update(snapshot, core::StudyResults {},
            app::StudyCharts::newEvents(journal, snapshot, charts.feedPositions()));
        const app::RunLines mean { app::StudyCharts::repeatsPrefix(snapshot.runs[0].config.key()) };
        MetricChart *loss = charts.lossChart();
        QVERIFY(charts.groupRepeatsBox()->isEnabled());
        QVERIFY(loss->hasSeries(mean.loss()));
        QCOMPARE(loss->pointCount(mean.loss()), 10u);
        QCOMPARE(loss->data(mean.loss())->rawValue(0), 2.0 - 0.1 + 0.1); // (1.9 + 2.1) / 2
        QVERIFY2(loss->line(mean.loss())->name().contains(QLatin1String("mean of 2")),
            qPrintable(loss->line(mean.loss())->name()));
        const QString r01
            = app::RunLines { app::StudyCharts::attemptPrefix(QStringLiteral("st-r01"), 1) }.loss();
        const QString r03
            = app::RunLines { app::StudyCharts::attemptPrefix(QStringLiteral("st-r03"), 1) }.loss();
        QVERIFY(!loss->isSeriesVisible(r01));
        QVERIFY(loss->isSeriesVisible(r03)); // a single run stands for itself
        // The legend names the mean, not the runs it stands for.
        const auto legendShows = [&](const QString &id) {
            const auto markers = loss->chart()->legend()->markers(loss->line(id));
            return !markers.isEmpty() && markers.first()->isVisible();
        };
        QTRY_VERIFY(legendShows(r03)); // laid out on the event loop
        QVERIFY(legendShows(mean.loss()));
        QVERIFY(!legendShows(r01));
        loss->redraw();
        QTRY_VERIFY(!loss->bandPath(mean.loss()).isEmpty());
        // A run the user hid from the legend stays hidden when the charts update.
        loss->setSeriesVisible(r03, false);
        charts.update(snapshot, core::StudyResults {},
            app::StudyCharts::newEvents(journal, snapshot, charts.feedPositions()));
        QVERIFY(!loss->isSeriesVisible(r03));
        loss->setSeriesVisible(r03, true);
        QCOMPARE(loss->pointCount(mean.loss()), 10u); // drawn again the same
        QVERIFY(loss->chart()
                    ->plotArea()
                    .adjusted(-1, -1, 1, 1)
                    .contains(loss->bandPath(mean.loss()).boundingRect()));
        if (const QString shots = qEnvironmentVariable("SCALELAB_TEST_SCREENSHOT_DIR"); !shots.isEmpty())
            QVERIFY(loss->grab().save(shots + QStringLiteral("/repeats_band.png"))); // to look at
        // Cleared: the runs come back, the mean and band go.
        charts.groupRepeatsBox()->setChecked(false);
        QVERIFY(!loss->hasSeries(mean.loss()));
        QVERIFY(loss->bandPath(mean.loss()).isEmpty());
        QVERIFY(loss->isSeriesVisible(r01));
        QTRY_VERIFY(legendShows(r01));
    }

    // An elastic run that shrank and grew back (issue 55): every chart of the study marks,
    // dashed, where each attempt on another size starts ("→ 1 worker"), on each x axis,
    // with the reason on hover; the attempt's legend says its size.
    void studyChartsMarkWhereARunChangedSize()
    {
        QTemporaryDir dir;
        core::Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("journal.sqlite"))));
        core::RunResult run;
        run.runId = QStringLiteral("st-r02");
        run.config.workers = 2;
        run.config.minWorkers = 1;
        run.config.epochs = 3;
        const QString shrank = QStringLiteral("shrank from 2 to 1 of 2 workers: a:2 is gone");
        const QString grew = QStringLiteral("grew from 1 to 2 of 2 workers: capacity returned");
        // Attempt, its size, why it has it, the epoch it resumed after; 10 steps an epoch, 1 s a step.
        const std::tuple<int, int, QString, int> attempts[]
            = { { 1, 2, QString(), 0 }, { 2, 1, shrank, 1 }, { 3, 2, grew, 2 } };
        for (const auto &[number, world, resize, resumed] : attempts) {
            core::AttemptRecord attempt;
            attempt.attempt = number;
            attempt.agents = { QStringLiteral("a:1") };
            attempt.worldSize = world;
            attempt.resize = resize;
            attempt.resumedFromEpoch = resumed;
            run.attempts << attempt;
            std::vector<v1::RunEvent> events;
            v1::RunEvent started;
            started.set_seq(1);
            started.mutable_started()->set_steps_per_epoch(10);
            started.mutable_started()->set_resumed_from_epoch(resumed);
            events.push_back(started);
            for (int step = resumed * 10 + 1; step <= (resumed + 1) * 10; ++step) {
                v1::RunEvent e;
                e.set_seq(qint64(events.size()) + 1);
                auto *s = e.mutable_step();
                s->set_step(step);
                s->set_epoch(resumed + 1);
                s->set_loss(2.0 - step * 0.05);
                s->set_elapsed_seconds(step - resumed * 10);
                s->set_images_per_second(world * 100);
                s->set_learning_rate(0.1);
                s->set_grad_norm(1);
                s->set_step_seconds(0.5);
                events.push_back(e);
            }
            v1::RunEvent epoch;
            epoch.set_seq(qint64(events.size()) + 1);
            epoch.mutable_epoch()->set_epoch(resumed + 1);
            epoch.mutable_epoch()->set_test_accuracy(0.3);
            epoch.mutable_epoch()->set_elapsed_seconds(10);
            events.push_back(epoch);
            VERIFY_OK(journal.appendRunEvents(
                QStringLiteral("st"), run.runId, number, QStringLiteral("a:1"), events));
        }
        core::StudySnapshot snapshot;
        snapshot.runs << run;
        app::StudyCharts charts;
        charts.resize(1000, 600);
        charts.show();
        charts.update(snapshot, core::StudyResults {},
            app::StudyCharts::newEvents(journal, snapshot, charts.feedPositions()));
        charts.update(snapshot, core::StudyResults {},
            app::StudyCharts::newEvents(
                journal, snapshot, charts.feedPositions())); // nothing new: marked once
        const QList<std::pair<double, QString>> byStep { { 10, QStringLiteral("→ 1 worker") },
            { 20, QStringLiteral("→ 2 workers") } };
        // Every chart over time (not speedup and efficiency, which are against workers).
        QList<MetricChart *> overTime { charts.lossChart(), charts.accuracyChart(),
            charts.throughputChart() };
        for (const char *name : { "studyStepTimeChart", "studyLearningRateChart", "studyGradNormChart" })
            overTime << charts.findChild<MetricChart *>(QLatin1String(name));
        for (MetricChart *chart : overTime) {
            QVERIFY(chart);
            chart->redraw();
            QTRY_COMPARE(chart->shownVerticalMarkers(), byStep);
        }
        // Dashed, unlike an epoch's dotted boundary, and saying why on hover.
        MetricChart *loss = charts.lossChart();
        QStringList tips;
        for (QGraphicsItem *item : loss->chart()->childItems())
            if (auto *path = dynamic_cast<QGraphicsPathItem *>(item);
                path && path->pen().style() == Qt::DashLine)
                tips << path->toolTip();
        QCOMPARE(tips.size(), 2);
        QVERIFY2(tips.contains(shrank) && tips.contains(grew), qPrintable(tips.join(u'|')));
        // By wall-clock: where the attempt before ended (10 s, then 20 s), as the lines continue.
        loss->setXAxis(XAxis::WallClock);
        loss->redraw();
        QTRY_COMPARE(loss->shownVerticalMarkers(),
            (QList<std::pair<double, QString>> { { 10, byStep[0].second }, { 20, byStep[1].second } }));
        loss->setXAxis(XAxis::Step);
        const QString second = app::RunLines { app::StudyCharts::attemptPrefix(run.runId, 2) }.loss();
        QVERIFY2(loss->line(second)->name().endsWith(
                     QLatin1String("attempt 2 on 1 worker (resumed after epoch 1)")),
            qPrintable(loss->line(second)->name()));
        const QString first = app::RunLines { app::StudyCharts::attemptPrefix(run.runId, 1) }.loss();
        QCOMPARE(loss->line(first)->name(), QStringLiteral("r02 · 1–2 workers"));
        if (const QString shots = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !shots.isEmpty()) {
            charts.tabs()->setCurrentWidget(charts.throughputChart());
            charts.throughputChart()->redraw();
            QTest::qWait(2 * MetricChart::kRedrawIntervalMs);
            QVERIFY(charts.grab().save(shots + QStringLiteral("/elastic_throughput.png"))); // to look at
            charts.tabs()->setCurrentWidget(loss);
            loss->redraw();
            QTest::qWait(2 * MetricChart::kRedrawIntervalMs);
            QVERIFY(charts.grab().save(shots + QStringLiteral("/elastic_loss.png")));
        }
        // The run's lines removed: their markers go with them.
        charts.clear();
        loss->redraw();
        QVERIFY(loss->shownVerticalMarkers().isEmpty());
    }
};

QTEST_MAIN(TestRunCharts)
#include "tst_run_charts.moc"
