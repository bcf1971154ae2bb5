// The training engine's reproducibility, through scalelab-worker processes: every built-in
// model resumes bit for bit and trains channels-last (and bf16), the same seed gives the same
// loss curve, a killed run resumes to identical weights, so does a run stopped after an epoch of
// its schedule, and a corrupt checkpoint is refused and the previous one used.
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

class TestTrainerResume : public QObject, public test::TrainerBench {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { makeSets(); }

    void cleanupTestCase() { checkNothingLeft(); }

    // Issue 36 item 4, for each built-in: paused after an epoch and resumed from its checkpoint,
    // a run ends with the weights of one never paused (bit for bit); and it trains in
    // channels-last and, where the CPU has bf16, under bf16 autocast.
    void everyModelResumesBitForBitAndTrainsChannelsLast_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("seed-cnn") << "seed-cnn";
        QTest::newRow("resnet18") << "resnet18";
        QTest::newRow("mobilenet_v2") << "mobilenet_v2";
    }

    void everyModelResumesBitForBitAndTrainsChannelsLast()
    {
        QFETCH(QString, model);
        const QStringList recipe = { QStringLiteral("train"), QStringLiteral("--data-dir"), m_small,
            QStringLiteral("--model"), model, QStringLiteral("--batch-size"), QStringLiteral("16"),
            QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--max-train-images"),
            QStringLiteral("48"), QStringLiteral("--max-test-images"), QStringLiteral("16"),
            QStringLiteral("--epochs"), QStringLiteral("2") };
        const QString dir = m_tmp.filePath(QStringLiteral("resume-") + model);
        Worker whole(recipe);
        Worker paused(recipe
            + QStringList { QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--stop-after-epoch"),
                QStringLiteral("1") });
        QVERIFY(whole.finish(test::endsWithin()) && paused.finish(test::endsWithin()));
        QCOMPARE(whole.exitCode(), 0);
        QCOMPARE(paused.exitCode(), 0);
        Worker resumed(recipe
            + QStringList {
                QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"), QStringLiteral("on") });
        const bool bf16 = trainer::cpu::hasBf16();
        Worker formats(recipe.mid(0, recipe.size() - 2)
            + QStringList { QStringLiteral("--epochs"), QStringLiteral("1"),
                QStringLiteral("--channels-last"), QStringLiteral("on"), QStringLiteral("--precision"),
                bf16 ? QStringLiteral("bf16") : QStringLiteral("fp32") });
        QVERIFY(resumed.finish(test::endsWithin()) && formats.finish(test::endsWithin()));
        QCOMPARE(resumed.exitCode(), 0);
        QCOMPARE(resumed.events(QStringLiteral("started")).value(0).started().resumed_from_epoch(), 1);
        QCOMPARE(resumed.events(QStringLiteral("step")).size(), 3); // epoch 2 only: 48 / 16
        QCOMPARE(digest(resumed).size(), 64);
        QCOMPARE(digest(resumed), digest(whole));
        QVERIFY2(formats.exitCode() == 0, qPrintable(formats.stderrText()));
        const auto started = formats.events(QStringLiteral("started"));
        QCOMPARE(started.size(), 1);
        QVERIFY(started[0].started().effective().channels_last());
        QCOMPARE(started[0].started().effective().precision(), bf16 ? v1::BF16 : v1::FP32);
        const auto steps = formats.events(QStringLiteral("step"));
        QCOMPARE(steps.size(), 3);
        for (const auto &step : steps)
            QVERIFY(std::isfinite(step.step().loss()) && step.step().loss() > 0);
        qInfo("%s: resumed = never paused (%s...); %s + channels-last, losses %.4f .. %.4f",
            qPrintable(model), qPrintable(digest(whole).left(12)),
            bf16 ? "bf16" : "fp32 (this CPU has no bf16)", steps.first().step().loss(),
            steps.last().step().loss());
    }

    void sameSeedGivesTheSameLossCurve()
    {
        Worker a(small({ QStringLiteral("--seed"), QStringLiteral("11") }));
        Worker b(small({ QStringLiteral("--seed"), QStringLiteral("11") }));
        QVERIFY(a.finish(test::endsWithin()) && b.finish(test::endsWithin()));
        const auto stepsA = a.events(QStringLiteral("step"));
        const auto stepsB = b.events(QStringLiteral("step"));
        QCOMPARE(stepsA.size(), 8);
        QCOMPARE(stepsB.size(), stepsA.size());
        for (int i = 0; i < stepsA.size(); ++i)
            QCOMPARE(stepsA[i].step().loss(), stepsB[i].step().loss());
        QCOMPARE(digest(a), digest(b));
        Worker c(small({ QStringLiteral("--seed"), QStringLiteral("12") }));
        QVERIFY(c.finish(test::endsWithin()));
        QVERIFY(digest(c) != digest(a)); // the seed matters
    }

    void killedRunResumesToIdenticalWeights()
    {
        const QStringList epochs = { QStringLiteral("--epochs"), QStringLiteral("3") };
        Worker whole(small(epochs
            + QStringList {
                QStringLiteral("--checkpoint-dir"), m_tmp.filePath(QStringLiteral("ck-whole")) }));
        QVERIFY(whole.finish(test::endsWithin()));
        QCOMPARE(whole.exitCode(), 0);
        QVERIFY(!digest(whole).isEmpty());

        const QString dir = m_tmp.filePath(QStringLiteral("ck-killed"));
        {
            Worker killed(small(epochs + QStringList { QStringLiteral("--checkpoint-dir"), dir }));
            QVERIFY(killed.waitFor(QStringLiteral("checkpoint"), test::endsWithin()));
            killed.kill(); // SIGKILL right after epoch 1's checkpoint was committed
            QVERIFY(killed.events(QStringLiteral("finished")).isEmpty());
        }
        Worker resumed(small(epochs
            + QStringList {
                QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"), QStringLiteral("on") }));
        QVERIFY(resumed.finish(test::endsWithin()));
        QCOMPARE(resumed.exitCode(), 0);
        const auto started = resumed.events(QStringLiteral("started"));
        QCOMPARE(started.size(), 1);
        QVERIFY(started[0].started().resumed_from_epoch() >= 1);
        // The checkpoint it resumed from is named, with its epoch.
        QCOMPARE(started[0].started().checkpoint_epoch(), started[0].started().resumed_from_epoch());
        QVERIFY(QString::fromStdString(started[0].started().resumed_from()).startsWith(dir));
        QCOMPARE(resumed.events(QStringLiteral("step")).first().step().step(),
            started[0].started().resumed_from_epoch() * 8 + 1);
        QCOMPARE(digest(resumed), digest(whole));
    }

    // A run told to stop after epoch 1 of a 3-epoch schedule ends there, successfully, with
    // a checkpoint; resumed to epoch 3 it trains epochs 2 and 3 exactly as an uninterrupted
    // run does (same learning rates, same losses to the bit, same weights). Resumed again
    // to a point it has passed, it ends at once.
    void stoppedRunResumesAsIfNeverStopped()
    {
        const QStringList epochs = { QStringLiteral("--epochs"), QStringLiteral("3") };
        Worker whole(small(epochs));
        const QString dir = m_tmp.filePath(QStringLiteral("ck-stopped"));
        Worker stopped(small(epochs
            + QStringList { QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--stop-after-epoch"),
                QStringLiteral("1") }));
        QVERIFY(whole.finish(test::endsWithin()) && stopped.finish(test::endsWithin()));
        QCOMPARE(whole.exitCode(), 0);
        QCOMPARE(stopped.exitCode(), 0); // the agent's SUCCEEDED
        QCOMPARE(
            stopped.events(QStringLiteral("started")).value(0).started().effective().stop_after_epochs(), 1);
        QCOMPARE(stopped.events(QStringLiteral("epoch")).size(), 1);
        QCOMPARE(stopped.events(QStringLiteral("step")).size(), 8);
        const auto checkpoints = stopped.events(QStringLiteral("checkpoint"));
        QCOMPARE(checkpoints.size(), 1);
        QCOMPARE(checkpoints[0].checkpoint().epoch(), 1);
        QVERIFY(QFile::exists(dir + QStringLiteral("/epoch-0001/MANIFEST"))); // committed
        QVERIFY(!QFile::exists(dir + QStringLiteral("/epoch-0002")));
        const auto finished = stopped.events(QStringLiteral("finished"));
        QCOMPARE(finished.size(), 1);
        QCOMPARE(finished[0].finished().epochs_completed(), 1);

        const QStringList resume
            = { QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"), QStringLiteral("on") };
        Worker resumed(small(
            epochs + resume + QStringList { QStringLiteral("--stop-after-epoch"), QStringLiteral("3") }));
        QVERIFY(resumed.finish(test::endsWithin()));
        QCOMPARE(resumed.exitCode(), 0);
        QCOMPARE(resumed.events(QStringLiteral("started")).value(0).started().resumed_from_epoch(), 1);
        const auto epochsAfter = resumed.events(QStringLiteral("epoch"));
        QCOMPARE(epochsAfter.size(), 2);
        QCOMPARE(epochsAfter[0].epoch().epoch(), 2);
        QCOMPARE(epochsAfter[1].epoch().epoch(), 3);
        const auto wholeEpochs = whole.events(QStringLiteral("epoch"));
        QCOMPARE(wholeEpochs.size(), 3);
        for (int i = 0; i < 2; ++i) {
            const auto &a = epochsAfter[i].epoch();
            const auto &b = wholeEpochs[i + 1].epoch();
            QVERIFY2(a.train_loss() == b.train_loss() && a.test_loss() == b.test_loss()
                    && a.test_accuracy() == b.test_accuracy(),
                qPrintable(QStringLiteral("epoch %1: train loss %2 vs %3")
                               .arg(a.epoch())
                               .arg(a.train_loss(), 0, 'g', 17)
                               .arg(b.train_loss(), 0, 'g', 17)));
        }
        const auto steps = resumed.events(QStringLiteral("step"));
        const auto wholeSteps = whole.events(QStringLiteral("step"));
        QCOMPARE(steps.size(), 16);
        QCOMPARE(wholeSteps.size(), 24);
        for (int i = 0; i < steps.size(); ++i) {
            const auto &a = steps[i].step();
            const auto &b = wholeSteps[i + 8].step();
            QCOMPARE(a.step(), b.step());
            QVERIFY2(a.learning_rate() == b.learning_rate() && a.loss() == b.loss(),
                qPrintable(QStringLiteral("step %1: lr %2 vs %3, loss %4 vs %5")
                               .arg(a.step())
                               .arg(a.learning_rate(), 0, 'g', 17)
                               .arg(b.learning_rate(), 0, 'g', 17)
                               .arg(a.loss(), 0, 'g', 17)
                               .arg(b.loss(), 0, 'g', 17)));
        }
        QCOMPARE(resumed.events(QStringLiteral("finished")).value(0).finished().epochs_completed(), 3);
        QCOMPARE(digest(resumed), digest(whole));

        // The other built-in models (issue 36) resume bit-exactly too, BatchNorm statistics
        // and momentum included: 2 epochs of 64 images against 1, stopped, and 1 resumed.
        for (const QString &model : { QStringLiteral("resnet18"), QStringLiteral("mobilenet_v2") }) {
            const QStringList brief = { QStringLiteral("--model"), model, QStringLiteral("--epochs"),
                QStringLiteral("2"), QStringLiteral("--max-train-images"), QStringLiteral("64"),
                QStringLiteral("--max-test-images"), QStringLiteral("16") };
            const QString modelDir = m_tmp.filePath(QStringLiteral("ck-stopped-") + model);
            const QStringList keep = { QStringLiteral("--checkpoint-dir"), modelDir };
            Worker modelWhole(small(brief));
            Worker modelStopped(small(
                brief + keep + QStringList { QStringLiteral("--stop-after-epoch"), QStringLiteral("1") }));
            QVERIFY(modelWhole.finish(test::endsWithin()) && modelStopped.finish(test::endsWithin()));
            QCOMPARE(modelStopped.exitCode(), 0);
            Worker modelResumed(
                small(brief + keep + QStringList { QStringLiteral("--resume"), QStringLiteral("on") }));
            QVERIFY(modelResumed.finish(test::endsWithin()));
            QCOMPARE(modelResumed.exitCode(), 0);
            QCOMPARE(
                modelResumed.events(QStringLiteral("started")).value(0).started().resumed_from_epoch(), 1);
            QVERIFY2(!digest(modelWhole).isEmpty() && digest(modelResumed) == digest(modelWhole),
                qPrintable(model));
            QVERIFY(digest(modelWhole) != digest(whole)); // another model was trained
        }

        // Already past where it is told to stop: nothing to train, a success at once.
        Worker passed(small(
            epochs + resume + QStringList { QStringLiteral("--stop-after-epoch"), QStringLiteral("2") }));
        QVERIFY(passed.finish(60000));
        QCOMPARE(passed.exitCode(), 0);
        QVERIFY(passed.events(QStringLiteral("step")).isEmpty());
        QVERIFY(passed.events(QStringLiteral("checkpoint")).isEmpty());
        QCOMPARE(passed.events(QStringLiteral("finished")).value(0).finished().epochs_completed(), 3);
    }

    void corruptCheckpointIsRefusedAndThePreviousUsed()
    {
        const QString dir = m_tmp.filePath(QStringLiteral("ck-corrupt"));
        Worker first(small(
            { QStringLiteral("--epochs"), QStringLiteral("2"), QStringLiteral("--checkpoint-dir"), dir }));
        QVERIFY(first.finish(test::endsWithin()));
        QCOMPARE(first.exitCode(), 0);
        QVERIFY(QFile::exists(dir + QStringLiteral("/epoch-0001/MANIFEST")));
        QVERIFY(QFile::exists(dir + QStringLiteral("/epoch-0002/MANIFEST")));
        // The momentum in state.pt, not optimizer.pt (libtorch 1.x and 2.x read its keys differently).
        const QString at = dir + QStringLiteral("/epoch-0002/");
        QVERIFY(QFileInfo(at + QStringLiteral("optimizer.pt")).size() < 100'000);
        QVERIFY(QFileInfo(at + QStringLiteral("state.pt")).size() > 10'000'000); // the seed CNN's 13 MB
        {
            QFile model(dir + QStringLiteral("/epoch-0002/model.pt"));
            QVERIFY(model.open(QIODevice::ReadWrite));
            model.seek(model.size() / 2);
            model.write("corrupt");
        }
        Worker resumed(small({ QStringLiteral("--epochs"), QStringLiteral("2"),
            QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"), QStringLiteral("on") }));
        QVERIFY(resumed.finish(test::endsWithin()));
        QCOMPARE(resumed.exitCode(), 0);
        const auto warnings = resumed.events(QStringLiteral("warning"));
        QCOMPARE(warnings.size(), 1);
        const QString warning = QString::fromStdString(warnings[0].warning().message());
        QVERIFY2(warning.contains(QStringLiteral("model.pt does not match its sha256")), qPrintable(warning));
        QCOMPARE(resumed.events(QStringLiteral("started")).value(0).started().resumed_from_epoch(), 1);
        QCOMPARE(resumed.events(QStringLiteral("epoch")).size(), 1); // epoch 2 trained again
        QCOMPARE(digest(resumed), digest(first)); // and deterministically the same
    }
};

QTEST_GUILESS_MAIN(TestTrainerResume)
#include "tst_trainer_resume.moc"
