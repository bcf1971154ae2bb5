// Drives a study in a test with fresh StudyRunners until it ends; each runner commits
// `crashAfter` journal events (0 = never) and then "dies" (StudyRunner::crashed), as a
// console or CLI killed at that moment would; the next one continues from the journal.
//
//   QCOMPARE(test::driveStudyToEnd(&journal, studyId, agents, 1, &runners), "SUCCEEDED");
//
// Returns the study's final state, or what went wrong. startStudyAgent() starts one of
// the agents such a study runs on, startStudyAgents() all of them with their data set
// (createSyntheticSet() makes a data set alone), createStudy() the study, and
// agentRunsOf() lists what the agents ran for it. Test-thread only.
#pragma once

#include "agent_client.h"
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

// Makes the synthetic set `name` of `trainImages` and `testImages` images from `seed` through
// `client`'s agent, in its data folder (which agents of startStudyAgent() share).
inline core::Status createSyntheticSet(
    core::AgentClient &client, const char *name, int trainImages, int testImages, int seed = 0)
{
    v1::CreateSyntheticDatasetRequest request;
    request.set_name(name);
    request.set_train_images(trainImages);
    request.set_test_images(testImages);
    request.set_seed(seed);
    v1::Dataset dataset;
    return client.createSyntheticDataset(request, &dataset);
}

// Starts each of `agents` as startStudyAgent() does, sharing `folder`/data, with state folders
// `folder`/agent-1, agent-2, ..., and makes the synthetic set "synth" there (`trainImages`, 64
// test images, seed 3): the agents the process tests of studies and tunes run on.
inline core::Status startStudyAgents(const QList<core::LocalAgent *> &agents, const QString &folder,
    const QString &token, int trainImages, QList<core::AgentEndpoint> *endpoints)
{
    const QString dataDir = folder + QStringLiteral("/data");
    if (!QDir().mkpath(dataDir))
        return core::Status::failure(QStringLiteral("cannot make ") + dataDir);
    for (core::LocalAgent *agent : agents) {
        const QString stateDir = folder + QStringLiteral("/agent-%1").arg(endpoints->size() + 1);
        if (core::Status started = startStudyAgent(agent, dataDir, stateDir, token, endpoints); !started)
            return started;
    }
    core::AgentClient client(agents.first()->endpoint(), token);
    return createSyntheticSet(client, "synth", trainImages, 64, 3);
}

// Creates a study of `plan` in `journal`, as a runner for `agents` does: its id.
inline core::Result<QString> createStudy(
    core::Journal *journal, const QList<core::AgentEndpoint> &agents, const v1::StudyPlan &plan)
{
    core::StudyRunner creator(journal);
    creator.setAgents(agents);
    return creator.createStudy(plan);
}

// The runs of study `studyId` as `agents` (all of the study's token) list them: a run's id
// starts with its study's.
inline core::Result<QList<v1::RunInfo>> agentRunsOf(
    const QList<core::AgentEndpoint> &agents, const QString &token, const QString &studyId)
{
    QList<v1::RunInfo> found;
    for (const core::AgentEndpoint &agent : agents) {
        core::AgentClient client(agent.address, token);
        v1::ListRunsResponse runs;
        if (const core::Status listed = client.listRuns({}, &runs); !listed)
            return listed;
        for (const v1::RunInfo &run : runs.runs())
            if (QString::fromStdString(run.run_id()).startsWith(studyId))
                found << run;
    }
    return found;
}

inline QString driveStudyToEnd(core::Journal *journal, const QString &studyId,
    const QList<core::AgentEndpoint> &agents, int crashAfter, int *runners = nullptr, int maxRunners = 1000,
    int runnerTimeoutMs = 300'000)
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
            return QStringLiteral("runner %1 neither finished nor crashed in %2 s")
                .arg(n)
                .arg(runnerTimeoutMs / 1000);
        if (runners)
            *runners = n;
        if (!finished.isEmpty())
            return finished.first().first().toString();
    }
    return QStringLiteral("never finished (%1 runners)").arg(maxRunners);
}

} // namespace scalelab::test
