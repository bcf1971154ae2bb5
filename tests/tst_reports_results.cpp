// Results math on hand-computed snapshots (speedup, efficiency, time to accuracy, spread over
// repeats, baselines and what is said when one is missing or never reaches the target), and the
// content every report shares. The formats are tst_reports_formats'; tunes tst_reports_tune's.
#include "report.h"
#include "report_charts.h"
#include "report_content.h"
#include "report_fixtures.h"
#include "study_results.h"
#include "tune_plan.h"

#include <QFile>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace scalelab::core;
using namespace scalelab::test;

class TestReportsResults : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void statIsSampleStddevAndSkipsNaN();
    void speedupAndEfficiencyByWallClockAndTimeToAccuracy();
    void timeToTargetFromEpochsWhenTheRunLacksIt();
    void failedRunsAreCountedButNotAveraged();
    void configNeverReachingTargetHasNoTimeSpeedup();
    void missingBaselineSaysWhy();
    void baselineNeverReachingTargetSaysWhy();
    void baselineThatDidNotLearnIsFlagged();
    void imagesPerSecondHasOneDefinition();
    void reportCarriesRecipesPlanAndDefinitions();
    void perRunSpeedup();
    void modelsAreComparedEachWithItsOwnBaseline();
    void otherWorkIsComparedByThroughputNotWallClock();
    void seedComparison();
};

void TestReportsResults::statIsSampleStddevAndSkipsNaN()
{
    const Stat s = statOf({ 2, 4, kNotMeasured, 4, 4, 5, 5, 7, 9 });
    QCOMPARE(s.count, 8);
    QCOMPARE(s.mean, 5.0);
    QVERIFY(qAbs(s.stddev - std::sqrt(32.0 / 7.0)) < 1e-12);
    QCOMPARE(s.min, 2.0);
    QCOMPARE(s.max, 9.0);
    const Stat one = statOf({ 3 });
    QCOMPARE(one.mean, 3.0);
    QVERIFY(std::isnan(one.stddev));
    QVERIFY(std::isnan(statOf({}).mean));
}

void TestReportsResults::speedupAndEfficiencyByWallClockAndTimeToAccuracy()
{
    const StudyResults r = computeStudyResults(handSnapshot());
    QCOMPARE(r.configs.size(), 3);
    QVERIFY(r.baseline());
    QCOMPARE(r.baseline()->config.workers, 1);
    QCOMPARE(r.configs.first().key, r.baseline()->key); // the baseline sorts first
    QVERIFY(r.baselineNote.isEmpty());

    const ConfigResult &base = *r.baseline();
    QCOMPARE(base.wallSeconds.mean, 105.0);
    QVERIFY(qAbs(base.wallSeconds.stddev - std::sqrt(50.0)) < 1e-9);
    QCOMPARE(base.timeToTargetSeconds.mean, 65.0);
    QVERIFY(qAbs(base.byWallClock.speedup - 1.0) < 1e-12);
    QVERIFY(qAbs(base.byWallClock.efficiency - 1.0) < 1e-12);

    const ConfigResult *w2 = r.config(config(2).key());
    QVERIFY(w2);
    QCOMPARE(w2->repeats, 2);
    QCOMPARE(w2->wallSeconds.mean, 55.0);
    QVERIFY(qAbs(w2->byWallClock.speedup - 105.0 / 55.0) < 1e-12);
    QVERIFY(qAbs(w2->byWallClock.efficiency - 105.0 / 55.0 / 2.0) < 1e-12);
    QCOMPARE(w2->timeToTargetSeconds.mean, 37.5);
    QVERIFY(qAbs(w2->byTimeToAccuracy.speedup - 65.0 / 37.5) < 1e-12);
    QVERIFY(qAbs(w2->byTimeToAccuracy.efficiency - 65.0 / 37.5 / 2.0) < 1e-12);

    const ConfigResult *w4 = r.config(config(4).key());
    QVERIFY(w4);
    QVERIFY(qAbs(w4->byWallClock.speedup - 3.0) < 1e-12);
    QVERIFY(qAbs(w4->byWallClock.efficiency - 0.75) < 1e-12);
    QVERIFY(qAbs(w4->byTimeToAccuracy.speedup - 3.25) < 1e-12);
    QVERIFY(qAbs(w4->byTimeToAccuracy.efficiency - 0.8125) < 1e-12);
}

