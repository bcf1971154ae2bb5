// The training engine's data parallelism, through scalelab-worker processes: the gradients two
// ranks all-reduce equal one process's on the whole batch (every built-in model), a dead rank is
// noticed, an advertised address no interface holds falls back to the routed one, 2 workers
// learn as well as 1 at the same global batch, and the noise scale is measured through c10d.
#include "blas_kernel.h"
#include "cifar10.h"
#include "cpu_features.h"
#include "test_support.h"
#include "trainer_bench.h"
#include "verify_ok.h"
#include "worker_process.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <sched.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "spec_rules.h"
#include "worker_channel.h"
#include "worker_contract.h"

using namespace scalelab;
using test::digest;
using test::heavyTrainingLimitMs;
using test::Worker;

class TestTrainerParallel : public QObject, public test::TrainerBench {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { makeSets(); }

    void cleanupTestCase() { checkNothingLeft(); }

    // For each built-in model (issue 36): the gradients two ranks all-reduce equal those of
    // one process on the whole batch.
    void dataParallelGradientsEqualOneProcessOnTheWholeBatch_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tensors"); // parameter tensors compared
        QTest::newRow("seed-cnn") << "seed-cnn" << 28;
        QTest::newRow("resnet18") << "resnet18" << 62;
        QTest::newRow("mobilenet_v2") << "mobilenet_v2" << 158;
    }

    void dataParallelGradientsEqualOneProcessOnTheWholeBatch()
    {
        QFETCH(QString, model);
        QFETCH(int, tensors);
        const int storePort = test::freePort(); // for a TCPStore, freed just before the worker binds it
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
        auto args = [&](int rank) {
            return QStringList { QStringLiteral("gradient-check"), QStringLiteral("--data-dir"), m_small,
                QStringLiteral("--batch-size"), QStringLiteral("16"), QStringLiteral("--world-size"),
                QStringLiteral("2"), QStringLiteral("--rank"), QString::number(rank),
                QStringLiteral("--rendezvous"), rendezvous, QStringLiteral("--threads"), QStringLiteral("1"),
                QStringLiteral("--model"), model };
        };
        Worker rank0(args(0)), rank1(args(1));
        QVERIFY(rank0.finish(heavyTrainingLimitMs()) && rank1.finish(heavyTrainingLimitMs()));
        QCOMPARE(rank0.exitCode(), 0);
        QCOMPARE(rank1.exitCode(), 0);
        const auto check = rank0.events(QStringLiteral("gradient_check"));
        QCOMPARE(check.size(), 1);
        const double diff = check[0].gradient_check().max_abs_diff();
        const double grad = check[0].gradient_check().max_abs_grad();
        QCOMPARE(check[0].gradient_check().tensors(), tensors);
        QVERIFY(grad > 1e-4); // a real gradient was compared
        qInfo("%s: max |diff| %.3g, max |grad| %.3g", qPrintable(model), diff, grad);
        QVERIFY2(diff <= 1e-5 * grad,
            qPrintable(QStringLiteral("max |diff| %1 vs max |grad| %2").arg(diff).arg(grad)));
    }

    void deadRankMakesTheOthersExitWithAnError()
    {
        const int storePort = test::freePort();
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
        auto args = [&](int rank) {
            return small({ QStringLiteral("--epochs"), QStringLiteral("50"), QStringLiteral("--world-size"),
                QStringLiteral("2"), QStringLiteral("--rank"), QString::number(rank),
                QStringLiteral("--rendezvous"), rendezvous, QStringLiteral("--collective-timeout-s"),
                QStringLiteral("20") });
        };
        Worker rank0(args(0)), rank1(args(1));
        QVERIFY(rank0.waitFor(QStringLiteral("step"), test::endsWithin()));
        QElapsedTimer timer;
        timer.start();
        rank1.kill();
        QVERIFY2(rank0.finish(60000), "rank 0 hung after its peer died");
        QVERIFY(timer.elapsed() < 45000);
        QVERIFY(rank0.exitCode() != 0);
        const auto errors = rank0.events(QStringLiteral("error"));
        QCOMPARE(errors.size(), 1);
        QVERIFY(!errors[0].error().message().empty());
    }

    // The address an agent advertises may be one no interface here holds (NAT'ed, floating);
    // it cannot be bound, so the ranks fall back to the address on the route to the
    // rendezvous and train. Before bf8f0cc Gloo failed to bind it and the run failed.
    // 192.0.2.7 is TEST-NET-1 (RFC 5737): on no interface of a test machine.
    void unboundAdvertisedAddressFallsBackToTheRoutedOne()
    {
        const int storePort = test::freePort();
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
        auto args = [&](int rank) {
            return small(
                { QStringLiteral("--epochs"), QStringLiteral("1"), QStringLiteral("--max-train-images"),
                    QStringLiteral("64"), QStringLiteral("--max-test-images"), QStringLiteral("32"),
                    QStringLiteral("--world-size"), QStringLiteral("2"), QStringLiteral("--rank"),
                    QString::number(rank), QStringLiteral("--rendezvous"), rendezvous,
                    QStringLiteral("--bind-address"), QStringLiteral("192.0.2.7"),
                    QStringLiteral("--collective-timeout-s"), QStringLiteral("60") });
        };
        Worker rank0(args(0)), rank1(args(1));
        QVERIFY2(
            rank0.finish(test::endsWithin()) && rank1.finish(test::endsWithin()), "the ranks did not end");
        const QString said = rank0.stderrText();
        QVERIFY2(rank0.exitCode() == 0 && rank1.exitCode() == 0,
            qPrintable(
                QStringLiteral("exit %1 and %2: %3").arg(rank0.exitCode()).arg(rank1.exitCode()).arg(said)));
        QVERIFY2(said.contains(QStringLiteral("no interface here holds 192.0.2.7")), qPrintable(said));
        QCOMPARE(rank0.events(QStringLiteral("finished")).size(), 1);
    }

    void twoWorkersLearnAsWellAsOneAtTheSameGlobalBatch()
    {
        const QStringList common = { QStringLiteral("train"), QStringLiteral("--data-dir"), m_learnable,
            QStringLiteral("--epochs"), QStringLiteral("3"), QStringLiteral("--warmup-epochs"),
            QStringLiteral("0.5") };
        Worker baseline(common
            + QStringList { QStringLiteral("--batch-size"), QStringLiteral("64"), QStringLiteral("--threads"),
                QStringLiteral("2") });
        QVERIFY(baseline.finish(heavyTrainingLimitMs()));
        QCOMPARE(baseline.exitCode(), 0);
        const int storePort = test::freePort();
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
        auto args = [&](int rank) {
            return common
                + QStringList { QStringLiteral("--batch-size"), QStringLiteral("32"),
                      QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--world-size"),
                      QStringLiteral("2"), QStringLiteral("--rank"), QString::number(rank),
                      QStringLiteral("--rendezvous"), rendezvous };
        };
        Worker rank0(args(0)), rank1(args(1));
        QVERIFY(rank0.finish(test::endsWithin()) && rank1.finish(test::endsWithin()));
        QCOMPARE(rank0.exitCode(), 0);
        QCOMPARE(rank1.exitCode(), 0);
        QCOMPARE(digest(rank0), digest(rank1)); // one model on every rank
        // Every step says where its time went and how large its gradients were: on one rank
        // nothing waits for an all-reduce; on two, the exposed wait is part of the step.
        for (const auto &e : baseline.events(QStringLiteral("step"))) {
            QVERIFY(e.step().grad_norm() > 0 && std::isfinite(e.step().grad_norm()));
            QVERIFY(e.step().step_seconds() > 0);
            QCOMPARE(e.step().exposed_allreduce_seconds(), 0.0);
        }
        double waited = 0;
        for (const auto &e : rank0.events(QStringLiteral("step"))) {
            QVERIFY(e.step().grad_norm() > 0);
            QVERIFY(e.step().exposed_allreduce_seconds() >= 0
                && e.step().exposed_allreduce_seconds() < e.step().step_seconds());
            waited += e.step().exposed_allreduce_seconds();
        }
        QVERIFY(waited > 0); // the last bucket's all-reduce, at least, is never hidden
        QVERIFY(rank1.events(QStringLiteral("step")).isEmpty()); // rank 0 speaks for the run
        // How the ranks shared this machine's cores (RunStarted.core_share): one machine, the
        // two ranks' one thread each, the cores they may run on (the affinity's, or fewer
        // under a cgroup's CPU quota).
        cpu_set_t affinity;
        CPU_ZERO(&affinity);
        QCOMPARE(sched_getaffinity(0, sizeof affinity, &affinity), 0);
        const v1::CoreShare share = rank0.events(QStringLiteral("started")).first().started().core_share();
        QCOMPARE(share.machines(), 1);
        QCOMPARE(share.threads(), 2);
        QVERIFY(share.cores() > 0 && share.cores() <= CPU_COUNT(&affinity));
        const v1::CoreShare alone = baseline.events(QStringLiteral("started")).first().started().core_share();
        QCOMPARE(alone.machines(), 1);
        QCOMPARE(alone.threads(), 2);
        QCOMPARE(alone.cores(), share.cores());
        const auto base = baseline.events(QStringLiteral("epoch")).last();
        const auto dist = rank0.events(QStringLiteral("epoch")).last();
        QCOMPARE(dist.epoch().test_images(), 500); // each test image once
        const double a = base.epoch().test_accuracy();
        const double b = dist.epoch().test_accuracy();
        qInfo("test accuracy: 1 worker %.4f, 2 workers %.4f", a, b);
        QVERIFY2(
            std::abs(a - b) <= 0.02, qPrintable(QStringLiteral("1 worker %1 vs 2 workers %2").arg(a).arg(b)));
        QVERIFY(a > 0.5); // it learned
    }

    // Issue 36: OpenBLAS's detection falls back to its generic Prescott kernel on CPUs newer
    // than it knows; the worker runs the best kernel the CPU's flags allow, says which, and
    // keeps a kernel the user names with OPENBLAS_CORETYPE.
    // Issue 54 item 2: the gradient noise scale of a known noise, measured through the
    // worker's real c10d path (noise-check: linear regression, d = 100, |Δ|² = σ² = 1, the
    // weights frozen, so B_simple = 201 exactly) with 1, 2 and 4 ranks and batches of 8 and 32,
    // agrees within 5 %. The steps make the estimator's standard error at most ~1.7 % (a
    // simulation of each case; batch 8 is the noisiest); the draws are seeded, so the result is
    // the same on every run. Planted errors in the arithmetic (a dropped K − 1, norms not
    // squared) miss by 30 % and more: tst_trainer_rules.noiseScaleOfAKnownNoiseIsRecovered.
    void knownNoiseScaleIsMeasuredThroughC10d()
    {
        const struct {
            int ranks, batch, steps;
        } cases[] = { { 1, 8, 24000 }, { 1, 32, 4000 }, { 2, 8, 24000 }, { 2, 32, 4000 }, { 4, 8, 8000 },
            { 4, 32, 4000 } };
        for (const auto &c : cases) {
            const int storePort = test::freePort();
            QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
            std::vector<std::unique_ptr<Worker>> ranks;
            for (int rank = 0; rank < c.ranks; ++rank)
                ranks.push_back(std::make_unique<Worker>(QStringList { QStringLiteral("noise-check"),
                    QStringLiteral("--batch-size"), QString::number(c.batch), QStringLiteral("--steps"),
                    QString::number(c.steps), QStringLiteral("--world-size"), QString::number(c.ranks),
                    QStringLiteral("--rank"), QString::number(rank), QStringLiteral("--rendezvous"),
                    QStringLiteral("127.0.0.1:%1").arg(storePort), QStringLiteral("--threads"),
                    QStringLiteral("1") }));
            for (auto &w : ranks) {
                QVERIFY(w->finish(test::endsWithin()));
                QCOMPARE(w->exitCode(), 0);
            }
            ranks[0]->events();
            QJsonObject result;
            for (const QByteArray &line : ranks[0]->lines())
                if (const auto doc = QJsonDocument::fromJson(line);
                    doc.isObject() && doc.object().contains(u"bSimple"))
                    result = doc.object();
            QVERIFY2(!result.isEmpty(), "rank 0 printed no result");
            const double measured = result[u"bSimple"].toDouble();
            qInfo("%d rank(s) x %d, %d steps: B_simple %.1f (exact %.0f)", c.ranks, c.batch, c.steps,
                measured, result[u"exact"].toDouble());
            QCOMPARE(result[u"exact"].toDouble(), 201.0);
            QVERIFY2(std::abs(measured / 201.0 - 1) < 0.05,
                qPrintable(QStringLiteral("%1 rank(s) x %2: B_simple %3, not within 5 % of 201")
                               .arg(c.ranks)
                               .arg(c.batch)
                               .arg(measured)));
            QCOMPARE(result[u"batchesPerStep"].toInt(), c.ranks);
            QCOMPARE(result[u"differenced"].toBool(), c.ranks == 1); // one rank: consecutive steps
        }
    }
};

QTEST_GUILESS_MAIN(TestTrainerParallel)
#include "tst_trainer_parallel.moc"
