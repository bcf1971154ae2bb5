// Gradient accumulation and elastic resizes in the training engine (issue 55), driven through
// scalelab-worker processes. A step averages K micro-batches, each its own shard of the
// epoch, augmentation and dropout draws, over however many ranks share them, with one
// all-reduce after the last; so 4 ranks, 2 ranks accumulating 2 and 1 rank accumulating 4 at
// the same global batch train to the same weights, and a 4-rank run that loses 2 ranks and
// goes on from its checkpoint on the other 2 (K kept at 4) ends where the uninterrupted run
// ends; checkpoints, bit-exact resume, fine-tuning, channels-last and bf16 keep working.
// Weights are compared from checkpoints with `scalelab-worker compare-weights`.
//
// The tolerance: mini-cnn (no BatchNorm) at lr 0.05 over 20 steps, where the ways differ only
// in the order floats are summed: measured max |Δw| 4.5e-7 (2 x 2) and 3.5e-7 (1 x 4) with
// AdaScale's gain in the loop, against max |w| 0.38, and 3e-8 of 0.29 for the elastic run
// (AMD EPYC, 2026-11-28); the tests allow 1e-4 of max |w|. Longer runs drift apart: a ReLU or
// max-pool that a rounding difference flips changes a gradient by far more than rounding
// (on SYNTHETIC shapes, 4 x 1 and 2 x 2 agree to 1e-7 for 8 steps, then jump to 1e-5 at step
// 9 and 7e-4 by step 40, while 2 x 2 and 1 x 4 still agree to 3e-8). A net with
// BatchNorm amplifies rounding early in training: the seed CNN's 4-rank run on one thread
// and on two differs by 2e-4 after 5 steps, as much as its 4 x 1 and 2 x 2 (1e-4); so the
// property is checked where it is the only difference (docs/training-engine.md).
#include "cifar10.h"
#include "cpu_features.h"
#include "test_support.h"
#include "verify_ok.h"
#include "worker_process.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <memory>
#include <vector>

#include "worker_channel.h"

using namespace scalelab;
using test::Worker;

namespace {

constexpr double kTolerance = 1e-4; // of the largest weight

// The two checkpoints' weights side by side (compare-weights' JSON line).
QJsonObject compareWeights(const QString &a, const QString &b)
{
    QProcess p;
    p.start(test::binary("scalelab-worker"),
        { QStringLiteral("compare-weights"), QStringLiteral("--model"), QStringLiteral("mini-cnn"),
            QStringLiteral("--checkpoint-dir"), a, QStringLiteral("--against"), b });
    if (!p.waitForFinished(test::timeLimit(60'000)) || p.exitCode() != 0) {
        qWarning("compare-weights: %s", p.readAllStandardError().constData());
        return {};
    }
    return QJsonDocument::fromJson(p.readAllStandardOutput()).object();
}

} // namespace

class TestAccumulation : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    QString m_data; // 400 train / 200 test images, SYNTHETIC patterns (learnt at once)

    // A run of `world` ranks on loopback, each with `extra` options; started, not waited for.
    std::vector<std::unique_ptr<Worker>> start(int world, const QStringList &extra, const QString &data = {})
    {
        const int port = test::freePort();
        std::vector<std::unique_ptr<Worker>> ranks;
        for (int r = 0; r < world; ++r)
            ranks.push_back(std::make_unique<Worker>(
                QStringList { QStringLiteral("train"), QStringLiteral("--data-dir"),
                    data.isEmpty() ? m_data : data, QStringLiteral("--model"), QStringLiteral("mini-cnn"),
                    QStringLiteral("--batch-size"), QStringLiteral("16"),
                    QStringLiteral("--max-train-images"), QStringLiteral("320"), QStringLiteral("--threads"),
                    QStringLiteral("1"), QStringLiteral("--network-probe"), QStringLiteral("off"),
                    QStringLiteral("--world-size"), QString::number(world), QStringLiteral("--rank"),
                    QString::number(r), QStringLiteral("--rendezvous"),
                    QStringLiteral("127.0.0.1:%1").arg(port) }
                + extra));
        return ranks;
    }

    // Runs `world` ranks to their end; rank 0's worker (its events) when all exit 0.
    std::unique_ptr<Worker> train(int world, const QStringList &extra, const QString &data = {})
    {
        auto ranks = start(world, extra, data);
        for (auto &rank : ranks)
            if (!rank->finish(test::endsWithin()) || rank->exitCode() != 0) {
                qWarning("rank failed: %s", qPrintable(rank->stderrText()));
                return {};
            }
        return std::move(ranks.front());
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_data = m_tmp.filePath(QStringLiteral("data"));
        VERIFY_OK(trainer::cifar::writeSyntheticDataset(m_data.toStdString(), 400, 200, 3));
    }

    void cleanupTestCase()
    {
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 10000);
    }

