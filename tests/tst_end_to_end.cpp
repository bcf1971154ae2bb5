// The whole path, as a user drives it: scalelab-cli → a real scalelab-agent process on
// port 0 → scalelab-worker → events back, plus the CLI's answers to bad input.
#include "agent_fixture.h"
#include "cifar10.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTest>

using namespace scalelab;

namespace {

struct CliResult {
    int exitCode = -1;
    QString out;
    QString err;
};

CliResult runCli(const QStringList &args, const QString &token = {}, int timeoutMs = test::endsWithin())
{
    QProcess cli;
    auto env = QProcessEnvironment::systemEnvironment();
    if (!token.isEmpty())
        env.insert(QStringLiteral("SCALELAB_TOKEN"), token);
    env.insert(QStringLiteral("SCALELAB_AGENT_BIN"), test::binary("scalelab-agent"));
    cli.setProcessEnvironment(env);
    cli.start(test::binary("scalelab-cli"), args);
    if (!cli.waitForFinished(timeoutMs)) {
        cli.kill();
        cli.waitForFinished();
    }
    return { cli.exitStatus() == QProcess::NormalExit ? cli.exitCode() : -1,
        QString::fromUtf8(cli.readAllStandardOutput()), QString::fromUtf8(cli.readAllStandardError()) };
}

} // namespace

