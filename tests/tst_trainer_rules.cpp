// The trainer's pure rules, without libtorch: which images each rank trains on in an epoch
// (remote-agent/trainer/data_shard.h, DistributedSampler's padding) and when a run has
// diverged (divergence_watch.h), and the gradient noise scale's estimators (noise_scale.h).
#include "data_shard.h"
#include "divergence_watch.h"
#include "noise_scale.h"
#include "verify_ok.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

using namespace scalelab::trainer;

namespace {

// Gradients of a known noise: the true gradient G (|G|² = 1) in `dims` dimensions, and a
// batch of b examples' mean gradient G + N(0, (σ²/b)·I), so that tr(Σ) = dims·σ² and
// B_simple = dims·σ².
struct KnownNoise {
    int dims = 50;
    double sigmaSquared = 2.0; // B_simple = 100
    std::mt19937_64 rng { 11 };
    std::vector<double> g = std::vector<double>(std::size_t(dims), 1.0 / std::sqrt(double(dims)));

    double bSimple() const { return dims * sigmaSquared; }

    std::vector<double> batchMean(int examples)
    {
        std::normal_distribution<double> noise(0.0, std::sqrt(sigmaSquared / examples));
        std::vector<double> out = g;
        for (double &x : out)
            x += noise(rng);
        return out;
    }
};

double squaredNorm(const std::vector<double> &v)
{
    double s = 0;
    for (double x : v)
        s += x * x;
    return s;
}

// One step of K ranks of b examples each: rank 0's |g_b|² and the averaged |g_B|².
std::pair<double, double> rankStep(KnownNoise &known, int ranks, int b)
{
    std::vector<double> total(std::size_t(known.dims), 0.0);
    double local = 0;
    for (int r = 0; r < ranks; ++r) {
        const auto mean = known.batchMean(b);
        if (r == 0)
            local = squaredNorm(mean);
        for (std::size_t i = 0; i < mean.size(); ++i)
            total[i] += mean[i] / ranks;
    }
    return { local, squaredNorm(total) };
}

} // namespace

