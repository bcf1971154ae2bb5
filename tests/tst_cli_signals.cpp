// Ctrl-C in scalelab-cli's long-running commands (app/cli/interrupts.h): SIGINT sent once and
// twice to `run`, `study run` and `study watch`, to the CLI alone (as `kill -INT` does).
//
// Once, the command ends in order with exit 1: `run` stops its run on the agent and follows
// it to CANCELLED, its --json summary a JSON object; `study run` and `study watch` leave the
// study in the journal, its run training on on its agent, for `study watch` to continue.
// Twice, while the first one's clean-up cannot end (the agent SIGSTOPped: `run`'s StopRun and
// its stream wait for it, and a study's local agent takes ~10 s to be stopped), the second
// exits at once with 130, and once the agent goes on nothing the test started is left.
#include "agent_client.h"
#include "agent_fixture.h"
#include "journal.h"
#include "study_plan.h"
#include "study_state.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using namespace scalelab;
using namespace scalelab::core;

namespace {

// One scalelab-cli process: what it printed so far, signals to it, its end.
class Cli {
public:
    Cli(const QStringList &arguments, const QString &token = {})
    {
        auto env = QProcessEnvironment::systemEnvironment();
        if (!token.isEmpty())
            env.insert(QStringLiteral("SCALELAB_TOKEN"), token);
        m_process.setProcessEnvironment(env);
        m_process.start(test::binary("scalelab-cli"), arguments);
    }

