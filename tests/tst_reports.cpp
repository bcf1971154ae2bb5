// Results math (speedup, efficiency, time to accuracy, spread over repeats) on hand-computed
// snapshots, and every report format rendered from them.
//
// With SCALELAB_REPORT_SAMPLES_DIR set, sampleReports() also writes a realistic sample study
// in every format to that folder, to look at.
#include "chart_layout.h"
#include "report.h"
#include "report_charts.h"
#include "report_content.h"
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

namespace {

RunConfig config(int workers, bool baseline = false)
{
    RunConfig c;
    c.workers = workers;
    c.baseline = baseline;
    c.batchSize = 64;
    c.epochs = 2;
    return c;
}

RunResult run(const QString &id, const RunConfig &c, int repeat, double wall, double finalAcc,
    std::optional<double> timeToTarget, const QString &state = QStringLiteral("SUCCEEDED"))
{
    RunResult r;
    r.runId = id;
    r.config = c;
    r.repeat = repeat;
    r.state = state;
    r.wallSeconds = wall;
    r.finalTestAccuracy = finalAcc;
    r.bestTestAccuracy = finalAcc;
    r.imagesPerSecond = 1000.0 / wall;
    r.timeToTargetSeconds = timeToTarget;
    r.attempts.append(
        AttemptRecord { 1, { QStringLiteral("127.0.0.1:50051") }, state, {}, 0, 1000, 2000, 0, {}, 0, {} });
    r.epochs.append(EpochPoint { 1, 1.5, 0.5, 1.4, finalAcc - 0.1, wall / 2, 1000.0 / wall });
    r.epochs.append(EpochPoint { 2, 1.0, 0.7, 0.9, finalAcc, wall, 1000.0 / wall });
    return r;
}

// Target 70%. Baseline (1 worker): wall 100 and 110, time to target 60 and 70.
// 2 workers: wall 60 and 50; time to target 35 (given) and 40 (from its epochs).
// 4 workers: wall 40 (target at 20), 30 (never reaches the target), and a FAILED run.
StudySnapshot handSnapshot()
{
    StudySnapshot s;
    s.studyId = QStringLiteral("s-hand");
    s.name = QStringLiteral("hand computed");
    s.state = QStringLiteral("SUCCEEDED");
    s.dataset = QStringLiteral("cifar10");
    s.targetAccuracy = 0.7;
    s.runs << run(QStringLiteral("b0"), config(1, true), 0, 100, 0.72, 60)
           << run(QStringLiteral("b1"), config(1, true), 1, 110, 0.74, 70)
           << run(QStringLiteral("w2-0"), config(2), 0, 60, 0.71, 35);
    RunResult fromEpochs = run(QStringLiteral("w2-1"), config(2), 1, 50, 0.73, std::nullopt);
    fromEpochs.epochs[0].testAccuracy = 0.5;
    fromEpochs.epochs[0].elapsedSeconds = 20;
    fromEpochs.epochs[1].testAccuracy = 0.71;
    fromEpochs.epochs[1].elapsedSeconds = 40;
    s.runs << fromEpochs << run(QStringLiteral("w4-0"), config(4), 0, 40, 0.70, 20)
           << run(QStringLiteral("w4-1"), config(4), 1, 30, 0.60, std::nullopt)
           << run(QStringLiteral("w4-2"), config(4), 2, 10, 0.10, std::nullopt, QStringLiteral("FAILED"));
    s.runs.last().attempts.append(AttemptRecord { 2, { QStringLiteral("127.0.0.1:50051") },
        QStringLiteral("FAILED"), QStringLiteral("boom"), 1, 3000, 4000, 0, {}, 0, {} });
    return s;
}

int pdfPageCount(const QByteArray &pdf)
{
    // Page objects, not the /Pages tree node.
    return int(pdf.count("/Type /Page\n") + pdf.count("/Type /Page ") + pdf.count("/Type /Page/")
        + pdf.count("/Type /Page>"));
}

// The text of a PDF, through poppler's pdftotext (scripts/setup.sh installs it for the
// tests); a message saying what failed when it cannot be read.
// pdftotext's output for `pdf` with `options` (poppler-utils, which the test set-up
// installs); empty when the file cannot be written.
QString runPdfToText(const QByteArray &pdf, const QStringList &options)
{
    QTemporaryDir dir;
    QFile file(dir.filePath(QStringLiteral("r.pdf")));
    if (!file.open(QIODevice::WriteOnly) || file.write(pdf) != pdf.size())
        return {};
    file.close();
    QProcess p;
    p.start(QStandardPaths::findExecutable(QStringLiteral("pdftotext")),
        options + QStringList { file.fileName(), QStringLiteral("-") });
    p.waitForFinished(30000);
    return QString::fromUtf8(p.readAllStandardOutput());
}

QString pdfText(const QByteArray &pdf)
{
    if (QStandardPaths::findExecutable(QStringLiteral("pdftotext")).isEmpty())
        return QStringLiteral("(no pdftotext: apt-get install poppler-utils)");
    return runPdfToText(pdf, {});
}

} // namespace

class TestReports : public QObject {
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
    void modelsAreComparedEachWithItsOwnBaseline();
    void imagesPerSecondHasOneDefinition();
    void reportCarriesRecipesPlanAndDefinitions();
    void perRunSpeedup();
    void otherWorkIsComparedByThroughputNotWallClock();
    void seedComparison();
    void formatNames();
    void jsonMatchesSnapshot();
    void csvHeaderRowsAndQuoting();
    void epochCsv();
    void noiseScaleInEveryFormat();
    void htmlIsSelfContainedAndEscaped();
    void syntheticFlagInEveryFormat();
    void pdfHasPages();
    void emptyAndBaselineLessStudiesRender();
    void writeReportNamesPathAndError();
    void writeCsvWritesEpochFileBeside();
    void sampleReports();
    void htmlRunsTableFitsA1400PxWindow();
    void targetLineSitsAtTheTarget();
    void pdfLastPageIsNotNearlyEmpty();
    void tuneJsonHasSpaceTrialsDecisionsAndBest();
    void tuneCsvHasOneRowPerTrial();
    void tuneHtmlShowsSearchTrialsDecisionsAndCharts();
    void tunePdfShowsTrialsAndBestConfiguration();
};

void TestReports::statIsSampleStddevAndSkipsNaN()
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

void TestReports::speedupAndEfficiencyByWallClockAndTimeToAccuracy()
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

void TestReports::timeToTargetFromEpochsWhenTheRunLacksIt()
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

void TestReports::failedRunsAreCountedButNotAveraged()
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

void TestReports::configNeverReachingTargetHasNoTimeSpeedup()
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

void TestReports::missingBaselineSaysWhy()
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

void TestReports::baselineNeverReachingTargetSaysWhy()
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
void TestReports::baselineThatDidNotLearnIsFlagged()
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
void TestReports::imagesPerSecondHasOneDefinition()
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

void TestReports::reportCarriesRecipesPlanAndDefinitions()
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

void TestReports::perRunSpeedup()
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
void TestReports::modelsAreComparedEachWithItsOwnBaseline()
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

void TestReports::otherWorkIsComparedByThroughputNotWallClock()
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

void TestReports::seedComparison()
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

void TestReports::formatNames()
{
    QCOMPARE(parseReportFormat(QStringLiteral("JSON")), std::optional(ReportFormat::Json));
    QCOMPARE(parseReportFormat(QStringLiteral("csv")), std::optional(ReportFormat::Csv));
    QCOMPARE(parseReportFormat(QStringLiteral("epoch-csv")), std::optional(ReportFormat::EpochCsv));
    QCOMPARE(parseReportFormat(QStringLiteral("html")), std::optional(ReportFormat::Html));
    QCOMPARE(parseReportFormat(QStringLiteral("pdf")), std::optional(ReportFormat::Pdf));
    QCOMPARE(parseReportFormat(QStringLiteral("docx")), std::nullopt);
    QCOMPARE(reportFormatForPath(QStringLiteral("/tmp/a.epochs.csv")), std::optional(ReportFormat::EpochCsv));
    QCOMPARE(reportFormatForPath(QStringLiteral("/tmp/a.htm")), std::optional(ReportFormat::Html));
    QCOMPARE(reportFormatForPath(QStringLiteral("/tmp/a.PDF")), std::optional(ReportFormat::Pdf));
    QCOMPARE(epochCsvPath(QStringLiteral("/tmp/r.csv")), QStringLiteral("/tmp/r.epochs.csv"));
    for (const QString &name : reportFormatNames())
        QCOMPARE(reportFormatName(*parseReportFormat(name)), name);
}

