// The training engine's recipe, through scalelab-worker processes: dropout rates are options,
// the defaults learn a hard set the old ones do not (results.md's evidence), divergence ends a
// run saying where, the learning-rate rules scale with the global batch (sqrt, AdaScale's
// measured gain), and the learning-rate finder proposes a rate.
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

#include <algorithm>
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

class TestTrainerRecipe : public QObject, public test::TrainerBench {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { makeSets(); }

    void cleanupTestCase() { checkNothingLeft(); }

    // The seed CNN's dropout rates are options: off (0 and 0) the same weights train to a
    // different loss; the defaults are today's 0.25 and 0.5, given or not, bit for bit.
    void dropoutRatesAreOptions()
    {
        const QStringList zero = { QStringLiteral("--block-dropout"), QStringLiteral("0"),
            QStringLiteral("--dense-dropout"), QStringLiteral("0") };
        const QStringList given = { QStringLiteral("--block-dropout"), QStringLiteral("0.25"),
            QStringLiteral("--dense-dropout"), QStringLiteral("0.5") };
        Worker defaults(small({})), off(small(zero)), explicitDefaults(small(given));
        QVERIFY(defaults.finish(test::endsWithin()) && off.finish(test::endsWithin())
            && explicitDefaults.finish(test::endsWithin()));
        QCOMPARE(defaults.exitCode(), 0);
        QCOMPARE(off.exitCode(), 0);
        QCOMPARE(explicitDefaults.exitCode(), 0);
        const v1::RunSpec recipe = defaults.events(QStringLiteral("started")).value(0).started().effective();
        QCOMPARE(recipe.block_dropout(), 0.25);
        QCOMPARE(recipe.dense_dropout(), 0.5);
        QCOMPARE(recipe.block_dropout(), rules::kDefaultBlockDropout); // the agent's defaults
        QCOMPARE(recipe.dense_dropout(), rules::kDefaultDenseDropout);
        QCOMPARE(recipe.stop_after_epochs(), 0);
        const v1::RunSpec offRecipe = off.events(QStringLiteral("started")).value(0).started().effective();
        QVERIFY(offRecipe.has_block_dropout() && offRecipe.block_dropout() == 0);
        QVERIFY(offRecipe.has_dense_dropout() && offRecipe.dense_dropout() == 0);
        const double withDropout = defaults.events(QStringLiteral("epoch")).value(0).epoch().train_loss();
        const double without = off.events(QStringLiteral("epoch")).value(0).epoch().train_loss();
        QVERIFY2(std::isfinite(without) && without != withDropout,
            qPrintable(
                QStringLiteral("train loss %1 with dropout, %2 without").arg(withDropout).arg(without)));
        QCOMPARE(digest(explicitDefaults), digest(defaults));
    }

