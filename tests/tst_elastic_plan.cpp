// Elastic runs and gradient accumulation in the study control plane (issue 55), the pure
// parts: a plan's {"min": M, "max": N} worker ranges and accumulationSteps axis, their checks
// and keys, the spec an attempt sends, where a smaller attempt goes (placeElastic), the
// journal's resize events replayed, and a resized run's speedup marked as not like with like.
// The engine's side is tst_accumulation; the whole loop on hosts, tst_cluster's
// elasticRunShrinksAndGrowsBack.
#include "journal_test_support.h"
#include "placement.h"
#include "report.h"
#include "study_model.h"
#include "study_plan.h"
#include "study_results.h"
#include "study_state.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTest>

using namespace scalelab;
using namespace scalelab::core;

namespace {

NodeCapacity node(const QString &name, int cores)
{
    NodeCapacity n;
    n.agent = name;
    n.host = name;
    n.reachable = true;
    n.cpuCores = cores;
    n.freeSlots = cores;
    return n;
}

QByteArray planJson(const QString &workers, const QString &more = {})
{
    return QStringLiteral(R"({"name": "e", "dataset": "synthetic",
        "grid": {"workers": %1, "batchSize": [32]%2}})")
        .arg(workers, more)
        .toUtf8();
}

template <class Payload> JournalEvent journalEvent(qint64 id, const QString &type, const Payload &payload)
{
    return testing::journalEvent(id, QStringLiteral("s"), 1000 * id, type, payload);
}

} // namespace