void TestReports::jsonMatchesSnapshot()
{
    const StudySnapshot s = handSnapshot();
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(reportJson(s), &error);
    QCOMPARE(error.error, QJsonParseError::NoError);
    const QJsonObject root = doc.object();
    QCOMPARE(root.value(QStringLiteral("study_id")).toString(), s.studyId);
    QCOMPARE(root.value(QStringLiteral("synthetic")).toBool(true), false);
    QCOMPARE(root.value(QStringLiteral("target_accuracy")).toDouble(), 0.7);

    const QJsonArray comparison = root.value(QStringLiteral("seed_study_comparison")).toArray();
    QCOMPARE(comparison.size(), 2);
    const QJsonObject w2 = comparison[0].toObject();
    QCOMPARE(w2.value(QStringLiteral("baseline_seconds")).toDouble(), 105.0);
    QCOMPARE(w2.value(QStringLiteral("distributed_seconds")).toDouble(), 55.0);
    QVERIFY(qAbs(w2.value(QStringLiteral("speedup")).toDouble() - 105.0 / 55.0) < 1e-12);
    QVERIFY(qAbs(w2.value(QStringLiteral("efficiency")).toDouble() - 105.0 / 110.0) < 1e-12);
    QVERIFY(qAbs(w2.value(QStringLiteral("baseline_accuracy")).toDouble() - 0.73) < 1e-12);
    QVERIFY(qAbs(w2.value(QStringLiteral("distributed_accuracy")).toDouble() - 0.72) < 1e-12);

    const QJsonArray runs = root.value(QStringLiteral("runs")).toArray();
    QCOMPARE(runs.size(), s.runs.size());
    for (int i = 0; i < runs.size(); ++i) {
        const QJsonObject r = runs[i].toObject();
        QCOMPARE(r.value(QStringLiteral("run_id")).toString(), s.runs[i].runId);
        QCOMPARE(r.value(QStringLiteral("state")).toString(), s.runs[i].state);
        QCOMPARE(r.value(QStringLiteral("wall_seconds")).toDouble(), s.runs[i].wallSeconds);
        QCOMPARE(r.value(QStringLiteral("epochs")).toArray().size(), s.runs[i].epochs.size());
        QCOMPARE(r.value(QStringLiteral("attempts")).toArray().size(), s.runs[i].attempts.size());
    }
    // Time to target from epochs; never reached is null, not 0.
    QCOMPARE(runs[3].toObject().value(QStringLiteral("time_to_target_seconds")).toDouble(), 40.0);
    QVERIFY(runs[5].toObject().value(QStringLiteral("time_to_target_seconds")).isNull());

    const QJsonObject w4 = root.value(QStringLiteral("configurations")).toArray()[2].toObject();
    QCOMPARE(w4.value(QStringLiteral("repeats")).toInt(), 3);
    QCOMPARE(w4.value(QStringLiteral("failed")).toInt(), 1);
    QCOMPARE(
        w4.value(QStringLiteral("wall_seconds")).toObject().value(QStringLiteral("mean")).toDouble(), 35.0);
    QCOMPARE(w4.value(QStringLiteral("speedup_by_time_to_accuracy"))
                 .toObject()
                 .value(QStringLiteral("speedup"))
                 .toDouble(),
        3.25);

    // NaN is null, never a number.
    StudySnapshot noBase = s;
    noBase.runs.removeFirst();
    noBase.runs.removeFirst();
    const QJsonObject nb = QJsonDocument::fromJson(reportJson(noBase)).object();
    const QJsonObject first = nb.value(QStringLiteral("seed_study_comparison")).toArray()[0].toObject();
    QVERIFY(first.value(QStringLiteral("speedup")).isNull());
    QVERIFY(first.value(QStringLiteral("note")).toString().contains(QStringLiteral("no baseline")));
    QVERIFY(nb.value(QStringLiteral("baseline_note")).toString().contains(QStringLiteral("no baseline")));
}

void TestReports::csvHeaderRowsAndQuoting()
{
    StudySnapshot s = handSnapshot();
    s.runs[0].runId = QStringLiteral("run,\"one\"");
    s.runs[1].stateReason = QStringLiteral("line one\nline two");
    const QString csv = QString::fromUtf8(reportRunsCsv(s));
    const QStringList lines = csv.split(QStringLiteral("\r\n"), Qt::SkipEmptyParts);
    QVERIFY(lines.first().startsWith(QStringLiteral("study_id,synthetic,run_id,config_key,")));
    const QStringList header = lines.first().split(QLatin1Char(','));
    for (const char *column :
        { "workers", "gpus_per_worker", "batch_size", "epochs", "final_test_accuracy", "best_test_accuracy",
            "wall_seconds", "time_to_target_seconds", "images_per_second", "speedup_wall_clock",
            "efficiency_wall_clock", "speedup_time_to_accuracy", "efficiency_time_to_accuracy" })
        QVERIFY2(header.contains(QLatin1String(column)), column);
    QCOMPARE(lines.size(), 1 + s.runs.size());
    QVERIFY(lines[1].startsWith(QStringLiteral("s-hand,false,\"run,\"\"one\"\"\",")));
    QVERIFY(csv.contains(QStringLiteral("\"line one\nline two\"")));

    // The 2-worker run's speedup and a value that was not measured (empty).
    const QStringList w2 = lines[3].split(QLatin1Char(','));
    QCOMPARE(w2[2], QStringLiteral("w2-0"));
    QVERIFY(qAbs(w2[header.indexOf(QStringLiteral("speedup_wall_clock"))].toDouble() - 105.0 / 60.0) < 1e-9);
    const QStringList never = lines[6].split(QLatin1Char(','));
    QCOMPARE(never[header.indexOf(QStringLiteral("time_to_target_seconds"))], QString());
}

void TestReports::epochCsv()
{
    const StudySnapshot s = handSnapshot();
    const QStringList lines
        = QString::fromUtf8(reportEpochsCsv(s)).split(QStringLiteral("\r\n"), Qt::SkipEmptyParts);
    QCOMPARE(lines.first(),
        QStringLiteral("study_id,synthetic,run_id,config_key,workers,repeat,epoch,train_loss,"
                       "train_accuracy,test_loss,test_accuracy,elapsed_seconds,images_per_second,"
                       "gradient_noise_scale"));
    QCOMPARE(lines.size(), 1 + 2 * s.runs.size());
    QVERIFY(lines[8].startsWith(
        QStringLiteral("s-hand,false,w2-1,") + config(2).key() + QStringLiteral(",2,1,2,")));
    QVERIFY(lines[8].contains(QStringLiteral(",0.71,40,")));
}

// Issue 54: each run's gradient noise scale in the JSON and both CSVs, and a run 4x or more
// past it named in the report's notes.
void TestReports::noiseScaleInEveryFormat()
{
    StudySnapshot s = handSnapshot();
    for (RunResult &run : s.runs) {
        run.noise = { 40.0, 1.0, 40.0, 50, run.config.workers, run.config.workers == 1 };
        for (EpochPoint &e : run.epochs)
            e.noise = run.noise;
    }
    const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
    const QJsonObject run = json.value(QStringLiteral("runs")).toArray()[3].toObject();
    const QJsonObject noise = run.value(QStringLiteral("gradient_noise_scale")).toObject();
    QCOMPARE(noise.value(QStringLiteral("b_simple")).toDouble(), 40.0);
    QCOMPARE(noise.value(QStringLiteral("estimator")).toString(), QStringLiteral("two-batch"));
    QCOMPARE(run.value(QStringLiteral("epochs"))
                 .toArray()[0]
                 .toObject()
                 .value(QStringLiteral("gradient_noise_scale"))
                 .toDouble(),
        40.0);
    const QStringList csv
        = QString::fromUtf8(reportRunsCsv(s)).split(QStringLiteral("\r\n"), Qt::SkipEmptyParts);
    const QStringList header = csv[0].split(QLatin1Char(','));
    QCOMPARE(csv[1].split(QLatin1Char(',')).at(header.indexOf(QStringLiteral("gradient_noise_scale"))),
        QStringLiteral("40"));
    QVERIFY(reportEpochsCsv(s).contains(",40\r\n"));
    const ReportContent content = buildReportContent(s);
    QVERIFY2(content.notes.join(u' ').contains(QStringLiteral("Past the critical batch")),
        qPrintable(content.notes.join(u'|')));
}

void TestReports::htmlIsSelfContainedAndEscaped()
{
    StudySnapshot s = handSnapshot();
    s.runs[2].runId = QStringLiteral("<script>alert('x')</script>");
    s.dataset = QStringLiteral("data<img src=x onerror=alert(1)>");
    s.runs[6].attempts[1].reason = QStringLiteral("rank 1 said \"<b>bye</b>\"");
    const Result<QByteArray> html = reportHtml(s);
    QVERIFY2(html.ok(), qPrintable(html.error()));
    const QString text = QString::fromUtf8(html.value());
    QVERIFY(text.startsWith(QStringLiteral("<!DOCTYPE html>")));
    QVERIFY(!text.contains(QStringLiteral("<script")));
    QVERIFY(text.contains(QStringLiteral("&lt;script&gt;alert('x')&lt;/script&gt;")));
    QVERIFY(!text.contains(QStringLiteral("<img")));
    QVERIFY(text.contains(QStringLiteral("data&lt;img src=x onerror=alert(1)&gt;")));
    QVERIFY(text.contains(QStringLiteral("&lt;b&gt;bye&lt;/b&gt;")));
    // Self-contained: no resource fetched from anywhere.
    static const QRegularExpression external(QStringLiteral("(src|href)\\s*=\\s*[\"']?\\s*(https?:)?//"),
        QRegularExpression::CaseInsensitiveOption);
    QVERIFY(!external.match(text).hasMatch());
    QVERIFY(!text.contains(QStringLiteral("<link")));
    QVERIFY(!text.contains(QStringLiteral("@import")));
    QVERIFY(text.count(QStringLiteral("<svg")) >= 6); // loss, accuracy ×2, throughput, speedup, efficiency
    // Tables carry the snapshot's values.
    QVERIFY(text.contains(QStringLiteral("1.91×"))); // 2 workers by wall-clock: 105 / 55
    QVERIFY(text.contains(QStringLiteral("3.25×"))); // 4 workers by time to 70%: 65 / 20
    QVERIFY(text.contains(QStringLiteral("w4-2"))); // the failed run is listed
}

