// The agent's pure rules and file formats, without an agent process: which address ranks
// of other hosts reach us at, how a rank's exit is classified, what a RunSpec may ask of
// the model and its schedule, that unpacking refuses paths leaving its folder, and that a
// run's event log survives a torn tail. (Moved out of tst_agent, which starts real agents.)
#include "advertise.h"
#include "verify_ok.h"
#include "dataset_fetcher.h"
#include "net_address.h"
#include "run_event_log.h"
#include "run_supervisor.h"
#include "spec_rules.h"
#include "test_support.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <csignal>
#include <filesystem>

using namespace scalelab;

namespace {

bool writeFile(const QString &path, const QByteArray &bytes)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(bytes) == bytes.size();
}

} // namespace

class TestAgentRules : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    QString path(const QString &name) const { return m_tmp.filePath(name); }

private Q_SLOTS:
    // The address ranks of other hosts reach ours at: never guessed from the host name
    // when that is loopback; an operator's unusable setting is refused by name.
    void advertiseAddressIsChosenNotGuessed()
    {
        using agent::chooseAdvertiseAddress;
        auto c = chooseAdvertiseAddress("127.0.0.1", "", "", "node1");
        QCOMPARE(QString::fromStdString(c.address), QStringLiteral("127.0.0.1"));
        QVERIFY(c.warning.empty() && c.error.empty());
        c = chooseAdvertiseAddress("0.0.0.0", "10.9.8.7", "", "node1");
        QCOMPARE(QString::fromStdString(c.address), QStringLiteral("10.9.8.7"));
        QVERIFY(c.error.empty());
        c = chooseAdvertiseAddress("0.0.0.0", "", "lo", "node1");
        QCOMPARE(QString::fromStdString(c.address), QStringLiteral("127.0.0.1"));
        QVERIFY2(QString::fromStdString(c.warning).contains(QLatin1String("other hosts will fail")),
            c.warning.c_str());
        c = chooseAdvertiseAddress("0.0.0.0", "", "nosuch0", "node1");
        QVERIFY2(QString::fromStdString(c.error).contains(QLatin1String("'nosuch0' has no address here")),
            c.error.c_str());
        c = chooseAdvertiseAddress("0.0.0.0", "no-such-host.invalid", "", "node1");
        QVERIFY(!c.error.empty());
        // Every address, host name on loopback (stock Debian): an interface's address, or a
        // warning that says nothing but loopback was found.
        c = chooseAdvertiseAddress("0.0.0.0", "", "", "localhost");
        QVERIFY(c.error.empty());
        bool anyInterface = false;
        for (const auto &a : net::interfaceAddresses())
            anyInterface = anyInterface || (!a.loopback && a.up);
        if (anyInterface) {
            QVERIFY2(!net::isLoopback(c.address), c.address.c_str());
            QVERIFY2(QString::fromStdString(c.how).contains(QLatin1String("host name localhost resolves to")), c.how.c_str());
        } else {
            QVERIFY(!c.warning.empty());
        }

        QVERIFY(net::isLoopback("127.0.1.1"));
        QVERIFY(net::isLoopback("::1"));
        QVERIFY(net::isLoopback("localhost"));
        QVERIFY(!net::isLoopback("127.evil")); // a name, resolving to nothing: not loopback
        QVERIFY(!net::isLoopback("10.0.0.1"));
        QCOMPARE(net::splitInterfaces("eth0,,ib0"), (std::vector<std::string> { "eth0", "ib0" }));
        const auto towards = net::localAddressTowards("127.0.0.1", 80);
        VERIFY_OK(towards);
        QCOMPARE(QString::fromStdString(towards.value()), QStringLiteral("127.0.0.1"));
    }

    void exitClassificationRules()
    {
        using agent::classifyExit;
        const int exited0 = 0, exited2 = 2 << 8, killed = SIGKILL, terminated = SIGTERM;
        QCOMPARE(classifyExit(0, exited0, false, {}, true, 0).kind(), v1::EXIT_SUCCEEDED);
        QCOMPARE(classifyExit(0, exited0, false, {}, false, 0).kind(), v1::EXIT_FAILED);
        QCOMPARE(classifyExit(1, exited2, false, "boom", false, 0).kind(), v1::EXIT_FAILED);
        QCOMPARE(
            classifyExit(1, exited2, false, "CUDA out of memory", false, 0).kind(), v1::EXIT_OUT_OF_MEMORY);
        QCOMPARE(classifyExit(1, killed, false, {}, false, 1).kind(), v1::EXIT_OUT_OF_MEMORY);
        QCOMPARE(classifyExit(1, killed, false, {}, false, 0).kind(), v1::EXIT_KILLED);
        QCOMPARE(classifyExit(1, killed, false, {}, false, -1).kind(), v1::EXIT_KILLED);
        QCOMPARE(classifyExit(1, terminated, true, {}, false, 0).kind(), v1::EXIT_STOPPED);
        QCOMPARE(classifyExit(1, terminated, false, {}, false, 0).kind(), v1::EXIT_KILLED);
    }

    // Dropout rates are probabilities below 1 (0 turns dropout off), and a run stops after
    // an epoch of its own schedule or not at all: refused by field, in both namings.
    void runSpecBoundsDropoutAndStopAfterEpochs()
    {
        const auto problems = [](const v1::RunSpec &spec, const rules::SpecContext &context) {
            QStringList all;
            for (const auto &p : rules::checkRunSpec(spec, context))
                all << QString::fromStdString(p.text());
            return all;
        };
        const rules::SpecContext agent { "spec.", false, false };
        v1::RunSpec spec;
        spec.set_batch_size(32);
        spec.set_epochs(3);
        QCOMPARE(problems(spec, agent), QStringList());
        spec.set_block_dropout(0);
        spec.set_dense_dropout(0);
        spec.set_stop_after_epochs(3); // the whole schedule: allowed
        QCOMPARE(problems(spec, agent), QStringList());
        spec.set_block_dropout(1);
        spec.set_dense_dropout(std::nan(""));
        spec.set_stop_after_epochs(4);
        QCOMPARE(problems(spec, agent),
            (QStringList { QStringLiteral("spec.block_dropout: must be a number in [0, 1) (got 1)"),
                QStringLiteral("spec.dense_dropout: must be a number in [0, 1) (got NaN)"),
                QStringLiteral("spec.stop_after_epochs: must be 0 (train every epoch) or between 1 and the run's 3 "
                               "epochs (got 4)") }));
        spec.set_block_dropout(-0.125);
        spec.set_dense_dropout(HUGE_VAL);
        spec.set_stop_after_epochs(-1);
        QCOMPARE(problems(spec, agent).size(), 3);
        // In a plan's training the grid decides the epochs: bounded by the most a run may have.
        const rules::SpecContext plan { "training.", true, true };
        v1::RunSpec training;
        training.set_stop_after_epochs(rules::kMaxEpochs + 1);
        training.set_dense_dropout(1);
        QCOMPARE(problems(training, plan),
            (QStringList { QStringLiteral("training.denseDropout: must be a number in [0, 1) (got 1)"),
                QStringLiteral("training.stopAfterEpochs: must be 0 (train every epoch) or between 1 and 10000 (got "
                               "10001)") }));
        // Unset rates run as the seed CNN always has; zero stays zero.
        v1::RunSpec unset;
        unset.set_epochs(3);
        const v1::RunSpec filled = rules::withDefaults(unset);
        QCOMPARE(filled.block_dropout(), 0.25);
        QCOMPARE(filled.dense_dropout(), 0.5);
        QCOMPARE(filled.stop_after_epochs(), 0);
        unset.set_block_dropout(0);
        QVERIFY(rules::withDefaults(unset).has_block_dropout() && rules::withDefaults(unset).block_dropout() == 0);
    }

    void unpackRefusesPathsLeavingTheFolder()
    {
        const QString inner = path(QStringLiteral("evil/inner"));
        QVERIFY(QDir().mkpath(inner));
        QVERIFY(writeFile(path(QStringLiteral("evil/escape.txt")), "outside\n"));
        const QString tarball = path(QStringLiteral("evil.tar.gz"));
        const QString problem = test::runTool(QStringLiteral("tar"),
            { QStringLiteral("-czPf"), tarball, QStringLiteral("-C"), inner,
                QStringLiteral("../escape.txt") });
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        QVERIFY(QFile::remove(path(QStringLiteral("evil/escape.txt"))));
        const QString into = path(QStringLiteral("evil/inner/unpacked"));
        const std::string error = agent::unpackTarGz(tarball.toStdString(), into.toStdString(), {}).error();
        QVERIFY2(QString::fromStdString(error).contains(QStringLiteral("unsafe path '../escape.txt'")),
            error.c_str());
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("evil/escape.txt"))));
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("evil/inner/escape.txt"))));
    }

    void eventLogSurvivesATornTail()
    {
        const std::filesystem::path dir = path(QStringLiteral("torn")).toStdString();
        std::filesystem::create_directories(dir);
        {
            agent::RunEventLog log(dir / "events.log");
            QVERIFY(log.error().empty());
            for (int i = 0; i < 3; ++i) {
                v1::RunEvent e;
                e.mutable_log()->set_text("line " + std::to_string(i));
                QCOMPARE(log.append(e, i == 2), qint64(i + 1));
            }
        }
        {
            QFile f(QString::fromStdString((dir / "events.log").string()));
            QVERIFY(f.open(QIODevice::Append));
            f.write("\x20\x08\x04"); // a record cut short by a crash
        }
        agent::RunEventLog reopened(dir / "events.log");
        QVERIFY(reopened.error().empty());
        QCOMPARE(reopened.lastSeq(), qint64(3));
        QCOMPARE(reopened.droppedOnOpen(), std::size_t(3));
        v1::RunEvent e;
        e.mutable_log()->set_text("after");
        QCOMPARE(reopened.append(e), qint64(4));
        std::vector<v1::RunEvent> all;
        QVERIFY(reopened.read(1, 100, std::chrono::milliseconds(0), &all));
        QCOMPARE(all.size(), std::size_t(4));
        QCOMPARE(all[3].log().text(), std::string("after"));
    }
};

QTEST_GUILESS_MAIN(TestAgentRules)
#include "tst_agent_rules.moc"