void TestReportsResults::timeToTargetFromEpochsWhenTheRunLacksIt()
{
    const StudySnapshot s = handSnapshot();
    QCOMPARE(effectiveTimeToTarget(s.runs[3], 0.7), std::optional<double>(40.0));
    QCOMPARE(effectiveTimeToTarget(s.runs[3], 0.5), std::optional<double>(20.0));
    QCOMPARE(effectiveTimeToTarget(s.runs[3], 0.9), std::nullopt);
    QCOMPARE(effectiveTimeToTarget(s.runs[3], kNotMeasured), std::nullopt);
    // A value the run carries wins over the epochs.
    QCOMPARE(effectiveTimeToTarget(s.runs[2], 0.7), std::optional<double>(35.0));
    // The epoch reached the target but its time was not measured: unknown, not zero.
    RunResult r = s.runs[3];
    r.epochs[1].elapsedSeconds = kNotMeasured;
    QCOMPARE(effectiveTimeToTarget(r, 0.7), std::nullopt);
}

void TestReportsResults::failedRunsAreCountedButNotAveraged()
{
    const StudyResults r = computeStudyResults(handSnapshot());
    const ConfigResult *w4 = r.config(config(4).key());
    QCOMPARE(w4->repeats, 3);
    QCOMPARE(w4->succeeded, 2);
    QCOMPARE(w4->failed, 1);
    QCOMPARE(w4->unfinished, 0);
    QCOMPARE(w4->wallSeconds.count, 2);
    QCOMPARE(w4->wallSeconds.mean, 35.0);
    QCOMPARE(w4->wallSeconds.min, 30.0);
    QCOMPARE(w4->finalTestAccuracy.mean, 0.65);
    QCOMPARE(
        w4->runIds, QStringList({ QStringLiteral("w4-0"), QStringLiteral("w4-1"), QStringLiteral("w4-2") }));

    StudySnapshot s = handSnapshot();
    s.runs[0].state = QStringLiteral("RUNNING");
    const StudyResults live = computeStudyResults(s);
    QCOMPARE(live.baseline()->unfinished, 1);
    QCOMPARE(live.baseline()->wallSeconds.mean, 110.0);
}

void TestReportsResults::configNeverReachingTargetHasNoTimeSpeedup()
{
    StudySnapshot s = handSnapshot();
    s.runs << run(QStringLiteral("w8-0"), config(8), 0, 20, 0.5, std::nullopt);
    const StudyResults r = computeStudyResults(s);
    const ConfigResult *w8 = r.config(config(8).key());
    QVERIFY(w8);
    QCOMPARE(w8->reachedTarget, 0);
    QVERIFY(w8->byWallClock.available());
    QVERIFY(qAbs(w8->byWallClock.speedup - 105.0 / 20.0) < 1e-12);
    QVERIFY(!w8->byTimeToAccuracy.available());
    QVERIFY(std::isnan(w8->byTimeToAccuracy.speedup));
    QVERIFY2(w8->byTimeToAccuracy.unavailableReason.contains(QStringLiteral("never reached")),
        qPrintable(w8->byTimeToAccuracy.unavailableReason));
    // The 4-worker configuration: one of two reached the target.
    QCOMPARE(r.config(config(4).key())->reachedTarget, 1);
}

void TestReportsResults::missingBaselineSaysWhy()
{
    StudySnapshot s = handSnapshot();
    s.runs.removeFirst();
    s.runs.removeFirst();
    const StudyResults r = computeStudyResults(s);
    QCOMPARE(r.baselineIndex, -1);
    QVERIFY(!r.baselineNote.isEmpty());
    QVERIFY(r.baselineNote.contains(QStringLiteral("no baseline")));
    for (const ConfigResult &c : r.configs) {
        QVERIFY(std::isnan(c.byWallClock.speedup));
        QVERIFY(std::isnan(c.byTimeToAccuracy.efficiency));
        QVERIFY(c.byWallClock.unavailableReason.contains(QStringLiteral("no baseline")));
    }
    // Means are still there.
    QCOMPARE(r.config(config(2).key())->wallSeconds.mean, 55.0);

    // A baseline that exists but has no succeeded run.
    s = handSnapshot();
    s.runs[0].state = QStringLiteral("FAILED");
    s.runs[1].state = QStringLiteral("CANCELLED");
    const StudyResults failed = computeStudyResults(s);
    QVERIFY(failed.baseline());
    QVERIFY(std::isnan(failed.config(config(2).key())->byWallClock.speedup));
    QVERIFY(
        failed.config(config(2).key())->byWallClock.unavailableReason.contains(QStringLiteral("baseline")));
    QVERIFY(!failed.baselineNote.isEmpty());
}