void TestReports::syntheticFlagInEveryFormat()
{
    StudySnapshot s = handSnapshot();
    for (const bool synthetic : { true, false }) {
        s.synthetic = synthetic;
        const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
        QCOMPARE(json.value(QStringLiteral("synthetic")).toBool(!synthetic), synthetic);
        const QString flag = synthetic ? QStringLiteral(",true,") : QStringLiteral(",false,");
        const QString runs = QString::fromUtf8(reportRunsCsv(s)).section(QStringLiteral("\r\n"), 1, 1);
        QVERIFY2(runs.startsWith(QStringLiteral("s-hand") + flag), qPrintable(runs));
        const QString epochs = QString::fromUtf8(reportEpochsCsv(s)).section(QStringLiteral("\r\n"), 1, 1);
        QVERIFY2(epochs.startsWith(QStringLiteral("s-hand") + flag), qPrintable(epochs));
        const QString html = QString::fromUtf8(reportHtml(s).value());
        QCOMPARE(html.contains(QStringLiteral("SYNTHETIC DATA")), synthetic);
        const QByteArray pdf = reportPdf(s).value();
        // The document title carries the flag (UTF-16BE in the info dictionary) ...
        QByteArray utf16;
        for (const QChar c : QStringLiteral("SYNTHETIC DATA"))
            utf16 += char(c.unicode() >> 8), utf16 += char(c.unicode() & 0xff);
        QCOMPARE(pdf.contains(utf16), synthetic);
        // ... and so does the page, where poppler can read it.
        const QString text = pdfText(pdf);
        if (!text.isEmpty())
            QCOMPARE(text.contains(QStringLiteral("SYNTHETIC DATA")), synthetic);
        else
            qInfo("pdftotext not found: the PDF page text is not checked");
    }
}

void TestReports::pdfHasPages()
{
    const Result<QByteArray> pdf = reportPdf(handSnapshot());
    QVERIFY2(pdf.ok(), qPrintable(pdf.error()));
    QVERIFY(pdf.value().startsWith("%PDF-"));
    QVERIFY(pdf.value().trimmed().endsWith("%%EOF"));
    QVERIFY2(pdfPageCount(pdf.value()) >= 2, qPrintable(QString::number(pdfPageCount(pdf.value()))));
    const QString text = pdfText(pdf.value());
    QVERIFY2(text.contains(QStringLiteral("w4-2")), qPrintable(text.left(2000)));
    QVERIFY2(text.contains(QStringLiteral("1.91×")), qPrintable(text.left(2000)));
}

void TestReports::emptyAndBaselineLessStudiesRender()
{
    StudySnapshot empty;
    empty.studyId = QStringLiteral("s-empty");
    for (const ReportFormat format : { ReportFormat::Json, ReportFormat::Csv, ReportFormat::EpochCsv,
             ReportFormat::Html, ReportFormat::Pdf }) {
        const Result<QByteArray> r = renderReport(empty, format);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(!r.value().isEmpty());
    }
    QVERIFY(
        QString::fromUtf8(reportHtml(empty).value()).contains(QStringLiteral("The study has no runs yet.")));

    StudySnapshot noBase = handSnapshot();
    noBase.runs.removeFirst();
    noBase.runs.removeFirst();
    const QString html = QString::fromUtf8(reportHtml(noBase).value());
    QVERIFY(
        html.contains(QStringLiteral("Speedup and efficiency are not available: the study has no baseline")));
    QVERIFY(!html.contains(QStringLiteral("ideal (linear)"))); // no ideal line without a baseline
    QVERIFY(reportPdf(noBase).value().startsWith("%PDF-"));
}

void TestReports::writeReportNamesPathAndError()
{
    const QString path = QStringLiteral("/nonexistent-scalelab-dir/report.json");
    const Result<QStringList> written = writeReport(handSnapshot(), ReportFormat::Json, path);
    QVERIFY(!written.ok());
    QVERIFY2(written.error().contains(path), qPrintable(written.error()));
    QVERIFY2(written.error().size() > path.size() + 30, qPrintable(written.error())); // and the reason

    QTemporaryDir dir;
    const QString ok = dir.filePath(QStringLiteral("r.html"));
    const Result<QStringList> html = writeReport(handSnapshot(), ReportFormat::Html, ok);
    QVERIFY2(html.ok(), qPrintable(html.error()));
    QCOMPARE(html.value(), QStringList { ok });
    QFile file(ok);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QVERIFY(file.readAll().startsWith("<!DOCTYPE html>"));
}

void TestReports::writeCsvWritesEpochFileBeside()
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("study.csv"));
    const Result<QStringList> written = writeReport(handSnapshot(), ReportFormat::Csv, path);
    QVERIFY2(written.ok(), qPrintable(written.error()));
    QCOMPARE(written.value(), QStringList({ path, dir.filePath(QStringLiteral("study.epochs.csv")) }));
    QFile epochs(written.value()[1]);
    QVERIFY(epochs.open(QIODevice::ReadOnly));
    QVERIFY(epochs.readLine().startsWith("study_id,synthetic,run_id,config_key,workers,repeat,epoch,"));
}

// ---- A realistic sample study, written only when asked for --------------------------------

namespace {

// A synthetic-data study as the journal would report it: a baseline and 2 and 4 workers,
// two repeats each, 5 epochs, step losses; one 2-worker run retried after a lost rank, and
// one 4-worker run that failed twice.
StudySnapshot sampleSnapshot()
{
    StudySnapshot s;
    s.studyId = QStringLiteral("study-20240611-seed");
    s.name = QStringLiteral("Seed CNN scale-up on 2 nodes");
    s.state = QStringLiteral("FAILED");
    s.dataset = QStringLiteral("synthetic-cifar10 (50,000 train / 10,000 test, 32×32×3)");
    s.synthetic = true;
    s.targetAccuracy = 0.70;
    s.createdUnixMs = 1718100000000;
    s.finishedUnixMs = 1718103900000;
    s.nodes << NodeInfo { QStringLiteral("10.0.0.11:50051"), QStringLiteral("gpu-a"), QStringLiteral("0.1.0"),
        16, qint64(128) << 30, { QStringLiteral("0: NVIDIA H100 80GB HBM3 (80 GiB)") },
        QStringLiteral("AMD EPYC 9654 96-Core Processor"), QStringLiteral("Debian GNU/Linux 12 (bookworm)"),
        QStringLiteral("NVML 12.4"), { { QStringLiteral("git_commit"), QStringLiteral("abc123") } } }
            << NodeInfo { QStringLiteral("10.0.0.12:50051"), QStringLiteral("gpu-b"), QStringLiteral("0.1.0"),
                   16, qint64(128) << 30, { QStringLiteral("0: NVIDIA H100 80GB HBM3 (80 GiB)") },
                   QStringLiteral("AMD EPYC 9654 96-Core Processor"),
                   QStringLiteral("Debian GNU/Linux 12 (bookworm)"), QStringLiteral("NVML 12.4"),
                   { { QStringLiteral("git_commit"), QStringLiteral("abc123") } } };
    s.software = { { QStringLiteral("ScaleLab"), QStringLiteral("0.1.0") },
        { QStringLiteral("Qt"), QStringLiteral("6.4.2") },
        { QStringLiteral("gRPC"), QStringLiteral("1.51.1") },
        { QStringLiteral("libtorch"), QStringLiteral("2.1.2") },
        { QStringLiteral("c10d backend"), QStringLiteral("NCCL 2.18") } };

    QRandomGenerator rng(42);
    const auto noise = [&](double scale) { return (rng.generateDouble() - 0.5) * 2 * scale; };
    const qint64 t0 = s.createdUnixMs;
    const int trainImages = 50000;
    struct Plan {
        int workers;
        double rate; // images/s of the whole run
    };
    for (const Plan plan : { Plan { 1, 412 }, Plan { 2, 771 }, Plan { 4, 1398 } }) {
        for (int repeat = 0; repeat < 2; ++repeat) {
            RunResult r;
            r.config.workers = plan.workers;
            r.config.baseline = plan.workers == 1;
            r.config.batchSize = 128;
            r.config.epochs = 5;
            r.config.gpusPerWorker = 0.5;
            r.config.precision = QStringLiteral("bf16");
            r.repeat = repeat;
            r.runId = QStringLiteral("%1-w%2-r%3").arg(s.studyId).arg(plan.workers).arg(repeat);
            const double rate = plan.rate * (1 + noise(0.03));
            const bool failed = plan.workers == 4 && repeat == 1;
            const int epochs = failed ? 2 : 5;
            const double globalBatch = r.config.globalBatch();
            const int stepsPerEpoch = int(std::ceil(trainImages / globalBatch));
            // Larger global batches learn a little less per epoch.
            const double learn = 0.62 - 0.035 * std::log2(plan.workers);
            for (int e = 1; e <= epochs; ++e) {
                EpochPoint p;
                p.epoch = e;
                p.elapsedSeconds = e * trainImages / rate + e * 4.0; // + evaluation
                p.imagesPerSecond = rate * (1 + noise(0.01));
                p.testAccuracy = 0.86 - 0.76 * std::exp(-learn * e) + noise(0.008);
                p.trainAccuracy = p.testAccuracy + 0.03;
                p.trainLoss = 2.3 * std::exp(-0.55 * learn * e) + 0.25;
                p.testLoss = p.trainLoss + 0.08;
                r.epochs.append(p);
            }
            for (int step = 1; step <= stepsPerEpoch * epochs; ++step) {
                const double epoch = double(step) / stepsPerEpoch;
                r.steps.append(StepPoint { step, int(std::ceil(epoch)),
                    2.3 * std::exp(-0.55 * learn * epoch) + 0.25 + noise(0.12),
                    step * globalBatch / rate + std::floor(epoch) * 4.0, {} });
            }
            r.imagesPerSecond = rate;
            r.wallSeconds = r.epochs.last().elapsedSeconds;
            r.finalTestAccuracy = r.epochs.last().testAccuracy;
            r.bestTestAccuracy = r.finalTestAccuracy;
            for (const EpochPoint &p : r.epochs)
                r.bestTestAccuracy = std::max(r.bestTestAccuracy, p.testAccuracy);
            const QStringList agents = plan.workers == 1 ? QStringList { s.nodes[0].agent }
                                                         : QStringList { s.nodes[0].agent, s.nodes[1].agent };
            const qint64 start = t0 + (plan.workers * 2 + repeat) * 400000;
            const qint64 end = start + qint64(r.wallSeconds * 1000) + 9000;
            if (failed) {
                r.state = QStringLiteral("FAILED");
                r.stateReason = QStringLiteral("gave up after 2 attempts (max_failures = 1)");
                r.attempts << AttemptRecord { 1, agents, QStringLiteral("FAILED"),
                    QStringLiteral("rank 3 on 10.0.0.12:50051 exited with signal 9 (SIGKILL): "
                                   "out of memory"),
                    0, start, start + 61000, 0, {}, 0, {} }
                           << AttemptRecord { 2, agents, QStringLiteral("FAILED"),
                                  QStringLiteral("rendezvous at 10.0.0.11:29500 timed out after 300 s, "
                                                 "\"rank 2\" never joined"),
                                  1, start + 70000, end, 0, {}, 0, {} };
                r.wallSeconds = kNotMeasured;
                r.finalTestAccuracy = kNotMeasured;
            } else if (plan.workers == 2 && repeat == 0) {
                r.state = QStringLiteral("SUCCEEDED");
                r.attempts << AttemptRecord { 1, agents, QStringLiteral("FAILED"),
                    QStringLiteral("lost the agent 10.0.0.12:50051 (heartbeat missed for 30 s)"), 0, start,
                    start + 120000, 0, {}, 0, {} }
                           << AttemptRecord { 2, agents, QStringLiteral("SUCCEEDED"), {}, 2, start + 130000,
                                  end + 10000, 0, {}, 0, {} };
            } else {
                r.state = QStringLiteral("SUCCEEDED");
                r.attempts << AttemptRecord { 1, agents, QStringLiteral("SUCCEEDED"), {}, 0, start, end, 0,
                    {}, 0, {} };
            }
            s.runs.append(r);
        }
    }
    return s;
}

} // namespace