    // Issue 55 item 1's property: 4 ranks x 1, 2 x 2 and 1 x 4 at the global batch 64, the
    // same seed and data, train to the same weights over 20 steps (4 epochs of 5); with
    // AdaScale, whose gain comes from the noise scale measured with K = 4 in each.
    void fourRanksTwoAccumulatingTwoAndOneAccumulatingFourTrainAlike()
    {
        QHash<QString, QJsonObject> compared;
        const QStringList recipe = { QStringLiteral("--epochs"), QStringLiteral("4"), QStringLiteral("--lr"),
            QStringLiteral("0.05"), QStringLiteral("--lr-scaling"), QStringLiteral("adascale"),
            QStringLiteral("--base-batch"), QStringLiteral("16") };
        const QString four = m_tmp.filePath(QStringLiteral("w4a1"));
        auto reference = train(4, recipe + QStringList { QStringLiteral("--checkpoint-dir"), four });
        QVERIFY(reference);
        for (const auto &[world, accumulation] : { std::pair { 2, 2 }, { 1, 4 } }) {
            const QString dir = m_tmp.filePath(QStringLiteral("w%1a%2").arg(world).arg(accumulation));
            auto rank0 = train(world,
                recipe
                    + QStringList { QStringLiteral("--checkpoint-dir"), dir,
                        QStringLiteral("--accumulation-steps"), QString::number(accumulation) });
            QVERIFY(rank0);
            const auto started = rank0->events(QStringLiteral("started"));
            QCOMPARE(started.size(), 1);
            QCOMPARE(started[0].started().global_batch(), 64);
            QCOMPARE(started[0].started().effective().accumulation_steps(), accumulation);
            QCOMPARE(started[0].started().effective().batches_per_step(), 4);
            QCOMPARE(started[0].started().steps_per_epoch(), 5);
            const auto steps = rank0->events(QStringLiteral("step"));
            QCOMPARE(steps.size(), 20);
            // The noise scale takes the micro-batches as its small batches: K = 4 everywhere.
            QCOMPARE(steps.last().step().gradient_noise().batches_per_step(), 4);
            QVERIFY(steps.last().step().gradient_noise().b_simple() > 0);
            // The step's parts still add up to no more than the step.
            const auto &s = steps.last().step();
            QVERIFY(s.forward_seconds() + s.backward_seconds() + s.optimizer_seconds()
                <= s.step_seconds() * 1.01);
            const QJsonObject c = compareWeights(four, dir);
            QCOMPARE(c.value(QStringLiteral("step_a")).toInt(), 20);
            QCOMPARE(c.value(QStringLiteral("step_b")).toInt(), 20);
            const double diff = c.value(QStringLiteral("max_abs_diff")).toDouble(-1);
            const double largest = c.value(QStringLiteral("max_abs_weight")).toDouble();
            qInfo("%d ranks x %d: max |dw| %.3g of max |w| %.3g", world, accumulation, diff, largest);
            QVERIFY(largest > 0.01);
            QVERIFY2(diff >= 0 && diff <= kTolerance * largest,
                qPrintable(QStringLiteral("max |dw| %1 vs max |w| %2").arg(diff).arg(largest)));
        }
    }

    // Accumulation keeps the rest of the engine: 2 ranks x 2 stopped after epoch 2 and resumed
    // end bit for bit where the uninterrupted run does (checkpoints carry nothing of K that the
    // data order does not give back); channels-last with fine-tuning's two phases trains.
    void accumulatedRunResumesBitForBitAndKeepsEveryFeature()
    {
        const QStringList recipe = { QStringLiteral("--epochs"), QStringLiteral("3"),
            QStringLiteral("--accumulation-steps"), QStringLiteral("2") };
        auto whole = train(2, recipe);
        QVERIFY(whole);
        const QString dir = m_tmp.filePath(QStringLiteral("stopped"));
        QVERIFY(train(2,
            recipe
                + QStringList { QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--stop-after-epoch"),
                    QStringLiteral("2") }));
        auto resumed = train(2,
            recipe
                + QStringList { QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"),
                    QStringLiteral("on") });
        QVERIFY(resumed);
        QCOMPARE(resumed->events(QStringLiteral("started")).value(0).started().resumed_from_epoch(), 2);
        QCOMPARE(test::digest(*resumed).size(), 64);
        QCOMPARE(test::digest(*resumed), test::digest(*whole));

        // bf16 where the CPU has it (AVX-512 BF16 or AMX; fp32 said otherwise).
        const bool bf16 = trainer::cpu::hasBf16();
        auto finetuned = train(2,
            { QStringLiteral("--epochs"), QStringLiteral("2"), QStringLiteral("--accumulation-steps"),
                QStringLiteral("2"), QStringLiteral("--head-epochs"), QStringLiteral("1"),
                QStringLiteral("--channels-last"), QStringLiteral("on"), QStringLiteral("--precision"),
                bf16 ? QStringLiteral("bf16") : QStringLiteral("fp32") });
        QVERIFY(finetuned);
        QCOMPARE(finetuned->events(QStringLiteral("started")).value(0).started().effective().precision(),
            bf16 ? v1::BF16 : v1::FP32);
        qInfo("fine-tuning, channels-last and %s with 2 x 2", bf16 ? "bf16" : "fp32 (this CPU has no bf16)");
        const auto epochs = finetuned->events(QStringLiteral("epoch"));
        QCOMPARE(epochs.size(), 2);
        QVERIFY(epochs.last().epoch().test_accuracy() > 0.2); // SYNTHETIC patterns: learnt at once
        QCOMPARE(epochs.last().epoch().ranks_size(), 2);
        QCOMPARE(epochs.last().epoch().ranks(0).steps(), 5);
    }

