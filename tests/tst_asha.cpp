// core/studies/asha.h: ASHA's decisions against reference values computed independently:
// numpy 1.24's nanpercentile, and a Python port of Ray Tune's ASHA stopping rule
// (ray/tune/schedulers/async_hyperband.py: _Bracket with np.nanpercentile, the metric
// negated for mode min, max_t stopping) run on a generated sequence of results; the
// hand-worked cases below follow Ray's own docstring and Li et al.'s Algorithm 2.
// The generator (tests/asha/asha_reference.py) printed the tables; rerun it to check them.
#include "asha.h"

#include <QTest>

#include <cmath>
#include <limits>

using namespace scalelab::core::asha;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNone = -12345; // "no cutoff": the rung was empty

struct Result {
    int trial;
    int epoch;
    double value;
    bool stop; // Ray's answer
    bool finished; // at max_t: stopped as done, not judged
    double rung; // 0: at no new rung
    double cutoff; // kNone, kNaN or the value
};

// grace 1, η 3, max 9 epochs, one bracket; 9 trials, 3 at a time.
const Result kMaxSequence[] = {
    { 1, 1, 0.1504, false, false, 1, kNone },
    { 0, 1, 0.1781, false, false, 1, 0.1504 },
    { 1, 2, 0.2292, false, false, 0, kNone },
    { 2, 1, 0.2567, false, false, 1, 0.16886666666666666 },
    { 0, 2, 0.3177, false, false, 0, kNone },
    { 2, 2, 0.4544, false, false, 0, kNone },
    { 2, 3, 0.5399, false, false, 3, kNone },
    { 0, 3, 0.4031, true, false, 3, 0.5399 },
    { 1, 3, 0.3056, true, false, 3, 0.4943000000000001 },
    { 2, 4, 0.5887, false, false, 0, kNone },
    { 2, 5, 0.6355, false, false, 0, kNone },
    { 4, 1, kNaN, false, false, 1, 0.2043 },
    { 4, 2, 0.3801, false, false, 0, kNone },
    { 4, 3, 0.4857, false, false, 3, 0.44870000000000004 },
    { 2, 6, 0.6511, false, false, 0, kNone },
    { 4, 4, 0.5459, false, false, 0, kNone },
    { 4, 5, 0.5529, false, false, 0, kNone },
    { 2, 7, 0.6696, false, false, 0, kNone },
    { 4, 6, 0.5877, false, false, 0, kNone },
    { 3, 1, 0.1338, true, false, 1, 0.2043 },
    { 4, 7, 0.5972, false, false, 0, kNone },
    { 2, 8, 0.6897, false, false, 0, kNone },
    { 5, 1, 0.2156, false, false, 1, 0.1781 },
    { 2, 9, 0.6859, true, true, 0, kNone },
    { 6, 1, 0.1315, true, false, 1, 0.20310000000000003 },
    { 5, 2, 0.3375, false, false, 0, kNone },
    { 5, 3, 0.4079, true, false, 3, 0.4857 },
    { 4, 8, 0.5949, false, false, 0, kNone },
    { 7, 1, 0.2244, false, false, 1, 0.19060000000000002 },
    { 7, 2, 0.3682, false, false, 0, kNone },
    { 7, 3, 0.4665, false, false, 3, 0.4597666666666667 },
    { 8, 1, 0.11, true, false, 1, 0.2156 },
    { 7, 4, 0.5163, false, false, 0, kNone },
    { 7, 5, 0.5586, false, false, 0, kNone },
    { 7, 6, 0.5571, false, false, 0, kNone },
    { 4, 9, 0.6324, true, true, 0, kNone },
    { 7, 7, 0.5941, false, false, 0, kNone },
    { 7, 8, 0.5758, false, false, 0, kNone },
    { 7, 9, 0.6036, true, true, 0, kNone },
};