void TestReports::sampleReports()
{
    // Written to a temporary folder unless SCALELAB_REPORT_SAMPLES_DIR names one to keep.
    QTemporaryDir scratch;
    QString dir = qEnvironmentVariable("SCALELAB_REPORT_SAMPLES_DIR");
    if (dir.isEmpty())
        dir = scratch.path();
    const StudySnapshot s = sampleSnapshot();
    for (const auto &[format, name] : { std::pair { ReportFormat::Json, "sample.json" },
             std::pair { ReportFormat::Csv, "sample.csv" }, std::pair { ReportFormat::Html, "sample.html" },
             std::pair { ReportFormat::Pdf, "sample.pdf" } }) {
        const Result<QStringList> written
            = writeReport(s, format, dir + QLatin1Char('/') + QLatin1String(name));
        QVERIFY2(written.ok(), qPrintable(written.error()));
        qInfo("wrote %s", qPrintable(written.value().join(QStringLiteral(", "))));
        // Each document says what it is about: the study, every run, and that the data
        // were synthetic.
        QFile file(written.value().first());
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray bytes = file.readAll();
        QString text;
        if (format == ReportFormat::Json) {
            const QJsonObject json = QJsonDocument::fromJson(bytes).object();
            QCOMPARE(json.value(QLatin1String("study_id")).toString(), s.studyId);
            QCOMPARE(json.value(QLatin1String("synthetic")).toBool(), true);
            QCOMPARE(json.value(QLatin1String("runs")).toArray().size(), s.runs.size());
            text = QString::fromUtf8(bytes);
        } else if (format == ReportFormat::Csv) {
            QCOMPARE(int(bytes.trimmed().count('\n')), int(s.runs.size())); // a header and a row per run
            QVERIFY2(written.value().size() == 2, "the per-epoch CSV is written beside it");
            text = QString::fromUtf8(bytes);
        } else {
            text = format == ReportFormat::Pdf ? pdfText(bytes) : QString::fromUtf8(bytes);
            QVERIFY2(
                text.contains(s.name.toHtmlEscaped()) || text.contains(s.name), qPrintable(text.left(2000)));
            QVERIFY2(text.contains(QLatin1String("SYNTHETIC")), qPrintable(text.left(2000)));
        }
        for (const auto &run : s.runs)
            QVERIFY2(text.contains(run.runId),
                qPrintable(QStringLiteral("%1 does not name run %2").arg(name, run.runId)));
    }
}

namespace {

// The text of every <th> (lines joined by '\n') and its title, and the lines of every <td>
// with the font each line is set in, of the HTML table whose caption paragraph follows
// `<h2>title</h2>`.
struct HtmlCell {
    QStringList lines;
    QList<bool> subLines; // per line: set in the smaller .sub type
    QString title;
    bool header = false;
    int column = 0;
};

QList<HtmlCell> htmlTableCells(const QString &html, const QString &title)
{
    const qsizetype at = html.indexOf(QStringLiteral(">%1</h").arg(title));
    const qsizetype start = html.indexOf(QStringLiteral("<table"), at);
    const qsizetype end = html.indexOf(QStringLiteral("</table>"), start);
    if (at < 0 || start < 0 || end < 0)
        return {};
    const QString table = html.mid(start, end - start);
    static const QRegularExpression row(QStringLiteral("<tr[^>]*>(.*?)</tr>"));
    static const QRegularExpression cell(
        QStringLiteral("<(th|td)([^>]*)>(.*?)</t[hd]>"), QRegularExpression::DotMatchesEverythingOption);
    static const QRegularExpression titleAttr(QStringLiteral("title=\"([^\"]*)\""));
    static const QRegularExpression sub(QStringLiteral("<span class=\"sub\">(.*?)</span>"));
    static const QRegularExpression tag(QStringLiteral("<[^>]+>"));
    const auto text = [](QString s) {
        s.remove(tag);
        return s.replace(QStringLiteral("&lt;"), QStringLiteral("<"))
            .replace(QStringLiteral("&gt;"), QStringLiteral(">"))
            .replace(QStringLiteral("&quot;"), QStringLiteral("\""))
            .replace(QStringLiteral("&amp;"), QStringLiteral("&"));
    };
    QList<HtmlCell> cells;
    for (auto r = row.globalMatch(table); r.hasNext();) {
        int column = 0;
        for (auto c = cell.globalMatch(r.next().captured(1)); c.hasNext(); ++column) {
            const auto m = c.next();
            HtmlCell out;
            out.header = m.captured(1) == QLatin1String("th");
            out.column = column;
            out.title = text(titleAttr.match(m.captured(2)).captured(1));
            QString body = m.captured(3);
            QStringList subs;
            for (auto s = sub.globalMatch(body); s.hasNext();)
                subs << text(s.next().captured(1));
            body.remove(sub);
            for (const QString &line : body.split(QStringLiteral("<br>"))) {
                out.lines << text(line);
                out.subLines << false;
            }
            for (const QString &line : std::as_const(subs)) {
                out.lines << line;
                out.subLines << true;
            }
            cells << out;
        }
    }
    return cells;
}

// How far down each page of a PDF its text reaches above the page's footer, as a fraction of
// the page (pdftotext -bbox); empty when poppler is not installed.
QList<qreal> pdfPageTextBottoms(const QByteArray &pdf)
{
    if (QStandardPaths::findExecutable(QStringLiteral("pdftotext")).isEmpty())
        return {};
    const QString out = runPdfToText(pdf, { QStringLiteral("-bbox") });
    static const QRegularExpression page(
        QStringLiteral("<page width=\"[0-9.]+\" height=\"([0-9.]+)\">(.*?)</page>"),
        QRegularExpression::DotMatchesEverythingOption);
    static const QRegularExpression word(
        QStringLiteral("<word xMin=\"[0-9.]+\" yMin=\"([0-9.]+)\" xMax=\"[0-9.]+\" yMax=\"([0-9.]+)\""));
    QList<qreal> bottoms;
    for (auto pm = page.globalMatch(out); pm.hasNext();) {
        const auto m = pm.next();
        QList<QPair<qreal, qreal>> words; // (yMin, yMax)
        for (auto wm = word.globalMatch(m.captured(2)); wm.hasNext();) {
            const auto w = wm.next();
            words.append({ w.captured(1).toDouble(), w.captured(2).toDouble() });
        }
        qreal footerTop = 0, bottom = 0;
        for (const auto &w : std::as_const(words))
            footerTop = std::max(footerTop, w.first);
        for (const auto &w : std::as_const(words))
            if (w.second < footerTop - 1)
                bottom = std::max(bottom, w.second);
        bottoms << bottom / m.captured(1).toDouble();
    }
    return bottoms;
}

} // namespace

