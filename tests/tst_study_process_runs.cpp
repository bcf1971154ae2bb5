// What a study's runs do, end to end against real agents and workers: an infeasible run waits
// with its reason, a diverged run fails without retries, exact values reach the worker, the
// learning rate is found before the runs, a plan names its agents, and a spread run waits
// for an agent that answers late.
#include "agent_client.h"
#include "checkpoint_copy.h"
#include "journal.h"
#include "journal_events.h"
#include "local_agent.h"
#include "study_driver.h"
#include "study_process_bench.h"
#include "study_runner.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "spec_rules.h"
#include "study_results.h"
#include "worker_contract.h"

#include <csignal>

using namespace scalelab;
using namespace scalelab::core;
using test::kToken;
using test::resumablePlan;
using test::tinyPlan;

class TestStudyProcessRuns : public QObject, public test::StudyProcessBench {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { startBenchAgents(); }

    void cleanupTestCase() { stopBenchAgents(); }

    void infeasibleRunWaitsWithItsReasonUntilCancelled()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("infeasible/journal.sqlite"))));
        v1::StudyPlan plan = tinyPlan({ 2 });
        plan.mutable_baseline()->set_skip(true);
        plan.mutable_grid()->add_gpus_per_worker(1);
        StudyRunner runner(&journal);
        runner.setAgents(m_agents);
        runner.setTickInterval(100);
        const auto createdStudy = runner.createStudy(plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        QVERIFY(!studyId.isEmpty());
        QSignalSpy finished(&runner, &StudyRunner::finished);
        VERIFY_OK(runner.drive(studyId));
        QTRY_VERIFY_WITH_TIMEOUT(!runner.state().runs().first().reason.isEmpty(), 20000);
        QCOMPARE(runner.state().runs().first().reason,
            QStringLiteral("needs 1 GPU per worker; no agent has a GPU"));
        // A "nothing happens" wait, the one kind a fixed time may bound: for 1.5 s (15 of the
        // runner's ticks) the run stays pending and the study does not end.
        QTest::qWait(1500);
        QCOMPARE(runner.state().runs().first().phase, RunPhase::Pending);
        QVERIFY(finished.isEmpty());

        // Cancelled from "another process": the journal carries the request.
        Journal other;
        VERIFY_OK(other.open(journal.path()));
        VERIFY_OK(StudyRunner::requestCancel(&other, studyId, {}));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 20000);
        QCOMPARE(finished.first().first().toString(), QStringLiteral("CANCELLED"));
        QCOMPARE(runner.state().runs().first().phase, RunPhase::Cancelled);
    }

    // A run whose loss diverges ends FAILED at once, saying where, and is not retried
    // (maxFailures 2): a retry from its checkpoint would only diverge again.
    void divergedRunFailsWithoutRetries()
    {
        v1::StudyPlan plan = tinyPlan({ 2 }, 2);
        plan.set_max_failures(2);
        plan.mutable_training()->set_learning_rate(10); // the largest the rules take
        plan.mutable_training()->set_warmup_epochs(0);
        plan.mutable_training()->set_divergence_factor(1.5);
        plan.mutable_training()->set_divergence_steps(3);
        Journal journal;
        QString studyId;
        StudySnapshot s;
        QCOMPARE(runStudy(plan, QStringLiteral("diverge"), test::endsWithin(), &journal, &studyId, &s),
            QStringLiteral("FAILED"));
        const StudyResults results = computeStudyResults(s);
        for (int i = 0; i < s.runs.size(); ++i) {
            const RunResult &r = s.runs[i];
            QCOMPARE(r.state, QStringLiteral("FAILED"));
            QCOMPARE(r.attempts.size(), 1); // not retried
            QVERIFY2(r.attempts[0].reason.contains(QLatin1String("diverged at step")),
                qPrintable(r.attempts[0].reason));
            QVERIFY(!results.runs[i].byWallClock.available()); // no speedup from a diverged run
        }
    }

    // Every number of a plan reaches the worker exactly: tiny values, a long mantissa, and
    // zero as a value (momentum 0 turns momentum off; it is not "unset").
    void exactValuesReachTheWorker()
    {
        const QByteArray planText = R"({
            "name": "exact", "dataset": "synth",
            "training": { "learningRate": 1e-7, "momentum": 0, "weightDecay": 2.5e-7,
                          "labelSmoothing": 1.25e-5, "warmupEpochs": 0,
                          "divergenceFactor": 1.2345678901234567,
                          "maxTrainImages": 64, "maxTestImages": 32 },
            "baseline": { "skip": true },
            "grid": { "workers": [1], "batchSize": [16], "epochs": [1], "threadsPerWorker": [1] } })";
        const auto plan = parsePlanJson(planText);
        VERIFY_OK(plan);
        VERIFY_OK(checkPlan(*plan));
        QVERIFY(plan->training().has_momentum());
        Journal journal;
        QString studyId;
        StudySnapshot s;
        QCOMPARE(runStudy(*plan, QStringLiteral("exact"), test::endsWithin(), &journal, &studyId, &s),
            QStringLiteral("SUCCEEDED"));
        QCOMPARE(s.runs.size(), 1);
        const QJsonObject recipe = s.runs[0].recipe; // as the worker's started event said
        QCOMPARE(recipe.value(QLatin1String("learning_rate")).toDouble(), 1e-7);
        QCOMPARE(recipe.value(QLatin1String("peak_learning_rate")).toDouble(), 1e-7);
        QCOMPARE(recipe.value(QLatin1String("momentum")).toDouble(), 0.0);
        QCOMPARE(recipe.value(QLatin1String("weight_decay")).toDouble(), 2.5e-7);
        QCOMPARE(recipe.value(QLatin1String("label_smoothing")).toDouble(), 1.25e-5);
        QCOMPARE(recipe.value(QLatin1String("warmup_epochs")).toDouble(), 0.0);
        QCOMPARE(recipe.value(QLatin1String("divergence_factor")).toDouble(), 1.2345678901234567);
        const QStringList command = s.runs[0].workerCommand;
        QCOMPARE(command.value(command.indexOf(QStringLiteral("--lr")) + 1), QStringLiteral("1e-07"));
        QCOMPARE(command.value(command.indexOf(QStringLiteral("--momentum")) + 1), QStringLiteral("0"));
    }

    // "learningRate": "auto": the range test runs once before any run, its choice is
    // journalled, trained with and reported.
    void autoLearningRateIsChosenBeforeTheRuns()
    {
        const QByteArray planText = R"({
            "name": "auto-lr", "dataset": "synth",
            "training": { "learningRate": "auto", "maxTrainImages": 192, "maxTestImages": 64 },
            "baseline": { "threadsPerWorker": 1 },
            "grid": { "workers": [2], "batchSize": [16], "epochs": [1], "threadsPerWorker": [1],
                      "lrRule": ["linear"] } })";
        const auto plan = parsePlanJson(planText);
        VERIFY_OK(plan);
        QVERIFY(plan->learning_rate_auto());
        QVERIFY(!plan->training().has_learning_rate());
        Journal journal;
        QString studyId;
        StudySnapshot s;
        QCOMPARE(runStudy(*plan, QStringLiteral("auto"), test::endsWithin(), &journal, &studyId, &s),
            QStringLiteral("SUCCEEDED"));
        const StudyState state = StudyState::replay(journal.events(studyId));
        const auto &search = state.learningRateSearch();
        QVERIFY(search.found);
        QCOMPARE(search.found->batch, 16); // the baseline's global batch
        QVERIFY(search.points.size() >= 10);
        QVERIFY2(search.conclusive, qPrintable(search.rule)); // the synthetic set's loss falls clearly
        QCOMPARE(search.found->learningRate, search.minLossLearningRate / 10);
        QVERIFY2(s.learningRateNote.startsWith(QLatin1String("auto: ")), qPrintable(s.learningRateNote));
        // The baseline trains with the choice; the 2-worker run (linear rule, global 32)
        // with it scaled to its global batch.
        QCOMPARE(s.runs[0].recipe.value(QLatin1String("peak_learning_rate")).toDouble(),
            search.found->learningRate);
        QCOMPARE(s.runs[1].recipe.value(QLatin1String("peak_learning_rate")).toDouble(),
            search.found->learningRate * worker::kLinearRuleBaseBatch / 16.0 * 32.0
                / worker::kLinearRuleBaseBatch);
    }

    // scalelab-cli runs baseline + 2 and 4 workers across both agents, is killed with
    // SIGKILL mid-study, and `study watch` finishes it: every run once, all SUCCEEDED.
    // A plan's "agents" (here an agents file next to it, as the Slurm launcher writes) are
    // where `study run` runs it when its command line names none; agents given there
    // replace the plan's, and it says so.
    void planNamesItsAgents()
    {
        QVERIFY(QDir().mkpath(path(QStringLiteral("plan-agents"))));
        v1::StudyPlan plan = tinyPlan({ 2 });
        plan.mutable_baseline()->set_skip(true);
        plan.add_agents("file:agents.txt");
        VERIFY_OK(savePlan(plan, path(QStringLiteral("plan-agents/plan.json"))));
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SCALELAB_TOKEN"), kToken);
        const auto run = [&](const QByteArray &agentsFile, const QStringList &more, QByteArray *stderrText) {
            QFile list(path(QStringLiteral("plan-agents/agents.txt")));
            if (!list.open(QIODevice::WriteOnly) || list.write(agentsFile) != agentsFile.size())
                return QStringLiteral("cannot write agents.txt");
            list.close();
            QProcess cli;
            cli.setProcessEnvironment(env);
            cli.setWorkingDirectory(m_tmp.path()); // not the plan's folder: the file is found from the plan
            cli.start(test::binary("scalelab-cli"),
                QStringList { QStringLiteral("study"), QStringLiteral("run"),
                    QStringLiteral("plan-agents/plan.json"), QStringLiteral("--json"),
                    QStringLiteral("--state-dir"), path(QStringLiteral("plan-agents/state")) }
                    + more);
            if (!cli.waitForFinished(test::endsWithin()))
                return QStringLiteral("study run did not end in 3 minutes");
            *stderrText = cli.readAllStandardError();
            const QByteArray output = cli.readAllStandardOutput().trimmed();
            return QJsonDocument::fromJson(output.split('\n').last())
                       .object()
                       .value(QLatin1String("state"))
                       .toString()
                + QStringLiteral(" (exit %1)").arg(cli.exitCode());
        };
        QByteArray log;
        QString state
            = run(QStringLiteral("# from the plan\n%1\n%2\n").arg(m_a.endpoint(), m_b.endpoint()).toUtf8(),
                {}, &log);
        QVERIFY2(state == QLatin1String("SUCCEEDED (exit 0)"), qPrintable(state + '\n' + log));
        QVERIFY2(
            log.contains(
                QStringLiteral("agents from the plan: %1, %2").arg(m_a.endpoint(), m_b.endpoint()).toUtf8()),
            log.constData());
        // Nothing listens at the plan's agent: the command line's agent runs the study.
        state = run("127.0.0.1:1\n", { QStringLiteral("--agent"), m_a.endpoint() }, &log);
        QVERIFY2(state == QLatin1String("SUCCEEDED (exit 0)"), qPrintable(state + '\n' + log));
        QVERIFY2(log.contains("the plan's agents (file:agents.txt) are replaced by the command line's"),
            log.constData());
        // A plan whose agents file is missing is refused before anything is recorded.
        QVERIFY(QFile::remove(path(QStringLiteral("plan-agents/agents.txt"))));
        QProcess cli;
        cli.setProcessEnvironment(env);
        cli.start(test::binary("scalelab-cli"),
            { QStringLiteral("study"), QStringLiteral("run"), path(QStringLiteral("plan-agents/plan.json")),
                QStringLiteral("--state-dir"), path(QStringLiteral("plan-agents/state")) });
        QVERIFY(cli.waitForFinished(30'000));
        QCOMPARE(cli.exitCode(), 2);
        const QByteArray refused = cli.readAllStandardError();
        QVERIFY2(refused.contains("agents: cannot read agents file"), refused.constData());
    }

    // A spread run's first attempt waits for an agent that answered before and answers late
    // now (stopped here: its Describe times out) instead of putting both ranks on the other,
    // and is placed on both once it answers again. A fresh clone's CI once saw a host just
    // back from the network probe left out this way.
    void spreadRunWaitsForAnAgentThatAnswersLate()
    {
        LocalAgent first, second; // of this test only: one of them is stopped a while
        QList<AgentEndpoint> agents;
        for (LocalAgent *agent : { &first, &second })
            VERIFY_OK(startAgent(agent, QStringLiteral("late-agent-%1").arg(agents.size() + 1), &agents));
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("late/journal.sqlite"))));
        v1::StudyPlan plan = tinyPlan({ 2 });
        plan.mutable_baseline()->set_skip(true);
        plan.set_placement("spread");
        StudyRunner runner(&journal);
        runner.setAgents(agents);
        runner.setTickInterval(100);
        const auto created = runner.createStudy(plan);
        VERIFY_OK(created);
        // Both answered once, as at a study's start before its network survey...
        NodeInfo a, b;
        a.agent = first.endpoint();
        b.agent = second.endpoint();
        VERIFY_OK(journal.append(created.value(), journal_events::nodesSeen({ a, b })));
        // ...then the first stops answering.
        const pid_t late = pid_t(first.processId());
        ::kill(late, SIGSTOP);
        auto resume = qScopeGuard([late] { ::kill(late, SIGCONT); });
        QStringList said;
        connect(&runner, &StudyRunner::message, this, [&](const QString &line) { said << line; });
        QSignalSpy finished(&runner, &StudyRunner::finished);
        VERIFY_OK(runner.drive(created.value()));
        const auto reason = [&] { return runner.state().runs().first().reason; };
        QTRY_VERIFY2_WITH_TIMEOUT(reason().contains(QLatin1String("to spread its ranks as planned")),
            qPrintable(reason() + QLatin1Char('\n') + said.join(QLatin1Char('\n'))), 20'000);
        QVERIFY2(reason().contains(first.endpoint()), qPrintable(reason()));
        QVERIFY2(
            said.filter(QStringLiteral("placed on")).isEmpty(), qPrintable(said.join(QLatin1Char('\n'))));
        ::kill(late, SIGCONT);
        QTRY_VERIFY_WITH_TIMEOUT(!said.filter(QStringLiteral("attempt 1 placed on")).isEmpty(), 30'000);
        const QString placed = said.filter(QStringLiteral("attempt 1 placed on")).first();
        QVERIFY2(placed.contains(QStringLiteral("%1 (1 rank)").arg(first.endpoint()))
                && placed.contains(QStringLiteral("%1 (1 rank)").arg(second.endpoint())),
            qPrintable(placed));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, test::endsWithin());
        QCOMPARE(finished.first().first().toString(), QStringLiteral("SUCCEEDED"));
        first.stop();
        second.stop();
    }
};

QTEST_GUILESS_MAIN(TestStudyProcessRuns)
#include "tst_study_process_runs.moc"