    // Whether standard output or error holds `text` by now.
    bool said(const char *text)
    {
        m_out += m_process.readAllStandardOutput();
        m_err += m_process.readAllStandardError();
        return m_out.contains(text) || m_err.contains(text);
    }
    void interrupt() { ::kill(pid_t(m_process.processId()), SIGINT); }
    qint64 pid() const { return m_process.processId(); }
    // Its exit code once it ended (-1 when it did not end within `timeoutMs`, or by a signal).
    int exitCode(int timeoutMs)
    {
        if (!m_process.waitForFinished(timeoutMs))
            return -1;
        said("");
        return m_process.exitStatus() == QProcess::NormalExit ? m_process.exitCode() : -1;
    }
    QByteArray out() const { return m_out; }
    QByteArray err() const { return m_err; }
    QByteArray both() const { return m_out + "\n--- stderr:\n" + m_err; }

private:
    QProcess m_process; // killed when the test fails before its end
    QByteArray m_out, m_err;
};

// The run `runId` as `client`'s agent lists it (state 0 when it lists no such run).
v1::RunState agentRunState(AgentClient &client, const QString &runId)
{
    v1::ListRunsResponse runs;
    if (!client.listRuns({}, &runs).ok())
        return v1::RUN_STATE_UNSPECIFIED;
    for (const v1::RunInfo &run : runs.runs())
        if (QString::fromStdString(run.run_id()) == runId)
            return run.state();
    return v1::RUN_STATE_UNSPECIFIED;
}

bool ended(v1::RunState state)
{
    return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

// `agent` started with the synthetic set "syn" (200 train, 50 test images).
Status startWithSet(test::AgentFixture &agent)
{
    test::AgentFixtureOptions options;
    options.syntheticSet = QStringLiteral("syn");
    return agent.start(options);
}

// Stops `runId` on `agent`, which the CLI left training (or stopping), and waits for its end.
bool stopRunAndWait(test::AgentFixture &agent, const QString &runId)
{
    v1::StopRunResponse stopped;
    if (!agent.client().stopRun(runId, &stopped).ok())
        return false;
    return QTest::qWaitFor(
        [&] { return ended(agentRunState(agent.client(), runId)); }, test::timeLimit(60'000));
}

// One run of one worker on the set "syn", 1 thread, long enough to be training whenever the
// test signals (the test stops it).
v1::StudyPlan longPlan()
{
    v1::StudyPlan plan;
    plan.set_name("signals");
    plan.set_dataset("syn");
    plan.mutable_training()->set_max_test_images(40);
    plan.mutable_baseline()->set_skip(true);
    plan.mutable_grid()->add_workers(1);
    plan.mutable_grid()->add_batch_size(25);
    plan.mutable_grid()->add_epochs(500);
    plan.mutable_grid()->add_threads_per_worker(1);
    return plan;
}

// The study id in `study run`'s "study ID created" line.
QString createdStudy(const QByteArray &err)
{
    return QString::fromUtf8(err).section(QLatin1String("study "), 1, 1).section(QLatin1Char(' '), 0, 0);
}

// The state of `studyId` in the journal of `stateDir`.
QString studyState(const QString &stateDir, const QString &studyId)
{
    Journal journal;
    if (!journal.open(stateDir + QStringLiteral("/journal.sqlite")).ok())
        return QStringLiteral("(no journal)");
    return StudyState::replay(journal.events(studyId)).state();
}

// The one local agent `cli` started (its only child), 0 when there is none (yet).
qint64 localAgentOf(const Cli &cli)
{
    const QStringList children = test::childProcesses(cli.pid());
    return children.size() == 1 ? children.first().section(QLatin1Char(':'), 0, 0).toLongLong() : 0;
}

} // namespace

class TestCliSignals : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp; // on every command line the test starts: "nothing left" is checkable
    QString path(const QString &name) const { return m_tmp.filePath(name); }

    QStringList runArguments(const test::AgentFixture &agent, const char *runId) const
    {
        return { QStringLiteral("run"), QStringLiteral("--agent"), agent.address(),
            QStringLiteral("--dataset"), QStringLiteral("syn"), QStringLiteral("--epochs"),
            QStringLiteral("500"), QStringLiteral("--batch-size"), QStringLiteral("25"),
            QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--max-test-images"),
            QStringLiteral("40"), QStringLiteral("--run-id"), QLatin1String(runId),
            QStringLiteral("--json") };
    }

    // The second SIGINT while `agentPid` is stopped: `cli` ends at once with 130.
    void interruptTwice(Cli &cli, qint64 agentPid, const char *firstSays)
    {
        QVERIFY(agentPid > 0);
        ::kill(pid_t(agentPid), SIGSTOP);
        auto resume = qScopeGuard([agentPid] { ::kill(pid_t(agentPid), SIGCONT); });
        cli.interrupt();
        // The first one is acted on (its words printed); what it started cannot end meanwhile.
        QTRY_VERIFY2_WITH_TIMEOUT(cli.said(firstSays), cli.both().constData(), test::timeLimit(120'000));
        cli.interrupt();
        QCOMPARE(cli.exitCode(test::timeLimit(60'000)), 130);
        QVERIFY2(cli.err().contains("interrupted again: exiting at once"), cli.both().constData());
    }

    // interruptTwice() for `study run` or `watch` on its local agent, whose run has been placed:
    // then the agent, continued, goes with its CLI, and the journal keeps the study as it was.
    void interruptStudyTwice(Cli &cli, const QString &stateDir, const QString &studyId)
    {
        interruptTwice(cli, localAgentOf(cli), "interrupted; the study is kept in");
        if (QTest::currentTestFailed())
            return;
        const auto left = [&] { return test::processesMentioning(stateDir); };
        QTRY_VERIFY2_WITH_TIMEOUT(left().isEmpty(), qPrintable(left().join('\n')), test::timeLimit(60'000));
        QCOMPARE(studyState(stateDir, studyId), QStringLiteral("RUNNING"));
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_tmp.isValid()); }

    void cleanupTestCase()
    {
        const auto left = [this] { return test::processesMentioning(m_tmp.path()); };
        QTRY_VERIFY2_WITH_TIMEOUT(
            left().isEmpty(), qPrintable(left().join(QLatin1Char('\n'))), test::timeLimit(30'000));
    }

    // Once: the run is stopped on the agent and followed to its end; exit 1.
    void runInterruptedOnceStopsItsRun()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(startWithSet(agent));
        Cli cli(runArguments(agent, "sig-once"), agent.token());
        QTRY_VERIFY2_WITH_TIMEOUT(cli.said("\"step\":"), cli.both().constData(), test::endsWithin());
        cli.interrupt();
        QCOMPARE(cli.exitCode(test::endsWithin()), 1);
        QVERIFY2(cli.err().contains("interrupted: stopping run sig-once"), cli.both().constData());
        // The summary line is JSON (written by QJsonDocument), and says what the agent says.
        const QJsonObject summary = QJsonDocument::fromJson(cli.out().trimmed().split('\n').last()).object();
        QCOMPARE(summary.value(QLatin1String("run_id")).toString(), QStringLiteral("sig-once"));
        QCOMPARE(summary.value(QLatin1String("final")).toObject().value(QLatin1String("state")).toString(),
            QStringLiteral("CANCELLED"));
        QCOMPARE(summary.value(QLatin1String("batch_size")).toInt(), 25);
        QCOMPARE(agentRunState(agent.client(), QStringLiteral("sig-once")), v1::CANCELLED);
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Twice, the agent not answering: exit 130 at once, not after the stop's deadline.
    void runInterruptedTwiceExitsAtOnce()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(startWithSet(agent));
        Cli cli(runArguments(agent, "sig-twice"), agent.token());
        QTRY_VERIFY2_WITH_TIMEOUT(cli.said("\"step\":"), cli.both().constData(), test::endsWithin());
        interruptTwice(cli, agent.agent().processId(), "interrupted: stopping run sig-twice");
        if (QTest::currentTestFailed())
            return;
        QVERIFY(stopRunAndWait(agent, QStringLiteral("sig-twice"))); // if the CLI's StopRun did not
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Once, `study run` and then `study watch`: the study is left as it is (its run trains on),
    // exit 1 each time.
    void studyInterruptedOnceIsKept()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(startWithSet(agent));
        VERIFY_OK(savePlan(longPlan(), path(QStringLiteral("once.json"))));
        const QString stateDir = path(QStringLiteral("once"));
        const QStringList common { QStringLiteral("--agent"), agent.address(), QStringLiteral("--state-dir"),
            stateDir };

        Cli run(
            QStringList { QStringLiteral("study"), QStringLiteral("run"), path(QStringLiteral("once.json")) }
                + common,
            agent.token());
        QTRY_VERIFY2_WITH_TIMEOUT(run.said("placed on"), run.both().constData(), test::endsWithin());
        run.interrupt();
        QCOMPARE(run.exitCode(test::endsWithin()), 1);
        const QString studyId = createdStudy(run.err());
        QVERIFY2(studyId.startsWith(QLatin1String("st-")), run.both().constData());
        QVERIFY2(run.err().contains("interrupted; the study is kept in"), run.both().constData());
        QVERIFY2(run.err().contains(("study watch " + studyId).toUtf8()), run.both().constData());
        const QString runId = studyId + QStringLiteral("-r01");
        QCOMPARE(studyState(stateDir, studyId), QStringLiteral("RUNNING"));
        QVERIFY(!ended(agentRunState(agent.client(), runId)));

        Cli watch(QStringList { QStringLiteral("study"), QStringLiteral("watch"), studyId } + common,
            agent.token());
        // Following the run again: its next epoch's line.
        QTRY_VERIFY2_WITH_TIMEOUT(
            watch.said("attempt 1 epoch"), watch.both().constData(), test::endsWithin());
        watch.interrupt();
        QCOMPARE(watch.exitCode(test::endsWithin()), 1);
        QVERIFY2(watch.err().contains("interrupted; the study is kept in"), watch.both().constData());
        QCOMPARE(studyState(stateDir, studyId), QStringLiteral("RUNNING"));
        QVERIFY(!ended(agentRunState(agent.client(), runId)));

        QVERIFY(stopRunAndWait(agent, runId));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Twice, `study run` and then `study watch` on a local agent that does not stop (SIGSTOPped):
    // exit 130 at once; the agent, continued, goes with its CLI (PR_SET_PDEATHSIG); the journal
    // keeps the study.
    void studyInterruptedTwiceExitsAtOnce()
    {
        VERIFY_OK(savePlan(longPlan(), path(QStringLiteral("twice.json"))));
        const QString stateDir = path(QStringLiteral("twice"));
        QVERIFY(QDir().mkpath(path(QStringLiteral("twice-data"))));
        const QStringList common { QStringLiteral("--state-dir"), stateDir, QStringLiteral("--data-dir"),
            path(QStringLiteral("twice-data")), QStringLiteral("--local-agents"), QStringLiteral("1") };

        Cli run(
            QStringList { QStringLiteral("study"), QStringLiteral("run"), path(QStringLiteral("twice.json")),
                QStringLiteral("--synthetic"), QStringLiteral("--synthetic-train"), QStringLiteral("200"),
                QStringLiteral("--synthetic-test"), QStringLiteral("50") }
            + common);
        QTRY_VERIFY2_WITH_TIMEOUT(run.said("placed on"), run.both().constData(), test::endsWithin());
        const QString studyId = createdStudy(run.err());
        QVERIFY2(studyId.startsWith(QLatin1String("st-")), run.both().constData());
        interruptStudyTwice(run, stateDir, studyId);
        if (QTest::currentTestFailed())
            return;

        // `study watch` starts the local agent again and places the run's next attempt there.
        Cli watch(QStringList { QStringLiteral("study"), QStringLiteral("watch"), studyId } + common);
        QTRY_VERIFY2_WITH_TIMEOUT(watch.said("placed on"), watch.both().constData(), test::endsWithin());
        interruptStudyTwice(watch, stateDir, studyId);
    }
};

QTEST_GUILESS_MAIN(TestCliSignals)
#include "tst_cli_signals.moc"