// Issue 21: the runs table overflowed a 1400-px window and its headers wrapped onto four
// lines. There is no browser here, so the table's narrowest width is worked out as a browser
// does (every line that may not wrap at its full width, plus cell padding) in DejaVu Sans,
// the widest of the page's fonts, and compared with main's content width in that window.
void TestReports::htmlRunsTableFitsA1400PxWindow()
{
    StudySnapshot s = sampleSnapshot();
    for (int i = 0; i < s.runs.size(); ++i) // the run ids the study runner gives
        s.runs[i].runId = QStringLiteral("st-20240611-100000-ab12-r%1").arg(i + 1, 2, 10, QLatin1Char('0'));
    const QString html = QString::fromUtf8(reportHtml(s).value());
    const ReportContent content = buildReportContent(s);

    // Headers break only at the report's <br>, into two lines at most, and name the full
    // header in a tooltip when they shorten it.
    QVERIFY(html.contains(QStringLiteral("white-space: nowrap; }\nth[title]")));
    for (const ReportTable &t : content.tables) {
        const QList<HtmlCell> cells = htmlTableCells(html, t.title);
        if (t.rows.isEmpty())
            continue;
        QVERIFY2(!cells.isEmpty(), qPrintable(t.title));
        int headers = 0;
        for (const HtmlCell &c : cells) {
            if (!c.header)
                continue;
            ++headers;
            QVERIFY2(c.lines.size() <= 2, qPrintable(c.lines.join(QLatin1Char('/'))));
            const QString full = t.headers[c.column];
            QVERIFY2(c.lines.join(QLatin1Char(' ')) == full || c.title == full,
                qPrintable(QStringLiteral("%1: %2 without its full name")
                               .arg(t.title, c.lines.join(QLatin1Char(' ')))));
        }
        QCOMPARE(headers, int(t.headers.size())); // every column kept
    }

    // The CSS this model follows: main at most 1360 px wide with 28-px sides, the runs table in
    // compact type (11.5-px bold headers, 12-px cells, 10.5-px second lines, 6-px sides).
    QVERIFY(
        html.contains(QStringLiteral("main { max-width: 1360px; margin: 0 auto; padding: 32px 28px 40px;")));
    QVERIFY(html.contains(QStringLiteral("<h2>Runs</h2>")));
    const qsizetype runs = html.indexOf(QStringLiteral("<h2>Runs</h2>"));
    QVERIFY(html.indexOf(QStringLiteral("<table class=\"compact\">"), runs) > runs);
    QVERIFY(html.contains(QStringLiteral("table.compact th { font-size: 11.5px; }")));
    const qreal viewport = 1400 - 17; // a window 1400 px wide, less a scroll bar
    const qreal contentWidth = std::min<qreal>(1360, viewport) - 2 * 28;
    const auto fontOf = [](qreal px, bool bold) {
        QFont f(QStringLiteral("DejaVu Sans"));
        f.setPixelSize(100); // measured large, scaled down: no hinting rounds it
        f.setBold(bold);
        return QPair<QFontMetricsF, qreal>(QFontMetricsF(f), px / 100);
    };
    const auto head = fontOf(11.5, true), body = fontOf(12, false), sub = fontOf(10.5, false);
    const ReportTable &runTable = content.tables[2];
    QCOMPARE(runTable.title, QStringLiteral("Runs"));
    QList<qreal> columns(runTable.headers.size(), 0);
    for (const HtmlCell &c : htmlTableCells(html, runTable.title)) {
        for (int i = 0; i < c.lines.size(); ++i) {
            const auto &[fm, scale] = c.header ? head : c.subLines[i] ? sub : body;
            columns[c.column] = std::max(columns[c.column], fm.horizontalAdvance(c.lines[i]) * scale + 2 * 6);
        }
    }
    qreal width = 0;
    for (const qreal w : std::as_const(columns))
        width += w;
    QVERIFY2(width <= contentWidth,
        qPrintable(QStringLiteral("the runs table needs %1 px of %2").arg(width).arg(contentWidth)));
}

// Issue 21: the target accuracy's line sat on the x axis when every measured accuracy was at
// or above the target (the y range started at the target). The line must be at the target's
// place on the y axis, and clear of the axis.
void TestReports::targetLineSitsAtTheTarget()
{
    for (const double target : { 0.5, 0.7 }) {
        StudySnapshot s = handSnapshot();
        s.runs.removeLast(); // the failed run's 0% epoch
        s.targetAccuracy = target; // 0.5: the lowest accuracy measured (w2-1's first epoch)
        const StudyResults results = computeStudyResults(s);
        int checked = 0;
        for (const ChartSpec &chart : studyCharts(s, results)) {
            if (chart.referenceLines.isEmpty())
                continue;
            ++checked;
            QCOMPARE(chart.referenceLines.first().y, target);
            // The target's line at its place on the y axis, clear of the x axis; the ticks go up
            // from the x axis.
            const ChartLayout l = layoutChart(chart, QRectF(0, 0, 580, 350));
            QVERIFY2(l.yTicks.size() >= 2, qPrintable(chart.title));
            QCOMPARE(l.yTicks.first().value, l.yLo);
            QCOMPARE(l.mapY(l.yLo), l.plot.bottom());
            QVERIFY2(l.yLo < target && target < l.yHi, qPrintable(chart.title));
            const double y = l.mapY(target);
            QVERIFY2(l.plot.bottom() - y >= 10,
                qPrintable(QStringLiteral("%1: target line %2 px above the x axis")
                               .arg(chart.title)
                               .arg(l.plot.bottom() - y)));
        }
        QCOMPARE(checked, 2); // accuracy by epoch and over time
    }
}

// Issue 21: the PDF's last page carried a few lines. A report whose last page would be
// nearly empty is laid out a little smaller when that saves the page.
void TestReports::pdfLastPageIsNotNearlyEmpty()
{
    QVERIFY2(!QStandardPaths::findExecutable(QStringLiteral("pdftotext")).isEmpty(),
        "pdftotext is needed to read the PDF's pages: apt-get install poppler-utils");
    // The sample study with 0 to 24 more runs: every length of the runs table's last page.
    const StudySnapshot base = sampleSnapshot();
    for (int extra = 0; extra <= 24; ++extra) {
        StudySnapshot s = base;
        for (int i = 0; i < extra; ++i) {
            RunResult r = base.runs[i % base.runs.size()];
            r.runId += QStringLiteral("-x%1").arg(i);
            s.runs.append(r);
        }
        const Result<QByteArray> pdf = reportPdf(s);
        QVERIFY2(pdf.ok(), qPrintable(pdf.error()));
        const QList<qreal> bottoms = pdfPageTextBottoms(pdf.value());
        QCOMPARE(int(bottoms.size()), pdfPageCount(pdf.value()));
        if (const QString dir = qEnvironmentVariable("SCALELAB_REPORT_SAMPLES_DIR");
            !dir.isEmpty() && extra == 13) {
            QFile file(dir + QStringLiteral("/sample-19-runs.pdf")); // to look at, as sampleReports()
            QVERIFY(file.open(QIODevice::WriteOnly) && file.write(pdf.value()) == pdf.value().size());
        }
        // Without the second layout, 13 and 24 more runs left 15% (a table's last rows).
        QVERIFY2(bottoms.size() < 2 || bottoms.last() >= 0.3,
            qPrintable(QStringLiteral("%1 more runs: %2 pages, the last one's text ends %3% down")
                           .arg(extra)
                           .arg(bottoms.size())
                           .arg(qRound(bottoms.last() * 100))));
    }
}

// ---- A tune (issue 18), by hand --------------------------------------------------------------

namespace {

// ASHA stopping, η 3, grace 1, 9 epochs (rungs at epochs 1 and 3), test accuracy maximised,
// 9 trials over a log-uniform learning rate, a uniform momentum and a batch size of 32 or 64.
// The decisions below follow Ray's rule on these values (cutoff: the 2/3 quantile of the
// values already at the rung, NaN ignored; a trial stops only when strictly below it).
// t05's first epoch was not measured (NaN); t07 finished (the best); t04 is still running;
// t01 failed after its second rung. The runs are listed t01..t09, but the decisions were made
// in the order of `kTuneDecisionOrder` (when each attempt ended).
const QByteArray kTunePlanJson = R"({
  "name": "hand tune", "dataset": "synthetic-2k", "baseline": { "skip": true },
  "tune": {
    "space": {
      "learningRate": { "kind": "loguniform", "low": 0.003, "high": 0.3 },
      "momentum": { "kind": "uniform", "low": 0.5, "high": 0.95 },
      "batchSize": { "kind": "choice", "values": [32, 64] }
    },
    "samples": 9, "searcher": "random", "seed": "7", "metric": "test_accuracy", "mode": "max",
    "scheduler": { "kind": "asha", "variant": "stopping", "gracePeriod": 1, "reductionFactor": 3, "maxEpochs": 9 }
  }
})";

struct HandDecision {
    int trial; // 1..9
    QString action;
    int epoch;
    double value;
    int rung;
    std::optional<double> cutoff;
    QList<double> seen;
    int nextTarget;
};

