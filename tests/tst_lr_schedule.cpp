// The learning rate at each step (remote-agent/trainer/lr_schedule.h): warm-up from a tenth
// of the peak, then cosine decay to 0 at the run's last step, or the peak held.
#include "lr_schedule.h"

#include <QTest>

using scalelab::trainer::LrSchedule;

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
};

QTEST_GUILESS_MAIN(TestLrSchedule)
#include "tst_lr_schedule.moc"
