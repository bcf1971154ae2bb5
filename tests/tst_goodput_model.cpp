// core/studies/goodput_model.h: epochs to a target from evaluations, statistical efficiency
// (McCandlish et al. 2018's (B + M0)/(B + M)), the basis a study gives (its reference batch,
// repeats and noise scales), time to target joined to throughput with bands, and the
// recommendation. Issue 54 item 4.
#include "goodput_model.h"
#include "report_charts.h"

#include <QTest>

#include <cmath>

using namespace scalelab::core;

namespace {

// A SUCCEEDED run of `workers` x `batch` whose epochs reach `accuracies`, each with noise
// scale `noise` (K = workers).
RunResult run(int workers, int batch, const QList<double> &accuracies, double noise, int repeat = 0)
{
    RunResult r;
    r.config.workers = workers;
    r.config.batchSize = batch;
    r.config.baseline = workers == 1;
    r.config.epochs = 4; // as planned; a run may stop sooner
    r.repeat = repeat;
    r.runId = QStringLiteral("%1-%2").arg(r.config.key()).arg(repeat);
    r.state = QStringLiteral("SUCCEEDED");
    r.recipe.insert(QStringLiteral("dataset_train_images"), 50000.0);
    r.recipe.insert(QStringLiteral("max_train_images"), 10000.0);
    for (int i = 0; i < accuracies.size(); ++i) {
        EpochPoint e;
        e.epoch = i + 1;
        e.testAccuracy = accuracies[i];
        e.noise = { noise, 1.0, noise, 100, workers, workers == 1 };
        r.epochs << e;
    }
    r.noise = r.epochs.last().noise;
    // A measured step, so that the run enters the study's scaling (scaling_model.h).
    r.anatomy.steps = 10;
    r.anatomy.perStep = { 0.001, 0.01, 0.02, 0.0, 0.001 };
    r.gradientBytes = 1e5;
    return r;
}

StudyScaling scalingOf(const StudySnapshot &)
{
    StudyScaling s;
    s.model = QString::fromLatin1(kDefaultModelName);
    return s;
}

// A throughput fit from exact runs of a known step model at 1, 2 and 4 workers × 32 and 128,
// as tst_scaling_model makes them: compute 20 ms + 4 ms an image, 13 MB of gradients over a
// ~1 Gbit/s ring.
StudyScaling fittedScaling()
{
    ScalingModel m;
    m.valid = true;
    m.computeIntercept = 0.020;
    m.computePerImage = 0.004;
    m.dataPerImage = 0.0002;
    m.latency = 150e-6;
    m.bandwidth = 120e6;
    m.gamma = 2.5;
    m.gradientBytes = 13e6;
    StudyScaling s;
    s.model = QString::fromLatin1(kDefaultModelName);
    for (int workers : { 1, 2, 4 })
        for (int batch : { 32, 128 }) {
            const ScalingPoint p = predictScaling(m, workers, batch);
            ScalingRun r;
            r.runId = QStringLiteral("w%1-b%2").arg(workers).arg(batch);
            r.workers = workers;
            r.batchPerWorker = batch;
            r.gradientBytes = m.gradientBytes;
            r.threads = 1;
            r.perStep = { m.dataPerImage * batch, p.computeSeconds * 0.3, p.computeSeconds * 0.65,
                p.exposedSeconds, p.computeSeconds * 0.05 };
            for (int k = 0; k < 10; ++k)
                r.steps << r.perStep;
            if (workers > 1) {
                r.network = { workers, QStringLiteral("gloo"), workers, {} };
                for (qint64 bytes = 4 << 10; bytes <= (64 << 20); bytes *= 4)
                    r.network.samples << NetworkSample { bytes,
                        { 2 * (workers - 1) * m.latency
                            + 2.0 * (workers - 1) / workers * double(bytes) / m.bandwidth } };
            }
            s.runs << r;
        }
    s.fit = fitScalingModel(s.runs);
    s.batchPerWorker = 32;
    return s;
}

ScalingPoint point(int workers, int batch, double ips)
{
    ScalingPoint p;
    p.workers = workers;
    p.batchPerWorker = batch;
    p.imagesPerSecond = ips;
    p.imagesPerSecondLow = ips * 0.9;
    p.imagesPerSecondHigh = ips * 1.1;
    return p;
}

} // namespace

class TestGoodputModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void statisticalEfficiencyIsMcCandlishs()
    {
        QCOMPARE(statisticalEfficiency(100, 32, 32), 1.0);
        QVERIFY(std::abs(statisticalEfficiency(100, 32, 132) - 132.0 / 232.0) < 1e-12);
        // Far below B_noise a larger batch loses almost nothing; far past it, each image counts for
        // about B/M of one at M0.
        QVERIFY(statisticalEfficiency(1e6, 32, 1024) > 0.99);
        QVERIFY(std::abs(statisticalEfficiency(10, 10, 1000) - 20.0 / 1010.0) < 1e-12);
    }

    void epochsToTargetInterpolatesBetweenEvaluations()
    {
        QCOMPARE(*epochsToTarget(run(1, 32, { 0.5, 0.7, 0.9 }, 100), 0.8), 2.5);
        QCOMPARE(*epochsToTarget(run(1, 32, { 0.85, 0.9 }, 100), 0.8), 1.0);
        QCOMPARE(*epochsToTarget(run(1, 32, { 0.5, 0.8 }, 100), 0.8), 2.0);
        QVERIFY(!epochsToTarget(run(1, 32, { 0.5, 0.7 }, 100), 0.8));
    }

    void basisTakesTheBaselineAndPrefersSeveralRanksNoise()
    {
        StudySnapshot s;
        s.runs << run(1, 32, { 0.5, 0.7, 0.9 }, 900, 0) << run(1, 32, { 0.6, 0.9, 0.95 }, 900, 1)
               << run(1, 32, { 0.5, 0.6, 0.7, 0.9 }, 900, 2) << run(2, 32, { 0.4, 0.85 }, 200)
               << run(4, 32, { 0.3, 0.6, 0.8 }, 300);
        const GoodputBasis b = goodputBasis(s, scalingOf(s), 0.8);
        QVERIFY2(b.valid, qPrintable(b.problem));
        QCOMPARE(b.referenceGlobalBatch, 32);
        QCOMPARE(b.epochRuns, 3);
        QCOMPARE(b.epochs.value, 2.5); // median of 2.5, 1.67 and 3.5
        QVERIFY(std::abs(b.epochs.low - (1 + 0.2 / 0.3)) < 1e-9);
        QCOMPARE(b.epochs.high, 3.5);
        // The one-rank runs' differenced 900 is left out: two runs of several ranks measured.
        QCOMPARE(b.noiseEstimator, QStringLiteral("two-batch"));
        QCOMPARE(b.noiseRuns, 2);
        QCOMPARE(b.noiseScale.value, 250.0);
        QCOMPARE(b.imagesPerEpoch, 10000.0); // the cap, not the split
    }

    void basisSaysWhatIsMissing()
    {
        StudySnapshot s;
        s.runs << run(1, 32, { 0.5, 0.6 }, 100);
        GoodputBasis b = goodputBasis(s, scalingOf(s), 0.8);
        QVERIFY(!b.valid);
        QVERIFY2(b.problem.contains(QStringLiteral("reached 80")), qPrintable(b.problem));
        s.runs = { run(1, 32, { 0.5, 0.9 }, kNotMeasured) };
        s.runs[0].noise = {};
        b = goodputBasis(s, scalingOf(s), 0.8);
        QVERIFY(!b.valid);
        QVERIFY2(b.problem.contains(QStringLiteral("noise scale")), qPrintable(b.problem));
        QVERIFY(!goodputBasis(s, scalingOf(s), 0).valid);
    }

    void timeToTargetJoinsEpochsAndThroughput()
    {
        StudySnapshot s;
        s.runs << run(1, 32, { 0.5, 0.9 }, 96) << run(2, 32, { 0.5, 0.9 }, 96);
        const GoodputBasis b = goodputBasis(s, scalingOf(s), 0.9);
        QVERIFY2(b.valid, qPrintable(b.problem));
        QCOMPARE(b.epochs.value, 2.0);
        const ScalingPoint reference = point(1, 32, 100);
        const QList<GoodputPoint> g
            = predictGoodput(b, { point(1, 32, 100), point(4, 32, 400), point(64, 32, 6400) }, reference);
        QCOMPARE(g.size(), 3);
        // The reference itself: 2 epochs of 10,000 images at 100 img/s.
        QCOMPARE(g[0].seconds.value, 200.0);
        QCOMPARE(g[0].speedup.value, 1.0);
        // 4 workers: M = 128, E = (96 + 32)/(96 + 128) = 4/7, so 3.5 epochs at 400 img/s.
        QVERIFY(std::abs(g[1].epochs.value - 3.5) < 1e-12);
        QVERIFY(std::abs(g[1].seconds.value - 87.5) < 1e-9);
        QVERIFY(std::abs(g[1].goodput.value - 400 * 4.0 / 7.0) < 1e-9);
        // The throughput band reaches the time's band, fastest with the most images/s.
        QVERIFY(std::abs(g[1].seconds.low - 3.5 * 10000 / 440) < 1e-9);
        QVERIFY(std::abs(g[1].seconds.high - 3.5 * 10000 / 360) < 1e-9);
        QVERIFY(!g[1].pastCritical());
        // 64 workers buy 64x the images/s, but M = 2048 is 21x B_noise: E = 128/2144, so the
        // time to the target improves 3.8x, not 64x, and the point says it is past the critical batch.
        QVERIFY(g[2].pastCritical());
        QVERIFY(std::abs(g[2].speedup.value - 64 * 128.0 / 2144.0) < 1e-9);
        QVERIFY(!pastCriticalText(2048, 96).isEmpty());
        QVERIFY(pastCriticalText(128, 96).isEmpty());
    }

    void aLargeNoiseScaleScalesPerfectly()
    {
        // Planted: with B_noise far above every batch, epochs do not grow and the time to the
        // target falls with the throughput.
        StudySnapshot s;
        s.runs << run(1, 32, { 0.5, 0.9 }, 1e9) << run(2, 32, { 0.5, 0.9 }, 1e9);
        const GoodputBasis b = goodputBasis(s, scalingOf(s), 0.9);
        const QList<GoodputPoint> g = predictGoodput(b, { point(8, 32, 800) }, point(1, 32, 100));
        QVERIFY(std::abs(g[0].epochs.value - 2.0) < 1e-5);
        QVERIFY(std::abs(g[0].speedup.value - 8.0) < 1e-4);
    }

    void recommendationFollowsTheNoiseScale()
    {
        const StudyScaling scaling = fittedScaling();
        QVERIFY2(scaling.fit.valid, qPrintable(scaling.fit.problem));
        const QList<int> workers { 1, 2, 4, 8, 16, 32, 64 };
        const auto recommended = [&](double noise, double deadline = 0) {
            StudySnapshot s;
            s.runs << run(1, 32, { 0.5, 0.9 }, noise) << run(2, 32, { 0.5, 0.9 }, noise);
            return recommend(goodputBasis(s, scaling, 0.9), scaling, s, workers, { 32, 128 }, deadline);
        };
        // A noisy gradient (B_noise 100,000 images) keeps large batches efficient: the more
        // workers the sooner, up to the 64 allowed or close to it.
        const Recommendation noisy = recommended(1e5);
        QVERIFY2(noisy.found, qPrintable(noisy.problem));
        QVERIFY2(noisy.best.workers >= 32, qPrintable(noisy.reason));
        // A clean one (B_noise 64) makes every image past the critical batch count for little:
        // time to the target nears its floor (the fewest steps times a step), so the
        // recommendation stops at fewer workers, far below their worth in images/s, and it is
        // within 10 % of the soonest considered.
        const Recommendation clean = recommended(64);
        QVERIFY2(clean.found, qPrintable(clean.problem));
        QVERIFY2(clean.best.workers < noisy.best.workers, qPrintable(clean.reason));
        QVERIFY2(clean.best.scalingEfficiency.value < 0.5, qPrintable(clean.reason));
        QVERIFY(clean.best.seconds.value <= 1.1 * clean.considered.first().seconds.value);
        QCOMPARE(clean.considered.size(), workers.size() * 2);
        // A deadline: the fewest workers predicted within it, which is fewer than the soonest.
        const double deadline = noisy.considered.first().seconds.value * 3;
        const Recommendation inTime = recommended(1e5, deadline);
        QVERIFY2(inTime.found, qPrintable(inTime.problem));
        QVERIFY(inTime.best.seconds.value <= deadline);
        QVERIFY(inTime.best.workers < noisy.best.workers);
        for (const GoodputPoint &p : inTime.considered)
            if (p.workers < inTime.best.workers)
                QVERIFY(p.seconds.value > deadline);
        // One that cannot be met says by how much it misses.
        const Recommendation late = recommended(1e5, 1e-3);
        QVERIFY(!late.found);
        QVERIFY2(late.problem.contains(QStringLiteral("the fastest")), qPrintable(late.problem));
        // The rule: what the study's runs at a larger batch reached the target with (here the
        // 2-worker run's "none"); with no such run, past B_noise, AdaScale, and why.
        QCOMPARE(clean.lrRule, QStringLiteral("none"));
        QVERIFY2(clean.lrRuleReason.contains(QStringLiteral("of the study's runs")),
            qPrintable(clean.lrRuleReason));
        StudySnapshot alone;
        alone.runs << run(1, 32, { 0.5, 0.9 }, 64);
        const Recommendation untested
            = recommend(goodputBasis(alone, scaling, 0.9), scaling, alone, workers, { 32, 128 });
        QVERIFY2(untested.found && untested.best.globalBatch > 64, qPrintable(untested.reason));
        QCOMPARE(untested.lrRule, QStringLiteral("adascale"));
        QVERIFY(untested.lrRuleReason.contains(QStringLiteral("Johnson et al. 2020")));
    }

    void criticalBatchChartMarksTheNoiseScale()
    {
        StudySnapshot s;
        s.targetAccuracy = 0.8;
        s.runs << run(1, 32, { 0.5, 0.7, 0.9 }, 96) << run(2, 32, { 0.4, 0.85 }, 96)
               << run(2, 64, { 0.3, 0.6, 0.9 }, 96);
        const QList<ChartSpec> charts = criticalBatchCharts(s);
        QCOMPARE(charts.size(), 1);
        const ChartSpec &c = charts.first();
        QCOMPARE(c.verticalLines.size(), 1);
        QCOMPARE(c.verticalLines.first().x, std::log2(96.0));
        QCOMPARE(c.series.size(), 2);
        const ChartSeries &predicted = c.series[0];
        // From a quarter of M0 = 32 to 16 × B_noise (1,536) at least, doubling; at M0 the
        // reference's 2.5 epochs.
        QCOMPARE(predicted.points.first().x(), 3.0);
        QVERIFY(predicted.points.last().x() >= std::log2(16 * 96.0));
        QCOMPARE(predicted.points.size(), predicted.errorBars.size());
        for (const QPointF &p : predicted.points)
            if (p.x() == 5.0)
                QCOMPARE(p.y(), 2.5);
        // Each run that reached the target, at its global batch.
        QCOMPARE(c.series[1].points.size(), 3);
        QVERIFY(c.series[1].points.contains(QPointF(7.0, 2 + 0.2 / 0.3)));
        // No target, no chart.
        s.targetAccuracy = kNotMeasured;
        QVERIFY(criticalBatchCharts(s).isEmpty());
    }

    void parsesDurations()
    {
        QCOMPARE(durationText(48), QStringLiteral("48 s"));
        QCOMPARE(durationText(192), QStringLiteral("3.2 min"));
        QCOMPARE(durationText(5040 * 2), QStringLiteral("2.8 h"));
    }
};

QTEST_APPLESS_MAIN(TestGoodputModel)
#include "tst_goodput_model.moc"
