// core/agents/progress_meter.h: epoch and step x/y, the ETA from the measured step rate
// (shown once stable, evaluations included), and the progress line's text; the CLI's
// live line on a terminal and plain lines elsewhere are tested in tst_end_to_end.
#include "progress_meter.h"
#include "run_events.h"

#include <QTest>

#include <cmath>

using namespace scalelab;
using namespace scalelab::core;

namespace {

using test::epochEvent;
using test::startedEvent;

// Step `step` of `epoch`, `elapsed` seconds in, at 88 images/s.
v1::RunEvent step(int epoch, qint64 step, double elapsed, double loss = 1.5)
{
    v1::RunEvent e = test::stepEvent(epoch, step, loss);
    e.mutable_step()->set_elapsed_seconds(elapsed);
    e.mutable_step()->set_images_per_second(88);
    return e;
}

} // namespace

class TestProgress : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void stepsAndEpochsCount()
    {
        ProgressMeter m;
        ProgressView v = m.view();
        QCOMPARE(v.stepsTotal, qint64(0));
        QVERIFY(std::isnan(v.loss));
        QVERIFY(!v.etaSeconds);
        m.apply(startedEvent(3, 10));
        m.apply(step(1, 1, 0.0));
        v = m.view();
        QCOMPARE(v.epoch, 1);
        QCOMPARE(v.epochs, 3);
        QCOMPARE(v.stepInEpoch, qint64(1));
        QCOMPARE(v.stepsTotal, qint64(30));
        QCOMPARE(v.loss, 1.5);
        m.apply(step(2, 14, 6.5));
        v = m.view();
        QCOMPARE(v.epoch, 2);
        QCOMPARE(v.stepInEpoch, qint64(4));
        QCOMPARE(v.stepsDone, qint64(14));
        QVERIFY(qAbs(v.fraction - 14.0 / 30) < 1e-12);
    }

    void etaOnceTheRateIsStable()
    {
        ProgressMeter m;
        m.apply(startedEvent(3, 10));
        // One step every 0.5 s: after 4 steps (1.5 s) not yet stable.
        for (int s = 1; s <= 4; ++s)
            m.apply(step(1, s, 0.5 * (s - 1)));
        QVERIFY(!m.view().etaSeconds);
        for (int s = 5; s <= 10; ++s)
            m.apply(step(1, s, 0.5 * (s - 1)));
        // 9 steps in 4.5 s: 2 steps/s; 20 steps left = 10 s; no evaluation measured yet.
        QCOMPARE(m.view().etaSeconds, std::optional<double>(10.0));
        // Epoch 1 evaluates for 1.5 s after its last step (4.5 s): that recurs for the
        // two epochs left.
        m.apply(epochEvent(1, 6.0));
        QCOMPARE(m.view().etaSeconds, std::optional<double>(10.0 + 2 * 1.5));
        m.apply(step(2, 11, 6.5));
        // 10 steps in 6.5 s now (the evaluation slowed the average), 19 left, 2 evaluations.
        QCOMPARE(m.view().etaSeconds, std::optional<double>(19 / (10 / 6.5) + 2 * 1.5));
    }

    void resumedRunsCountTheirDoneEpochs()
    {
        ProgressMeter m;
        m.apply(startedEvent(3, 10));
        for (int s = 1; s <= 10; ++s)
            m.apply(step(1, s, s));
        m.apply(epochEvent(1, 11));
        // A new attempt from the checkpoint of epoch 2: a new measurement.
        m.apply(startedEvent(3, 10, 2));
        ProgressView v = m.view();
        QCOMPARE(v.stepsDone, qint64(20));
        QCOMPARE(v.epoch, 3);
        QVERIFY(!v.etaSeconds);
        m.apply(step(3, 21, 0.1));
        m.apply(step(3, 22, 0.2));
        QVERIFY(!m.view().etaSeconds); // 1 step measured in 0.1 s: not stable
    }

    void doneRunsHaveNoEta()
    {
        ProgressMeter m;
        m.apply(startedEvent(1, 10));
        for (int s = 1; s <= 10; ++s)
            m.apply(step(1, s, s));
        m.apply(epochEvent(1, 12));
        const ProgressView v = m.view();
        QVERIFY(v.done);
        QVERIFY(!v.etaSeconds);
        QCOMPARE(v.fraction, 1.0);
        QVERIFY(formatProgress(QStringLiteral("r01"), v).contains(QLatin1String("evaluated")));
    }

    void durations_data()
    {
        QTest::addColumn<double>("seconds");
        QTest::addColumn<QString>("text");
        QTest::newRow("0") << 0.0 << "0s";
        QTest::newRow("42") << 42.4 << "42s";
        QTest::newRow("59.6") << 59.6 << "1m00s";
        QTest::newRow("192") << 192.0 << "3m12s";
        QTest::newRow("3840") << 3840.0 << "1h04m";
        QTest::newRow("183600") << 183600.0 << "2d03h";
        QTest::newRow("negative") << -1.0 << "?";
        QTest::newRow("NaN") << std::nan("") << "?";
    }
    void durations()
    {
        QFETCH(double, seconds);
        QFETCH(QString, text);
        QCOMPARE(formatDuration(seconds), text);
    }

    void lineFitsItsTerminal()
    {
        ProgressMeter m;
        m.apply(startedEvent(5, 125));
        for (int s = 1; s <= 48; ++s)
            m.apply(step(1, s, s * 0.25, 0.5512));
        const ProgressView v = m.view(); // 47 steps in 11.75 s: 4/s; 577 left: 144 s
        const QString wide = formatProgress(QStringLiteral("r01"), v, 120);
        QVERIFY2(wide.startsWith(QLatin1String("r01 [")), qPrintable(wide));
        for (const char *part :
            { "epoch 1/5", "step 48/125", "loss 0.5512", "88.0 img/s", "ETA 2m24s", "  7%" })
            QVERIFY2(wide.contains(QLatin1String(part)), qPrintable(wide + QStringLiteral(" lacks ") + part));
        QVERIFY(wide.size() <= 120);
        const QString narrow = formatProgress(QStringLiteral("r01"), v, 60);
        QVERIFY2(!narrow.contains(QLatin1Char('[')) && narrow.size() < 60,
            qPrintable(narrow)); // the bar goes first
        const QString log = formatProgress(QStringLiteral("r01"), v, 0);
        QVERIFY2(
            !log.contains(QLatin1Char('[')) && log.contains(QLatin1String("ETA 2m24s")), qPrintable(log));
    }
};

QTEST_GUILESS_MAIN(TestProgress)
#include "tst_progress.moc"