void TestReportsResults::baselineNeverReachingTargetSaysWhy()
{
    StudySnapshot s = handSnapshot();
    for (int i : { 0, 1 }) {
        s.runs[i].timeToTargetSeconds.reset();
        for (EpochPoint &e : s.runs[i].epochs)
            e.testAccuracy = 0.5;
    }
    const StudyResults r = computeStudyResults(s);
    const ConfigResult *w2 = r.config(config(2).key());
    QVERIFY(w2->byWallClock.available());
    QVERIFY(!w2->byTimeToAccuracy.available());
    QVERIFY(w2->byTimeToAccuracy.unavailableReason.contains(QStringLiteral("baseline never reached")));

    s.targetAccuracy = kNotMeasured;
    for (RunResult &run : s.runs)
        run.timeToTargetSeconds.reset();
    const StudyResults noTarget = computeStudyResults(s);
    QVERIFY(noTarget.config(config(2).key())
                ->byTimeToAccuracy.unavailableReason.contains(QStringLiteral("no target")));
}

// The issue's case: a baseline at 27.8 % beside a 2-worker run at 78.1 %: speedups are
// computed but flagged, with a target and without one.
void TestReportsResults::baselineThatDidNotLearnIsFlagged()
{
    StudySnapshot s = handSnapshot();
    for (int i : { 0, 1 })
        for (EpochPoint &e : s.runs[i].epochs)
            e.testAccuracy = 0.278;
    for (RunResult &run : s.runs)
        if (!run.epochs.isEmpty())
            run.finalTestAccuracy = run.epochs.last().testAccuracy;
    StudyResults r = computeStudyResults(s);
    QVERIFY2(r.baselineWarning.contains(QStringLiteral("below the target")), qPrintable(r.baselineWarning));
    s.targetAccuracy = kNotMeasured;
    r = computeStudyResults(s);
    QVERIFY2(
        r.baselineWarning.contains(QStringLiteral("did not learn alike")), qPrintable(r.baselineWarning));
    bool flagged = false;
    for (const SeedComparison &c : r.comparisons)
        flagged = flagged || c.note.contains(QStringLiteral("differs from the baseline's"));
    QVERIFY(flagged);
    const ReportContent content = buildReportContent(s);
    QVERIFY(content.notes.contains(r.baselineWarning));
    QVERIFY(computeStudyResults(handSnapshot()).baselineWarning.isEmpty()); // a sound baseline: no warning
}

// Training images per second of training time over the run's epochs: the harmonic mean of
// the epochs' rates (each epoch trains the same images), the same in every view.
void TestReportsResults::imagesPerSecondHasOneDefinition()
{
    QList<EpochPoint> epochs(2);
    epochs[0].imagesPerSecond = 100;
    epochs[1].imagesPerSecond = 300;
    QCOMPARE(runImagesPerSecond(epochs), 150.0); // 2 epochs of N images in N/100 + N/300 s
    QVERIFY(std::isnan(runImagesPerSecond({})));
    StudySnapshot s = handSnapshot();
    s.runs[0].epochs = epochs;
    s.runs[0].imagesPerSecond = runImagesPerSecond(epochs);
    const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
    QCOMPARE(json.value(QStringLiteral("runs"))
                 .toArray()[0]
                 .toObject()
                 .value(QStringLiteral("images_per_second"))
                 .toDouble(),
        150.0);
    QVERIFY(QString::fromUtf8(reportRunsCsv(s)).contains(QStringLiteral(",150,")));
}

