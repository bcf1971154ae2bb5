// The trainer's pure rules, without libtorch: which images each rank trains on in an epoch
// (remote-agent/trainer/data_shard.h, DistributedSampler's padding) and when a run has
// diverged (divergence_watch.h).
#include "data_shard.h"
#include "divergence_watch.h"
#include "verify_ok.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

using namespace scalelab::trainer;

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
            for (const std::int64_t size : { std::int64_t(1), std::int64_t(5), std::int64_t(50), std::int64_t(101) }) {
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
                                       .arg(size).arg(world).arg(index).arg(times)));
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
};

QTEST_GUILESS_MAIN(TestTrainerRules)
#include "tst_trainer_rules.moc"