const double nan = kNotMeasured;
// In the order the scheduler made them.
const QList<HandDecision> kTuneDecisionOrder {
    { 1, QStringLiteral("continue"), 1, 0.30, 0, std::nullopt, {}, 3 },
    { 2, QStringLiteral("continue"), 1, 0.35, 0, 0.30, { 0.30 }, 3 },
    { 3, QStringLiteral("stop"), 1, 0.25, 0, 1.0 / 3, { 0.30, 0.35 }, 0 },
    { 4, QStringLiteral("continue"), 1, 0.40, 0, 0.95 / 3, { 0.30, 0.35, 0.25 }, 3 },
    { 5, QStringLiteral("continue"), 1, nan, 0, 0.35, { 0.30, 0.35, 0.25, 0.40 }, 3 },
    { 6, QStringLiteral("stop"), 1, 0.33, 0, 0.35, { 0.30, 0.35, 0.25, 0.40, nan }, 0 },
    { 7, QStringLiteral("continue"), 1, 0.45, 0, 0.33 + 0.02 * 2 / 3, { 0.30, 0.35, 0.25, 0.40, nan, 0.33 },
        3 },
    { 8, QStringLiteral("stop"), 1, 0.28, 0, 0.35 + 0.05 / 3, { 0.30, 0.35, 0.25, 0.40, nan, 0.33, 0.45 },
        0 },
    { 9, QStringLiteral("continue"), 1, 0.38, 0, 0.35, { 0.30, 0.35, 0.25, 0.40, nan, 0.33, 0.45, 0.28 }, 3 },
    { 1, QStringLiteral("continue"), 3, 0.42, 1, std::nullopt, {}, 9 },
    { 2, QStringLiteral("stop"), 3, 0.40, 1, 0.42, { 0.42 }, 0 },
    { 4, QStringLiteral("continue"), 3, 0.50, 1, 0.40 + 0.02 * 2 / 3, { 0.42, 0.40 }, 9 },
    { 5, QStringLiteral("stop"), 3, 0.31, 1, 0.42 + 0.08 / 3, { 0.42, 0.40, 0.50 }, 0 },
    { 7, QStringLiteral("continue"), 3, 0.55, 1, 0.42, { 0.42, 0.40, 0.50, 0.31 }, 9 },
    { 9, QStringLiteral("stop"), 3, 0.44, 1, 0.42 + 0.08 * 2 / 3, { 0.42, 0.40, 0.50, 0.31, 0.55 }, 0 },
    { 7, QStringLiteral("finish"), 9, 0.62, 2, std::nullopt, {}, 0 },
};

QString tuneTrialId(int trial)
{
    return QStringLiteral("tune-hand-t%1").arg(trial, 2, 10, QLatin1Char('0'));
}

// Each decision's reason, as the scheduler words them, with the trial named so each is unique.
QString handReason(const HandDecision &d)
{
    const QString v = std::isnan(d.value) ? QStringLiteral("no value") : QString::number(d.value, 'g', 4);
    if (d.action == QLatin1String("finish"))
        return QStringLiteral("t%1 trained all %2 epochs: %3").arg(d.trial).arg(d.epoch).arg(v);
    if (d.action == QLatin1String("stop"))
        return QStringLiteral("t%1 stopped at rung %2 (epoch %3): %4 is below the cutoff %5")
            .arg(d.trial)
            .arg(d.rung + 1)
            .arg(d.epoch)
            .arg(v)
            .arg(*d.cutoff, 0, 'g', 4);
    if (!d.cutoff)
        return QStringLiteral("t%1 continues to epoch %2: first result at rung %3")
            .arg(d.trial)
            .arg(d.nextTarget)
            .arg(d.rung + 1);
    return QStringLiteral("t%1 continues to epoch %2: %3 reached the cutoff %4 <at> rung %5")
        .arg(d.trial)
        .arg(d.nextTarget)
        .arg(v)
        .arg(*d.cutoff, 0, 'g', 4)
        .arg(d.rung + 1);
}

StudySnapshot tuneSnapshot()
{
    StudySnapshot s;
    s.studyId = QStringLiteral("tune-hand");
    s.name = QStringLiteral("hand tune");
    s.state = QStringLiteral("RUNNING");
    s.dataset = QStringLiteral("synthetic-2k");
    s.synthetic = true;
    s.createdUnixMs = 1718100000000;
    s.planJson = kTunePlanJson;
    s.tune = true;
    s.tuneMetric = QStringLiteral("test_accuracy");
    s.tuneMaximize = true;
    s.tuneScheduler = QStringLiteral("ASHA stopping, η 3, grace 1 epoch(s), at most 9 epochs");
    s.software = { { QStringLiteral("ScaleLab"), QStringLiteral("0.1.0") } };

    const QList<std::tuple<double, double, int>> params { { 0.0125, 0.81, 32 }, { 0.0041, 0.62, 64 },
        { 0.21, 0.93, 32 }, { 0.047, 0.88, 64 }, { 0.29, 0.55, 64 }, { 0.0062, 0.71, 32 }, { 0.031, 0.9, 64 },
        { 0.0033, 0.52, 32 }, { 0.094, 0.77, 32 } };
    const QStringList agents { QStringLiteral("10.0.0.11:50051") };
    for (int i = 0; i < 9; ++i) {
        RunResult r;
        r.runId = tuneTrialId(i + 1);
        r.trial = true;
        const auto &[lr, momentum, batch] = params[i];
        r.params = QJsonObject { { QStringLiteral("learningRate"), lr },
            { QStringLiteral("momentum"), momentum }, { QStringLiteral("batchSize"), batch } };
        r.config.batchSize = batch;
        r.config.epochs = 9;
        r.trialTarget = 9;
        s.runs << r;
    }
    // Decision k is made at t0 + k minutes, when the attempt it judges ends.
    const qint64 t0 = s.createdUnixMs;
    for (int k = 0; k < kTuneDecisionOrder.size(); ++k) {
        const HandDecision &h = kTuneDecisionOrder[k];
        RunResult &r = s.runs[h.trial - 1];
        const qint64 at = t0 + (k + 1) * 60000;
        const int from = r.decisions.isEmpty() ? 0 : r.decisions.last().epoch;
        const qint64 start = r.attempts.isEmpty() ? t0 + 1000 * h.trial : r.attempts.last().endedUnixMs + 500;
        r.attempts << AttemptRecord { int(r.attempts.size()) + 1, agents, QStringLiteral("SUCCEEDED"), {},
            from, start, at, 0, {}, 0, {} };
        // Epochs from the last decision's to this one, on a line towards this decision's value.
        const double last = r.epochs.isEmpty() ? 0.2 : r.epochs.last().testAccuracy;
        for (int e = from + 1; e <= h.epoch; ++e) {
            const double acc = e == h.epoch ? h.value
                                            : (std::isnan(last) ? 0.25 : last)
                    + (h.value - (std::isnan(last) ? 0.25 : last)) * (e - from) / (h.epoch - from);
            r.epochs << EpochPoint { e, 2.3 - 2 * acc, acc - 0.02, 2.2 - 2 * acc, acc, 30.0 * e, 900 };
        }
        TrialDecision d;
        d.runId = r.runId;
        d.action = h.action;
        d.epoch = h.epoch;
        d.value = h.value;
        d.rung = h.rung;
        d.cutoff = h.cutoff;
        d.seen = h.seen;
        d.nextTarget = h.nextTarget;
        d.reason = handReason(h);
        d.eventId = 100 + k; // the journal's order
        d.unixMs = at;
        r.decisions << d;
        r.state = h.action == QLatin1String("stop") ? QStringLiteral("STOPPED")
            : h.action == QLatin1String("finish")   ? QStringLiteral("SUCCEEDED")
                                                    : QStringLiteral("PENDING");
        r.stateReason = d.reason;
    }
    // t05's first epoch was not measured.
    s.runs[4].epochs[0].testAccuracy = nan;
    s.runs[4].epochs[0].testLoss = nan;
    // t04 is training on to epoch 9: 3 more epochs so far.
    RunResult &t04 = s.runs[3];
    t04.state = QStringLiteral("RUNNING");
    t04.attempts << AttemptRecord { 3, agents, QStringLiteral("RUNNING"), {}, 3, t0 + 20 * 60000, 0, 0, {}, 0,
        {} };
    for (int e = 4; e <= 6; ++e)
        t04.epochs << EpochPoint { e, 1.2, 0.5, 1.25, 0.5 + 0.02 * (e - 3), 30.0 * e, 900 };
    // t01 failed on its way to epoch 9.
    RunResult &t01 = s.runs[0];
    t01.state = QStringLiteral("FAILED");
    t01.stateReason = QStringLiteral("failed 3 times: rank 0 exited with code 134");
    t01.attempts << AttemptRecord { 3, agents, QStringLiteral("FAILED"),
        QStringLiteral("rank 0 exited with code 134"), 3, t0 + 11 * 60000, t0 + 12 * 60000, 0, {}, 0, {} };
    return s;
}

} // namespace