void TestReportsResults::reportCarriesRecipesPlanAndDefinitions()
{
    StudySnapshot s = handSnapshot();
    s.runs[0].recipe = QJsonObject { { QStringLiteral("learning_rate"), 0.02 },
        { QStringLiteral("peak_learning_rate"), 0.02 }, { QStringLiteral("momentum"), 0.0 },
        { QStringLiteral("weight_decay"), 2.5e-7 }, { QStringLiteral("warmup_epochs"), 1.0 },
        { QStringLiteral("warmup_steps"), 157.0 }, { QStringLiteral("schedule"), QStringLiteral("cosine") },
        { QStringLiteral("label_smoothing"), 0.0 },
        { QStringLiteral("seed"), QStringLiteral("18446744073709551615") },
        { QStringLiteral("normalize_mean"), QJsonArray { 0.49, 0.48, 0.44 } },
        { QStringLiteral("normalize_std"), QJsonArray { 0.25, 0.24, 0.26 } },
        { QStringLiteral("dataset"), QStringLiteral("cifar10") },
        { QStringLiteral("dataset_train_images"), 50000.0 },
        { QStringLiteral("dataset_test_images"), 10000.0 },
        { QStringLiteral("dataset_sha256"), QString(64, QLatin1Char('a')) } };
    s.runs[0].workerCommand = { QStringLiteral("scalelab-worker"), QStringLiteral("train"),
        QStringLiteral("--lr"), QStringLiteral("0.02") };
    s.planJson = R"({"name":"hand computed","dataset":"cifar10"})";
    s.learningRateNote = QStringLiteral("auto: 0.02 at global batch 64");
    s.learningRateCurve = { { 1e-5, 2.3 }, { 1e-3, 2.0 }, { 1e-1, 1.5 }, { 1.0, 4.0 } };
    const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
    const QJsonObject run = json.value(QStringLiteral("runs")).toArray()[0].toObject();
    QCOMPARE(run.value(QStringLiteral("recipe")).toObject().value(QStringLiteral("weight_decay")).toDouble(),
        2.5e-7);
    QCOMPARE(run.value(QStringLiteral("worker_command")).toArray().size(), 4);
    QCOMPARE(json.value(QStringLiteral("plan")).toObject().value(QStringLiteral("name")).toString(),
        QStringLiteral("hand computed"));
    QVERIFY(json.value(QStringLiteral("definitions")).toObject().contains(QStringLiteral("speedup")));
    QCOMPARE(json.value(QStringLiteral("learning_rate_search"))
                 .toObject()
                 .value(QStringLiteral("curve"))
                 .toArray()
                 .size(),
        4);
    const ReportContent content = buildReportContent(s);
    bool recipes = false;
    for (const ReportTable &t : content.tables)
        if (t.title == QStringLiteral("Recipes")) {
            recipes = true;
            QCOMPARE(t.rows.size(), 1);
            QVERIFY2(t.rows[0].join(QLatin1Char('|')).contains(QStringLiteral("2.5e-07")),
                qPrintable(t.rows[0].join('|')));
            QVERIFY(t.rows[0].join(QLatin1Char('|')).contains(QStringLiteral("18446744073709551615")));
        }
    QVERIFY(recipes);
    bool chart = false;
    for (const ChartSpec &c : content.charts)
        chart = chart || c.title == QStringLiteral("Learning-rate range test");
    QVERIFY(chart);
    const QString html = QString::fromUtf8(reportHtml(s).value());
    QVERIFY(html.contains(QStringLiteral("Recipes"))
        && html.contains(QStringLiteral("auto: 0.02 at global batch 64")));
}

void TestReportsResults::perRunSpeedup()
{
    const StudyResults r = computeStudyResults(handSnapshot());
    QCOMPARE(r.runs.size(), 7);
    QCOMPARE(r.runs[2].runId, QStringLiteral("w2-0"));
    QVERIFY(qAbs(r.runs[2].byWallClock.speedup - 105.0 / 60.0) < 1e-12);
    QVERIFY(qAbs(r.runs[2].byTimeToAccuracy.speedup - 65.0 / 35.0) < 1e-12);
    QCOMPARE(r.runs[3].timeToTargetSeconds, std::optional<double>(40.0));
    // Never reached: wall-clock speedup yes, time-to-accuracy no.
    QVERIFY(qAbs(r.runs[5].byWallClock.efficiency - 105.0 / 30.0 / 4.0) < 1e-12);
    QVERIFY(std::isnan(r.runs[5].byTimeToAccuracy.speedup));
    // A failed run has no speedup, and says why.
    QVERIFY(std::isnan(r.runs[6].byWallClock.speedup));
    QVERIFY(r.runs[6].byWallClock.unavailableReason.contains(QStringLiteral("FAILED")));
}

