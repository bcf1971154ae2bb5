// Every report format rendered from hand-computed snapshots: JSON, CSV (and the epoch CSV),
// self-contained HTML (its runs table measured against a 1400-px window), PDF (its pages read
// back with pdftotext), and the files written. The math is tst_reports_results'.
//
// With SCALELAB_REPORT_SAMPLES_DIR set, sampleReports() also writes a realistic sample study
// in every format to that folder, to look at.
#include "chart_layout.h"
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

class TestReportsFormats : public QObject {
    Q_OBJECT

private Q_SLOTS:
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
};

void TestReportsFormats::formatNames()
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

void TestReportsFormats::jsonMatchesSnapshot()
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

void TestReportsFormats::csvHeaderRowsAndQuoting()
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

void TestReportsFormats::epochCsv()
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
void TestReportsFormats::noiseScaleInEveryFormat()
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

void TestReportsFormats::htmlIsSelfContainedAndEscaped()
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

void TestReportsFormats::syntheticFlagInEveryFormat()
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

void TestReportsFormats::pdfHasPages()
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

void TestReportsFormats::emptyAndBaselineLessStudiesRender()
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

void TestReportsFormats::writeReportNamesPathAndError()
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

void TestReportsFormats::writeCsvWritesEpochFileBeside()
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

void TestReportsFormats::sampleReports()
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
void TestReportsFormats::htmlRunsTableFitsA1400PxWindow()
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
void TestReportsFormats::targetLineSitsAtTheTarget()
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
void TestReportsFormats::pdfLastPageIsNotNearlyEmpty()
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

QTEST_MAIN(TestReportsFormats)
#include "tst_reports_formats.moc"