class TestTrainerRules : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Ranks take every world-th index of one seeded permutation, padded (as
    // DistributedSampler pads) by repeating its start until every rank has as many.
    void shardsInterleaveOnePaddedPermutation()
    {
        const int world = 3;
        std::vector<std::vector<std::int64_t>> shards;
        for (int rank = 0; rank < world; ++rank)
            shards.push_back(shardForEpoch(10, 7, 2, rank, world));
        // Recorded: a resumed run must see the batches it would have seen, so the rule (and
        // the generator under it) may not change silently.
        QCOMPARE(shards[0], (std::vector<std::int64_t> { 1, 8, 5, 9 }));
        QCOMPARE(shards[1], (std::vector<std::int64_t> { 0, 3, 4, 1 }));
        QCOMPARE(shards[2], (std::vector<std::int64_t> { 7, 2, 6, 0 }));
        std::vector<std::int64_t> order;
        for (std::size_t i = 0; i < 4; ++i)
            for (int rank = 0; rank < world; ++rank)
                order.push_back(shards[std::size_t(rank)][i]);
        // The first 10 are a permutation of 0..9; the 2 of padding repeat its first 2.
        std::vector<std::int64_t> first(order.begin(), order.begin() + 10);
        std::sort(first.begin(), first.end());
        for (std::int64_t i = 0; i < 10; ++i)
            QCOMPARE(first[std::size_t(i)], i);
        QCOMPARE(order[10], order[0]);
        QCOMPARE(order[11], order[1]);
    }

    void oneRankGetsEveryImageOnce()
    {
        auto all = shardForEpoch(1000, 1, 1, 0, 1);
        QCOMPARE(all.size(), std::size_t(1000));
        std::sort(all.begin(), all.end());
        QVERIFY(std::adjacent_find(all.begin(), all.end()) == all.end());
        QCOMPARE(all.front(), std::int64_t(0));
        QCOMPARE(all.back(), std::int64_t(999));
    }

    // Every rank the same number (no rank waits at an all-reduce the others skipped), every
    // image seen at least once and the padding spread round-robin (a set smaller than the
    // world repeats whole, as DistributedSampler repeats it); divisible sizes have no padding.
    void shardsAreEvenAndCoverTheSet()
    {
        for (const int world : { 2, 3, 4, 7, 8 }) {
            for (const std::int64_t size :
                { std::int64_t(1), std::int64_t(5), std::int64_t(50), std::int64_t(101) }) {
                std::map<std::int64_t, int> seen;
                const auto perRank = std::size_t((size + world - 1) / world);
                for (int rank = 0; rank < world; ++rank) {
                    const auto shard = shardForEpoch(size, 3, 1, rank, world);
                    QCOMPARE(shard.size(), perRank);
                    for (auto i : shard) {
                        QVERIFY(i >= 0 && i < size);
                        ++seen[i];
                    }
                }
                QCOMPARE(std::int64_t(seen.size()), size);
                const auto padded = std::int64_t(perRank) * world;
                const int most = int((padded + size - 1) / size), fewest = int(padded / size);
                for (const auto &[index, times] : seen)
                    QVERIFY2(times >= fewest && times <= most,
                        qPrintable(QStringLiteral("size %1, world %2: index %3 seen %4 times")
                                       .arg(size)
                                       .arg(world)
                                       .arg(index)
                                       .arg(times)));
                if (size % world == 0)
                    for (const auto &[index, times] : seen)
                        QCOMPARE(times, 1);
            }
        }
    }

    // The same (seed, epoch) gives the same shard on every call (every rank computes it
    // alone); another epoch or seed reshuffles.
    void epochsReshuffleAndSeedsDecide()
    {
        QCOMPARE(shardForEpoch(500, 11, 4, 1, 2), shardForEpoch(500, 11, 4, 1, 2));
        QVERIFY(shardForEpoch(500, 11, 4, 1, 2) != shardForEpoch(500, 11, 5, 1, 2));
        QVERIFY(shardForEpoch(500, 11, 4, 1, 2) != shardForEpoch(500, 12, 4, 1, 2));
    }

    // A non-finite loss diverges at once; a loss above factor x the reference (the first
    // loss, at least ln 10) for `steps` steps in a row diverges; a dip resets the count.
    void divergenceNeedsStepsInARowAboveTheBound()
    {
        DivergenceWatch nan(4, 3);
        VERIFY_OK(nan.observe(1, 2.0));
        const scalelab::common::Status said = nan.observe(2, std::numeric_limits<double>::quiet_NaN());
        QVERIFY(!said.ok());
        QCOMPARE(QString::fromStdString(said.error()),
            QStringLiteral("diverged at step 2 (loss nan): lower the learning rate or lengthen the warm-up"));
        const scalelab::common::Status infinite
            = DivergenceWatch(4, 3).observe(7, std::numeric_limits<double>::infinity());
        QVERIFY(!infinite.ok());
        QVERIFY(QString::fromStdString(infinite.error())
                    .startsWith(QLatin1String("diverged at step 7 (loss inf)")));

        // Reference max(1.0, ln 10 = 2.302585...) = ln 10: the bound is 4 ln 10 = 9.21.
        DivergenceWatch watch(4, 3);
        VERIFY_OK(watch.observe(1, 1.0));
        VERIFY_OK(watch.observe(2, 9.3));
        VERIFY_OK(watch.observe(3, 9.3));
        VERIFY_OK(watch.observe(4, 9.0)); // below the bound: the count starts again
        VERIFY_OK(watch.observe(5, 9.3));
        VERIFY_OK(watch.observe(6, 9.3));
        const scalelab::common::Status diverged = watch.observe(7, 9.3);
        QVERIFY(!diverged.ok());
        QVERIFY2(QString::fromStdString(diverged.error())
                     .startsWith(QLatin1String("diverged at step 7 (loss 9.3, above 4 x the starting 2.30")),
            diverged.error().c_str());

        // A resumed run whose first loss is high is held to its own reference.
        DivergenceWatch high(2, 1);
        VERIFY_OK(high.observe(1, 5.0));
        VERIFY_OK(high.observe(2, 10.0)); // not above 2 x 5
        QVERIFY(!high.observe(3, 10.5).ok());
    }
    // The two-batch estimator recovers a known B_simple (within 5 % over 4,000 steps) for
    // several rank counts and batches; planted errors (the K − 1 dropped, norms not squared)
    // miss it by far more, so the check can fail.
    void noiseScaleOfAKnownNoiseIsRecovered()
    {
        for (const auto &[ranks, batch] : { std::pair { 2, 8 }, { 4, 8 }, { 4, 32 }, { 3, 16 } }) {
            KnownNoise known;
            NoiseScaleAverage average(0.999), droppedKMinusOne(0.999), unsquared(0.999);
            for (int step = 0; step < 4000; ++step) {
                const auto [local, total] = rankStep(known, ranks, batch);
                const auto sample = twoBatchSample(local, batch, total, double(batch) * ranks);
                QVERIFY(sample);
                average.add(*sample);
                // |G|² as (K·total − local)/K, the K − 1 dropped: B_simple K/(K − 1) too large.
                droppedKMinusOne.add(
                    { .gradSquared = (ranks * total - local) / ranks, .traceSigma = sample->traceSigma });
                unsquared.add(
                    *twoBatchSample(std::sqrt(local), batch, std::sqrt(total), double(batch) * ranks));
            }
            const double expected = known.bSimple();
            const double measured = *average.bSimple();
            QVERIFY2(std::abs(measured / expected - 1) < 0.05,
                qPrintable(QStringLiteral("%1 ranks x %2: B_simple %3, expected %4")
                               .arg(ranks)
                               .arg(batch)
                               .arg(measured)
                               .arg(expected)));
            qInfo("%d ranks x %d: B_simple %.1f (expected %.0f); planted errors give %.1f and %.1f", ranks,
                batch, measured, expected, *droppedKMinusOne.bSimple(), *unsquared.bSimple());
            QVERIFY(std::abs(*droppedKMinusOne.bSimple() / expected - 1) > 0.2);
            QVERIFY(std::abs(*unsquared.bSimple() / expected - 1) > 0.2);
            QCOMPARE(average.samples(), 4000);
        }
    }

    // One rank: consecutive steps' gradients as the two samples (the gradient here does not
    // move, so the differenced estimator is unbiased).
    void differencedNoiseScaleOfAKnownNoiseIsRecovered()
    {
        KnownNoise known;
        NoiseScaleAverage average(0.999);
        std::vector<double> previous = known.batchMean(16);
        for (int step = 0; step < 4000; ++step) {
            const auto current = known.batchMean(16);
            double dot = 0, difference = 0;
            for (std::size_t i = 0; i < current.size(); ++i) {
                dot += current[i] * previous[i];
                difference += (current[i] - previous[i]) * (current[i] - previous[i]);
            }
            average.add(*differencedSample(dot, difference, 16));
            previous = current;
        }
        QVERIFY2(std::abs(*average.bSimple() / known.bSimple() - 1) < 0.05,
            qPrintable(QString::number(*average.bSimple())));
    }

    // Samples are averaged unclipped (a negative |G|² estimate counts as it is), the averages
    // are bias-corrected (the first sample is the average), and B_simple is the ratio of the
    // averages, unknown while the averaged |G|² is not positive.
    void noiseAveragesAreBiasCorrectedAndUnclipped()
    {
        NoiseScaleAverage average(0.9);
        QVERIFY(!average.bSimple());
        average.add({ .gradSquared = -1.0, .traceSigma = 30.0 });
        QCOMPARE(average.gradSquared(), -1.0);
        QCOMPARE(average.traceSigma(), 30.0);
        QVERIFY(!average.bSimple()); // the gradient is lost in its noise
        average.add({ .gradSquared = 3.0, .traceSigma = 10.0 });
        // Weights 0.09 and 0.1 over their sum 0.19.
        QVERIFY(std::abs(average.gradSquared() - (-0.09 + 0.3) / 0.19) < 1e-12);
        QVERIFY(std::abs(average.traceSigma() - (2.7 + 1.0) / 0.19) < 1e-12);
        QVERIFY(std::abs(*average.bSimple() - 3.7 / 0.21) < 1e-9);
        // A checkpoint carries the whole state: restored, the averages go on as if never stopped.
        NoiseScaleAverage restored(0.9);
        restored.restore(average.state());
        average.add({ .gradSquared = 5.0, .traceSigma = 2.0 });
        restored.add({ .gradSquared = 5.0, .traceSigma = 2.0 });
        QCOMPARE(restored.samples(), 3);
        QCOMPARE(restored.gradSquared(), average.gradSquared());
        QCOMPARE(*restored.bSimple(), *average.bSimple());
        // Batches that cannot be told apart, or norms that are not numbers, give no sample.
        QVERIFY(!twoBatchSample(1.0, 8, 0.5, 8));
        QVERIFY(!twoBatchSample(1.0, 0, 0.5, 8));
        QVERIFY(!twoBatchSample(std::nan(""), 8, 0.5, 16));
        QVERIFY(!differencedSample(std::numeric_limits<double>::infinity(), 1.0, 8));
        // Exactly: E|g_b|² = |G|² + tr(Σ)/b with |G|² = 2, tr(Σ) = 64, b = 8, B = 32.
        const auto exact = twoBatchSample(2.0 + 64.0 / 8, 8, 2.0 + 64.0 / 32, 32);
        QVERIFY(exact);
        QVERIFY(std::abs(exact->gradSquared - 2.0) < 1e-12);
        QVERIFY(std::abs(exact->traceSigma - 64.0) < 1e-12);
    }
};

QTEST_GUILESS_MAIN(TestTrainerRules)
#include "tst_trainer_rules.moc"