void TestReports::tuneJsonHasSpaceTrialsDecisionsAndBest()
{
    const StudySnapshot s = tuneSnapshot();
    QCOMPARE(bestTrialIndex(s), 6); // t07, 62% at epoch 9 (t04 is at 56% so far)
    const QJsonObject root = QJsonDocument::fromJson(reportJson(s)).object();
    QCOMPARE(root.value(QStringLiteral("synthetic")).toBool(), true);
    // A tune has no baseline: no comparison with one, no speedups.
    QVERIFY(!root.contains(QStringLiteral("seed_study_comparison")));
    QVERIFY(!root.contains(QStringLiteral("configurations")));
    const QJsonObject tune = root.value(QStringLiteral("tune")).toObject();
    QCOMPARE(tune.value(QStringLiteral("metric")).toString(), QStringLiteral("test_accuracy"));
    QCOMPARE(tune.value(QStringLiteral("mode")).toString(), QStringLiteral("max"));
    QCOMPARE(tune.value(QStringLiteral("scheduler")).toString(), s.tuneScheduler);
    QCOMPARE(tune.value(QStringLiteral("searcher")).toString(), QStringLiteral("random"));
    QCOMPARE(tune.value(QStringLiteral("samples")).toInt(), 9);
    QCOMPARE(tune.value(QStringLiteral("seed")).toInt(), 7);
    QCOMPARE(tune.value(QStringLiteral("rung_epochs")).toArray(), (QJsonArray { 1, 3 }));

    // The space, in drawing order.
    const QJsonArray space = tune.value(QStringLiteral("space")).toArray();
    QCOMPARE(space.size(), 3);
    const QJsonObject lr = space[0].toObject();
    QCOMPARE(lr.value(QStringLiteral("name")).toString(), QStringLiteral("learningRate"));
    QCOMPARE(lr.value(QStringLiteral("kind")).toString(), QStringLiteral("loguniform"));
    QCOMPARE(lr.value(QStringLiteral("low")).toDouble(), 0.003);
    QCOMPARE(lr.value(QStringLiteral("high")).toDouble(), 0.3);
    QCOMPARE(lr.value(QStringLiteral("log_scale")).toBool(), true);
    QCOMPARE(space[1].toObject().value(QStringLiteral("name")).toString(), QStringLiteral("momentum"));
    QCOMPARE(space[1].toObject().value(QStringLiteral("log_scale")).toBool(), false);
    const QJsonObject batch = space[2].toObject();
    QCOMPARE(batch.value(QStringLiteral("name")).toString(), QStringLiteral("batchSize"));
    QCOMPARE(batch.value(QStringLiteral("kind")).toString(), QStringLiteral("choice"));
    QCOMPARE(batch.value(QStringLiteral("values")).toArray(), (QJsonArray { 32, 64 }));
    QVERIFY(!batch.contains(QStringLiteral("low")));

    // The best trial and the budget: 3+3+1+6+3+1+9+1+3 epochs of 9 × 9.
    const QJsonObject best = tune.value(QStringLiteral("best_trial")).toObject();
    QCOMPARE(best.value(QStringLiteral("run_id")).toString(), tuneTrialId(7));
    QCOMPARE(best.value(QStringLiteral("value")).toDouble(), 0.62);
    QCOMPARE(best.value(QStringLiteral("epoch")).toInt(), 9);
    QCOMPARE(best.value(QStringLiteral("params")).toObject(), s.runs[6].params);
    QCOMPARE(tune.value(QStringLiteral("epochs_spent")).toInt(), 30);
    QCOMPARE(tune.value(QStringLiteral("epochs_without_stopping")).toInt(), 81);

    // Every decision, in the order the scheduler made them (not trial by trial).
    const QJsonArray decisions = tune.value(QStringLiteral("decisions")).toArray();
    QCOMPARE(decisions.size(), kTuneDecisionOrder.size());
    for (int k = 0; k < decisions.size(); ++k) {
        const QJsonObject d = decisions[k].toObject();
        QCOMPARE(d.value(QStringLiteral("runId")).toString(), tuneTrialId(kTuneDecisionOrder[k].trial));
        QCOMPARE(d.value(QStringLiteral("reason")).toString(), handReason(kTuneDecisionOrder[k]));
    }

    // Every trial with its parameters, state and decisions.
    const QJsonArray runs = root.value(QStringLiteral("runs")).toArray();
    QCOMPARE(runs.size(), 9);
    int decisionCount = 0;
    for (int i = 0; i < runs.size(); ++i) {
        const QJsonObject run = runs[i].toObject();
        QCOMPARE(run.value(QStringLiteral("run_id")).toString(), tuneTrialId(i + 1));
        QCOMPARE(run.value(QStringLiteral("trial")).toBool(), true);
        QCOMPARE(run.value(QStringLiteral("params")).toObject(), s.runs[i].params);
        QCOMPARE(run.value(QStringLiteral("trial_state")).toString(), trialStatus(s.runs[i]));
        QVERIFY(!run.contains(QStringLiteral("speedup_by_wall_clock")));
        const QJsonArray ds = run.value(QStringLiteral("decisions")).toArray();
        QCOMPARE(ds.size(), s.runs[i].decisions.size());
        for (int k = 0; k < ds.size(); ++k)
            QCOMPARE(TrialDecision::fromJson(ds[k].toObject()).reason, s.runs[i].decisions[k].reason);
        decisionCount += int(ds.size());
    }
    QCOMPARE(decisionCount, kTuneDecisionOrder.size());
    // t03 was stopped at rung 1 below the cutoff 1/3; t05's first value was not measured (null).
    const QJsonObject t03 = runs[2].toObject().value(QStringLiteral("decisions")).toArray()[0].toObject();
    QCOMPARE(t03.value(QStringLiteral("action")).toString(), QStringLiteral("stop"));
    QVERIFY(qAbs(t03.value(QStringLiteral("cutoff")).toDouble() - 1.0 / 3) < 1e-12);
    QCOMPARE(runs[2].toObject().value(QStringLiteral("trial_state")).toString(),
        QStringLiteral("stopped at rung 1 (epoch 1)"));
    const QJsonObject t05 = runs[4].toObject().value(QStringLiteral("decisions")).toArray()[0].toObject();
    QVERIFY(t05.value(QStringLiteral("value")).isNull());
    // The plan travels with the report, so `study rerun` can start the tune again.
    QVERIFY(root.value(QStringLiteral("plan")).toObject().contains(QStringLiteral("tune")));
}

void TestReports::tuneCsvHasOneRowPerTrial()
{
    const StudySnapshot s = tuneSnapshot();
    const QStringList lines = QString::fromUtf8(reportRunsCsv(s)).trimmed().split(QStringLiteral("\r\n"));
    QCOMPARE(lines.size(), 1 + 9); // a header and a row per trial
    const QStringList header = lines[0].split(QLatin1Char(','));
    QCOMPARE(header.mid(0, 6),
        (QStringList { QStringLiteral("study_id"), QStringLiteral("synthetic"), QStringLiteral("run_id"),
            QStringLiteral("best"), QStringLiteral("state"), QStringLiteral("trial_state") }));
    // A column per hyperparameter, in drawing order, then per epoch the scheduler judged at.
    QCOMPARE(header.mid(6, 3),
        (QStringList {
            QStringLiteral("learningRate"), QStringLiteral("momentum"), QStringLiteral("batchSize") }));
    for (const char *column : { "epochs_trained", "final_test_accuracy", "test_accuracy_at_epoch_1",
             "test_accuracy_at_epoch_3", "test_accuracy_at_epoch_9", "cutoff_missed", "reason" })
        QVERIFY2(header.contains(QLatin1String(column)), column);
    QVERIFY(!lines[0].contains(QStringLiteral("speedup")));
    const auto cell = [&](int trial, const char *column) {
        return lines[trial].split(QLatin1Char(','))[header.indexOf(QLatin1String(column))];
    };
    for (int i = 1; i <= 9; ++i) {
        QVERIFY2(lines[i].startsWith(QStringLiteral("tune-hand,true,%1,").arg(tuneTrialId(i))),
            qPrintable(lines[i]));
        QCOMPARE(cell(i, "best"), i == 7 ? QStringLiteral("true") : QStringLiteral("false"));
        QCOMPARE(cell(i, "batchSize").toInt(), s.runs[i - 1].config.batchSize);
    }
    QCOMPARE(cell(7, "learningRate").toDouble(), 0.031);
    QCOMPARE(cell(7, "epochs_trained"), QStringLiteral("9"));
    QCOMPARE(cell(7, "final_test_accuracy").toDouble(), 0.62);
    QCOMPARE(cell(7, "test_accuracy_at_epoch_3").toDouble(), 0.55);
    QCOMPARE(cell(3, "state"), QStringLiteral("STOPPED"));
    QCOMPARE(cell(3, "test_accuracy_at_epoch_3"), QString()); // never got there
    QVERIFY(qAbs(cell(3, "cutoff_missed").toDouble() - 1.0 / 3) < 1e-9);
    QCOMPARE(cell(5, "test_accuracy_at_epoch_1"), QString()); // NaN: not measured

    // The decisions beside it, in the order they were made.
    QTemporaryDir dir;
    const Result<QStringList> written
        = writeReport(s, ReportFormat::Csv, dir.filePath(QStringLiteral("tune.csv")));
    QVERIFY2(written.ok(), qPrintable(written.error()));
    QCOMPARE(written.value(),
        (QStringList { dir.filePath(QStringLiteral("tune.csv")),
            dir.filePath(QStringLiteral("tune.epochs.csv")),
            dir.filePath(QStringLiteral("tune.decisions.csv")) }));
    const QStringList decisions
        = QString::fromUtf8(reportDecisionsCsv(s)).trimmed().split(QStringLiteral("\r\n"));
    QCOMPARE(decisions.size(), 1 + kTuneDecisionOrder.size());
    QVERIFY(decisions[0].startsWith(
        QStringLiteral("study_id,synthetic,order,run_id,action,epoch,rung_index,value,cutoff,seen")));
    for (int k = 0; k < kTuneDecisionOrder.size(); ++k)
        QVERIFY2(decisions[k + 1].startsWith(
                     QStringLiteral("tune-hand,true,%1,%2,%3,")
                         .arg(k + 1)
                         .arg(tuneTrialId(kTuneDecisionOrder[k].trial), kTuneDecisionOrder[k].action)),
            qPrintable(decisions[k + 1]));
    // A study has no decisions: only the header.
    QCOMPARE(reportDecisionsCsv(handSnapshot()).count("\r\n"), 1);
}

