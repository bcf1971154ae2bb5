// Tune plans and the tune's scheduler as the runner uses them (issue 18), without
// processes: plans read and refused field by field, trials drawn reproducibly, rung
// targets, ASHA decisions with hand-worked cutoffs (stopping, mode min, promotion), and a
// tune's journal replayed prefix by prefix to the same decisions.
#include "journal_test_support.h"
#include "study_plan.h"
#include "study_state.h"
#include "tune_decisions.h"
#include "tune_plan.h"
#include "verify_ok.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTest>

#include <cmath>
#include <set>
#include <tuple>

using namespace scalelab;
using namespace scalelab::core;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

v1::StudyPlan planFrom(const QByteArray &json)
{
    const auto plan = parsePlanJson(json);
    if (!plan)
        qFatal("test plan does not parse: %s", qPrintable(plan.error().join('\n')));
    return *plan;
}

// A tune with `scheduler` (JSON) around a small space.
v1::StudyPlan tunePlan(const QByteArray &scheduler, int samples = 9)
{
    return planFrom(R"({"name":"t","dataset":"syn","baseline":{"skip":true},"tune":{
        "space":{"learningRate":{"kind":"loguniform","low":0.001,"high":0.3}},
        "samples":)"
        + QByteArray::number(samples) + R"(,"seed":5,"scheduler":)" + scheduler + "}}");
}

QList<PlannedRun> trialsOf(const v1::StudyPlan &plan)
{
    return expandPlan(plan, QStringLiteral("st"));
}

template <class Payload> JournalEvent journalEvent(qint64 id, const QString &type, const Payload &payload)
{
    return testing::journalEvent(id, QStringLiteral("st"), 1'700'000'000'000 + id, type, payload);
}

// A tune's journal made by hand, and the state it replays to, event by event.
struct TuneJournal {
    TuneJournal(const v1::StudyPlan &plan, const QList<PlannedRun> &trials)
    {
        append(QStringLiteral("study_created"),
            journal_events::studyCreated(QStringLiteral("t"), plan, { "a" }, trials));
    }
    template <class Payload> void append(const QString &type, const Payload &payload)
    {
        events << journalEvent(events.size() + 1, type, payload);
        state.apply(events.last());
    }
    QList<JournalEvent> events;
    StudyState state;
};

} // namespace