// A 1-epoch 2-worker run against a 6-epoch baseline did a sixth of the work: by wall-clock
// it would be "9.52x, efficiency 476 %". It gets no wall-clock speedup, and its speedup by
// images/s is shown instead, said so in every format.
// A study of two models (issue 36): each run's speedup is against the baseline of its own
// model, and the report names every model with what it costs per step.
void TestReportsResults::modelsAreComparedEachWithItsOwnBaseline()
{
    StudySnapshot s;
    s.studyId = QStringLiteral("s-models");
    s.state = QStringLiteral("SUCCEEDED");
    RunConfig seedBase = config(1, true), seed2 = config(2), resnetBase = config(1, true),
              resnet2 = config(2);
    resnetBase.model = resnet2.model = QStringLiteral("resnet18");
    s.runs << run(QStringLiteral("sb"), seedBase, 0, 100, 0.7, std::nullopt)
           << run(QStringLiteral("rb"), resnetBase, 0, 400, 0.7, std::nullopt)
           << run(QStringLiteral("s2"), seed2, 0, 60, 0.7, std::nullopt)
           << run(QStringLiteral("r2"), resnet2, 0, 250, 0.7, std::nullopt);
    for (RunResult &r : s.runs) {
        const bool resnet = r.config.model == QLatin1String("resnet18");
        r.recipe = QJsonObject { { QStringLiteral("model"), r.config.model },
            { QStringLiteral("parameters"), resnet ? 11173962.0 : 3249994.0 },
            { QStringLiteral("gradient_bytes"), resnet ? 44695848.0 : 12999976.0 },
            { QStringLiteral("forward_flops_per_image"), resnet ? 1111091200.0 : 309733376.0 } };
    }
    const StudyResults r = computeStudyResults(s);
    QCOMPARE(r.configs.size(), 4);
    QCOMPARE(r.baselineFor(resnet2)->key, resnetBase.key());
    QCOMPARE(r.baselineFor(seed2)->key, seedBase.key());
    QCOMPARE(r.config(resnet2.key())->byWallClock.speedup, 400.0 / 250.0);
    QCOMPARE(r.config(seed2.key())->byWallClock.speedup, 100.0 / 60.0);
    QCOMPARE(r.config(resnet2.key())->byThroughput.speedup, (1000.0 / 250.0) / (1000.0 / 400.0));
    QCOMPARE(r.runs[3].byWallClock.speedup, 400.0 / 250.0);
    QVERIFY(r.baselineNote.isEmpty());

    // Without a baseline of its model, a run has no speedup, and says why.
    StudySnapshot noResnetBaseline = s;
    noResnetBaseline.runs.removeAt(1);
    const StudyResults missing = computeStudyResults(noResnetBaseline);
    QVERIFY(!missing.config(resnet2.key())->byWallClock.available());
    QCOMPARE(missing.config(resnet2.key())->byWallClock.unavailableReason,
        QStringLiteral("the study has no baseline of model resnet18"));
    QVERIFY(missing.config(seed2.key())->byWallClock.available());

    const ReportContent content = buildReportContent(s);
    const ReportTable *models = nullptr;
    for (const ReportTable &t : content.tables)
        if (t.title == QLatin1String("Models"))
            models = &t;
    QVERIFY(models);
    QCOMPARE(models->rows.size(), 2);
    QCOMPARE(models->rows[0],
        (QStringList { QStringLiteral("seed-cnn"), QStringLiteral("3,249,994"), QStringLiteral("13.0 MB"),
            QStringLiteral("0.310 GFLOP"), QStringLiteral("0.929 GFLOP"), QStringLiteral("2") }));
    QCOMPARE(models->rows[1].mid(0, 3),
        (QStringList {
            QStringLiteral("resnet18"), QStringLiteral("11,173,962"), QStringLiteral("44.7 MB") }));

    const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
    QCOMPARE(json[QStringLiteral("configurations")].toArray().size(), 4);
    for (const auto &c : json[QStringLiteral("configurations")].toArray()) {
        const QJsonObject o = c.toObject();
        const QString model = o[QStringLiteral("config")].toObject()[QStringLiteral("model")].toString();
        QCOMPARE(o[QStringLiteral("baseline_key")].toString(),
            model == QLatin1String("resnet18") ? resnetBase.key() : seedBase.key());
    }
    const QStringList csv
        = QString::fromUtf8(reportRunsCsv(s)).split(QStringLiteral("\r\n"), Qt::SkipEmptyParts);
    const int column = csv[0].split(QLatin1Char(',')).indexOf(QStringLiteral("model"));
    QVERIFY(column > 0);
    QCOMPARE(csv[4].split(QLatin1Char(',')).at(column), QStringLiteral("resnet18"));
}