// The same with mode min (values are a loss; the rule sees them negated).
const Result kMinSequence[] = {
    { 0, 1, 1.9785, false, false, 1, kNone },
    { 1, 1, 1.9103, false, false, 1, -1.9785 },
    { 2, 1, 1.6285, false, false, 1, -1.9330333333333334 },
    { 2, 2, 1.1361, false, false, 0, kNone },
    { 2, 3, 0.7921, false, false, 3, kNone },
    { 1, 2, 1.4798, false, false, 0, kNone },
    { 2, 4, 0.6378, false, false, 0, kNone },
    { 2, 5, 0.5875, false, false, 0, kNone },
    { 2, 6, 0.5137, false, false, 0, kNone },
    { 0, 2, 1.628, false, false, 0, kNone },
    { 0, 3, 1.3802, true, false, 3, -0.7921 },
    { 2, 7, 0.4456, false, false, 0, kNone },
    { 3, 1, 1.8958, true, false, 1, -1.8163666666666667 },
    { 4, 1, kNaN, false, false, 1, -1.8958 },
    { 2, 8, 0.4028, false, false, 0, kNone },
    { 4, 2, 1.5859, false, false, 0, kNone },
    { 4, 3, 1.3477, true, false, 3, -0.9881333333333333 },
    { 5, 1, 1.8087, false, false, 1, -1.8958 },
    { 1, 3, 1.2443, true, false, 3, -1.1624999999999999 },
    { 5, 2, 1.4432, false, false, 0, kNone },
    { 6, 1, 2.117, true, false, 1, -1.8377333333333332 },
    { 2, 9, 0.3811, true, true, 0, kNone },
    { 5, 3, 1.2428, false, false, 3, -1.2443 },
    { 7, 1, 1.9141, true, false, 1, -1.8667666666666665 },
    { 5, 4, 1.0549, false, false, 0, kNone },
    { 5, 5, 1.0315, false, false, 0, kNone },
    { 5, 6, 0.9531, false, false, 0, kNone },
    { 8, 1, 1.8412, false, false, 1, -1.8958 },
    { 5, 7, 0.8903, false, false, 0, kNone },
    { 8, 2, 1.445, false, false, 0, kNone },
    { 8, 3, 1.2001, false, false, 3, -1.2432999999999998 },
    { 8, 4, 1.0087, false, false, 0, kNone },
    { 5, 8, 0.9353, false, false, 0, kNone },
    { 5, 9, 0.9359, true, true, 0, kNone },
    { 8, 5, 0.9146, false, false, 0, kNone },
    { 8, 6, 0.8713, false, false, 0, kNone },
    { 8, 7, 0.8616, false, false, 0, kNone },
    { 8, 8, 0.7877, false, false, 0, kNone },
    { 8, 9, 0.8321, true, true, 0, kNone },
};

bool same(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

// Replays `results` as ASHAScheduler does; empty when every answer is Ray's.
template <std::size_t N> QString replay(const Result (&results)[N], double sign)
{
    StoppingBracket bracket(1, 9, 3);
    for (std::size_t i = 0; i < N; ++i) {
        const Result &r = results[i];
        const QString where
            = QStringLiteral("result %1 (trial %2, epoch %3)").arg(i).arg(r.trial).arg(r.epoch);
        if (r.epoch >= 9) {
            if (!r.finished)
                return where + QStringLiteral(": max_t reached but not finished");
            bracket.onComplete(std::to_string(r.trial), r.epoch, sign * r.value); // on_trial_complete
            continue;
        }
        const StopDecision d = bracket.onResult(std::to_string(r.trial), r.epoch, sign * r.value);
        if (d.stop)
            bracket.onComplete(std::to_string(r.trial), r.epoch, sign * r.value);
        if (d.stop != r.stop)
            return where + QStringLiteral(": stop %1, Ray says %2").arg(d.stop).arg(r.stop);
        if (d.rung.value_or(0) != r.rung)
            return where + QStringLiteral(": rung %1, Ray says %2").arg(d.rung.value_or(0)).arg(r.rung);
        const double cutoff = d.cutoff ? *d.cutoff : kNone;
        if (!same(cutoff, r.cutoff))
            return where
                + QStringLiteral(": cutoff %1, Ray says %2")
                      .arg(cutoff, 0, 'g', 17)
                      .arg(r.cutoff, 0, 'g', 17);
    }
    return {};
}

} // namespace

