// Studies launched from the console's study panel against a real local agent, offscreen:
// the runs table filled to SUCCEEDED and the charts (every run's curves, speedup and
// efficiency against workers, why it scales); the report exported off the GUI thread,
// filtering, remembered columns, a run's details with its logs; a tune's trials and charts;
// a cancelled run retried from the UI.
#include "agent_client.h"
#include "agent_fixture.h"
#include "console_support.h"
#include "frozen_columns.h"
#include "lr_find_dialog.h"
#include "metric_chart.h"
#include "parallel_coordinates.h"
#include "run_details.h"
#include "run_plot.h"
#include "runs_table.h"
#include "scaling_panel.h"
#include "study_charts.h"
#include "study_plan.h"
#include "study_results.h"
#include "study_view.h"
#include "study_view_support.h"
#include "tune_charts.h"
#include "tune_plan.h"
#include "verify_ok.h"

#include <QComboBox>
#include <QFileInfo>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSignalSpy>
#include <QThread>

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSettings>
#include <QTableWidget>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

using namespace scalelab;
using test::cell;

class TestStudyViewRuns : public QObject {
    Q_OBJECT
private:
    test::AgentFixture m_fixture;

    // studyLaunchedFromTheUiFillsTheTable's parts, each on the finished study `view` shows.
    // Each QVERIFYs; the caller stops at the first that failed.
    void reportIsExportedOffTheGuiThread(app::StudyView &view, QPushButton *exportReport)
    {
        // The report is written on the thread pool: the button waits for it, this thread does not.
        QTemporaryDir exportDir;
        QSignalSpy exported(&view, &app::StudyView::reportExported);
        const QString reportPath = exportDir.filePath(QStringLiteral("report.json"));
        view.exportReportTo(core::ReportFormat::Json, reportPath);
        QVERIFY(!exportReport->isEnabled());
        QTRY_COMPARE_WITH_TIMEOUT(exported.size(), 1, 30'000);
        QCOMPARE(exported.first().first().toString(), reportPath);
        QVERIFY(QFileInfo::exists(reportPath));
        QVERIFY(exportReport->isEnabled());
    }

    void designerIsCheckedBesideTheOpenStudy(app::StudyView &view, v1::StudyPlan plan)
    {
        // "A seed each" for repeats goes into the plan and comes back from it.
        {
            v1::StudyPlan varied = plan;
            varied.set_repeat_seeds("vary");
            view.setForm(varied);
            QCOMPARE(view.findChild<QComboBox *>(QStringLiteral("repeatSeeds"))->currentIndex(), 1);
            QStringList formProblems;
            QCOMPARE(view.planFromForm(&formProblems).repeat_seeds(), std::string("vary"));
            view.setForm(plan);
            QVERIFY(view.planFromForm(&formProblems).repeat_seeds().empty()); // "same": the default, left out
        }
        // With a study open, the designer is still checked and summarised as it is edited.
        plan.mutable_grid()->add_workers(4);
        view.setForm(plan);
        QTRY_VERIFY2_WITH_TIMEOUT(
            view.problemsLabel()->text().startsWith(QLatin1String("The designer's plan: 3 run(s)")),
            qPrintable(view.problemsLabel()->text()), 30'000);
        QCOMPARE(view.runsTable()->rowCount(), 2); // the table still shows the open study
        {
            // Opened elsewhere (as `scalelab --open-study ID` does), the study's own plan fills the
            // designer beside it, not the plan that designer held (issue 56 item 6).
            app::StudyView reader;
            VERIFY_OK(reader.openJournal(m_fixture.path(QStringLiteral("console"))));
            VERIFY_OK(reader.open(view.snapshot().studyId));
            QStringList readProblems;
            const v1::StudyPlan held = reader.planFromForm(&readProblems);
            QCOMPARE(held.name(), std::string("ui"));
            QCOMPARE(held.dataset(), std::string("synth"));
            QCOMPARE(held.grid().workers_size(), 1); // the study's 2 workers, not the form's 2 and 4
            QCOMPARE(held.grid().workers(0), 2);
            QCOMPARE(held.target_accuracy(), 0.1);
        }
        plan.mutable_grid()->set_workers(1, 0);
        view.setForm(plan);
        QVERIFY2(view.problemsLabel()->text().contains(QLatin1String("must be between 1 and")),
            qPrintable(view.problemsLabel()->text()));
        QCOMPARE(view.runsTable()->rowCount(), 2);
    }

    void tableShowsEveryRunFinished(app::StudyView &view)
    {
        // The table follows on its coalescing timer (rows may be sorted either way).
        QTRY_VERIFY_WITH_TIMEOUT(
            cell(view.runsTable(), 0, app::StudyView::StateCol) == QLatin1String("SUCCEEDED")
                && cell(view.runsTable(), 1, app::StudyView::StateCol) == QLatin1String("SUCCEEDED"),
            5000);
        for (int row = 0; row < 2; ++row) {
            using V = app::StudyView;
            QVERIFY(cell(view.runsTable(), row, V::AccuracyCol).endsWith(QLatin1Char('%'))); // test accuracy
            QVERIFY2(!cell(view.runsTable(), row, V::WallCol).isEmpty(), // wall-clock
                qPrintable(cell(view.runsTable(), row, V::RunCol) + QLatin1Char(' ')
                    + cell(view.runsTable(), row, V::StateCol) + QLatin1Char(' ')
                    + cell(view.runsTable(), row, V::ProgressCol) + QLatin1Char(' ')
                    + cell(view.runsTable(), row, V::WhyCol)));
            QCOMPARE(cell(view.runsTable(), row, V::ProgressCol), QStringLiteral("1/1 epochs"));
            // Every run measured its gradient noise scale: B_simple, or "…" while not known (issue 54).
            QVERIFY2(!cell(view.runsTable(), row, V::NoiseCol).isEmpty(), qPrintable(view.runIdAt(row)));
            // The run's short name; its full id is kept for the actions.
            QVERIFY(QRegularExpression(QStringLiteral("^r0[12]$"))
                        .match(cell(view.runsTable(), row, V::RunCol))
                        .hasMatch());
            QVERIFY(view.runIdAt(row).endsWith(cell(view.runsTable(), row, V::RunCol)));
        }
    }

    void chartsShowEveryRunAndTheScaling(app::StudyView &view)
    {
        // The charts: every run's curves, and the scaling point of the 2-worker run
        // beside the baseline's (1, 1×).
        app::StudyCharts *charts = view.charts();
        QTRY_VERIFY_WITH_TIMEOUT(charts->lossChart()->seriesIds().size() == 2, 5000); // one per run
        for (const auto &run : view.snapshot().runs) {
            const app::RunLines lines { app::StudyCharts::attemptPrefix(run.runId, 1) };
            QVERIFY2(charts->lossChart()->pointCount(lines.loss()) > 0, qPrintable(run.runId));
            QCOMPARE(charts->accuracyChart()->pointCount(lines.testAccuracy()), std::size_t(1));
            QVERIFY(charts->throughputChart()->pointCount(lines.throughput()) > 0);
        }
        const QStringList speedups = charts->speedupChart()->seriesIds();
        QVERIFY2(!speedups.isEmpty(), "no speedup line");
        QCOMPARE(charts->speedupChart()->pointCount(speedups.first()), std::size_t(2));
        const auto *speedup = charts->speedupChart()->data(speedups.first());
        QCOMPARE(speedup->rawValue(0), 1.0); // the baseline
        QVERIFY(speedup->rawValue(1) > 0);
        QVERIFY(!charts->efficiencyChart()->seriesIds().isEmpty());
        // A single run per point says so; efficiency is read from 0, as in the reports.
        auto *note = charts->findChild<QLabel *>(QStringLiteral("scalingNote"));
        QVERIFY(note);
        QTRY_VERIFY_WITH_TIMEOUT(
            note->text().startsWith(QStringLiteral("Each point is a single run")), 30'000);
        QTRY_VERIFY_WITH_TIMEOUT(
            static_cast<QValueAxis *>(charts->efficiencyChart()->yAxisItem())->min() <= 0, 30'000);
        // Why it scales (issue 37): a bar per run of where its step's time goes; the scaling
        // model's predicted line beside the measured points; the What if panel answers, and
        // follows the link it is given.
        app::ScalingPanel *panel = charts->scalingPanel();
        QTRY_COMPARE_WITH_TIMEOUT(panel->barLabels().size(), 2, 5000);
        QVERIFY2(panel->barLabels().first().startsWith(QStringLiteral("r01 baseline")),
            qPrintable(panel->barLabels().join(u'|')));
        QVERIFY2(panel->whatIfText().contains(QStringLiteral(" images/s, speedup ")),
            qPrintable(panel->whatIfText()));
        // The study has a target: the time to it, or why there is none (issue 54).
        QVERIFY2(panel->whatIfText().contains(QStringLiteral("Time to ")), qPrintable(panel->whatIfText()));
        // With a prediction, the critical-batch chart: epochs against the global batch, B_noise marked.
        const bool predicted = !panel->whatIfText().contains(QStringLiteral("no prediction"));
        QCOMPARE(panel->criticalBatchPoints() >= 5, predicted);
        if (predicted)
            QVERIFY(panel->criticalBatchNoiseX() > 0);
        // One model in one precision: one fit to ask, named, nothing to choose.
        QCOMPARE(panel->whatIfFit()->count(), 1);
        QCOMPARE(panel->whatIfFit()->currentText(), QStringLiteral("seed-cnn"));
        QVERIFY(!panel->whatIfFit()->isEnabled());
        const QString asMeasured = panel->whatIfText();
        panel->whatIfBandwidth()->setCurrentText(QStringLiteral("100Mbit"));
        QVERIFY2(
            panel->whatIfText() != asMeasured && panel->whatIfText().contains(QStringLiteral("12.5 MB/s")),
            qPrintable(panel->whatIfText()));
        QVERIFY(charts->speedupChart()->seriesIds().contains(QStringLiteral("predicted/seed-cnn")));
        QVERIFY(
            charts->speedupChart()->pointCount(QStringLiteral("predicted/seed-cnn")) >= 5); // 1, 2, 4, 8, 16
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty()) {
            view.resize(1400, 900);
            charts->tabs()->setCurrentWidget(panel);
            QVERIFY(test::showAndSettle(&view)); // the charts redraw on a timer
            view.grab().save(dir + QStringLiteral("/why_it_scales.png"));
            charts->tabs()->setCurrentIndex(3);
            QVERIFY(test::showAndSettle(&view));
            view.grab().save(dir + QStringLiteral("/speedup_predicted.png"));
            charts->tabs()->setCurrentIndex(0);
        }
        // Train accuracy is told from test by its legend's colour and words, not only its dash.
        {
            const core::StudySnapshot shown = view.snapshot(); // a reference into a temporary would dangle
            const auto &run = shown.runs.first();
            const app::RunLines lines { app::StudyCharts::attemptPrefix(run.runId, 1) };
            QVERIFY(charts->accuracyChart()
                        ->line(lines.trainAccuracy())
                        ->name()
                        .endsWith(QStringLiteral("train (dashed)")));
            QVERIFY(charts->accuracyChart()->line(lines.trainAccuracy())->color()
                != charts->accuracyChart()->line(lines.testAccuracy())->color());
        }
    }

    void tableSortsFiltersAndRemembersColumns(app::StudyView &view)
    {
        // The table's img/s is the run's, as the CLI and the reports define it (core::runImagesPerSecond).
        for (int row = 0; row < view.runsTable()->rowCount(); ++row)
            for (const auto &run : view.snapshot().runs)
                if (view.runIdAt(row) == run.runId)
                    QCOMPARE(cell(view.runsTable(), row, app::StudyView::ImagesCol),
                        QString::number(run.imagesPerSecond, 'f', 1));

        // Sorted by the run's name, as the plan lists them.
        QCOMPARE(cell(view.runsTable(), 0, app::StudyView::RunCol), QStringLiteral("r01"));
        QCOMPARE(cell(view.runsTable(), 1, app::StudyView::RunCol), QStringLiteral("r02"));

        // Filtering hides rows (in the frozen columns too); clearing it shows them again.
        auto *states = view.findChild<QComboBox *>(QStringLiteral("stateFilter"));
        states->setCurrentIndex(states->findData(QStringLiteral("FAILED|CANCELLED")));
        QVERIFY(view.runsTable()->isRowHidden(0) && view.runsTable()->isRowHidden(1));
        QVERIFY(view.frozenColumns()->isRowHidden(0) && view.frozenColumns()->isRowHidden(1));
        states->setCurrentIndex(0);
        view.runFilter()->setText(QStringLiteral("w2-"));
        QCOMPARE(int(view.runsTable()->isRowHidden(0)) + int(view.runsTable()->isRowHidden(1)), 1);
        QCOMPARE(view.frozenColumns()->isRowHidden(0), view.runsTable()->isRowHidden(0));
        view.runFilter()->clear();

        // The frozen columns are the run and its configuration, as wide as the table's.
        for (int c = 0; c < app::StudyView::RunColumnCount; ++c)
            QCOMPARE(view.frozenColumns()->isColumnHidden(c), c > app::StudyView::ConfigCol);
        QCOMPARE(view.frozenColumns()->columnWidth(app::StudyView::ConfigCol),
            view.runsTable()->columnWidth(app::StudyView::ConfigCol));

        // Scrolled to its right end in a narrow window, the run and configuration still show.
        if (const QByteArray shot = qgetenv("SCALELAB_SCREENSHOT_DIR"); !shot.isEmpty()) {
            view.resize(900, 600);
            QVERIFY(test::showAndSettle(&view));
            view.runsTable()->horizontalScrollBar()->setValue(
                view.runsTable()->horizontalScrollBar()->maximum());
            QVERIFY(test::showAndSettle(&view));
            view.grab().save(QString::fromLocal8Bit(shot) + QStringLiteral("/runs-scrolled.png"));
        }

        // Attempt, agents and wall time show when chosen, and the choice is remembered.
        QVERIFY(view.runsTable()->isColumnHidden(app::StudyView::AttemptCol));
        QVERIFY(!view.runsTable()->isColumnHidden(app::StudyView::EfficiencyCol));
        view.setRunColumnVisible(app::StudyView::AttemptCol, true);
        view.setRunColumnVisible(app::StudyView::EfficiencyCol, false);
        {
            QSettings settings(m_fixture.path(QStringLiteral("columns.ini")), QSettings::IniFormat);
            view.saveSettings(settings);
        }
        app::StudyView reopened;
        reopened.restoreSettings(
            QSettings(m_fixture.path(QStringLiteral("columns.ini")), QSettings::IniFormat));
        QVERIFY(!reopened.runsTable()->isColumnHidden(app::StudyView::AttemptCol));
        QVERIFY(reopened.runsTable()->isColumnHidden(app::StudyView::EfficiencyCol));
        QVERIFY(reopened.runsTable()->isColumnHidden(app::StudyView::AgentsCol));
        view.setRunColumnVisible(app::StudyView::EfficiencyCol, true);
    }

    void runDetailsShowTheAttemptAndItsLog(app::StudyView &view)
    {
        // A run's details: its attempt and the worker's log lines.
        app::RunDetails *details = view.showRunDetails(view.snapshot().runs.first().runId);
        QCOMPARE(details->attempts()->rowCount(), 1);
        // Its progress: every planned epoch trained (live steps and ETA while it runs).
        QCOMPARE(details->progress()->value(), 1000);
        QCOMPARE(details->progress()->text(), QStringLiteral("1/1 epochs trained"));
        // The details follow the journal on a timer: the last lines may come a moment later.
        QTRY_VERIFY2_WITH_TIMEOUT(details->log()->toPlainText().contains(QLatin1String("started: "))
                && details->log()->toPlainText().contains(QLatin1String("state SUCCEEDED")),
            qPrintable(details->log()->toPlainText()), 10000);
        // The log says what the attempt trains with, each epoch's metrics, and the outcome.
        const QString log = details->log()->toPlainText();
        for (const char *expected :
            { "batch 16/rank (global 16)", "seed ", "thread(s)/rank on cpu", "(SYNTHETIC)",
                "epoch 1: train loss ", "summary: SUCCEEDED after 1 epoch(s)", "weights sha256 " })
            QVERIFY2(log.contains(QLatin1String(expected)),
                qPrintable(QLatin1String(expected) + QLatin1Char('\n') + log));
        // The exact command rank 0 ran; the log filtered to what is searched for; saved whole.
        QTRY_VERIFY2_WITH_TIMEOUT(
            details->log()->toPlainText().contains(QLatin1String("worker command (rank 0): ")),
            qPrintable(details->log()->toPlainText()), 30'000);
        QVERIFY(details->log()->toPlainText().contains(QLatin1String("scalelab-worker train ")));
        details->setLogFilter(QStringLiteral("EPOCH 1:"));
        const QStringList shown = details->log()->toPlainText().split(QLatin1Char('\n'));
        QVERIFY(!shown.isEmpty());
        for (const QString &line : shown)
            QVERIFY2(line.contains(QLatin1String("epoch 1:")), qPrintable(line));
        QString saveError;
        const QString saved = m_fixture.path(QStringLiteral("r01.log"));
        VERIFY_OK(details->saveLog(saved));
        QFile savedFile(saved);
        QVERIFY(savedFile.open(QIODevice::ReadOnly));
        const QString savedText = QString::fromUtf8(savedFile.readAll());
        QVERIFY(savedText.contains(QLatin1String("started: "))
            && savedText.contains(QLatin1String("worker command")));
        details->setLogFilter({});
        QVERIFY(details->log()->toPlainText().contains(QLatin1String("started: ")));
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty())
            details->grab().save(dir + QStringLiteral("/run_details.png")); // to look at
        details->close();
    }

private Q_SLOTS:
    void initTestCase() { VERIFY_OK(test::startAgentWithSynth(m_fixture)); }

    void cleanupTestCase() { VERIFY_OK(m_fixture.stopAndCheckNothingLeft()); }

    void studyLaunchedFromTheUiFillsTheTable()
    {
        app::StudyView view;
        VERIFY_OK(view.openJournal(m_fixture.path(QStringLiteral("console"))));
        view.setAgents({ m_fixture.endpoint() });
        // Nothing to cancel or export before a study is open.
        auto *cancel = view.findChild<QPushButton *>(QStringLiteral("cancelStudy"));
        auto *exportReport = view.findChild<QPushButton *>(QStringLiteral("exportReport"));
        QVERIFY(cancel && exportReport);
        QVERIFY(!cancel->isEnabled());
        QVERIFY(!exportReport->isEnabled());
        v1::StudyPlan plan;
        plan.set_name("ui");
        plan.set_dataset("synth");
        plan.mutable_grid()->add_workers(2);
        plan.mutable_grid()->add_batch_size(16);
        plan.mutable_grid()->add_epochs(1);
        plan.mutable_grid()->add_threads_per_worker(1);
        plan.set_target_accuracy(0.1);
        view.setForm(plan);
        VERIFY_OK(view.launch());
        QTRY_COMPARE_WITH_TIMEOUT(view.runsTable()->rowCount(), 2, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(exportReport->isEnabled(), 30'000);
        QTRY_VERIFY_WITH_TIMEOUT(view.snapshot().state == QLatin1String("SUCCEEDED"), test::endsWithin());
        QTRY_VERIFY_WITH_TIMEOUT(!cancel->isEnabled(), 30'000); // ended: nothing left to cancel
        // What the redraws showed was read on the view's reader thread, not this one (item 5).
        QVERIFY(view.journalReader().reads() > 0);
        QVERIFY(view.journalReader().lastReadThread() != QThread::currentThread());
        reportIsExportedOffTheGuiThread(view, exportReport);
        if (QTest::currentTestFailed())
            return;
        QVERIFY(exportReport->isEnabled());
        designerIsCheckedBesideTheOpenStudy(view, plan);
        if (QTest::currentTestFailed())
            return;
        for (auto check : { &TestStudyViewRuns::tableShowsEveryRunFinished,
                 &TestStudyViewRuns::chartsShowEveryRunAndTheScaling,
                 &TestStudyViewRuns::tableSortsFiltersAndRemembersColumns,
                 &TestStudyViewRuns::runDetailsShowTheAttemptAndItsLog }) {
            (this->*check)(view);
            if (QTest::currentTestFailed())
                return;
        }
        // The widget tree renders.
        view.resize(1400, 900);
        const QImage image = view.grab().toImage();
        QVERIFY(!image.isNull());
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty())
            image.save(dir + QStringLiteral("/study_view.png")); // to look at
    }

    // A run cancelled while it trains is retried from the UI: the study, which had ended
    // FAILED (one run did not succeed), runs again and ends SUCCEEDED with two attempts.
    // A tune loaded into the designer and launched: the grid's fields step aside, the trials
    // fill the runs table with their hyperparameters, and the tune's panel replaces the
    // speedup charts: the best so far, the trials table with a column per hyperparameter
    // and per rung, the metric by epoch with rungs marked and a parallel-coordinates line
    // per trial.
    void tuneShowsTrialsAndTheirCharts()
    {
        app::StudyView view;
        VERIFY_OK(view.openJournal(m_fixture.path(QStringLiteral("console-tune"))));
        view.setAgents({ m_fixture.endpoint() });
        v1::StudyPlan plan = core::exampleTunePlan(QStringLiteral("synth"));
        plan.mutable_training()->set_max_train_images(64);
        plan.mutable_training()->set_max_test_images(32);
        plan.mutable_training()->set_threads_per_worker(1);
        plan.mutable_tune()->set_samples(4);
        auto *scheduler = plan.mutable_tune()->mutable_scheduler();
        scheduler->set_variant("promotion");
        scheduler->set_reduction_factor(2);
        scheduler->set_max_epochs(2);
        view.setForm(plan);
        auto *workers = view.findChildren<QLineEdit *>().at(2);
        QVERIFY(!workers->isEnabled()); // a tune's trials come from its space
        QTRY_VERIFY2_WITH_TIMEOUT(
            view.problemsLabel()->text().startsWith(QLatin1String("A tune of 4 trial(s)")),
            qPrintable(view.problemsLabel()->text()), 30'000);
        VERIFY_OK(view.launch());
        QTRY_VERIFY_WITH_TIMEOUT(view.snapshot().state == QLatin1String("SUCCEEDED"), test::endsWithin());
        const core::StudySnapshot s = view.snapshot();
        QVERIFY(s.tune);
        app::TuneCharts *tune = view.tuneCharts();
        QTRY_VERIFY_WITH_TIMEOUT(
            tune->isVisible() || !view.isVisible(), 30'000); // shown in place of the speedup charts
        QVERIFY(view.charts()->isHidden());
        QTRY_COMPARE_WITH_TIMEOUT(tune->trialsTable()->rowCount(), 4, 30'000);
        // Columns: trial, state, epochs, metric, one per hyperparameter, one per rung, why.
        QStringList headers;
        for (int c = 0; c < tune->trialsTable()->columnCount(); ++c)
            headers << tune->trialsTable()->horizontalHeaderItem(c)->text();
        for (const char *h :
            { "lr", "momentum", "dense dropout", "batch", "at epoch 1", "at epoch 2", "Why" })
            QVERIFY2(headers.contains(QLatin1String(h)), qPrintable(headers.join(u'|')));
        // Every trial finished or stopped at rung 1 (the table follows on its timer): at least
        // ⌊4/2⌋ promoted to epoch 2, one more when an early promotion fell out of the top half.
        int finished = 0, stopped = 0;
        QTRY_VERIFY_WITH_TIMEOUT(
            [&] {
                finished = stopped = 0;
                for (int row = 0; row < 4; ++row) {
                    const QString state = cell(tune->trialsTable(), row, 1);
                    finished += state.startsWith(QLatin1String("finished")) ? 1 : 0;
                    stopped += state.startsWith(QLatin1String("stopped at rung 1")) ? 1 : 0;
                }
                return finished + stopped == 4;
            }(),
            10000);
        QVERIFY2(finished >= 2 && finished <= 3, qPrintable(QString::number(finished)));
        const int best = core::bestTrialIndex(s);
        QVERIFY(best >= 0);
        QVERIFY2(tune->bestLabel()->text().startsWith(
                     QStringLiteral("Best so far: %1").arg(s.runs[best].runId.section(u'-', -1))),
            qPrintable(tune->bestLabel()->text()));
        QVERIFY2(
            tune->bestLabel()->text().contains(QStringLiteral("Epochs trained: %1 of 8").arg(4 + finished)),
            qPrintable(tune->bestLabel()->text()));
        // The runs table shows each trial's hyperparameters and state.
        QTRY_COMPARE_WITH_TIMEOUT(view.runsTable()->rowCount(), 4, 30'000);
        QVERIFY2(cell(view.runsTable(), 0, app::StudyView::ConfigCol).startsWith(QLatin1String("lr ")),
            qPrintable(cell(view.runsTable(), 0, app::StudyView::ConfigCol)));
        QVERIFY(view.runsTable()->isColumnHidden(app::StudyView::SpeedupCol));
        // Metric by epoch: a line per trial, the rung marked.
        QCOMPARE(tune->metricChart()->seriesIds().size(), 4);
        QCOMPARE(
            tune->metricChart()->pointCount(s.runs[best].runId), std::size_t(s.runs[best].epochs.size()));
        // Parallel coordinates: 4 hyperparameters and the metric; a line per trial, lr on a log axis.
        const auto axes = tune->parallel()->axes();
        QCOMPARE(axes.size(), 5);
        QCOMPARE(axes.first().label, QStringLiteral("lr"));
        QVERIFY(axes.first().log);
        QCOMPARE(tune->parallel()->lines().size(), 4);
        tune->tabs()->setCurrentIndex(2);
        view.resize(1400, 900);
        QVERIFY(test::showAndSettle(&view));
        // The parallel coordinates lay their lines out once the widget has its size.
        QTRY_COMPARE_WITH_TIMEOUT(tune->parallel()->polyline(0).size(), 5, 10'000);
        if (const QByteArray shot = qgetenv("SCALELAB_SCREENSHOT_DIR"); !shot.isEmpty())
            view.grab().save(QString::fromLocal8Bit(shot) + QStringLiteral("/tune.png"));
    }

    void cancelledRunIsRetriedFromTheUi()
    {
        app::StudyView view;
        VERIFY_OK(view.openJournal(m_fixture.path(QStringLiteral("console-retry"))));
        view.setAgents({ m_fixture.endpoint() });
        v1::StudyPlan plan;
        plan.set_name("retry");
        plan.set_dataset("synth");
        plan.mutable_baseline()->set_skip(true);
        plan.mutable_grid()->add_workers(1);
        plan.mutable_grid()->add_batch_size(8);
        plan.mutable_grid()->add_epochs(3);
        plan.mutable_grid()->add_threads_per_worker(1);
        view.setForm(plan);
        VERIFY_OK(view.launch());
        QTRY_VERIFY_WITH_TIMEOUT(view.snapshot().runs.size() == 1
                && view.snapshot().runs.first().state == QLatin1String("RUNNING"),
            60'000);
        const QString runId = view.snapshot().runs.first().runId;
        const core::Status retried = view.retryRun(runId);
        QVERIFY(!retried); // only a FAILED or CANCELLED run
        QVERIFY2(retried.error().contains(QLatin1String("only a FAILED or CANCELLED run")),
            qPrintable(retried.error()));
        VERIFY_OK(view.cancelRun(runId));
        QTRY_VERIFY_WITH_TIMEOUT(view.snapshot().state == QLatin1String("FAILED"), 60'000);
        QCOMPARE(view.snapshot().runs.first().state, QStringLiteral("CANCELLED"));

        VERIFY_OK(view.retryRun(runId));
        QTRY_VERIFY_WITH_TIMEOUT(view.snapshot().state == QLatin1String("SUCCEEDED"), test::endsWithin());
        const core::RunResult run = view.snapshot().runs.first();
        QCOMPARE(run.attempts.size(), 2);
        QCOMPARE(run.attempts[0].outcome, QStringLiteral("CANCELLED"));
        QCOMPARE(run.attempts[1].outcome, QStringLiteral("SUCCEEDED"));
        QCOMPARE(run.epochs.size(), 3);
        // Each attempt is its own line, so the charts show where the retry started.
        const auto *charts = view.charts();
        QTRY_VERIFY_WITH_TIMEOUT(
            charts->accuracyChart()->pointCount(
                app::RunLines { app::StudyCharts::attemptPrefix(runId, 2) }.testAccuracy())
                == 3 - std::size_t(run.attempts[1].resumedFromEpoch),
            5000);
    }
};

QTEST_MAIN(TestStudyViewRuns)
#include "tst_study_view_runs.moc"