class TestEndToEnd : public QObject {
    Q_OBJECT
private:
    // Its folder is every test's: the first starts its agent, the others run the CLI in
    // its local-agent mode by hand (that mode, starting its own agent, is what they test).
    test::AgentFixture m_fixture;

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(!m_fixture.folder().isEmpty());
        QVERIFY(QDir().mkpath(m_fixture.dataDir()));
    }

    void cleanupTestCase() { VERIFY_OK(m_fixture.stopAndCheckNothingLeft(10'000)); }

    void baselineRunThroughRealAgent()
    {
        VERIFY_OK(m_fixture.start()); // --port 0, port read back
        QVERIFY(!m_fixture.address().endsWith(QStringLiteral(":0")));

        const auto r = runCli(
            { QStringLiteral("run"), QStringLiteral("--agent"), m_fixture.address(),
                QStringLiteral("--synthetic"), QStringLiteral("--synthetic-train"), QStringLiteral("300"),
                QStringLiteral("--synthetic-test"), QStringLiteral("100"), QStringLiteral("--batch-size"),
                QStringLiteral("32"), QStringLiteral("--epochs"), QStringLiteral("1"),
                QStringLiteral("--run-id"), QStringLiteral("e2e-1"), QStringLiteral("--json") },
            m_fixture.token());
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));

        qint64 expected = 1;
        int steps = 0, epochs = 0;
        QString lastState;
        QJsonObject final;
        const auto lines = r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        for (const QString &line : lines) {
            const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
            QVERIFY2(!o.isEmpty(), qPrintable(QStringLiteral("not JSON: ") + line));
            if (o.contains(QStringLiteral("final"))) {
                final = o;
                continue;
            }
            // Events in order, no gap, no duplicate (int64 is a string in proto JSON).
            QCOMPARE(o.value(QStringLiteral("seq")).toVariant().toLongLong(), expected++);
            if (o.contains(QStringLiteral("step")))
                ++steps;
            if (o.contains(QStringLiteral("epoch")))
                ++epochs;
            if (o.contains(QStringLiteral("state")))
                lastState
                    = o.value(QStringLiteral("state")).toObject().value(QStringLiteral("state")).toString();
        }
        QCOMPARE(steps, 10); // ceil(300 / 32)
        QCOMPARE(epochs, 1);
        QCOMPARE(lastState, QStringLiteral("SUCCEEDED"));
        QVERIFY(!final.isEmpty());
        QCOMPARE(final.value(QStringLiteral("gaps")).toInt(), 0);
        QCOMPARE(final.value(QStringLiteral("duplicates")).toInt(), 0);
        QVERIFY(final.value(QStringLiteral("synthetic")).toBool());
        const double accuracy = final.value(QStringLiteral("final"))
                                    .toObject()
                                    .value(QStringLiteral("finalTestAccuracy"))
                                    .toDouble(-1);
        QVERIFY(accuracy >= 0 && accuracy <= 1);

        // The human-readable form ends with the summary line.
        m_fixture.stop();
        QVERIFY2(test::processesMentioning(m_fixture.folder()).isEmpty(),
            qPrintable(test::processesMentioning(m_fixture.folder()).join(QLatin1Char('\n'))));
    }

    void localAgentModePrintsSummary()
    {
        const auto r = runCli({ QStringLiteral("run"), QStringLiteral("--data-dir"), m_fixture.dataDir(),
            QStringLiteral("--state-dir"), m_fixture.path(QStringLiteral("state2")),
            QStringLiteral("--synthetic"), QStringLiteral("--synthetic-train"), QStringLiteral("300"),
            QStringLiteral("--synthetic-test"), QStringLiteral("100"), QStringLiteral("--batch-size"),
            QStringLiteral("50"), QStringLiteral("--max-train-images"), QStringLiteral("100") });
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString last = r.out.trimmed().split(QLatin1Char('\n')).last();
        QVERIFY2(last.startsWith(QStringLiteral("run run-")), qPrintable(last));
        for (const char *field : { "SUCCEEDED", "workers=1", "batch=50", "epochs=1",
                 "test_accuracy=", "wall_seconds=", "images_per_second=", "data=SYNTHETIC" })
            QVERIFY2(last.contains(QLatin1String(field)), qPrintable(last));
        QVERIFY(r.out.contains(QStringLiteral("[SYNTHETIC DATA]")));
        // Not a terminal: plain lines with the progress in words, no cursor movement.
        QVERIFY2(!r.out.contains(QLatin1Char('\x1b')), qPrintable(r.out));
        QVERIFY2(r.out.contains(QLatin1String("epoch 1/1  step 1/2")), qPrintable(r.out));
    }

    // Issue 56 item 7: a run started with `scalelab-cli run` is in the journal of its state
    // folder, as the console's Run tab runs are: `study show`, `report` and `export
    // tensorboard` take its id (before, "no study or run … in journal.sqlite").
    void cliRunIsJournaledForReportsAndExports()
    {
        const QString state = m_fixture.path(QStringLiteral("state-journaled"));
        const auto r = runCli({ QStringLiteral("run"), QStringLiteral("--data-dir"), m_fixture.dataDir(),
            QStringLiteral("--state-dir"), state, QStringLiteral("--synthetic"), QStringLiteral("--dataset"),
            QStringLiteral("journaled"), QStringLiteral("--synthetic-train"), QStringLiteral("200"),
            QStringLiteral("--synthetic-test"), QStringLiteral("100"), QStringLiteral("--model"),
            QStringLiteral("mini-cnn"), QStringLiteral("--epochs"), QStringLiteral("2"),
            QStringLiteral("--json") });
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString id = QJsonDocument::fromJson(r.out.trimmed().split(QLatin1Char('\n')).last().toUtf8())
                               .object()
                               .value(QLatin1String("run_id"))
                               .toString();
        QVERIFY2(id.startsWith(QLatin1String("run-")), qPrintable(r.out.right(500)));
        const auto shown = runCli({ QStringLiteral("study"), QStringLiteral("show"), id,
            QStringLiteral("--json"), QStringLiteral("--state-dir"), state });
        QVERIFY2(shown.exitCode == 0, qPrintable(shown.err));
        const QJsonObject run = QJsonDocument::fromJson(shown.out.toUtf8())
                                    .object()
                                    .value(QLatin1String("runs"))
                                    .toArray()
                                    .first()
                                    .toObject();
        QCOMPARE(run.value(QLatin1String("runId")).toString(), id);
        QCOMPARE(run.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
        QVERIFY(run.value(QLatin1String("finalTestAccuracy")).toDouble() > 0);
        const auto report = runCli({ QStringLiteral("report"), id, QStringLiteral("--format"),
            QStringLiteral("json"), QStringLiteral("--state-dir"), state });
        QVERIFY2(report.exitCode == 0, qPrintable(report.err));
        QCOMPARE(QJsonDocument::fromJson(report.out.toUtf8())
                     .object()
                     .value(QLatin1String("runs"))
                     .toArray()
                     .size(),
            1);
        const auto exported = runCli({ QStringLiteral("export"), QStringLiteral("tensorboard"), id,
            m_fixture.path(QStringLiteral("tb-journaled")), QStringLiteral("--state-dir"), state });
        QVERIFY2(exported.exitCode == 0, qPrintable(exported.err + exported.out));
        const auto missing = runCli({ QStringLiteral("report"), QStringLiteral("run-nothing"),
            QStringLiteral("--state-dir"), state });
        QCOMPARE(missing.exitCode, 2);
        QVERIFY2(missing.err.contains(QLatin1String("no study or run run-nothing")), qPrintable(missing.err));
    }

    // `run --workers MIN:MAX` (issue 55 item 2): the agent has fewer free slots than 64 (one per
    // core), so the run starts with what it has, at the global batch of 64 workers: each worker
    // accumulates the micro-batches of the workers it stands in for.
    void elasticRunStartsWithTheFreeSlotsAtItsGlobalBatch()
    {
        const auto r = runCli({ QStringLiteral("run"), QStringLiteral("--data-dir"), m_fixture.dataDir(),
            QStringLiteral("--state-dir"), m_fixture.path(QStringLiteral("state-elastic")),
            QStringLiteral("--synthetic"), QStringLiteral("--dataset"), QStringLiteral("elastic"),
            QStringLiteral("--synthetic-train"), QStringLiteral("256"), QStringLiteral("--synthetic-test"),
            QStringLiteral("100"), QStringLiteral("--model"), QStringLiteral("mini-cnn"),
            QStringLiteral("--workers"), QStringLiteral("1:64"), QStringLiteral("--batch-size"),
            QStringLiteral("2"), QStringLiteral("--json") });
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QJsonObject summary
            = QJsonDocument::fromJson(r.out.trimmed().split(QLatin1Char('\n')).last().toUtf8()).object();
        QCOMPARE(summary.value(QLatin1String("workers")).toInt(), 64);
        QCOMPARE(summary.value(QLatin1String("global_batch")).toInt(), 128);
        const int started = summary.value(QLatin1String("workers_started")).toInt();
        QVERIFY2(started >= 1 && started < 64, qPrintable(r.out));
        QVERIFY2(
            r.err.contains(QStringLiteral("starting with %1 of 64 workers").arg(started)), qPrintable(r.err));
        QVERIFY2(
            r.err.contains(QLatin1String("a step still averages 64 micro-batches of 2")), qPrintable(r.err));
        // What the agent ran: the started ranks, 64 micro-batches a step.
        QVERIFY2(r.out.contains(QStringLiteral("\"batchesPerStep\":64"))
                || r.out.contains(QStringLiteral("\"batches_per_step\":64")),
            qPrintable(r.out.left(3000)));
    }

    // On a terminal (a pseudo-terminal made by script(1)): one live line, redrawn in place,
    // with a bar, the epoch and step and an ETA; the summary still ends the output.
    void terminalGetsALiveProgressLine()
    {
        const QString script = QStandardPaths::findExecutable(QStringLiteral("script"));
        QVERIFY2(!script.isEmpty(), "script(1) makes the pseudo-terminal: apt-get install bsdutils");
        QStringList command { test::binary("scalelab-cli"), QStringLiteral("run"),
            QStringLiteral("--data-dir"), m_fixture.dataDir(), QStringLiteral("--state-dir"),
            m_fixture.path(QStringLiteral("state3")), QStringLiteral("--synthetic"),
            QStringLiteral("--synthetic-train"), QStringLiteral("300"), QStringLiteral("--synthetic-test"),
            QStringLiteral("100"), QStringLiteral("--batch-size"), QStringLiteral("25"),
            QStringLiteral("--epochs"), QStringLiteral("2") };
        for (QString &word : command)
            word = QLatin1Char('\'') + word + QLatin1Char('\'');
        QProcess terminal;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("TERM"), QStringLiteral("xterm"));
        env.remove(QStringLiteral("SCALELAB_PROGRESS"));
        terminal.setProcessEnvironment(env);
        terminal.start(
            script, { QStringLiteral("-qfec"), command.join(QLatin1Char(' ')), QStringLiteral("/dev/null") });
        QVERIFY(terminal.waitForFinished(test::endsWithin()));
        const QString out = QString::fromUtf8(terminal.readAllStandardOutput());
        QCOMPARE(terminal.exitCode(), 0);
        QVERIFY2(
            out.contains(QLatin1String("\x1b[1A\x1b[J")), qPrintable(out.right(2000))); // redrawn in place
        static const QRegularExpression live(
            QStringLiteral("\\[#*\\.*\\] +\\d+%  epoch [12]/2  step \\d+/12  loss "));
        QVERIFY2(live.match(out).hasMatch(), qPrintable(out.right(2000)));
        QVERIFY2(out.contains(QLatin1String("ETA ")), qPrintable(out.right(2000)));
        QVERIFY2(!out.contains(QLatin1String(" step 10 loss")),
            qPrintable(out.right(2000))); // no per-step log lines
        QVERIFY2(out.contains(QLatin1String("SUCCEEDED workers=1 batch=25 epochs=2")),
            qPrintable(out.right(2000)));
        QTRY_VERIFY_WITH_TIMEOUT(
            test::processesMentioning(m_fixture.path(QStringLiteral("state3"))).isEmpty(), 10000);
    }

    void twoWorkerRunThroughTheAgent()
    {
        const auto r = runCli({ QStringLiteral("run"), QStringLiteral("--data-dir"), m_fixture.dataDir(),
            QStringLiteral("--state-dir"), m_fixture.path(QStringLiteral("state-dp")),
            QStringLiteral("--synthetic"), QStringLiteral("--synthetic-train"), QStringLiteral("300"),
            QStringLiteral("--synthetic-test"), QStringLiteral("100"), QStringLiteral("--workers"),
            QStringLiteral("2"), QStringLiteral("--batch-size"), QStringLiteral("25"),
            QStringLiteral("--run-id"), QStringLiteral("dp-1"), QStringLiteral("--json") });
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        int worldSize = 0, steps = 0, testImages = 0, checkpoints = 0;
        for (const QString &line : r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
            if (o.contains(QStringLiteral("started")))
                worldSize = o.value(QStringLiteral("started"))
                                .toObject()
                                .value(QStringLiteral("worldSize"))
                                .toInt();
            if (o.contains(QStringLiteral("step")))
                ++steps;
            if (o.contains(QStringLiteral("epoch")))
                testImages = o.value(QStringLiteral("epoch"))
                                 .toObject()
                                 .value(QStringLiteral("testImages"))
                                 .toVariant()
                                 .toInt();
            if (o.contains(QStringLiteral("checkpoint")))
                ++checkpoints;
        }
        QCOMPARE(worldSize, 2);
        QCOMPARE(steps, 6); // 150 images per rank, 25 per step
        QCOMPARE(testImages, 100); // the whole test split, once, across both ranks
        QCOMPARE(checkpoints, 1);
        QVERIFY(QFile::exists(
            m_fixture.path(QStringLiteral("state-dp/runs/dp-1/checkpoints/epoch-0001/MANIFEST"))));
        QVERIFY(test::processesMentioning(m_fixture.path(QStringLiteral("state-dp"))).isEmpty());
    }

    // The model chosen on the command line is the one the ranks train (issue 36): ResNet-18
    // over two workers, its parameters counted by the worker and its name in the recipe.
    void modelChosenOnTheCommandLineIsTrained()
    {
        const auto r = runCli({ QStringLiteral("run"), QStringLiteral("--data-dir"), m_fixture.dataDir(),
            QStringLiteral("--state-dir"), m_fixture.path(QStringLiteral("state-model")),
            QStringLiteral("--synthetic"), QStringLiteral("--dataset"), QStringLiteral("synthetic-64"),
            QStringLiteral("--synthetic-train"), QStringLiteral("64"), QStringLiteral("--synthetic-test"),
            QStringLiteral("32"), QStringLiteral("--workers"), QStringLiteral("2"),
            QStringLiteral("--batch-size"), QStringLiteral("16"), QStringLiteral("--model"),
            QStringLiteral("resnet18"), QStringLiteral("--run-id"), QStringLiteral("model-1"),
            QStringLiteral("--json") });
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QJsonObject started;
        QString lastState;
        for (const QString &line : r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
            if (o.contains(QStringLiteral("started")))
                started = o.value(QStringLiteral("started")).toObject();
            if (o.contains(QStringLiteral("state")))
                lastState
                    = o.value(QStringLiteral("state")).toObject().value(QStringLiteral("state")).toString();
        }
        QCOMPARE(started.value(QStringLiteral("parameters")).toVariant().toLongLong(), 11'173'962LL);
        QCOMPARE(
            started.value(QStringLiteral("effective")).toObject().value(QStringLiteral("model")).toString(),
            QStringLiteral("resnet18"));
        QCOMPARE(started.value(QStringLiteral("worldSize")).toInt(), 2);
        QCOMPARE(lastState, QStringLiteral("SUCCEEDED"));
    }

    void badInputIsRefused_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        const QStringList agentNowhere = { QStringLiteral("--agent"), QStringLiteral("127.0.0.1:1") };
        QTest::newRow("batch size 0")
            << (QStringList { QStringLiteral("run"), QStringLiteral("--batch-size"), QStringLiteral("0") }
                   + agentNowhere)
            << 2 << "batch size must be at least 1";
        QTest::newRow("epochs 0") << (QStringList { QStringLiteral("run"), QStringLiteral("--epochs"),
                                          QStringLiteral("0") }
            + agentNowhere) << 2 << "epochs must be at least 1";
        QTest::newRow("not a number")
            << (QStringList { QStringLiteral("run"), QStringLiteral("--epochs"), QStringLiteral("two") }
                   + agentNowhere)
            << 2 << "--epochs expects a whole number";
        QTest::newRow("unreachable agent")
            << (QStringList { QStringLiteral("run"), QStringLiteral("--synthetic") } + agentNowhere) << 3
            << "cannot reach the agent at 127.0.0.1:1";
        QTest::newRow("bad address") << QStringList { QStringLiteral("run"), QStringLiteral("--agent"),
            QStringLiteral("nowhere") }
                                     << 2 << "is not HOST:PORT";
        QTest::newRow("unknown data directory") << QStringList {
            QStringLiteral("run"), QStringLiteral("--data-dir"), QStringLiteral("/nonexistent/scalelab-data")
        } << 2 << "data directory '/nonexistent/scalelab-data' does not exist";
        QTest::newRow("unknown command")
            << QStringList { QStringLiteral("fly") } << 2 << "unknown command 'fly'";
        QTest::newRow("unknown model")
            << (QStringList { QStringLiteral("run"), QStringLiteral("--model"), QStringLiteral("resnet50") }
                   + agentNowhere)
            << 2 << "model: must be one of seed-cnn, resnet18, mobilenet_v2, mini-cnn, or sha256:HEX";
    }
    void badInputIsRefused()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        const auto r = runCli(args, {}, 30'000);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
        QCOMPARE(r.exitCode, exitCode);
    }

    void unknownDatasetNamesWhatExists()
    {
        // What exists: a synthetic set of its own (this function runs alone, as ctest's test
        // tst_end_to_end.unknownDatasetNamesWhatExists).
        VERIFY_OK(scalelab::trainer::cifar::writeSyntheticDataset(
            (m_fixture.dataDir() + QStringLiteral("/synthetic")).toStdString(), 100, 20, 1));
        const auto r = runCli({ QStringLiteral("run"), QStringLiteral("--data-dir"), m_fixture.dataDir(),
                                  QStringLiteral("--state-dir"), m_fixture.path(QStringLiteral("state3")),
                                  QStringLiteral("--dataset"), QStringLiteral("cifar-10") },
            {}, 30'000);
        QCOMPARE(r.exitCode, 3);
        QVERIFY2(r.err.contains(QStringLiteral("spec.dataset 'cifar-10' is not usable")), qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral("synthetic (synthetic)")), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestEndToEnd)
#include "tst_end_to_end.moc"