void TestReports::tuneHtmlShowsSearchTrialsDecisionsAndCharts()
{
    const StudySnapshot s = tuneSnapshot();
    const Result<QByteArray> rendered = reportHtml(s);
    QVERIFY2(rendered.ok(), qPrintable(rendered.error()));
    const QString html = QString::fromUtf8(rendered.value());
    if (const QString dir = qEnvironmentVariable("SCALELAB_REPORT_SAMPLES_DIR"); !dir.isEmpty()) {
        QFile file(dir + QStringLiteral("/tune.html")); // to look at, as sampleReports()
        QVERIFY(file.open(QIODevice::WriteOnly) && file.write(rendered.value()) == rendered.value().size());
    }
    QVERIFY(html.contains(QStringLiteral("SYNTHETIC DATA")));
    QVERIFY(html.contains(QStringLiteral("Hyperparameter tune report")));
    // No speedup or efficiency for a tune.
    QVERIFY(!html.contains(QStringLiteral("Speedup")));
    QVERIFY(!html.contains(QStringLiteral("fficiency")));
    QVERIFY(!html.contains(QStringLiteral("baseline")));

    // The summary: metric and mode, scheduler, best trial with its configuration, epochs.
    QVERIFY(html.contains(QStringLiteral("test accuracy, higher is better (max)")));
    QVERIFY(html.contains(s.tuneScheduler.toHtmlEscaped()));
    const QString bestCard
        = QStringLiteral("<div class=\"k\">Best trial</div><div class=\"v\">%1: 62.0% test accuracy at "
                         "epoch 9<span class=\"sub\">%2</span>")
              .arg(tuneTrialId(7), paramsText(s.runs[6].params).toHtmlEscaped());
    QVERIFY2(html.contains(bestCard), qPrintable(bestCard));
    QVERIFY(paramsText(s.runs[6].params).contains(QStringLiteral("lr 0.031")));
    QVERIFY(html.contains(QStringLiteral("30 of the 81 without early stopping (63% saved)")));

    // The search space: a row per dimension, the best trial's value last.
    const QList<HtmlCell> space = htmlTableCells(html, QStringLiteral("Search space"));
    QStringList spaceRows;
    QString row;
    for (const HtmlCell &c : space) {
        if (c.header)
            continue;
        if (c.column == 0 && !row.isEmpty())
            spaceRows << row;
        row = c.column == 0 ? c.lines.join(QLatin1Char(' '))
                            : row + QLatin1Char('|') + c.lines.join(QLatin1Char(' '));
    }
    spaceRows << row;
    QCOMPARE(spaceRows,
        (QStringList { QStringLiteral("lr learningRate|loguniform|0.003 – 0.3|—|log|0.031"),
            QStringLiteral("momentum momentum|uniform|0.5 – 0.95|—|linear|0.9"),
            QStringLiteral("batch batchSize|choice|32, 64|—|categories|64") }));
    QVERIFY(html.contains(QStringLiteral("random, 9 samples, seed 7")));

    // The trials: every one, the best marked, the stopped ones with the cutoff they missed.
    const QList<HtmlCell> trials = htmlTableCells(html, QStringLiteral("Trials"));
    QStringList firstColumn;
    for (const HtmlCell &c : trials)
        if (!c.header && c.column == 0)
            firstColumn << c.lines.join(QLatin1Char(' '));
    QStringList expected;
    for (int i = 1; i <= 9; ++i)
        expected << tuneTrialId(i) + (i == 7 ? QStringLiteral(" best") : QString());
    QCOMPARE(firstColumn, expected);
    QVERIFY(html.contains(
        QStringLiteral("stopped at rung 1 (epoch 1)<span class=\"sub\">missed the cutoff 33.3%</span>")));
    QVERIFY(html.contains(QStringLiteral("finished (9 epochs)")));
    QVERIFY(html.contains(QStringLiteral("running to epoch 9")));

    // Every decision, in the order it was made, with its reason.
    const qsizetype decisionsAt = html.indexOf(QStringLiteral("<h2>Decisions</h2>"));
    QVERIFY(decisionsAt > 0);
    qsizetype previous = decisionsAt;
    for (const HandDecision &d : kTuneDecisionOrder) {
        const qsizetype at = html.indexOf(handReason(d).toHtmlEscaped(), previous);
        QVERIFY2(at > previous, qPrintable(handReason(d)));
        previous = at;
    }
    // t05's unmeasured value and the values seen at its rung (one of them NaN).
    QVERIFY(
        html.contains(QStringLiteral("<td class=\"num\">—</td><td class=\"num\">35.0%</td><td>30.0%, 35.0%, "
                                     "25.0%, 40.0%</td>")));
    QVERIFY(html.contains(QStringLiteral("<td>30.0%, 35.0%, 25.0%, 40.0%, —</td>")));

    // The two charts: every trial's curve with the rungs marked, and the parallel coordinates
    // with a log axis for the learning rate.
    QCOMPARE(html.count(QStringLiteral("<svg")), 2);
    QVERIFY(html.contains(QStringLiteral("<title>Test accuracy of every trial</title>")));
    QVERIFY(html.contains(
        QStringLiteral("<title>Hyperparameters of every trial, coloured by final test accuracy</title>")));
    for (const char *text : { "rung 1", "rung 2", "lr (log)", "momentum", "batch", "final test accuracy",
             "stopped early (faded)", "best trial (tune-hand-t07)", "62.0% (best)" })
        QVERIFY2(html.contains(QLatin1String(text)), text);
}

void TestReports::tunePdfShowsTrialsAndBestConfiguration()
{
    const StudySnapshot s = tuneSnapshot();
    const Result<QByteArray> pdf = reportPdf(s);
    QVERIFY2(pdf.ok(), qPrintable(pdf.error()));
    if (const QString dir = qEnvironmentVariable("SCALELAB_REPORT_SAMPLES_DIR"); !dir.isEmpty()) {
        QFile file(dir + QStringLiteral("/tune.pdf"));
        QVERIFY(file.open(QIODevice::WriteOnly) && file.write(pdf.value()) == pdf.value().size());
    }
    QVERIFY2(!QStandardPaths::findExecutable(QStringLiteral("pdftotext")).isEmpty(),
        "pdftotext is needed to read the PDF's pages: apt-get install poppler-utils");
    // Qt sets "ff" and "fi" as ligatures, which pdftotext gives back as one character.
    const QString text = pdfText(pdf.value())
                             .replace(QChar(0xFB00), QStringLiteral("ff"))
                             .replace(QChar(0xFB01), QStringLiteral("fi"))
                             .replace(QChar(0xFB02), QStringLiteral("fl"));
    for (int i = 1; i <= 9; ++i)
        QVERIFY2(text.contains(tuneTrialId(i)), qPrintable(tuneTrialId(i)));
    for (const QString &expected : { QStringLiteral("SYNTHETIC DATA"), QStringLiteral("Best trial"),
             QStringLiteral("%1: 62.0% test accuracy at epoch 9").arg(tuneTrialId(7)),
             paramsText(s.runs[6].params), QStringLiteral("Search space"), QStringLiteral("loguniform"),
             QStringLiteral("Decisions"), handReason(kTuneDecisionOrder[2]),
             QStringLiteral("30 of the 81 without early stopping") })
        // A phrase may wrap where its column ends (the layout shrinks or not by page count).
        QVERIFY2(text.simplified().contains(expected),
            qPrintable(expected + QStringLiteral(" not in:\n") + text.left(3000)));
    QVERIFY(!text.contains(QStringLiteral("Speedup")));

    // A tune that has not started (no trial, no decision), or whose plan cannot be read,
    // renders in every format.
    for (const bool withPlan : { true, false }) {
        StudySnapshot empty = tuneSnapshot();
        empty.runs.clear();
        if (!withPlan)
            empty.planJson.clear();
        for (const ReportFormat format : { ReportFormat::Json, ReportFormat::Csv, ReportFormat::EpochCsv,
                 ReportFormat::Html, ReportFormat::Pdf }) {
            const Result<QByteArray> r = renderReport(empty, format);
            QVERIFY2(r.ok(), qPrintable(r.error()));
            QVERIFY(!r.value().isEmpty());
        }
        const QString html = QString::fromUtf8(reportHtml(empty).value());
        QVERIFY(html.contains(QStringLiteral("The tune has no trials yet.")));
        QVERIFY(html.contains(QStringLiteral("none measured yet")));
        QCOMPARE(html.count(QStringLiteral("<svg")), 2);
    }
}

QTEST_MAIN(TestReports)
#include "tst_reports.moc"
