// Drives a study in a test with fresh StudyRunners until it ends; each runner commits
// `crashAfter` journal events (0 = never) and then "dies" (StudyRunner::crashed), as a
// console or CLI killed at that moment would; the next one continues from the journal.
//
//   QCOMPARE(test::driveStudyToEnd(&journal, studyId, agents, 1, &runners), "SUCCEEDED");
//
// Returns the study's final state, or what went wrong. Test-thread only.
#pragma once

#include "journal.h"
#include "study_runner.h"

#include <QSignalSpy>
#include <QTest>

namespace scalelab::test {

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