    // Issue 55 item 3: 4 ranks lose 2 in epoch 2 (killed); the survivors fail their collective
    // and exit; the run goes on from epoch 1's checkpoint on 2 ranks with K = 4 (2 x 2) and
    // ends with the uninterrupted 4-rank run's weights, within the tolerance, and its test
    // accuracy within 0.5 pp.
    void elasticRunThatLosesTwoRanksEndsWithTheUninterruptedWeights()
    {
        // At lr 0.01 the patterns are not learnt yet (about 70 % after 4 epochs): the accuracy
        // compared is not a saturated one.
        const QStringList recipe = { QStringLiteral("--epochs"), QStringLiteral("4"), QStringLiteral("--lr"),
            QStringLiteral("0.01"), QStringLiteral("--collective-timeout-s"), QStringLiteral("30") };
        const QString whole = m_tmp.filePath(QStringLiteral("elastic-whole"));
        auto uninterrupted = train(4, recipe + QStringList { QStringLiteral("--checkpoint-dir"), whole });
        QVERIFY(uninterrupted);

        const QString dir = m_tmp.filePath(QStringLiteral("elastic"));
        {
            auto ranks = start(4, recipe + QStringList { QStringLiteral("--checkpoint-dir"), dir });
            // Rank 0 in epoch 2: its checkpoint of epoch 1 is committed.
            QTRY_VERIFY_WITH_TIMEOUT(
                [&] {
                    const auto steps = ranks[0]->events(QStringLiteral("step"));
                    return !steps.isEmpty() && steps.last().step().epoch() == 2;
                }(),
                test::endsWithin());
            ranks[2]->kill();
            ranks[3]->kill();
            for (int r : { 0, 1 }) {
                QVERIFY(ranks[std::size_t(r)]->finish(test::endsWithin()));
                QVERIFY(ranks[std::size_t(r)]->exitCode() != 0); // a lost peer fails the survivors
            }
        }
        auto shrunk = train(2,
            recipe
                + QStringList { QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"),
                    QStringLiteral("on"), QStringLiteral("--batches-per-step"), QStringLiteral("4") });
        QVERIFY(shrunk);
        const auto started = shrunk->events(QStringLiteral("started"));
        QCOMPARE(started.value(0).started().resumed_from_epoch(), 1);
        QCOMPARE(started.value(0).started().global_batch(), 64);
        QCOMPARE(shrunk->events(QStringLiteral("step")).first().step().step(), 6); // epoch 2's first
        const QJsonObject c = compareWeights(whole, dir);
        QCOMPARE(c.value(QStringLiteral("step_b")).toInt(), 20);
        const double diff = c.value(QStringLiteral("max_abs_diff")).toDouble(-1);
        const double largest = c.value(QStringLiteral("max_abs_weight")).toDouble();
        const double accuracy
            = shrunk->events(QStringLiteral("finished")).value(0).finished().final_test_accuracy();
        const double reference
            = uninterrupted->events(QStringLiteral("finished")).value(0).finished().final_test_accuracy();
        qInfo("4 ranks, 2 lost in epoch 2, on as 2 x 2: max |dw| %.3g of %.3g; accuracy %.4f vs %.4f", diff,
            largest, accuracy, reference);
        QVERIFY2(diff >= 0 && diff <= kTolerance * largest,
            qPrintable(QStringLiteral("max |dw| %1 vs max |w| %2").arg(diff).arg(largest)));
        QVERIFY(reference > 0.3 && reference < 0.95); // neither chance (0.1) nor saturated
        QVERIFY(std::abs(accuracy - reference) <= 0.005);
    }
};

QTEST_GUILESS_MAIN(TestAccumulation)
#include "tst_accumulation.moc"
