// A tune's report (issue 18) in every format, from a hand-worked ASHA tune: its search space,
// trials, decisions (Ray's rule on the values below) and the best configuration.
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

class TestReportsTune : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void tuneJsonHasSpaceTrialsDecisionsAndBest();
    void tuneCsvHasOneRowPerTrial();
    void tuneHtmlShowsSearchTrialsDecisionsAndCharts();
    void tunePdfShowsTrialsAndBestConfiguration();
};

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

void TestReportsTune::tuneJsonHasSpaceTrialsDecisionsAndBest()
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

void TestReportsTune::tuneCsvHasOneRowPerTrial()
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

void TestReportsTune::tuneHtmlShowsSearchTrialsDecisionsAndCharts()
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

void TestReportsTune::tunePdfShowsTrialsAndBestConfiguration()
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

QTEST_MAIN(TestReportsTune)
#include "tst_reports_tune.moc"
