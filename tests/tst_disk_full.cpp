// A full disk loses nothing. An agent keeps its state on a small tmpfs that holds one
// checkpoint but not two: the run fails cleanly when the next checkpoint does not fit
// (no abort, no temporary folder left, nothing committed lost), waits for space without
// counting as a failure, and finishes once the tmpfs is made larger. An agent that cannot
// even write a run's records refuses to start it, and keeps the records it has.
//
// Needs root (mount -t tmpfs). Elsewhere it fails saying so; exclude it with
// `ctest -LE root`.
#include "agent_client.h"
#include "agent_fixture.h"
#include "journal.h"
#include "run_event_log.h"
#include "study_driver.h"
#include "study_runner.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QDirIterator>
#include <QFileInfo>
#include <QProcess>
#include <QSignalSpy>
#include <QTest>

#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>

using namespace scalelab;
using namespace scalelab::core;

namespace {

const QString kToken = QStringLiteral("disk-full-test-token-0123456789abcdef");

bool run(const QString &program, const QStringList &arguments, QString *output)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, arguments);
    const bool ok = p.waitForFinished(30'000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    *output = QString::fromLocal8Bit(p.readAll()).trimmed();
    return ok;
}

qint64 freeBytes(const QString &dir)
{
    struct statvfs s { };
    return ::statvfs(dir.toLocal8Bit().constData(), &s) == 0 ? qint64(s.f_bavail) * qint64(s.f_frsize) : -1;
}

// Folders under `dir` whose name starts with `prefix`.
QStringList foldersStartingWith(const QString &dir, const QString &prefix)
{
    QStringList found;
    QDirIterator it(dir, QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        it.next();
        if (it.fileName().startsWith(prefix))
            found << it.filePath();
    }
    return found;
}

} // namespace

class TestDiskFull : public QObject {
    Q_OBJECT
private:
    test::AgentFixture m_agent;
    QString m_mount; // the small tmpfs in the fixture's folder: the agent's state folder
    bool m_mounted = false;
    QList<AgentEndpoint> m_agents;

    QString path(const QString &name) const { return m_agent.path(name); }

    // Starts the agent, again after a stop on the same state.
    Status startAgent()
    {
        test::AgentFixtureOptions options;
        options.stateName = QStringLiteral("small-disk/agent");
        options.logFile = path(QStringLiteral("agent.log")); // not on the small disk
        options.token = kToken;
        if (Status started = m_agent.start(options); !started)
            return started;
        m_agents = { m_agent.endpoint(m_agent.address()) };
        return Status::success();
    }

    bool resize(const QString &size, QString *output)
    {
        return run(QStringLiteral("mount"),
            { QStringLiteral("-o"), QStringLiteral("remount,size=") + size, m_mount }, output);
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(!m_agent.folder().isEmpty());
        if (::geteuid() != 0)
            QFAIL("needs root to mount a small tmpfs as the agent's disk; run as root, or leave the test "
                  "out with `ctest -LE root`");
        m_mount = path(QStringLiteral("small-disk"));
        QVERIFY(QDir().mkpath(m_mount));
        QVERIFY(QDir().mkpath(path(QStringLiteral("data"))));
        QString output;
        // One checkpoint of the seed CNN is 26 MB (its 13 MB of parameters, as many of
        // momentum, and the position): 40 MB hold one and the run's records, never two.
        QVERIFY2(run(QStringLiteral("mount"),
                     { QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"),
                         QStringLiteral("size=40m"), QStringLiteral("tmpfs"), m_mount },
                     &output),
            qPrintable(QStringLiteral("cannot mount a tmpfs: ") + output));
        m_mounted = true;
        VERIFY_OK(startAgent());
        VERIFY_OK(test::createSyntheticSet(m_agent.client(), "synth", 192, 64, 5));
    }

    void cleanupTestCase()
    {
        // What is left behind is said first: a process left on the mount also makes umount fail.
        const Status nothingLeft = m_agent.stopAndCheckNothingLeft();
        QString output;
        const bool unmounted = !m_mounted || run(QStringLiteral("umount"), { m_mount }, &output);
        VERIFY_OK(nothingLeft);
        QVERIFY2(unmounted, qPrintable(output));
    }

