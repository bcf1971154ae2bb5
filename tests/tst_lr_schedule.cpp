// The learning rate at each step (remote-agent/trainer/lr_schedule.h): warm-up from a tenth
// of the peak, then cosine decay to 0 at the run's last step, or the peak held; and the rules
// that scale it with the global batch (lr_rules.h): linear, square root, and AdaScale's gain
// with the schedule following its progress.
#include "lr_range_test.h"
#include "lr_rules.h"
#include "lr_schedule.h"

#include <QTest>

#include <cmath>
#include <limits>
#include <vector>

using scalelab::trainer::adaScaleGain;
using scalelab::trainer::AdaScaleProgress;
using scalelab::trainer::judgeLrSweep;
using scalelab::trainer::LrRangeVerdict;
using scalelab::trainer::LrSchedule;
using scalelab::trainer::scheduledLearningRate;
namespace worker = scalelab::worker;

class TestLrSchedule : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void warmUpThenCosine()
    {
        const LrSchedule s { .peak = 0.1, .warmupSteps = 10, .totalSteps = 110, .constant = false };
        QCOMPARE(s.at(0), 0.01); // a tenth of the peak
        QVERIFY(qAbs(s.at(5) - 0.055) < 1e-15); // halfway up
        QCOMPARE(s.at(10), 0.1); // the peak once warm
        QVERIFY(qAbs(s.at(60) - 0.05) < 1e-15); // half-way down the cosine
        QVERIFY(qAbs(s.at(110)) < 1e-15); // 0 at the end
        for (std::int64_t step = 1; step < 10; ++step)
            QVERIFY(s.at(step) > s.at(step - 1));
        for (std::int64_t step = 11; step <= 110; ++step)
            QVERIFY(s.at(step) < s.at(step - 1));
    }

    void constantHoldsThePeak()
    {
        const LrSchedule s { .peak = 0.05, .warmupSteps = 4, .totalSteps = 100, .constant = true };
        QCOMPARE(s.at(0), 0.005);
        QCOMPARE(s.at(4), 0.05);
        QCOMPARE(s.at(99), 0.05);
    }

    void noWarmUpStartsAtThePeak()
    {
        const LrSchedule s { .peak = 0.02, .warmupSteps = 0, .totalSteps = 8, .constant = false };
        QCOMPARE(s.at(0), 0.02);
        QVERIFY(qAbs(s.at(4) - 0.01) < 1e-15);
    }

    // A warm-up as long as the run: no division by zero, the peak at its end.
    void warmUpAsLongAsTheRun()
    {
        const LrSchedule s { .peak = 0.02, .warmupSteps = 8, .totalSteps = 8, .constant = false };
        QCOMPARE(s.at(8), 0.02);
        QVERIFY(std::isfinite(s.at(9)));
    }

    // The fixed rules from the base batch to 4 times it; adascale starts from the rate as
    // given (its gain scales each step).
    void fixedRulesScaleWithTheGlobalBatch()
    {
        QCOMPARE(scheduledLearningRate("none", 0.02, 64, 256), 0.02);
        QCOMPARE(scheduledLearningRate("linear", 0.02, 64, 256), 0.08);
        QCOMPARE(scheduledLearningRate("sqrt", 0.02, 64, 256), 0.04);
        QCOMPARE(scheduledLearningRate("adascale", 0.02, 64, 256), 0.02);
        QVERIFY(qAbs(worker::sqrtRuleLearningRate(0.1, 64, 128) - 0.1 * std::sqrt(2.0)) < 1e-15);
        QCOMPARE(worker::sqrtRuleLearningRate(0.1, 256, 64), 0.05); // down to a smaller batch
        QCOMPARE(worker::sqrtRuleLearningRate(0.1, 64, 64), 0.1);
    }

    void onlyTheKnownRulesAreRules()
    {
        for (const char *rule : { "none", "linear", "sqrt", "adascale" })
            QVERIFY2(worker::isLrRule(rule), rule);
        for (const char *rule : { "cubic", "", "Linear", "ada-scale" })
            QVERIFY2(!worker::isLrRule(rule), rule);
        QCOMPARE(worker::lrRulesText(), std::string("none, linear, sqrt or adascale"));
    }

    // r = (var + |G|²) / (var / S + |G|²), var = tr(Σ) / base batch.
    void adaScaleGainAtKnownValues()
    {
        // Noise-free: a big batch is worth no more than a base batch.
        QCOMPARE(adaScaleGain(2.0, 0.0, 10, 64, 4.0), 1.0);
        // All noise: worth S base batches.
        QCOMPARE(adaScaleGain(0.0, 64.0, 10, 64, 4.0), 4.0);
        QVERIFY(qAbs(adaScaleGain(1e-12, 64.0, 10, 64, 4.0) - 4.0) < 1e-9); // r -> S as |G|² -> 0
        // var = 128 / 64 = 2, |G|² = 1, S = 4: (2 + 1) / (0.5 + 1) = 2.
        QCOMPARE(adaScaleGain(1.0, 128.0, 10, 64, 4.0), 2.0);
        // var = 1, |G|² = 1, S = 8: 2 / (1/8 + 1) = 16 / 9.
        QVERIFY(qAbs(adaScaleGain(1.0, 32.0, 3, 32, 8.0) - 16.0 / 9.0) < 1e-15);
        // Growing with the noise, from 1 to S.
        double previous = 1.0;
        for (double trace : { 1.0, 10.0, 100.0, 1000.0, 1e5 }) {
            const double r = adaScaleGain(1.0, trace, 5, 64, 4.0);
            QVERIFY(r > previous && r < 4.0);
            previous = r;
        }
    }

    // Before the meter has a sample, and for estimates outside the formula's range, r stays
    // in [1, S]: 1 with nothing measured, clamped otherwise.
    void adaScaleGainIsOneUntilMeasuredAndClamped()
    {
        QCOMPARE(adaScaleGain(1.0, 128.0, 0, 64, 4.0), 1.0); // no samples yet
        QCOMPARE(adaScaleGain(0.0, 0.0, 5, 64, 4.0), 1.0); // nothing measured
        QCOMPARE(adaScaleGain(-1.0, -5.0, 5, 64, 4.0), 1.0); // early negative averages
        QCOMPARE(adaScaleGain(-0.5, 64.0, 5, 64, 4.0), 4.0); // |G|² < 0 is taken as 0
        QCOMPARE(adaScaleGain(1.0, -64.0, 5, 64, 4.0), 1.0); // tr(Σ) < 0 is taken as 0
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double inf = std::numeric_limits<double>::infinity();
        QCOMPARE(adaScaleGain(nan, 64.0, 5, 64, 4.0), 1.0);
        QCOMPARE(adaScaleGain(1.0, inf, 5, 64, 4.0), 1.0);
        QCOMPARE(adaScaleGain(1.0, 64.0, 5, 64, 1.0), 1.0); // the base batch itself: S = 1
        // Below the base batch (S = 1/2) the formula spans [S, 1].
        QCOMPARE(adaScaleGain(0.0, 64.0, 5, 64, 0.5), 0.5);
        QCOMPARE(adaScaleGain(1.0, 0.0, 5, 64, 0.5), 1.0);
    }

    // With r = S at every step, the schedule at the progress is the linear rule's, step for
    // step, through the warm-up and the cosine.
    void adaScaleAtFullGainIsTheLinearRule()
    {
        for (const double scale : { 4.0, 3.0, 8.0 }) {
            const double base = 0.02;
            const LrSchedule linear {
                .peak = base * scale, .warmupSteps = 10, .totalSteps = 100, .constant = false
            };
            const LrSchedule adaScale {
                .peak = base, .warmupSteps = 10, .totalSteps = 100, .constant = false
            };
            AdaScaleProgress progress(scale);
            for (std::int64_t step = 0; step < 100; ++step) {
                const double lr = progress.learningRate(adaScale, scale);
                QVERIFY2(qAbs(lr - linear.at(step)) < 1e-12,
                    qPrintable(QStringLiteral("S %1, step %2: %3 against the linear rule's %4")
                                   .arg(scale)
                                   .arg(step)
                                   .arg(lr)
                                   .arg(linear.at(step))));
                progress.advance(scale);
            }
            QCOMPARE(progress.progress(), 100 * scale);
        }
    }

    // Smaller gains make less progress: the warm-up and decay go slower than the steps, and
    // a run whose epochs end first ends short of the schedule's end.
    void adaScaleProgressFollowsTheGains()
    {
        const LrSchedule s { .peak = 0.1, .warmupSteps = 10, .totalSteps = 110, .constant = false };
        AdaScaleProgress progress(4.0);
        for (int step = 0; step < 20; ++step)
            progress.advance(2.0); // each step worth 2 base batches, half the linear rule's 4
        QCOMPARE(progress.progress(), 40.0);
        QCOMPARE(progress.scheduleStep(s), 10.0); // 20 steps in, the warm-up just done
        QCOMPARE(progress.learningRate(s, 2.0), 0.2); // the peak, times the gain
        for (int step = 20; step < 110; ++step)
            progress.advance(2.0);
        QCOMPARE(progress.scheduleStep(s), 55.0); // the run's epochs end half-way down
        QVERIFY(qAbs(progress.learningRate(s, 1.0) - s.at(55)) < 1e-15);
        // A resumed run continues from its checkpoint's progress.
        const AdaScaleProgress resumed(4.0, progress.progress());
        QCOMPARE(resumed.scheduleStep(s), 55.0);
        // Below the base batch the progress can outrun the steps: the schedule's end holds.
        AdaScaleProgress small(0.5);
        for (int step = 0; step < 100; ++step)
            small.advance(1.0);
        QCOMPARE(small.scheduleStep(s), 110.0);
        QVERIFY(qAbs(small.learningRate(s, 1.0)) < 1e-15);
    }

    // The schedule at fractional steps agrees with the integer steps and lies between them.
    void scheduleAtFractionalSteps()
    {
        const LrSchedule s { .peak = 0.1, .warmupSteps = 10, .totalSteps = 110, .constant = false };
        for (std::int64_t step = 0; step <= 110; ++step)
            QCOMPARE(s.atStep(double(step)), s.at(step));
        QVERIFY(s.atStep(4.5) > s.at(4) && s.atStep(4.5) < s.at(5));
        QVERIFY(s.atStep(60.5) < s.at(60) && s.atStep(60.5) > s.at(61));
    }

    // The range test's verdict (lr_range_test.h), on sweeps of 200 rates from 1e-5 to 10.
    void rangeTestFindsTheFallAfterTheAverageSettles()
    {
        const auto sweep = [](const auto &loss) {
            std::vector<double> lrs, smoothed;
            for (int i = 0; i < 200; ++i) {
                lrs.push_back(1e-5 * std::pow(1e6, i / 199.0));
                smoothed.push_back(loss(i));
            }
            return std::pair { lrs, smoothed };
        };
        // A loss that falls from 2.3 to 1.0 by step 150 (lr ~3e-1), then diverges.
        const auto [lrs, falling]
            = sweep([](int i) { return i <= 150 ? 2.3 - 1.3 * i / 150.0 : 1.0 + (i - 150) * 0.1; });
        const LrRangeVerdict found = judgeLrSweep(lrs, falling);
        QVERIFY(found.conclusive);
        QCOMPARE(found.minLossLr, lrs[150]);
        QCOMPARE(found.suggestedLr, lrs[150] / 10);
        QVERIFY(found.note.empty());

        // b987923's "auto" on a 512-image synthetic set: one lucky first batch (the average's
        // first value is that batch's loss), then flat. It chose 1e-6, below the rates tried,
        // and called the test conclusive.
        const auto [lrs2, lucky] = sweep([](int i) { return i == 0 ? 2.0 : 2.3 + 0.01 * std::sin(i); });
        const LrRangeVerdict flat = judgeLrSweep(lrs2, lucky);
        QVERIFY(!flat.conclusive);
        QVERIFY(flat.minLossLr > lrs2.front());
        QVERIFY2(flat.note.find("hardly fell") != std::string::npos, flat.note.c_str());

        // A real fall whose lowest point is in the sweep's first decade: a tenth of its lr
        // would be below the rates tried.
        const auto [lrs3, early]
            = sweep([](int i) { return i <= 25 ? 2.3 - 0.04 * i : 1.3 + (i - 25) * 0.05; });
        const LrRangeVerdict tooLow = judgeLrSweep(lrs3, early);
        QVERIFY(!tooLow.conclusive);
        QVERIFY(tooLow.suggestedLr < lrs3.front());
        QVERIFY2(tooLow.note.find("lower --min-lr") != std::string::npos, tooLow.note.c_str());
    }
};

QTEST_GUILESS_MAIN(TestLrSchedule)
#include "tst_lr_schedule.moc"