    // The evidence behind the default recipe, kept true: on the generated "shapes" set (one a
    // linear model cannot separate), the defaults (lr 0.02, a 1-epoch warm-up) learn in 3
    // epochs, while the old defaults (lr 0.05, no warm-up) stay at chance. Same data and
    // seeds as bench/defaults_sweep.sh (TRAIN=5000), whose table is in docs/results.md.
    void defaultsLearnAHardSetWhereTheOldOnesDoNot()
    {
        const QString data = m_tmp.filePath(QStringLiteral("shapes"));
        VERIFY_OK(trainer::cifar::writeSyntheticDataset(
            data.toStdString(), 5000, 2000, 11, trainer::cifar::SyntheticKind::Shapes));
        const QStringList common = { QStringLiteral("train"), QStringLiteral("--data-dir"), data,
            QStringLiteral("--epochs"), QStringLiteral("3"), QStringLiteral("--threads"), QStringLiteral("1"),
            QStringLiteral("--max-test-images"), QStringLiteral("1000") };
        Worker defaults(common);
        Worker old(common
            + QStringList { QStringLiteral("--lr"), QStringLiteral("0.05"), QStringLiteral("--warmup-epochs"),
                QStringLiteral("0") });
        QVERIFY(defaults.finish(heavyTrainingLimitMs()) && old.finish(heavyTrainingLimitMs()));
        QCOMPARE(defaults.exitCode(), 0);
        QCOMPARE(old.exitCode(), 0);
        const double good = defaults.events(QStringLiteral("epoch")).last().epoch().test_accuracy();
        const double bad = old.events(QStringLiteral("epoch")).last().epoch().test_accuracy();
        qInfo("shapes, 3 epochs: defaults %.3f, lr 0.05 without warm-up %.3f", good, bad);
        QVERIFY2(good >= 0.85, qPrintable(QString::number(good)));
        QVERIFY2(bad <= 0.3, qPrintable(QString::number(bad)));
        // The worker's defaults are the agent's (proto/rules/spec_rules.h).
        const v1::RunStarted started = defaults.events(QStringLiteral("started")).first().started();
        const v1::RunSpec &recipe = started.effective();
        QCOMPARE(recipe.learning_rate(), rules::kDefaultLearningRate);
        QCOMPARE(recipe.momentum(), rules::kDefaultMomentum);
        QCOMPARE(recipe.weight_decay(), rules::kDefaultWeightDecay);
        QCOMPARE(recipe.warmup_epochs(), rules::kDefaultWarmupEpochs);
        QCOMPARE(recipe.divergence_factor(), rules::kDefaultDivergenceFactor);
        QCOMPARE(recipe.divergence_steps(), rules::kDefaultDivergenceSteps);
        // Normalised with the set's own statistics, measured as the agent measures them.
        const auto stats = trainer::cifar::measureDataset(data.toStdString());
        VERIFY_OK(stats);
        QCOMPARE(started.normalize_measured(), true);
        QCOMPARE(started.normalize_mean_size(), 3);
        QCOMPARE(float(started.normalize_mean(0)), float(stats->mean[0]));
    }