class TestAsha : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // np.nanpercentile(values, q) as numpy 1.24.2 printed it (repr, so every bit).
    void percentileIsNumpys_data()
    {
        QTest::addColumn<QList<double>>("values");
        QTest::addColumn<double>("q");
        QTest::addColumn<double>("expected");
        const double third = (1 - 1 / 3.0) * 100;
        QTest::newRow("1..4") << QList<double> { 1, 2, 3, 4 } << third << 3.0;
        QTest::newRow("three") << QList<double> { 0.1, 0.2, 0.3 } << third << 0.23333333333333334;
        QTest::newRow("one") << QList<double> { 0.5 } << third << 0.5;
        QTest::newRow("NaN ignored") << QList<double> { 0.3, kNaN, 0.1, 0.2 } << third << 0.23333333333333334;
        QTest::newRow("only NaN") << QList<double> { kNaN } << third << kNaN;
        QTest::newRow("empty") << QList<double> {} << third << kNaN;
        QTest::newRow("ties") << QList<double> { 0.7, 0.7, 0.7, 0.2 } << third << 0.7;
        QTest::newRow("negated (mode min)")
            << QList<double> { -0.9, -1.3, -0.4, -2.2, -0.8 } << third << -0.8333333333333334;
        QTest::newRow("eta 4") << QList<double> { 0.11, 0.52, 0.33, 0.94, 0.25, 0.66, 0.47 } << 75.0
                               << 0.5900000000000001;
        QTest::newRow("eta 2") << QList<double> { 0.11, 0.52, 0.33, 0.94, 0.25, 0.66, 0.47 } << 50.0 << 0.47;
        QTest::newRow("halfway, rounded") << QList<double> { 0.1, 0.2 } << 50.0 << 0.15000000000000002;
        QTest::newRow("halfway") << QList<double> { 2.0, 4.0 } << 50.0 << 3.0;
        QTest::newRow("on a value") << QList<double> { 0.123456789, 0.987654321, 0.555555555, 0.333333333 }
                                    << third << 0.555555555;
        QTest::newRow("q 100") << QList<double> { 3, 1, 2 } << 100.0 << 3.0;
        QTest::newRow("q 0") << QList<double> { 3, 1, 2 } << 0.0 << 1.0;
        // numpy's arithmetic at the top end, x − (x − x)·(1 − γ): NaN for an infinite x.
        QTest::newRow("only +inf") << QList<double> { kInf } << 50.0 << kNaN;
        QTest::newRow("only -inf") << QList<double> { -kInf } << third << kNaN;
        QTest::newRow("+inf and NaN") << QList<double> { kNaN, kInf } << 50.0 << kNaN;
        QTest::newRow("q 100, +inf on top") << QList<double> { 1, kInf } << 100.0 << kNaN;
    }
    void percentileIsNumpys()
    {
        QFETCH(QList<double>, values);
        QFETCH(double, q);
        QFETCH(double, expected);
        const double got = nanPercentile(std::vector<double>(values.begin(), values.end()), q);
        QVERIFY2(same(got, expected), qPrintable(QString::number(got, 'g', 17)));
    }

    // The sign of a zero cutoff is numpy's: +0.0 (issue 35; ScaleLab gave −0.0).
    void percentileOfZerosIsPositiveAsNumpys()
    {
        const double got = nanPercentile({ 0.0, 0.0, 0.0, 0.0, -0.0, -0.0, 0.0 }, 75);
        QCOMPARE(got, 0.0);
        QVERIFY2(!std::signbit(got), "numpy gives +0.0");
        QVERIFY(std::signbit(nanPercentile({ -0.0 }, 50))); // numpy: -0.0 - (0.0)·0
    }

    // Issue 35's repro (η 2, grace 1, max_t 10, mode max): a rung holding only +inf has a
    // NaN cutoff in numpy, so Ray continues the next trial there; ScaleLab stopped it.
    void rungOfOnlyInfinityContinuesAsRay()
    {
        StoppingBracket b(1, 10, 2, 0);
        QVERIFY(!b.onResult("A", 1, kInf).stop);
        const StopDecision d = b.onResult("B", 1, 0.5);
        QVERIFY(!d.stop);
        QVERIFY(d.cutoff && std::isnan(*d.cutoff));
        // Mode min: a loss of −inf is +inf once negated, as Ray's metric_op does.
        StoppingBracket m(1, 10, 2, 0);
        QVERIFY(!m.onResult("A", 1, -1 * -kInf).stop);
        QVERIFY(!m.onResult("B", 1, -1 * 0.5).stop);
    }

    // Issue 35's repro (η 2, grace 1, max_t 10, mode max): Ray passes a stopped trial's last
    // result through on_trial_complete, which records B at the milestone (1) it skipped, so
    // C at 1 meets the median of {0.9, 0.1} = 0.5 and continues (it stopped on 0.9 before).
    void stoppedTrialIsRecordedAtTheMilestoneItSkipped()
    {
        StoppingBracket b(1, 10, 2, 0);
        QVERIFY(!b.onResult("A", 1, 0.9).stop);
        QVERIFY(!b.onResult("A", 2, 0.9).stop);
        const StopDecision stopped = b.onResult("B", 2, 0.1);
        QVERIFY(stopped.stop);
        QCOMPARE(stopped.rung, std::optional<double>(2));
        QCOMPARE(b.cutoff(1), std::optional<double>(0.9));
        b.onComplete("B", 2, 0.1);
        QCOMPARE(b.cutoff(1), std::optional<double>(0.5));
        const StopDecision c = b.onResult("C", 1, 0.5);
        QVERIFY(!c.stop);
        QCOMPARE(c.cutoff, std::optional<double>(0.5));
        QCOMPARE(c.seen, std::vector<double>({ 0.9, 0.1 }));
        // A trial that skipped no milestone is recorded nowhere again.
        b.onComplete("A", 2, 0.9);
        QCOMPARE(b.cutoff(1), std::optional<double>(0.5));
        QCOMPARE(b.cutoff(2), std::optional<double>(0.5));
    }

    void milestonesAreRays()
    {
        QCOMPARE(milestones(1, 9, 3, 0), std::vector<double>({ 1, 3, 9 }));
        QCOMPARE(milestones(1, 10, 2, 0), std::vector<double>({ 1, 2, 4, 8 }));
        QCOMPARE(milestones(1, 9, 3, 1), std::vector<double>({ 3, 9 }));
        QCOMPARE(milestones(1, 81, 3, 0), std::vector<double>({ 1, 3, 9, 27, 81 }));
        QCOMPARE(milestones(1, 100, 3, 0), std::vector<double>({ 1, 3, 9, 27, 81 }));
        QCOMPARE(milestones(2, 1, 3, 0), std::vector<double>());
    }

    // Ray's _Bracket docstring, with s = 0.
    void raysDocstringExample()
    {
        StoppingBracket b(1, 10, 2, 0);
        StopDecision d = b.onResult("trial1", 1, 2);
        QVERIFY(!d.stop);
        QCOMPARE(d.rung, std::optional<double>(1));
        QVERIFY(!d.cutoff); // an empty rung continues
        d = b.onResult("trial2", 1, 4);
        QVERIFY(!d.stop);
        QCOMPARE(d.cutoff, std::optional<double>(2.0));
        QCOMPARE(b.cutoff(1), std::optional<double>(3.0));
        d = b.onResult("trial3", 1, 1);
        QVERIFY(d.stop);
        QCOMPARE(d.cutoff, std::optional<double>(3.0));
        QCOMPARE(d.seen, std::vector<double>({ 2, 4 }));
        QCOMPARE(b.cutoff(1), std::optional<double>(2.0)); // recorded although stopped
        // Between rungs, and at a rung already recorded: no decision.
        d = b.onResult("trial1", 1, 9);
        QVERIFY(!d.stop && !d.rung);
        // Two epochs on: judged at rung 2, never again at rung 1.
        d = b.onResult("trial1", 2, 0.5);
        QCOMPARE(d.rung, std::optional<double>(2));
        QVERIFY(!d.cutoff);
    }

    void stopsOnlyStrictlyBelow()
    {
        StoppingBracket b(1, 9, 3);
        for (const char *t : { "a", "b", "c" })
            b.onResult(t, 1, 0.7);
        QVERIFY(!b.onResult("d", 1, 0.7).stop); // equal to the cutoff: continues
        QVERIFY(b.onResult("e", 1, std::nextafter(0.7, 0.0)).stop);
        // NaN neither stops nor counts in the cutoff.
        StoppingBracket n(1, 9, 3);
        QVERIFY(!n.onResult("x", 1, kNaN).stop);
        const StopDecision d = n.onResult("y", 1, 0.1);
        QVERIFY(!d.stop);
        QVERIFY(d.cutoff && std::isnan(*d.cutoff)); // a rung of NaN only: NaN, and the trial continues
        QVERIFY(!n.onResult("z", 1, kNaN).stop);
        QCOMPARE(n.cutoff(1), std::optional<double>(0.1));
    }

    void sequenceDecidesAsRay() { QCOMPARE(replay(kMaxSequence, 1), QString()); }

    void sequenceDecidesAsRayForModeMin() { QCOMPARE(replay(kMinSequence, -1), QString()); }

    // A stopped trial sends no more results (the generator stops it), and each trial is
    // judged at a rung once: replaying the decisions twice gives the same answers.
    void replayIsDeterministic()
    {
        QCOMPARE(replay(kMaxSequence, 1), replay(kMaxSequence, 1));
        for (const Result &stopped : kMaxSequence)
            if (stopped.stop && !stopped.finished)
                for (const Result &later : kMaxSequence)
                    QVERIFY(!(later.trial == stopped.trial && later.epoch > stopped.epoch));
    }

    // Algorithm 2 of Li et al. on recorded curves, η = 3, rungs at 1, 3 and 9 epochs.
    void promotionTakesTheTopThirdFromTheHighestRung()
    {
        PromotionRungs rungs(3, 3);
        QVERIFY(!rungs.nextPromotion()); // nothing recorded: start a trial
        rungs.record("t0", 0, 0.50);
        rungs.record("t1", 0, 0.70);
        QVERIFY(!rungs.nextPromotion()); // ⌊2/3⌋ = 0: none may go up yet
        rungs.record("t2", 0, 0.60);
        auto p = rungs.nextPromotion(); // ⌊3/3⌋ = 1: the best
        QVERIFY(p);
        QCOMPARE(p->trial, std::string("t1"));
        QCOMPARE(p->fromRung, 0);
        QVERIFY(rungs.promoted("t1", 0));
        QVERIFY(!rungs.nextPromotion()); // t1 is the only one in the top third, and went
        rungs.record("t3", 0, 0.80);
        rungs.record("t4", 0, 0.20);
        rungs.record("t5", 0, 0.65);
        p = rungs.nextPromotion(); // top ⌊6/3⌋ = 2: t3 and t1; t1 has gone
        QCOMPARE(p->trial, std::string("t3"));
        rungs.record("t1", 1, 0.75);
        rungs.record("t3", 1, 0.85);
        QVERIFY(!rungs.nextPromotion()); // rung 1: ⌊2/3⌋ = 0; rung 0: both promoted
        rungs.record("t6", 0, 0.90);
        rungs.record("t7", 0, 0.10);
        rungs.record("t8", 0, kNaN);
        p = rungs.nextPromotion(); // rung 0 now 9: top 3 = t6, t3, t1
        QCOMPARE(p->trial, std::string("t6"));
        rungs.record("t6", 1, 0.95);
        p = rungs.nextPromotion(); // rung 1: ⌊3/3⌋ = 1 — the higher rung goes first
        QCOMPARE(p->trial, std::string("t6"));
        QCOMPARE(p->fromRung, 1);
        QCOMPARE(p->value, 0.95);
        QVERIFY(!rungs.nextPromotion()); // and then no one is left to promote
        rungs.record("t1", 1, 0.99); // recorded once per rung: the first value stays
        QVERIFY(!rungs.nextPromotion());
    }

    void promotionTiesGoToTheFirstRecorded()
    {
        PromotionRungs rungs(2, 2);
        rungs.record("late", 0, kNaN);
        rungs.record("a", 0, 0.5);
        rungs.record("b", 0, 0.5);
        rungs.record("c", 0, 0.1);
        QCOMPARE(rungs.nextPromotion()->trial, std::string("a"));
        QCOMPARE(rungs.nextPromotion()->trial, std::string("b"));
        QVERIFY(!rungs.nextPromotion()); // top ⌊4/2⌋ = 2, both gone; NaN never goes up
    }

    // Issue 35: withdraw marked only the entries recorded then; a trial recorded at a rung
    // after it was withdrawn could still be promoted from it.
    void withdrawnTrialIsNeverPromotedFromALaterRung()
    {
        PromotionRungs rungs(3, 2);
        rungs.record("a", 0, 0.9);
        rungs.record("b", 0, 0.1);
        QCOMPARE(rungs.nextPromotion()->trial, std::string("a"));
        rungs.withdraw("a");
        rungs.record("a", 1, 0.95); // it reached rung 1 all the same (continued by hand)
        rungs.record("c", 1, 0.2);
        QVERIFY(rungs.promoted("a", 1));
        QVERIFY(!rungs.nextPromotion()); // top ⌊2/2⌋ = 1 of rung 1 is a; rung 0's a is gone
    }
};

QTEST_GUILESS_MAIN(TestAsha)
#include "tst_asha.moc"