class TestElasticPlan : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // {"min": 2, "max": 4} in grid.workers is an elastic run; numbers beside it stay fixed runs;
    // accumulationSteps is an axis; the keys tell them apart and old keys do not change.
    void elasticRangesAndAccumulationExpandIntoRuns()
    {
        const auto plan = parsePlanJson(planJson(QStringLiteral(R"([1, {"min": 2, "max": 4}])"),
            QStringLiteral(R"(, "accumulationSteps": [1, 2])")));
        QVERIFY2(plan.ok(), qPrintable(plan.error().join(QLatin1String("; "))));
        QVERIFY(checkPlan(*plan).ok());
        QCOMPARE(plan->grid().workers_size(), 1);
        QCOMPARE(plan->grid().worker_ranges_size(), 1);
        const QList<PlannedRun> runs = expandPlan(*plan, QStringLiteral("s"));
        QStringList keys;
        for (const auto &r : runs)
            keys << r.config.key();
        QVERIFY2(keys.contains(QStringLiteral("w1-b32-e1-cpu-t0-fp32-lr_none")), qPrintable(keys.join(' ')));
        QVERIFY(keys.contains(QStringLiteral("w1-b32-e1-cpu-t0-fp32-lr_none-acc2")));
        QVERIFY(keys.contains(QStringLiteral("w4-b32-e1-cpu-t0-fp32-lr_none-min2")));
        QVERIFY(keys.contains(QStringLiteral("w4-b32-e1-cpu-t0-fp32-lr_none-acc2-min2")));
        for (const auto &r : runs) {
            if (r.config.key().endsWith(QLatin1String("acc2-min2"))) {
                QVERIFY(r.config.elastic());
                QCOMPARE(r.config.globalBatch(), 4 * 32 * 2);
                QCOMPARE(r.config.batchesPerStep(), 8);
                const v1::RunSpec spec = runSpecFor(*plan, r.config, std::nullopt, 0);
                QCOMPARE(spec.accumulation_steps(), 2);
                QCOMPARE(spec.batches_per_step(), 0); // the attempt sets it when it runs smaller
            }
        }
        // The plan's JSON written back reads the same.
        const auto again = parsePlanJson(planToJson(*plan));
        QVERIFY(again.ok());
        QCOMPARE(again->grid().worker_ranges(0).min(), 2);
        QCOMPARE(again->grid().worker_ranges(0).max(), 4);
    }

    void badRangesAreRefusedSayingWhy()
    {
        const auto extra = parsePlanJson(planJson(QStringLiteral(R"([{"min": 2, "max": 4, "step": 1}])")));
        QVERIFY(!extra.ok());
        QVERIFY2(extra.error().join(' ').contains(QLatin1String("grid.workers[0]: an elastic run is")),
            qPrintable(extra.error().join(' ')));
        const auto inverted = parsePlanJson(planJson(QStringLiteral(R"([{"min": 4, "max": 2}])")));
        QVERIFY(inverted.ok());
        const CheckStatus checked = checkPlan(*inverted);
        QVERIFY(!checked.ok());
        QVERIFY2(checked.error().join(' ').contains(QLatin1String("1 <= min < max")),
            qPrintable(checked.error().join(' ')));
        const auto accumulation
            = parsePlanJson(planJson(QStringLiteral("[2]"), QStringLiteral(R"(, "accumulationSteps": [0])")));
        QVERIFY(accumulation.ok());
        QVERIFY(checkPlan(*accumulation).error().join(' ').contains(QLatin1String("grid.accumulationSteps")));
    }

    // The largest size that fits, then the fewest workers whose step is as short: K = 4 on 3
    // workers takes 2 micro-batches a step as on 2, so 2; never more than the ranks it kept.
    void smallerAttemptsTakeTheFewestWorkersThatAreAsFast()
    {
        RunConfig c;
        c.workers = 4;
        c.minWorkers = 1;
        const QList<NodeCapacity> three { node(QStringLiteral("a"), 1), node(QStringLiteral("b"), 1),
            node(QStringLiteral("c"), 1) };
        QVERIFY(!placeRun(c, three, PlacementPolicy::Spread, true).ok());
        Placement p = placeElastic(c, three, PlacementPolicy::Spread, true);
        QVERIFY(p.ok());
        QCOMPARE(p.portions.size(), 2);
        QCOMPARE(microBatchesPerWorker(c, 2), 2);
        QCOMPARE(microBatchesPerWorker(c, 3), 2);
        p = placeElastic(c, three, PlacementPolicy::Spread, true, QString(), 1);
        QCOMPARE(p.portions.size(), 1);
        c.minWorkers = 0; // not elastic
        QVERIFY(!placeElastic(c, three, PlacementPolicy::Spread, true).ok());
        c.minWorkers = 4 - 1;
        c.workers = 4;
        QVERIFY(placeElastic(c, three, PlacementPolicy::Spread, true).ok()); // 3 is its minimum
    }

    // Replayed from the journal: each attempt's size and why it changed, RESIZED ending an
    // attempt stopped to grow (PENDING again, not a failure), and the agents it lost.
    void resizesReplayFromTheJournal()
    {
        v1::StudyPlan plan;
        plan.set_name("e");
        plan.set_dataset("synthetic");
        auto *range = plan.mutable_grid()->add_worker_ranges();
        range->set_min(1);
        range->set_max(2);
        plan.mutable_baseline()->set_skip(true);
        QList<PlannedRun> runs = expandPlan(plan, QStringLiteral("s"));
        QCOMPARE(runs.size(), 1);
        const QString id = runs.first().runId;
        const QList<Portion> two { Portion { QStringLiteral("a"), { 0 } },
            Portion { QStringLiteral("b"), { 1 } } };
        const QList<Portion> one { Portion { QStringLiteral("a"), { 0 } } };
        QList<JournalEvent> events {
            journalEvent(1, QStringLiteral("study_created"),
                journal_events::studyCreated(
                    QStringLiteral("e"), plan, { QStringLiteral("a"), QStringLiteral("b") }, runs)),
            journalEvent(2, QStringLiteral("attempt_starting"), journal_events::attemptStarting(id, 1, two)),
            journalEvent(3, QStringLiteral("attempt_ended"),
                QJsonObject { { QStringLiteral("runId"), id }, { QStringLiteral("attempt"), 1 },
                    { QStringLiteral("outcome"), QStringLiteral("FAILED") },
                    { QStringLiteral("reason"), QStringLiteral("b lost") }, { QStringLiteral("retry"), true },
                    { QStringLiteral("counts"), false },
                    { QStringLiteral("unreachable"), QJsonArray { QStringLiteral("b") } } }),
            journalEvent(4, QStringLiteral("attempt_starting"),
                journal_events::attemptStarting(id, 2, one, QStringLiteral("shrank from 2 to 1"))),
            journalEvent(5, QStringLiteral("attempt_resizing"),
                QJsonObject { { QStringLiteral("runId"), id }, { QStringLiteral("attempt"), 2 },
                    { QStringLiteral("reason"), QStringLiteral("to grow") } }),
        };
        StudyState state = StudyState::replay(events);
        const RunProgress *run = state.run(id);
        QVERIFY(run);
        QCOMPARE(run->attempts.size(), 2);
        QCOMPARE(run->attempts[0].worldSize, 2);
        QCOMPARE(run->attempts[1].worldSize, 1);
        QCOMPARE(run->attempts[1].resize, QStringLiteral("shrank from 2 to 1"));
        QCOMPARE(run->lostAgents, QStringList { QStringLiteral("b") });
        QCOMPARE(run->resizing, QStringLiteral("to grow"));
        QCOMPARE(run->failures, 0);
        events << journalEvent(6, QStringLiteral("attempt_ended"),
            QJsonObject { { QStringLiteral("runId"), id }, { QStringLiteral("attempt"), 2 },
                { QStringLiteral("outcome"), QStringLiteral("RESIZED") },
                { QStringLiteral("reason"), QStringLiteral("to grow") }, { QStringLiteral("retry"), false } })
               << journalEvent(7, QStringLiteral("attempt_starting"),
                      journal_events::attemptStarting(id, 3, two, QStringLiteral("grew")));
        state = StudyState::replay(events);
        run = state.run(id);
        QCOMPARE(run->phase, RunPhase::Starting);
        QCOMPARE(run->failures, 0);
        QCOMPARE(run->attempts[1].outcome, QStringLiteral("RESIZED"));
        QVERIFY(run->lostAgents.isEmpty()); // back at its planned size
        QVERIFY(run->resizing.isEmpty());
    }

    // A run that changed size is compared with the baseline by images/s, its wall-clock speedup
    // unavailable and saying why.
    void aResizedRunIsNotComparedByWallClock()
    {
        StudySnapshot s;
        s.state = QStringLiteral("SUCCEEDED");
        RunResult base;
        base.runId = QStringLiteral("b");
        base.config.baseline = true;
        base.state = QStringLiteral("SUCCEEDED");
        base.wallSeconds = 100;
        base.imagesPerSecond = 100;
        base.attempts << AttemptRecord { 1, {}, QStringLiteral("SUCCEEDED"), {}, 0, 0, 0, 0, {}, 1, {} };
        RunResult elastic = base;
        elastic.runId = QStringLiteral("e");
        elastic.config.baseline = false;
        elastic.config.workers = 2;
        elastic.config.minWorkers = 1;
        elastic.wallSeconds = 60;
        elastic.imagesPerSecond = 180;
        elastic.attempts = { AttemptRecord { 1, {}, QStringLiteral("FAILED"), {}, 0, 0, 0, 0, {}, 2, {} },
            AttemptRecord {
                2, {}, QStringLiteral("SUCCEEDED"), {}, 1, 0, 0, 0, {}, 1, QStringLiteral("shrank") } };
        s.runs << base << elastic;
        QCOMPARE(elasticSizesText(elastic), QStringLiteral("2 → 1 workers"));
        QCOMPARE(elasticSizesText(base), QString());
        const StudyResults results = computeStudyResults(s);
        const RunOutcome &o = results.runs.last();
        QVERIFY(!o.sameWork);
        QVERIFY(o.byThroughputShown());
        QVERIFY(!o.byWallClock.available());
        QVERIFY2(o.byWallClock.unavailableReason.contains(
                     QStringLiteral("changed size while it ran (2 → 1 workers)")),
            qPrintable(o.byWallClock.unavailableReason));
        QCOMPARE(o.byThroughput.speedup, 1.8);

        // The reports say so: the sizes, each attempt's size and why it changed.
        const QJsonObject json = QJsonDocument::fromJson(reportJson(s)).object();
        const QJsonObject second = json.value(QLatin1String("runs"))
                                       .toArray()
                                       .at(1)
                                       .toObject()
                                       .value(QLatin1String("attempts"))
                                       .toArray()
                                       .at(1)
                                       .toObject();
        QCOMPARE(second.value(QLatin1String("world_size")).toInt(), 1);
        QCOMPARE(second.value(QLatin1String("resize")).toString(), QStringLiteral("shrank"));
        const Result<QByteArray> html = reportHtml(s);
        QVERIFY2(html.ok(), qPrintable(html.error()));
        const QString page = QString::fromUtf8(html.value());
        QVERIFY2(page.contains(QStringLiteral("1–2 elastic")), "the runs table names the range");
        QVERIFY2(page.contains(QStringLiteral("ran 2 → 1 workers")), "and the sizes it ran at");
        QVERIFY2(page.contains(QStringLiteral("1 worker: shrank")), "the attempts table says why");
    }
};

QTEST_MAIN(TestElasticPlan)
#include "tst_elastic_plan.moc"