class TestTune : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void exampleTuneIsValidAndDrawsTheSameTrials()
    {
        const v1::StudyPlan example = exampleTunePlan(QStringLiteral("syn"));
        VERIFY_OK(checkPlan(example));
        // Through its file form and back.
        const v1::StudyPlan plan = planFrom(planToJson(example));
        VERIFY_OK(checkPlan(plan));
        const QList<PlannedRun> trials = trialsOf(plan);
        QCOMPARE(trials.size(), 9);
        QCOMPARE(trials.first().runId, QStringLiteral("st-t01"));
        std::set<double> rates;
        for (const PlannedRun &t : trials) {
            QVERIFY(t.trial);
            const double lr = t.params.value(QLatin1String("learningRate")).toDouble();
            QVERIFY2(lr >= 0.003 && lr < 0.3, qPrintable(QString::number(lr)));
            rates.insert(lr);
            const double dropout = t.params.value(QLatin1String("denseDropout")).toDouble();
            QCOMPARE(QString::number(std::round(dropout / 0.05) * 0.05, 'g', 12).toDouble(),
                dropout); // a multiple of q
            QVERIFY(dropout >= 0.1 && dropout <= 0.6);
            const int batch = t.params.value(QLatin1String("batchSize")).toInt();
            QVERIFY(batch == 32 || batch == 64);
            QCOMPARE(t.config.batchSize, batch);
            QCOMPARE(t.config.epochs, 9); // ASHA's maxEpochs: the schedule's length
            QCOMPARE(t.config.workers, 1);
            // The drawn values reach the run exactly.
            const v1::RunSpec spec = runSpecFor(plan, t);
            QCOMPARE(spec.learning_rate(), lr);
            QCOMPARE(spec.dense_dropout(), dropout);
            QCOMPARE(spec.momentum(), t.params.value(QLatin1String("momentum")).toDouble());
        }
        QCOMPARE(int(rates.size()), 9);
        // The same plan draws the same trials; another seed others.
        QCOMPARE(trialsOf(plan).last().params, trials.last().params);
        v1::StudyPlan other = plan;
        other.mutable_tune()->set_seed(8);
        QVERIFY(trialsOf(other).first().params != trials.first().params);
        // Trial i depends on the seed and i alone: more samples keep the first ones.
        other = plan;
        other.mutable_tune()->set_samples(12);
        QCOMPARE(trialsOf(other).at(8).params, trials.at(8).params);
    }

    void gridWalksEveryChoice()
    {
        const v1::StudyPlan plan
            = planFrom(R"({"name":"g","dataset":"syn","tune":{"searcher":"grid","samples":2,
            "space":{"batchSize":{"kind":"choice","values":[32,64]},
                     "precision":{"kind":"choice","values":["fp32","bf16"]},
                     "momentum":{"kind":"uniform","low":0.5,"high":0.9}}}})");
        VERIFY_OK(checkPlan(plan));
        const QList<PlannedRun> trials = trialsOf(plan);
        QCOMPARE(trials.size(), 8);
        QStringList points;
        for (const PlannedRun &t : trials)
            points << QStringLiteral("%1/%2").arg(t.config.batchSize).arg(t.config.precision);
        QCOMPARE(points,
            (QStringList {
                "32/fp32", "32/bf16", "64/fp32", "64/bf16", "32/fp32", "32/bf16", "64/fp32", "64/bf16" }));
        QVERIFY(trials[0].params.value(QLatin1String("momentum"))
            != trials[4].params.value(QLatin1String("momentum")));
        QCOMPARE(tuneSettings(plan).trialEpochs, 1);
    }

    // ASHA over a model axis (issue 36): a trial's model is its configuration's, and its spec's.
    void modelIsAChoiceOfTheSpace()
    {
        const v1::StudyPlan plan = planFrom(R"({"name":"m","dataset":"syn","tune":{"searcher":"grid",
            "space":{"model":{"kind":"choice","values":["seed-cnn","mobilenet_v2"]}},
            "scheduler":{"kind":"asha","maxEpochs":3}}})");
        VERIFY_OK(checkPlan(plan));
        const QList<PlannedRun> trials = trialsOf(plan);
        QCOMPARE(trials.size(), 2);
        QCOMPARE(trials[0].config.model, QStringLiteral("seed-cnn"));
        QCOMPARE(trials[1].config.model, QStringLiteral("mobilenet_v2"));
        QCOMPARE(runSpecFor(plan, trials[1], std::nullopt).model(), std::string("mobilenet_v2"));
        QCOMPARE(paramsText(trials[1].params), QStringLiteral("model mobilenet_v2"));
    }

    void quantizedKindsRoundInTheirSpace()
    {
        const v1::StudyPlan plan = planFrom(R"({"name":"q","dataset":"syn","tune":{"samples":400,
            "space":{"learningRate":{"kind":"qloguniform","low":0.001,"high":0.1,"q":0.001},
                     "batchSize":{"kind":"qrandint","low":16,"high":64,"q":16},
                     "warmupEpochs":{"kind":"randint","low":0,"high":2},
                     "weightDecay":{"kind":"quniform","low":0,"high":0.01,"q":0.0025}}}})");
        VERIFY_OK(checkPlan(plan));
        std::set<int> batches, warmups;
        std::set<double> decays;
        for (const PlannedRun &t : trialsOf(plan)) {
            const double lr = t.params.value(QLatin1String("learningRate")).toDouble();
            QCOMPARE(QString::number(lr, 'g', 12).toDouble(), lr);
            QCOMPARE(std::round(lr / 0.001) * 0.001, lr);
            batches.insert(t.config.batchSize);
            warmups.insert(t.params.value(QLatin1String("warmupEpochs")).toInt());
            decays.insert(t.params.value(QLatin1String("weightDecay")).toDouble());
        }
        QCOMPARE(batches, (std::set<int> { 16, 32, 48, 64 })); // qrandint includes high
        QCOMPARE(warmups, (std::set<int> { 0, 1 })); // randint does not
        QCOMPARE(decays, (std::set<double> { 0, 0.0025, 0.005, 0.0075, 0.01 }));
        QVERIFY(drawnInLogSpace(plan, QStringLiteral("learningRate")));
        QVERIFY(!drawnInLogSpace(plan, QStringLiteral("weightDecay")));
    }

    void badPlansSayWhatIsWrong_data()
    {
        QTest::addColumn<QByteArray>("tune");
        QTest::addColumn<QString>("problem");
        QTest::newRow("unknown hyperparameter")
            << QByteArray(R"({"space":{"learnRate":{"kind":"uniform","low":0,"high":1}}})")
            << "tune.space.learnRate: not a hyperparameter a tune can search";
        QTest::newRow("unknown kind")
            << QByteArray(R"({"space":{"momentum":{"kind":"normal","low":0,"high":1}}})")
            << "tune.space.momentum.kind: must be one of choice";
        QTest::newRow("log of 0") << QByteArray(
            R"({"space":{"learningRate":{"kind":"loguniform","low":0,"high":1}}})")
                                  << "tune.space.learningRate.low: must be above 0 for loguniform";
        QTest::newRow("out of range")
            << QByteArray(R"({"space":{"momentum":{"kind":"uniform","low":0.5,"high":1.5}}})")
            << "tune.space.momentum: every value drawn must be in [0, 1)";
        QTest::newRow("rounded out of range")
            << QByteArray(R"({"space":{"learningRate":{"kind":"quniform","low":0.001,"high":0.1,"q":0.01}}})")
            << "after rounding to q";
        QTest::newRow("batch not whole")
            << QByteArray(R"({"space":{"batchSize":{"kind":"uniform","low":16,"high":64}}})")
            << "tune.space.batchSize.kind: batchSize takes whole numbers";
        QTest::newRow("empty choice") << QByteArray(R"({"space":{"batchSize":{"kind":"choice"}}})")
                                      << "tune.space.batchSize.values: list the values to choose from";
        QTest::newRow("choice twice")
            << QByteArray(R"({"space":{"batchSize":{"kind":"choice","values":[32,32]}}})")
            << "tune.space.batchSize.values[1]: 32 is listed twice";
        QTest::newRow("precision word")
            << QByteArray(R"({"space":{"precision":{"kind":"choice","values":["fp16"]}}})")
            << "tune.space.precision.values[0]: must be one of \"fp32\", \"bf16\"";
        QTest::newRow("model word") << QByteArray(
            R"({"space":{"model":{"kind":"choice","values":["resnet18","vgg16"]}}})")
                                    << "tune.space.model.values[1]: must be one of \"seed-cnn\", "
                                       "\"resnet18\", \"mobilenet_v2\", \"mini-cnn\"";
        QTest::newRow("model range") << QByteArray(
            R"({"space":{"model":{"kind":"uniform","low":0,"high":1}}})")
                                     << "tune.space.model.kind: model is a word; use \"choice\"";
        QTest::newRow("not an object")
            << QByteArray(R"({"space":{"momentum":3}})") << "tune.space.momentum: must be an object";
        QTest::newRow("misspelt field")
            << QByteArray(R"({"space":{"momentum":{"kind":"uniform","lo":0,"high":1}}})")
            << "tune.space.momentum.lo: unknown field; did you mean \"low\"?";
        QTest::newRow("q without quantizing")
            << QByteArray(R"({"space":{"momentum":{"kind":"uniform","low":0,"high":0.9,"q":0.1}}})")
            << "tune.space.momentum.q: only for the quantized kinds";
        QTest::newRow("scheduler") << QByteArray(R"({"scheduler":{"kind":"hyperband"}})")
                                   << "tune.scheduler.kind: must be \"none\" or \"asha\"";
        QTest::newRow("eta") << QByteArray(R"({"scheduler":{"kind":"asha","reductionFactor":1}})")
                             << "tune.scheduler.reductionFactor: must be above 1";
        QTest::newRow("variant") << QByteArray(R"({"scheduler":{"kind":"asha","variant":"median"}})")
                                 << "tune.scheduler.variant: must be \"stopping\"";
        QTest::newRow("promotion brackets")
            << QByteArray(R"({"scheduler":{"kind":"asha","variant":"promotion","brackets":2}})")
            << "tune.scheduler.brackets: the promotion variant has one bracket";
        QTest::newRow("too many brackets")
            << QByteArray(R"({"scheduler":{"kind":"asha","maxEpochs":9,"brackets":4}})")
            << "tune.scheduler.brackets: bracket 3 would have no rung";
        QTest::newRow("grace past max")
            << QByteArray(R"({"scheduler":{"kind":"asha","gracePeriod":10,"maxEpochs":9}})")
            << "tune.scheduler.gracePeriod: 10 is more than maxEpochs (9)";
        QTest::newRow("asha settings without asha")
            << QByteArray(R"({"scheduler":{"gracePeriod":2}})")
            << "tune.scheduler: gracePeriod, reductionFactor, maxEpochs and brackets are for kind \"asha\"";
        QTest::newRow("grid without choices")
            << QByteArray(R"({"searcher":"grid","space":{"momentum":{"kind":"uniform","low":0,"high":0.9}}})")
            << "tune.searcher: \"grid\" walks the \"choice\" dimensions";
        QTest::newRow("metric") << QByteArray(R"({"metric":"accuracy"})")
                                << "tune.metric: must be one of test_accuracy";
        QTest::newRow("mode") << QByteArray(R"({"mode":"maximum"})")
                              << "tune.mode: must be \"max\" or \"min\"";
        QTest::newRow("warm-up longer than a trial") << QByteArray(
            R"({"scheduler":{"kind":"asha","maxEpochs":9},"space":{"warmupEpochs":{"kind":"uniform","low":0,"high":20}}})")
                                                     << "tune.space.warmupEpochs.high: a warm-up of 20 "
                                                        "epochs is longer than a trial (9 epochs)";
        QTest::newRow("samples") << QByteArray(R"({"samples":-1})")
                                 << "tune.samples: must be between 1 and 10000";
    }
    void badPlansSayWhatIsWrong()
    {
        QFETCH(QByteArray, tune);
        QFETCH(QString, problem);
        const auto plan = parsePlanJson(R"({"name":"bad","dataset":"syn","tune":)" + tune + "}");
        const QStringList problems = plan ? checkPlan(*plan).error() : plan.error();
        QVERIFY2(!problems.isEmpty(), "accepted");
        QVERIFY2(problems.join('\n').contains(problem), qPrintable(problems.join('\n')));
    }

    void aTuneIsNotAGrid()
    {
        const QStringList problems = checkPlan(planFrom(R"({"name":"x","dataset":"syn","grid":{"workers":[2]},
            "baseline":{"batchSize":32},"repeats":2,"training":{"learningRate":"auto"},"tune":{}})"))
                                         .error();
        const QString all = problems.join('\n');
        QVERIFY2(all.contains(QLatin1String("grid: a tune's runs are its trials")), qPrintable(all));
        QVERIFY2(all.contains(QLatin1String("baseline: a tune has no baseline run")), qPrintable(all));
        QVERIFY2(all.contains(QLatin1String("repeats: a tune draws")), qPrintable(all));
        QVERIFY2(all.contains(QLatin1String("\"auto\" is not for a tune")), qPrintable(all));
    }

    void targetsFollowTheRungs()
    {
        TuneSettings s;
        s.scheduler = QStringLiteral("asha");
        s.trialEpochs = 9;
        QCOMPARE(trialTargets(s, 0), (QList<int> { 1, 3, 9 }));
        QCOMPARE(trialTargets(s, 1), (QList<int> { 3, 9 }));
        s.trialEpochs = 10;
        QCOMPARE(trialTargets(s, 0), (QList<int> { 1, 3, 9, 10 }));
        s.trialEpochs = 9;
        s.reductionFactor = 2.5; // rungs at 1, 2.5, 6.25: judged after 1, 3 and 7 epochs, as Ray does
        QCOMPARE(trialTargets(s, 0), (QList<int> { 1, 3, 7, 9 }));
        s.scheduler = QStringLiteral("none");
        QCOMPARE(trialTargets(s, 0), QList<int> { 9 });
    }

    // Hand-worked: η = 3, so the cutoff is the 2/3 quantile (numpy, linear) of the rung.
    void stoppingDecidesWithTheRungsCutoff()
    {
        const v1::StudyPlan plan
            = tunePlan(R"({"kind":"asha","gracePeriod":1,"reductionFactor":3,"maxEpochs":9})", 4);
        TrialScheduler s(tuneSettings(plan), trialsOf(plan));
        auto step = [&](const char *trial, int epoch, double value) {
            const TrialDecision d = s.decide(QLatin1String(trial), epoch, value);
            s.apply(d);
            return d;
        };
        TrialDecision d = step("st-t01", 1, 0.5);
        QCOMPARE(d.action, QStringLiteral("continue"));
        QVERIFY(!d.cutoff); // an empty rung continues
        QCOMPARE(d.nextTarget, 3);
        QCOMPARE(d.rung, 0);
        d = step("st-t02", 1, 0.4); // cutoff = 0.5 (one value)
        QCOMPARE(d.action, QStringLiteral("stop"));
        QCOMPARE(d.cutoff, std::optional<double>(0.5));
        QCOMPARE(d.seen, QList<double> { 0.5 });
        QVERIFY2(d.reason.contains(QLatin1String("40% is below the cutoff 50%")), qPrintable(d.reason));
        d = step("st-t03", 1, 0.47); // sorted [0.4, 0.5]: 0.4 + (2/3)·0.1 = 0.4667
        QCOMPARE(d.action, QStringLiteral("continue"));
        QVERIFY(std::abs(*d.cutoff - (0.4 + 0.1 * 2 / 3.0)) < 1e-15);
        d = step("st-t04", 1, kNaN); // NaN neither stops nor counts
        QCOMPARE(d.action, QStringLiteral("continue"));
        d = step("st-t01", 3, 0.6);
        QCOMPARE(d.action, QStringLiteral("continue"));
        QCOMPARE(d.rung, 1);
        QCOMPARE(d.nextTarget, 9);
        d = step("st-t03", 3, 0.55); // rung 3 holds [0.6]
        QCOMPARE(d.action, QStringLiteral("stop"));
        QCOMPARE(d.epoch, 3);
        d = step("st-t01", 9, 0.7);
        QCOMPARE(d.action, QStringLiteral("finish"));
    }

    void stoppingForALossNegatesAsRay()
    {
        v1::StudyPlan plan = tunePlan(R"({"kind":"asha","maxEpochs":3})", 3);
        plan.mutable_tune()->set_metric("test_loss"); // mode min by default
        TrialScheduler s(tuneSettings(plan), trialsOf(plan));
        QVERIFY(!s.settings().maximize);
        TrialDecision d = s.decide(QStringLiteral("st-t01"), 1, 1.2);
        s.apply(d);
        d = s.decide(QStringLiteral("st-t02"), 1, 1.5);
        QCOMPARE(d.action, QStringLiteral("stop"));
        QCOMPARE(d.cutoff, std::optional<double>(1.2)); // in the metric's units
        QVERIFY2(d.reason.contains(QLatin1String("1.5 is above the cutoff 1.2")), qPrintable(d.reason));
        QCOMPARE(s.decide(QStringLiteral("st-t02"), 1, 1.1).action, QStringLiteral("continue"));
    }

    // A trial judged at rung 2 without a result at rung 1 (its epoch-1 value was missing)
    // and stopped there: as Ray's on_trial_complete, the stop records its value at rung 1
    // too, on replay as when decided (issue 35's repro, η 2, grace 1, max_t 10).
    void stoppedTrialCountsAtTheRungItSkipped()
    {
        const v1::StudyPlan plan
            = tunePlan(R"({"kind":"asha","gracePeriod":1,"reductionFactor":2,"maxEpochs":10})", 3);
        TrialScheduler s(tuneSettings(plan), trialsOf(plan));
        for (const auto &[trial, epoch, value] :
            { std::tuple { "st-t01", 1, 0.9 }, std::tuple { "st-t01", 2, 0.9 } })
            s.apply(s.decide(QLatin1String(trial), epoch, value));
        const TrialDecision stopped = s.decide(QStringLiteral("st-t02"), 2, 0.1);
        QCOMPARE(stopped.action, QStringLiteral("stop"));
        s.apply(stopped);
        const TrialDecision c = s.decide(QStringLiteral("st-t03"), 1, 0.5);
        QCOMPARE(c.action, QStringLiteral("continue"));
        QCOMPARE(c.cutoff, std::optional<double>(0.5));
        QCOMPARE(c.seen, (QList<double> { 0.9, 0.1 }));
    }

    // Algorithm 2 on recorded values: 9 trials pause at epoch 1; the top ⌊n/3⌋ of the
    // rung are promoted as results come in; the best of those reaches epoch 9.
    void promotionResumesTheTopThird()
    {
        const v1::StudyPlan plan = tunePlan(R"({"kind":"asha","variant":"promotion","maxEpochs":9})", 9);
        TrialScheduler s(tuneSettings(plan), trialsOf(plan));
        const double rung1[] = { 0.30, 0.52, 0.41, 0.25, 0.60, 0.33, 0.48, 0.51, 0.20 };
        QStringList promoted;
        auto take = [&] {
            while (const auto p = s.nextPromotion()) {
                QCOMPARE(p->action, QStringLiteral("promote"));
                s.apply(*p);
                promoted
                    << QStringLiteral("%1@%2>%3").arg(p->runId.right(2)).arg(p->epoch).arg(p->nextTarget);
            }
        };
        for (int i = 0; i < 9; ++i) {
            const QString id = QStringLiteral("st-t%1").arg(i + 1, 2, 10, QLatin1Char('0'));
            const TrialDecision d = s.decide(id, 1, rung1[i]);
            QCOMPARE(d.action, QStringLiteral("pause"));
            s.apply(d);
            take();
        }
        // After 3 results: t02 (0.52); after 6: t05 (0.60); after 9: t08 (0.51).
        QCOMPARE(promoted, (QStringList { "02@1>3", "05@1>3", "08@1>3" }));
        for (const auto &[id, value] :
            { std::pair { "st-t02", 0.61 }, { "st-t05", 0.66 }, { "st-t08", 0.58 } }) {
            s.apply(s.decide(QLatin1String(id), 3, value));
            take();
        }
        QCOMPARE(promoted.last(), QStringLiteral("05@3>9"));
        const TrialDecision done = s.decide(QStringLiteral("st-t05"), 9, 0.7);
        QCOMPARE(done.action, QStringLiteral("finish"));
        s.apply(done);
        QVERIFY(!s.nextPromotion());
        const TrialDecision left = s.closeOut(QStringLiteral("st-t01"), 1, 0.30);
        QCOMPARE(left.action, QStringLiteral("stop"));
        QVERIFY2(
            left.reason.contains(QLatin1String("not in the top 3 of the rung's 9")), qPrintable(left.reason));
        // Epochs spent: 9·1 + 3·2 + 1·6 = 21, against 81 for the grid.
    }

    // A tune's journal, made by a sequential stand-in for the runner (every trial
    // attempt ends at its target with a value of a fixed curve), replayed prefix by
    // prefix: the state before each trial_decision decides exactly what was journalled.
    void journalReplaysToTheSameDecisions_data()
    {
        QTest::addColumn<QByteArray>("scheduler");
        QTest::addColumn<int>("expectedEpochs"); // ASHA's budget on these curves, against 81 for all 9 epochs
        QTest::newRow("stopping") << QByteArray(R"({"kind":"asha","maxEpochs":9})") << 25;
        QTest::newRow("stopping, 2 brackets")
            << QByteArray(R"({"kind":"asha","maxEpochs":9,"brackets":2})") << 41;
        QTest::newRow("promotion") << QByteArray(R"({"kind":"asha","variant":"promotion","maxEpochs":9})")
                                   << 21; // 9·1 + 3·2 + 1·6
        QTest::newRow("none") << QByteArray(R"({"kind":"none"})") << 9; // 9 trials of tune.epochs (1)
    }
    void journalReplaysToTheSameDecisions()
    {
        QFETCH(QByteArray, scheduler);
        const v1::StudyPlan plan = tunePlan(scheduler, 9);
        VERIFY_OK(checkPlan(plan));
        const QList<PlannedRun> trials = trialsOf(plan);
        TuneJournal tune(plan, trials);
        QList<JournalEvent> &journal = tune.events;
        StudyState &state = tune.state;
        auto append = [&](const QString &type, const auto &payload) { tune.append(type, payload); };
        // A curve per trial: better with a higher lr index, noisy.
        auto curve = [](const QString &id, int epoch) {
            const int i = id.right(2).toInt();
            return 0.1 + 0.05 * ((i * 7) % 9) + 0.01 * epoch;
        };
        int epochsSpent = 0;
        for (int round = 0; round < 200 && !state.allRunsTerminal(); ++round) {
            bool acted = false;
            for (const RunProgress &run : state.runs()) {
                const QString id = run.planned.runId;
                if (run.phase == RunPhase::Pending) {
                    append(QStringLiteral("attempt_starting"),
                        journal_events::attemptStarting(
                            id, run.attempt + 1, { Portion { QStringLiteral("a"), { 0 } } }));
                    append(QStringLiteral("attempt_running"),
                        QJsonObject { { "runId", id }, { "attempt", run.attempt + 1 } });
                    const RunProgress *now = state.run(id);
                    epochsSpent += now->target - now->epochsDone();
                    append(QStringLiteral("attempt_ended"),
                        QJsonObject {
                            { "runId", id }, { "attempt", now->attempt }, { "outcome", "SUCCEEDED" } });
                    acted = true;
                    break;
                }
            }
            for (const RunProgress &run : state.runs())
                if (run.decisionDue) {
                    const TrialDecision d = state.scheduler().decide(
                        run.planned.runId, run.target, curve(run.planned.runId, run.target));
                    append(QStringLiteral("trial_decision"), journal_events::trialDecision(d));
                    acted = true;
                    break;
                }
            if (acted)
                continue;
            if (const auto p = state.scheduler().nextPromotion()) {
                append(QStringLiteral("trial_decision"), journal_events::trialDecision(*p));
                continue;
            }
            for (const RunProgress &run : state.runs())
                if (run.phase == RunPhase::Paused) {
                    append(QStringLiteral("trial_decision"),
                        journal_events::trialDecision(state.scheduler().closeOut(
                            run.planned.runId, run.epochsDone(), run.decisions.last().value)));
                    break;
                }
        }
        QVERIFY(state.allRunsTerminal());
        QCOMPARE(state.state(), QStringLiteral("SUCCEEDED"));
        // Replay: every decision again, from the state just before it.
        int decisions = 0;
        for (int i = 0; i < journal.size(); ++i) {
            if (!journal[i].event.has_trial_decision())
                continue;
            const StudyState before = StudyState::replay(journal.mid(0, i));
            const TrialDecision made = journal_events::decisionFromRecord(journal[i].event.trial_decision());
            TrialDecision again;
            if (made.action == QLatin1String("promote"))
                again = *before.scheduler().nextPromotion();
            else if (made.action == QLatin1String("stop") && before.scheduler().settings().promotion())
                again = before.scheduler().closeOut(made.runId, made.epoch, made.value);
            else
                again = before.scheduler().decide(made.runId, made.epoch, made.value);
            QCOMPARE(again.toJson(), made.toJson());
            ++decisions;
        }
        QVERIFY(decisions >= 9);
        // Budget: no trial trains past a rung it stopped at, and ASHA spends less than the grid.
        const StudyState end = StudyState::replay(journal);
        for (const RunProgress &run : end.runs()) {
            QVERIFY(run.phase == RunPhase::Succeeded || run.phase == RunPhase::Stopped);
            if (run.phase == RunPhase::Stopped)
                QVERIFY(run.epochsDone() < 9);
        }
        QFETCH(int, expectedEpochs);
        QCOMPARE(epochsSpent, expectedEpochs);
    }

    // A paused trial the user continues, or cancels, leaves the promotion rungs: it is
    // never promoted (which would start it a second time), and a promotion journalled for
    // a trial no longer paused changes nothing.
    void continuedOrCancelledTrialsAreNeverPromoted()
    {
        const v1::StudyPlan plan = tunePlan(R"({"kind":"asha","variant":"promotion","maxEpochs":9})", 3);
        const QList<PlannedRun> trials = trialsOf(plan);
        TuneJournal tune(plan, trials);
        StudyState &state = tune.state;
        auto append = [&](const QString &type, const auto &payload) { tune.append(type, payload); };
        const double values[] = { 0.9, 0.5, 0.7 };
        for (int i = 0; i < 3; ++i) {
            const QString id = trials[i].runId;
            append(QStringLiteral("attempt_starting"),
                journal_events::attemptStarting(id, 1, { Portion { "a", { 0 } } }));
            append(QStringLiteral("attempt_running"), QJsonObject { { "runId", id }, { "attempt", 1 } });
            append(QStringLiteral("attempt_ended"),
                QJsonObject { { "runId", id }, { "attempt", 1 }, { "outcome", "SUCCEEDED" } });
            // The user cannot continue a trial while its decision is due.
            append(QStringLiteral("trial_continued"), QJsonObject { { "runId", id }, { "epochs", 5 } });
            QCOMPARE(state.run(id)->continuedTo, 0);
            append(QStringLiteral("trial_decision"),
                journal_events::trialDecision(state.scheduler().decide(id, 1, values[i])));
            QCOMPARE(state.run(id)->phase, RunPhase::Paused);
        }
        // t01 (0.9) is the one ⌊3/3⌋ promotion; the user continues it first.
        QCOMPARE(state.scheduler().nextPromotion()->runId, trials[0].runId);
        const v1::StudyEvent stale = journal_events::trialDecision(*state.scheduler().nextPromotion());
        append(
            QStringLiteral("trial_continued"), QJsonObject { { "runId", trials[0].runId }, { "epochs", 4 } });
        QCOMPARE(state.run(trials[0].runId)->phase, RunPhase::Pending);
        QCOMPARE(state.run(trials[0].runId)->target, 4);
        QVERIFY(!state.scheduler().nextPromotion());
        // A promotion recorded before the continue (a runner racing the user) is ignored.
        append(QStringLiteral("trial_decision"), stale);
        QCOMPARE(state.run(trials[0].runId)->target, 4);
        // A cancelled paused trial is not promoted either, and says how far it got.
        append(QStringLiteral("cancel_requested"), QJsonObject { { "runId", trials[2].runId } });
        QCOMPARE(state.run(trials[2].runId)->phase, RunPhase::Cancelled);
        QCOMPARE(state.run(trials[2].runId)->reason, QStringLiteral("cancelled after epoch 1"));
        // The continued trial finishes where the user asked, and the rungs do not see it.
        const TrialDecision done = state.scheduler().decide(trials[0].runId, 4, 0.95, 4);
        QCOMPARE(done.action, QStringLiteral("finish"));
        QVERIFY(done.continued);
        QVERIFY2(done.reason.contains(QLatin1String("as the user asked")), qPrintable(done.reason));
    }
};

QTEST_GUILESS_MAIN(TestTune)
#include "tst_tune.moc"
