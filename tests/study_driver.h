// Drives a study in a test with fresh StudyRunners until it ends; each runner commits
// `crashAfter` journal events (0 = never) and then "dies" (StudyRunner::crashed), as a
// console or CLI killed at that moment would; the next one continues from the journal.
//
//   QCOMPARE(test::driveStudyToEnd(&journal, studyId, agents, 1, &runners), "SUCCEEDED");
//
// Returns the study's final state, or what went wrong. startStudyAgent() starts one of
// the agents such a study runs on. Test-thread only.
#pragma once

#include "journal.h"
#include "local_agent.h"
#include "study_runner.h"
#include "test_support.h"

#include <QSignalSpy>
#include <QTest>

namespace scalelab::test {

// Starts `agent` on the shared `dataDir` with a state folder of its own and the study's
// `token`, and adds it to `agents` (named by its address).
inline core::Status startStudyAgent(core::LocalAgent *agent, const QString &dataDir, const QString &stateDir,
    const QString &token, QList<core::AgentEndpoint> *agents)
{
    core::LocalAgentOptions options;
    options.agentBinary = binary("scalelab-agent");
    options.dataDir = dataDir;
    options.stateDir = stateDir;
    options.token = token;
    if (core::Status started = agent->start(options); !started)
        return started;
    *agents << core::AgentEndpoint { agent->endpoint(), agent->endpoint(), token };
    return core::Status::success();
}

inline QString driveStudyToEnd(core::Journal *journal, const QString &studyId, const QList<core::AgentEndpoint> &agents,
    int crashAfter, int *runners = nullptr, int maxRunners = 1000, int runnerTimeoutMs = 300'000)
{
    for (int n = 1; n <= maxRunners; ++n) {
        core::StudyRunner runner(journal);
        runner.setAgents(agents);
        runner.setTickInterval(100);
        runner.setCrashAfterEvents(crashAfter);
        QSignalSpy finished(&runner, &core::StudyRunner::finished);
        QSignalSpy crashed(&runner, &core::StudyRunner::crashed);
        if (const core::Status driven = runner.drive(studyId); !driven)
            return QStringLiteral("drive failed: ") + driven.error();
        if (!QTest::qWaitFor([&] { return finished.count() + crashed.count() > 0; }, runnerTimeoutMs))
            return QStringLiteral("runner %1 neither finished nor crashed in %2 s").arg(n).arg(runnerTimeoutMs / 1000);
        if (runners)
            *runners = n;
        if (!finished.isEmpty())
            return finished.first().first().toString();
    }
    return QStringLiteral("never finished (%1 runners)").arg(maxRunners);
}

} // namespace scalelab::test
