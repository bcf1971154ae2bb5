// The desktop console killed mid-study and started again (issue: "a console that is
// killed mid-study and started again shows the same study, reattaches to runs that kept
// going, picks up their events from where it stopped, and finishes the study with every
// configuration run exactly once").
//
// Real processes: a scalelab-agent, and the `scalelab` console (offscreen) launched on a
// plan file with --launch-study, SIGKILLed while the baseline trains, then started again
// with no study argument: it must reattach by itself.
#include "agent_client.h"
#include "agent_fixture.h"
#include "journal.h"
#include "study_driver.h"
#include "study_plan.h"
#include "study_state.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QProcess>
#include <QTest>

#include <csignal>

using namespace scalelab;
using namespace scalelab::core;

namespace {
const QString kToken = QStringLiteral("console-durability-token-0123456789");
}

class TestConsoleDurability : public QObject {
    Q_OBJECT
private:
    test::AgentFixture m_agent; // its folder holds the console's too, so cleanup sees both

    QString path(const QString &name) const { return m_agent.path(name); }

    // The console is started (and killed) by hand: it is the program under test.
    void startConsole(QProcess *console, const QStringList &extra)
    {
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        console->setProcessEnvironment(env);
        console->setProcessChannelMode(QProcess::MergedChannels);
        console->start(test::binary("scalelab"),
            QStringList { QStringLiteral("--state-dir"), path(QStringLiteral("console")),
                QStringLiteral("--agent"), m_agent.address(), QStringLiteral("--token-file"),
                path(QStringLiteral("token")) }
                + extra);
        QVERIFY2(console->waitForStarted(), qPrintable(console->errorString()));
    }

    // The study as the journal has it (a separate connection, as another process would).
    StudyState studyState(QString *studyId)
    {
        Journal journal;
        if (!journal.open(path(QStringLiteral("console/journal.sqlite"))) || journal.studyIds().isEmpty())
            return {};
        *studyId = journal.studyIds().first();
        return StudyState::replay(journal.events(*studyId));
    }

    int storedEvents(const QString &studyId, const QString &runId)
    {
        Journal journal;
        if (!journal.open(path(QStringLiteral("console/journal.sqlite"))))
            return 0;
        const StudyState state = StudyState::replay(journal.events(studyId));
        const RunProgress *run = state.run(runId);
        if (!run || run->attempts.isEmpty())
            return 0;
        return int(journal.runEvents(runId, run->attempt, run->attempts.last().agents.first()).size());
    }

private Q_SLOTS:
    void initTestCase()
    {
        test::AgentFixtureOptions options;
        options.stateName = QStringLiteral("agent");
        options.token = kToken;
        VERIFY_OK(m_agent.start(options));
        VERIFY_OK(test::createSyntheticSet(m_agent.client(), "synth", 256, 64));
        QFile token(path(QStringLiteral("token")));
        QVERIFY(token.open(QIODevice::WriteOnly));
        token.write(kToken.toUtf8());
    }

    void cleanupTestCase() { VERIFY_OK(m_agent.stopAndCheckNothingLeft()); }

    void consoleKilledMidStudyAndReopened()
    {
        v1::StudyPlan plan;
        plan.set_name("durable");
        plan.set_dataset("synth");
        plan.mutable_grid()->add_workers(2);
        plan.mutable_grid()->add_batch_size(16);
        plan.mutable_grid()->add_epochs(3);
        plan.mutable_grid()->add_threads_per_worker(1);
        plan.mutable_baseline()->set_threads_per_worker(1);
        VERIFY_OK(savePlan(plan, path(QStringLiteral("plan.json"))));

        QProcess first;
        startConsole(&first, { QStringLiteral("--launch-study"), path(QStringLiteral("plan.json")) });
        // Kill it while the baseline trains and some of its events are stored.
        QString studyId;
        QTRY_VERIFY_WITH_TIMEOUT(studyState(&studyId).runs().size() == 2
                && studyState(&studyId).runs().first().phase == RunPhase::Running
                && storedEvents(studyId, studyState(&studyId).runs().first().planned.runId) >= 3,
            test::endsWithin());
        const QString baselineId = studyState(&studyId).runs().first().planned.runId;
        const int storedBeforeKill = storedEvents(studyId, baselineId);
        ::kill(pid_t(first.processId()), SIGKILL);
        QVERIFY(first.waitForFinished());

        // The run kept going on the agent while no console watched it.
        v1::ListRunsResponse listed;
        QVERIFY(m_agent.client().listRuns({}, &listed).ok());
        bool baselineAlive = false;
        for (const auto &r : listed.runs())
            baselineAlive
                = baselineAlive || (QString::fromStdString(r.run_id()) == baselineId && r.attempt() == 1);
        QVERIFY(baselineAlive);

        // Started again with nothing but its state folder, the console reattaches.
        QProcess second;
        startConsole(&second, {});
        QTRY_VERIFY_WITH_TIMEOUT(
            studyState(&studyId).state() == QLatin1String("SUCCEEDED"), test::endsWithin());
        second.terminate();
        QVERIFY(second.waitForFinished(10'000));
        QTRY_VERIFY_WITH_TIMEOUT(
            test::processesMentioning(path(QStringLiteral("console"))).isEmpty(), 10'000);

        const StudyState state = studyState(&studyId);
        QCOMPARE(state.runs().size(), 2);
        for (const RunProgress &run : state.runs()) {
            QCOMPARE(phaseName(run.phase), QStringLiteral("SUCCEEDED"));
            QCOMPARE(run.attempts.size(), 1); // reattached, not restarted: none duplicated
        }
        // Every event of the baseline once, in order, with no gap across the kill.
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("console/journal.sqlite"))));
        const auto events
            = journal.runEvents(baselineId, 1, state.run(baselineId)->attempts.first().agents.first());
        QVERIFY(int(events.size()) > storedBeforeKill);
        for (std::size_t i = 0; i < events.size(); ++i)
            QCOMPARE(events[i].seq(), qint64(i + 1));
        // The agent ran each configuration exactly once.
        QVERIFY(m_agent.client().listRuns({}, &listed).ok());
        QCOMPARE(listed.runs_size(), 2);
        for (const auto &r : listed.runs())
            QCOMPARE(r.attempt(), 1);
    }
};

QTEST_GUILESS_MAIN(TestConsoleDurability)
#include "tst_console_durability.moc"
