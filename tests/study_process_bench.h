// What the study process tests (tst_study_process_recovery, tst_study_process_runs) share:
// two local agents on loopback, started once for the program, and small plans for them.
#pragma once

#include "journal.h"
#include "local_agent.h"
#include "study_driver.h"
#include "study_runner.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

namespace scalelab::test {

using namespace scalelab::core;

inline const QString kToken = QStringLiteral("study-test-token-0123456789abcdef");

inline v1::StudyPlan tinyPlan(const QList<int> &workers, int epochs = 1)
{
    v1::StudyPlan plan;
    plan.set_name("tiny");
    plan.set_dataset("synth");
    plan.mutable_training()->set_max_train_images(192);
    plan.mutable_training()->set_max_test_images(64);
    plan.mutable_baseline()->set_threads_per_worker(1);
    for (int w : workers)
        plan.mutable_grid()->add_workers(w);
    plan.mutable_grid()->add_batch_size(16);
    plan.mutable_grid()->add_epochs(epochs);
    plan.mutable_grid()->add_threads_per_worker(1);
    plan.set_target_accuracy(0.2);
    return plan;
}

// One run of 1 worker, 4 epochs on all 192 images, a checkpoint every epoch: long
// enough to be stopped after a checkpoint and resumed.
inline v1::StudyPlan resumablePlan()
{
    v1::StudyPlan plan = tinyPlan({ 1 }, 4);
    plan.mutable_baseline()->set_skip(true);
    plan.mutable_training()->set_max_train_images(0); // all 192, a few seconds per epoch
    plan.mutable_training()->set_checkpoint_every_epochs(1);
    return plan;
}

// The agents and folder of one test program, and how its tests drive studies on them.
class StudyProcessBench {
protected:
    QTemporaryDir m_tmp;
    LocalAgent m_a, m_b;
    QList<AgentEndpoint> m_agents;

    QString path(const QString &name) const { return m_tmp.filePath(name); }

    QString driveToEnd(Journal *journal, const QString &studyId, int crashAfter, int *runners = nullptr)
    {
        return test::driveStudyToEnd(
            journal, studyId, m_agents, crashAfter, runners, 200, test::endsWithin());
    }

    // Creates a study from `plan` in a journal of its own under `folder` and drives it with
    // one runner to its end. Returns the study's final state, or what went wrong.
    QString runStudy(const v1::StudyPlan &plan, const QString &folder, int timeoutMs, Journal *journal,
        QString *studyId, StudySnapshot *snapshot)
    {
        if (const Status opened = journal->open(path(folder + QStringLiteral("/journal.sqlite"))); !opened)
            return opened.error();
        StudyRunner runner(journal);
        runner.setAgents(m_agents);
        runner.setTickInterval(100);
        const auto created = runner.createStudy(plan);
        if (!created)
            return created.error();
        *studyId = created.value();
        QSignalSpy finished(&runner, &StudyRunner::finished);
        if (const Status driven = runner.drive(*studyId); !driven)
            return driven.error();
        if (!QTest::qWaitFor([&] { return !finished.isEmpty(); }, timeoutMs))
            return QStringLiteral("the study did not end in %1 s").arg(timeoutMs / 1000);
        *snapshot = runner.snapshot();
        return finished.first().first().toString();
    }

    // Starts an agent on the shared data folder with its own state folder and adds it
    // to `agents`.
    Status startAgent(LocalAgent *agent, const QString &stateDir, QList<AgentEndpoint> *agents)
    {
        return test::startStudyAgent(agent, path(QStringLiteral("data")), path(stateDir), kToken, agents);
    }

    // For initTestCase(): the two agents.
    void startBenchAgents()
    {
        QVERIFY(m_tmp.isValid());
        VERIFY_OK(test::startStudyAgents({ &m_a, &m_b }, m_tmp.path(), kToken, 192, &m_agents));
    }

    // For cleanupTestCase(): they stop, and nothing is left.
    void stopBenchAgents()
    {
        m_a.stop();
        m_b.stop();
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
    }
};

} // namespace scalelab::test