void TestReportsResults::otherWorkIsComparedByThroughputNotWallClock()
{
    StudySnapshot s;
    s.studyId = QStringLiteral("s-work");
    s.state = QStringLiteral("SUCCEEDED");
    RunConfig longBaseline = config(1, true);
    longBaseline.epochs = 6;
    RunConfig shortRun = config(2);
    shortRun.epochs = 1;
    RunConfig sameWork = config(2);
    sameWork.epochs = 6;
    sameWork.batchSize = 32;
    s.runs << run(QStringLiteral("base"), longBaseline, 0, 600, 0.7, std::nullopt)
           << run(QStringLiteral("short"), shortRun, 0, 63, 0.5, std::nullopt)
           << run(QStringLiteral("same"), sameWork, 0, 400, 0.7, std::nullopt);
    s.runs[0].imagesPerSecond = 100;
    s.runs[1].imagesPerSecond = 160;
    s.runs[2].imagesPerSecond = 150;
    const StudyResults r = computeStudyResults(s);

    const RunOutcome &other = r.runs[1];
    QVERIFY(!other.sameWork);
    QVERIFY(std::isnan(other.byWallClock.speedup) && std::isnan(other.byWallClock.efficiency));
    QVERIFY2(
        other.byWallClock.unavailableReason.startsWith(QStringLiteral("trains 1 epoch, the baseline 6:")),
        qPrintable(other.byWallClock.unavailableReason));
    QCOMPARE(other.byThroughput.speedup, 1.6);
    QCOMPARE(other.byThroughput.efficiency, 0.8);
    QVERIFY(other.byThroughputShown());
    QCOMPARE(other.shown().speedup, 1.6);
    const ConfigResult *config = r.config(shortRun.key());
    QVERIFY(config && !config->sameWork && !config->byWallClock.available());
    QCOMPARE(config->shown().efficiency, 0.8);
    // The same work (other batch, same epochs) compares by wall-clock, its throughput beside it.
    const RunOutcome &same = r.runs[2];
    QVERIFY(same.sameWork && !same.byThroughputShown());
    QCOMPARE(same.shown().speedup, 1.5);
    QCOMPARE(same.byThroughput.speedup, 1.5);
    // The seed comparison says why there is no speedup.
    QCOMPARE(r.comparisons.size(), 2);
    for (const SeedComparison &row : r.comparisons)
        if (row.configKey == shortRun.key())
            QVERIFY2(row.note.startsWith(QStringLiteral("trains 1 epoch")) && std::isnan(row.efficiency),
                qPrintable(row.note));
        else
            QVERIFY(row.note.isEmpty() && row.speedup == 1.5);

    const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
    const QJsonObject shortJson = json[QStringLiteral("runs")].toArray()[1].toObject();
    QCOMPARE(shortJson[QStringLiteral("same_work_as_baseline")].toBool(), false);
    QCOMPARE(
        shortJson[QStringLiteral("speedup_by_throughput")].toObject()[QStringLiteral("speedup")].toDouble(),
        1.6);
    QVERIFY(shortJson[QStringLiteral("speedup_by_wall_clock")].toObject().contains(
        QStringLiteral("unavailable_reason")));
    const QString csv = QString::fromUtf8(reportRunsCsv(s));
    QVERIFY(csv.section(QLatin1Char('\n'), 0, 0)
                .contains(QStringLiteral("speedup_throughput,efficiency_throughput")));
    const QString html = QString::fromUtf8(reportHtml(s).value());
    QVERIFY(html.contains(QStringLiteral("by img/s")));
    QVERIFY(!html.contains(QStringLiteral("950.0")) && !html.contains(QStringLiteral("476")));
}

void TestReportsResults::seedComparison()
{
    const StudyResults r = computeStudyResults(handSnapshot());
    QCOMPARE(r.comparisons.size(), 2); // every configuration but the baseline
    const SeedComparison &w2 = r.comparisons[0];
    QCOMPARE(w2.workers, 2);
    QCOMPARE(w2.baselineSeconds, 105.0);
    QCOMPARE(w2.distributedSeconds, 55.0);
    QVERIFY(qAbs(w2.speedup - 105.0 / 55.0) < 1e-12);
    QVERIFY(qAbs(w2.efficiency - 105.0 / 110.0) < 1e-12);
    QVERIFY(qAbs(w2.baselineAccuracy - 0.73) < 1e-12);
    QVERIFY(qAbs(w2.distributedAccuracy - 0.72) < 1e-12);
    QVERIFY(w2.note.isEmpty());
}

QTEST_MAIN(TestReportsResults)
#include "tst_reports_results.moc"