    void fullDiskFailsCleanlyAndTheStudyFinishesOnceSpaceIsFreed()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("console/journal.sqlite"))));
        v1::StudyPlan plan;
        plan.set_name("full-disk");
        plan.set_dataset("synth");
        plan.set_max_failures(0); // a full disk must not count as one
        plan.mutable_baseline()->set_skip(true);
        plan.mutable_training()->set_checkpoint_every_epochs(1);
        plan.mutable_grid()->add_workers(1);
        plan.mutable_grid()->add_batch_size(32);
        plan.mutable_grid()->add_epochs(3);
        plan.mutable_grid()->add_threads_per_worker(1);
        StudyRunner runner(&journal);
        runner.setAgents(m_agents);
        runner.setTickInterval(100);
        connect(
            &runner, &StudyRunner::message, this, [](const QString &line) { qInfo("%s", qPrintable(line)); });
        const auto createdStudy = runner.createStudy(plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        QSignalSpy finished(&runner, &StudyRunner::finished);
        VERIFY_OK(runner.drive(studyId));
        QCOMPARE(runner.state().runs().size(), 1);
        const QString runId = runner.state().runs().first().planned.runId;

        // The second checkpoint does not fit: the attempt fails and the run waits.
        QTRY_VERIFY_WITH_TIMEOUT(runner.state().run(runId)->spaceNeeded > 0, test::endsWithin());
        const RunProgress waiting = *runner.state().run(runId);
        QCOMPARE(waiting.phase, RunPhase::Pending);
        QCOMPARE(waiting.failures, 0);
        QCOMPARE(waiting.attempts.size(), 1);
        const QString reason = waiting.attempts.first().reason;
        qInfo("attempt 1: %s", qPrintable(reason));
        QVERIFY2(reason.contains(QLatin1String("no space left on device: the checkpoint needs"))
                && reason.contains(QLatin1String("MB free")),
            qPrintable(reason));
        QVERIFY2(!reason.contains(QLatin1String("signal")), qPrintable(reason)); // no abort
        QVERIFY2(
            waiting.reason.contains(QLatin1String("waiting for disk space")), qPrintable(waiting.reason));
        // Parameters and momentum once each (2 x 13.0 MB) and the small rest.
        QVERIFY2(waiting.spaceNeeded > 26'000'000 && waiting.spaceNeeded < 27'000'000,
            qPrintable(QString::number(waiting.spaceNeeded)));

        // Nothing half-written stays, and the committed checkpoint of epoch 1 is whole.
        const QString checkpoints
            = m_mount + QStringLiteral("/agent/runs/") + runId + QStringLiteral("/checkpoints");
        QVERIFY2(foldersStartingWith(checkpoints, QStringLiteral(".tmp-")).isEmpty(),
            qPrintable(foldersStartingWith(checkpoints, QStringLiteral(".tmp-")).join(QLatin1Char(' '))));
        QVERIFY(QFileInfo::exists(checkpoints + QStringLiteral("/epoch-0001/MANIFEST")));
        // Attempt 1's event log is whole: its epoch, its end, no torn record.
        {
            agent::RunEventLog log(
                (m_mount + QStringLiteral("/agent/runs/") + runId + QStringLiteral("/1/events.log"))
                    .toStdString());
            VERIFY_OK(log.opened());
            QCOMPARE(log.droppedOnOpen(), std::size_t(0));
            std::vector<v1::RunEvent> events;
            log.read(1, 100'000, std::chrono::milliseconds(0), &events);
            bool epoch1 = false, ended = false;
            for (const auto &e : events) {
                epoch1 = epoch1 || (e.has_epoch() && e.epoch().epoch() == 1);
                ended = ended || (e.has_rank_exited() && e.rank_exited().kind() == v1::EXIT_NO_SPACE);
            }
            QVERIFY(epoch1);
            QVERIFY(ended);
        }
        // It keeps waiting while the disk is full: no attempt burns an epoch. A "nothing
        // happens" wait, the one kind a fixed time may bound: 4 s is dozens of the runner's
        // ticks, in which a retry would have started.
        QTest::qWait(4000);
        QCOMPARE(runner.state().run(runId)->attempts.size(), 1);
        QCOMPARE(runner.state().run(runId)->phase, RunPhase::Pending);

        // Space is freed: the run resumes from epoch 1 and finishes.
        QString output;
        QVERIFY2(resize(QStringLiteral("200m"), &output), qPrintable(output));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, test::endsWithin());
        QCOMPARE(finished.first().first().toString(), QStringLiteral("SUCCEEDED"));
        const RunProgress &done = *runner.state().run(runId);
        QCOMPARE(done.failures, 0);
        QCOMPARE(done.attempts.size(), 2);
        int resumed = -1;
        QList<int> trained;
        for (const auto &e : journal.runEvents(runId, 2, m_agent.address())) {
            if (e.has_started())
                resumed = e.started().resumed_from_epoch();
            if (e.has_epoch())
                trained << e.epoch().epoch();
        }
        QCOMPARE(resumed, 1); // what was committed before the disk filled was kept
        QCOMPARE(trained, QList<int>({ 2, 3 }));

        // The agent's rule: a run that SUCCEEDED keeps its final checkpoint only.
        QCOMPARE(foldersStartingWith(checkpoints, QStringLiteral("epoch-")),
            QStringList { checkpoints + QStringLiteral("/epoch-0003") });
        AgentClient &client = m_agent.client();
        v1::DescribeResponse d;
        QTRY_VERIFY_WITH_TIMEOUT(client.describe(&d).ok() && d.storage().temporary_bytes() == 0, 30'000);
        QVERIFY2(d.storage().checkpoint_bytes() > 26'000'000 && d.storage().checkpoint_bytes() < 27'000'000,
            qPrintable(QString::number(d.storage().checkpoint_bytes())));
        QVERIFY(d.storage().free_bytes() > 100'000'000);
        QVERIFY2(QString::fromStdString(d.storage().retention()).contains(QLatin1String("final checkpoint")),
            d.storage().retention().c_str());

        // gc --finished none frees it; a dry run first removes nothing.
        QProcess gc;
        const QStringList common { QStringLiteral("gc"), QStringLiteral("--agent"), m_agent.address(),
            QStringLiteral("--finished"), QStringLiteral("none"), QStringLiteral("--console-state-dir"),
            path(QStringLiteral("console")) };
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SCALELAB_TOKEN"), kToken);
        gc.setProcessEnvironment(env);
        gc.start(test::binary("scalelab-cli"), common + QStringList { QStringLiteral("--dry-run") });
        QVERIFY(gc.waitForFinished(30'000));
        QString said = QString::fromUtf8(gc.readAllStandardOutput());
        QVERIFY2(gc.exitCode() == 0 && said.contains(QLatin1String("would remove"))
                && said.contains(QLatin1String("epoch-0003")),
            qPrintable(said + QString::fromUtf8(gc.readAllStandardError())));
        QVERIFY(QFileInfo::exists(checkpoints + QStringLiteral("/epoch-0003")));
        gc.start(test::binary("scalelab-cli"), common);
        QVERIFY(gc.waitForFinished(30'000));
        said = QString::fromUtf8(gc.readAllStandardOutput());
        qInfo("%s", qPrintable(said));
        QVERIFY2(gc.exitCode() == 0 && said.contains(QLatin1String("removed 1 folder(s)")), qPrintable(said));
        QVERIFY(!QFileInfo::exists(checkpoints + QStringLiteral("/epoch-0003")));
    }

    // The disk is full to the last block: a new attempt cannot be recorded, so it is
    // refused (RESOURCE_EXHAUSTED, in words) and nothing is left half-written; the records
    // of the run before it stay readable, also to an agent restarted meanwhile.
    void unrecordableRunIsRefusedAndOlderRecordsSurvive()
    {
        // A run of its own first (this function runs alone, in a process of its own: ctest
        // registers each function as a test), recorded before the disk fills.
        const std::string earlier = "recorded-earlier";
        const int earlierAttempt = 1;
        // A one-rank, one-epoch run of the synthetic set, attempt 1.
        const auto oneEpoch = [](const std::string &runId) {
            v1::StartWorkersRequest request;
            request.set_run_id(runId);
            request.set_attempt(1);
            request.set_world_size(1);
            request.add_ranks(0);
            request.mutable_spec()->set_dataset("synth");
            request.mutable_spec()->set_batch_size(32);
            request.mutable_spec()->set_epochs(1);
            return request;
        };
        {
            v1::StartWorkersResponse response;
            VERIFY_OK(m_agent.client().startWorkers(oneEpoch(earlier), &response));
            const auto ended = [&] {
                QList<v1::RunInfo> runs;
                if (!m_agent.client().listAllRuns(&runs).ok())
                    return false;
                for (const auto &r : runs)
                    if (r.run_id() == earlier && r.state() == v1::SUCCEEDED)
                        return true;
                return false;
            };
            QTRY_VERIFY_WITH_TIMEOUT(ended(), test::endsWithin());
        }

        QString output;
        QVERIFY2(resize(QStringLiteral("60m"), &output), qPrintable(output));
        const QString filler = m_mount + QStringLiteral("/filler");
        {
            std::ofstream out(filler.toStdString(), std::ios::binary);
            const std::string block(1 << 20, 'x');
            while (out.write(block.data(), std::streamsize(block.size())))
                ;
        }
        QVERIFY2(freeBytes(m_mount) < (1 << 20), qPrintable(QString::number(freeBytes(m_mount))));

        v1::StartWorkersResponse response;
        const Status result = m_agent.client().startWorkers(oneEpoch("no-room"), &response);
        QCOMPARE(result.code(), Status::Code::ResourceExhausted);
        QVERIFY2(result.error().contains(QLatin1String(": no space left on device: cannot record the run")),
            qPrintable(result.error()));
        const QString attemptDir = m_mount + QStringLiteral("/agent/runs/no-room/1");
        QVERIFY(!QFileInfo::exists(attemptDir + QStringLiteral("/request.json"))); // no torn record

        // A restarted agent reopens the earlier run as it was and ignores the refused one.
        VERIFY_OK(m_agent.stopAndCheckNothingLeft());
        QVERIFY(QFile::remove(filler));
        VERIFY_OK(startAgent());
        QList<v1::RunInfo> after;
        QVERIFY(m_agent.client().listAllRuns(&after).ok());
        bool found = false;
        for (const auto &r : after) {
            found = found
                || (r.run_id() == earlier && r.attempt() == earlierAttempt && r.state() == v1::SUCCEEDED);
            QVERIFY2(r.run_id() != "no-room", "the refused run was reopened");
        }
        QVERIFY2(!QFileInfo::exists(m_mount + QStringLiteral("/agent/runs/no-room")),
            "the refused run left a folder");
        QVERIFY2(found,
            qPrintable(QStringLiteral("%1 attempt %2 was not reopened")
                           .arg(QString::fromStdString(earlier))
                           .arg(earlierAttempt)));
    }
};

QTEST_GUILESS_MAIN(TestDiskFull)
#include "tst_disk_full.moc"