    // A loss that is not finite ends the run at once, as diverged, with its own exit code.
    void divergenceEndsTheRunSayingWhere()
    {
        Worker w(small({ QStringLiteral("--lr"), QStringLiteral("1000"), QStringLiteral("--warmup-epochs"),
            QStringLiteral("0"), QStringLiteral("--epochs"), QStringLiteral("2") }));
        QVERIFY(w.finish(test::endsWithin()));
        QCOMPARE(w.exitCode(), worker::kExitDiverged);
        const auto errors = w.events(QStringLiteral("error"));
        QCOMPARE(errors.size(), 1);
        QVERIFY(errors[0].error().diverged());
        const QString message = QString::fromStdString(errors[0].error().message());
        QVERIFY2(message.startsWith(QLatin1String("diverged at step ")), qPrintable(message));
        QVERIFY(w.events(QStringLiteral("finished")).isEmpty());
        // A loss stuck above the bound for the given steps is divergence too.
        Worker stuck(small({ QStringLiteral("--divergence-factor"), QStringLiteral("1.0001"),
            QStringLiteral("--divergence-steps"), QStringLiteral("1"), QStringLiteral("--lr"),
            QStringLiteral("5"), QStringLiteral("--warmup-epochs"), QStringLiteral("0") }));
        QVERIFY(stuck.finish(test::endsWithin()));
        QCOMPARE(stuck.exitCode(), worker::kExitDiverged);
        // Infinite and NaN learning rates never get that far.
        for (const char *lr : { "inf", "nan", "-1" }) {
            Worker refused(small({ QStringLiteral("--lr"), QLatin1String(lr) }));
            QVERIFY(refused.finish(30'000));
            QCOMPARE(refused.exitCode(), worker::kExitUsage);
        }
    }

    // The rules at a global batch 4 times the base batch (32 images against --base-batch 8):
    // sqrt doubles the rate; adascale multiplies the schedule's, at the run's progress P (the
    // sum of the gains, in base batches), by a gain r in [1, 4] that each step reports, the
    // same on every rank; and P survives a stop and resume.
    void lrRulesScaleWithTheGlobalBatch()
    {
        const auto args = [&](int batch, const QStringList &extra) {
            return QStringList { QStringLiteral("train"), QStringLiteral("--data-dir"), m_small,
                QStringLiteral("--batch-size"), QString::number(batch), QStringLiteral("--threads"),
                QStringLiteral("1"), QStringLiteral("--base-batch"), QStringLiteral("8"),
                QStringLiteral("--lr"), QStringLiteral("0.02"), QStringLiteral("--warmup-epochs"),
                QStringLiteral("0") }
            + extra;
        };
        const double base = 0.02, scale = 4;
        Worker sqrtRun(args(32,
            { QStringLiteral("--lr-scaling"), QStringLiteral("sqrt"), QStringLiteral("--schedule"),
                QStringLiteral("constant") }));
        const QString dir = m_tmp.filePath(QStringLiteral("ck-adascale"));
        const QStringList adaScale = { QStringLiteral("--lr-scaling"), QStringLiteral("adascale"),
            QStringLiteral("--epochs"), QStringLiteral("2"), QStringLiteral("--checkpoint-dir"), dir };
        Worker stopped(
            args(32, adaScale + QStringList { QStringLiteral("--stop-after-epoch"), QStringLiteral("1") }));
        QVERIFY(sqrtRun.finish(test::endsWithin()) && stopped.finish(test::endsWithin()));
        QCOMPARE(sqrtRun.exitCode(), 0);
        QCOMPARE(stopped.exitCode(), 0);
        QCOMPARE(sqrtRun.events(QStringLiteral("started")).value(0).started().peak_learning_rate(), 2 * base);
        const auto sqrtSteps = sqrtRun.events(QStringLiteral("step"));
        QCOMPARE(sqrtSteps.size(), 8);
        for (const auto &e : sqrtSteps) {
            QCOMPARE(e.step().learning_rate(), 2 * base); // x sqrt(32 / 8)
            QVERIFY(e.step().has_lr_gain());
            QCOMPARE(e.step().lr_gain(), 1.0);
        }

        // Cosine over 2 epochs of 8 steps, evaluated at P / S of them, times the step's r.
        double progress = 0;
        bool gained = false;
        const auto checkAdaScaleSteps = [&](Worker &w, int count, bool resumed) {
            const auto steps = w.events(QStringLiteral("step"));
            QCOMPARE(steps.size(), count);
            for (const auto &e : steps) {
                const double r = e.step().lr_gain();
                QVERIFY2(e.step().has_lr_gain() && r >= 1 && r <= scale,
                    qPrintable(QStringLiteral("step %1: gain %2").arg(e.step().step()).arg(r)));
                const double expected
                    = base * 0.5 * (1 + std::cos(std::numbers::pi * progress / scale / 16)) * r;
                QVERIFY2(std::abs(e.step().learning_rate() / expected - 1) < 1e-9,
                    qPrintable(QStringLiteral("step %1: lr %2, expected %3 at progress %4, gain %5")
                                   .arg(e.step().step())
                                   .arg(e.step().learning_rate(), 0, 'g', 17)
                                   .arg(expected, 0, 'g', 17)
                                   .arg(progress)
                                   .arg(r)));
                progress += r;
                gained = gained || r > 1;
            }
            if (!resumed) {
                QCOMPARE(steps.value(0).step().lr_gain(), 1.0); // no noise measured yet
            } else {
                // The checkpoint carried the noise scale's averages: the gain goes on from them,
                // and the averages keep the samples taken before the stop.
                QVERIFY2(steps.value(0).step().lr_gain() > 1,
                    qPrintable(QString::number(steps.value(0).step().lr_gain())));
                QVERIFY(steps.value(0).step().gradient_noise().samples() >= 7);
            }
        };
        checkAdaScaleSteps(stopped, 8, false);
        QVERIFY(gained); // the noise of 8-image batches is measured
        QVERIFY(progress < 8 * scale); // less than the linear rule's: the schedule went slower
        Worker resumed(args(32, adaScale + QStringList { QStringLiteral("--resume"), QStringLiteral("on") }));
        QVERIFY(resumed.finish(test::endsWithin()));
        QCOMPARE(resumed.exitCode(), 0);
        QCOMPARE(resumed.events(QStringLiteral("started")).value(0).started().resumed_from_epoch(), 1);
        checkAdaScaleSteps(resumed, 8, true); // from the checkpoint's progress, not from 8 steps x 4

        // Two ranks of 16: the ranks take the same gains, so they train one model.
        const int storePort = test::freePort();
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const auto rank = [&](int r) {
            return args(16,
                { QStringLiteral("--lr-scaling"), QStringLiteral("adascale"), QStringLiteral("--world-size"),
                    QStringLiteral("2"), QStringLiteral("--rank"), QString::number(r),
                    QStringLiteral("--rendezvous"), QStringLiteral("127.0.0.1:%1").arg(storePort) });
        };
        Worker rank0(rank(0)), rank1(rank(1));
        QVERIFY(rank0.finish(test::endsWithin()) && rank1.finish(test::endsWithin()));
        QCOMPARE(rank0.exitCode(), 0);
        QCOMPARE(rank1.exitCode(), 0);
        QVERIFY(!digest(rank0).isEmpty());
        QCOMPARE(digest(rank0), digest(rank1));
        const auto steps = rank0.events(QStringLiteral("step"));
        QCOMPARE(steps.size(), 8);
        for (const auto &e : steps)
            QVERIFY2(e.step().lr_gain() >= 1 && e.step().lr_gain() <= scale,
                qPrintable(QStringLiteral("step %1: gain %2").arg(e.step().step()).arg(e.step().lr_gain())));
        QVERIFY(steps.last().step().lr_gain() > 1); // the two-batch estimator has samples by then
    }

    // The range test: the lr rises exponentially, the suggestion is the lowest smoothed
    // loss's lr / 10, the lowest after the average's first tenth (lr_range_test.h).
    void lrFindProposesALearningRate()
    {
        Worker w({ QStringLiteral("lr-find"), QStringLiteral("--data-dir"), m_learnable,
            QStringLiteral("--threads"), QStringLiteral("2"), QStringLiteral("--steps"),
            QStringLiteral("100"), QStringLiteral("--batch-size"), QStringLiteral("32") });
        QVERIFY(w.finish(test::endsWithin()));
        QCOMPARE(w.exitCode(), 0);
        const auto points = w.events(QStringLiteral("lr_point"));
        QVERIFY(points.size() >= 20);
        for (int i = 1; i < points.size(); ++i)
            QVERIFY(points[i].lr_point().learning_rate() > points[i - 1].lr_point().learning_rate());
        const v1::LrFindResult found = w.events(QStringLiteral("lr_found")).first().lr_found();
        const double best = found.min_loss_learning_rate();
        QCOMPARE(found.suggested_learning_rate(), best / 10);
        QVERIFY(found.conclusive()); // the learnable set's loss falls clearly
        QVERIFY(best > 1e-5 && best < 10);
        double lowest = 1e9, lowestLr = 0;
        for (qsizetype i = std::max<qsizetype>(1, points.size() / 10); i < points.size(); ++i)
            if (points[i].lr_point().smoothed_loss() < lowest) {
                lowest = points[i].lr_point().smoothed_loss();
                lowestLr = points[i].lr_point().learning_rate();
            }
        QCOMPARE(best, lowestLr);
    }
};

QTEST_GUILESS_MAIN(TestTrainerRecipe)
#include "tst_trainer_recipe.moc"
