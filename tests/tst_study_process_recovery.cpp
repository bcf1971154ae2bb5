// Studies that recover, end to end against real agents and workers: a runner that "crashes"
// after every single journal event, a worker killed mid-run, an agent killed for good (its run
// resumes elsewhere from the console's copy of its checkpoint), a failed run retried from that
// copy, and scalelab-cli killed mid-study and started again.
#include "agent_client.h"
#include "checkpoint_copy.h"
#include "journal.h"
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

namespace {

// What one attempt's worker on `agent` reports: the epoch it resumed from and the
// epochs it trained.
struct AttemptTraining {
    int resumedFrom = -1;
    QList<int> trained;
};

AttemptTraining attemptTraining(
    const Journal &journal, const QString &runId, int attempt, const QString &agent)
{
    AttemptTraining t;
    for (const auto &e : journal.runEvents(runId, attempt, agent)) {
        if (e.has_started())
            t.resumedFrom = e.started().resumed_from_epoch();
        if (e.has_epoch())
            t.trained << e.epoch().epoch();
    }
    return t;
}

} // namespace

class TestStudyProcessRecovery : public QObject, public test::StudyProcessBench {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { startBenchAgents(); }

    void cleanupTestCase() { stopBenchAgents(); }

    // A runner dies right after each journal event it commits; the next one picks up
    // from the journal. The study still ends with every run done exactly once.
    void crashAfterEveryJournalEvent()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("crash/journal.sqlite"))));
        const auto createdStudy = test::createStudy(&journal, m_agents, tinyPlan({ 2 }));
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();

        int runners = 0;
        QCOMPARE(driveToEnd(&journal, studyId, 1, &runners), QStringLiteral("SUCCEEDED"));
        const StudyState state = StudyState::replay(journal.events(studyId));
        QVERIFY2(runners >= 8, qPrintable(QString::number(runners))); // one per event, at least
        QCOMPARE(state.runs().size(), 2);
        for (const auto &run : state.runs()) {
            QCOMPARE(run.phase, RunPhase::Succeeded);
            QCOMPARE(run.attempts.size(), 1); // never started twice
            // Every stored event stream is gap-free from 1.
            for (const auto &portion : run.portions) {
                const auto events = journal.runEvents(run.planned.runId, 1, portion.agent);
                QVERIFY(!events.empty());
                for (size_t i = 0; i < events.size(); ++i)
                    QCOMPARE(events[i].seq(), qint64(i + 1));
            }
        }
        // The agents agree: one attempt per run, each succeeded.
        const auto agentRuns = test::agentRunsOf(m_agents, kToken, studyId);
        VERIFY_OK(agentRuns);
        for (const auto &r : agentRuns.value()) {
            QCOMPARE(r.attempt(), 1);
            QCOMPARE(r.state(), v1::SUCCEEDED);
        }
        const StudySnapshot snapshot = buildSnapshot(state, journal);
        QVERIFY(snapshot.synthetic);
        for (const auto &r : snapshot.runs) {
            QVERIFY(std::isfinite(r.finalTestAccuracy));
            QVERIFY(r.wallSeconds > 0);
            QCOMPARE(r.epochs.size(), 1);
        }
    }

    // A worker killed with SIGKILL after its first checkpoint: the run is retried and
    // resumes after epoch 1, and the study completes. The run is spread over both agents,
    // so the rank on the second agent resumes without a local copy of the checkpoint.
    void killedWorkerIsRetriedFromItsCheckpoint()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("retry/journal.sqlite"))));
        v1::StudyPlan plan = tinyPlan({ 2 }, 3);
        plan.mutable_baseline()->set_skip(true);
        plan.set_placement("spread");
        plan.mutable_training()->set_max_train_images(0); // all 192, a few seconds per epoch
        StudyRunner runner(&journal);
        runner.setAgents(m_agents);
        runner.setTickInterval(100);
        const auto createdStudy = runner.createStudy(plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        QVERIFY(!studyId.isEmpty());
        bool killed = false;
        connect(&runner, &StudyRunner::runEvents, this,
            [&](const QString &runId, int attempt, const std::vector<v1::RunEvent> &events) {
                for (const auto &e : events)
                    if (!killed && attempt == 1 && e.has_checkpoint() && e.checkpoint().epoch() == 1) {
                        for (const QString &p :
                            test::processesMentioning(QStringLiteral("/runs/") + runId + QLatin1Char('/'))) {
                            if (p.contains(QLatin1String("scalelab-worker"))
                                && p.contains(QLatin1String("--rank 1 "))) {
                                ::kill(p.section(QLatin1Char(':'), 0, 0).toInt(), SIGKILL);
                                killed = true;
                            }
                        }
                    }
            });
        QSignalSpy finished(&runner, &StudyRunner::finished);
        VERIFY_OK(runner.drive(studyId));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, test::endsWithin());
        QVERIFY2(killed, "the worker was never found to kill");
        QCOMPARE(finished.first().first().toString(), QStringLiteral("SUCCEEDED"));
        const StudySnapshot s = runner.snapshot();
        QCOMPARE(s.runs.size(), 1);
        const RunResult &r = s.runs.first();
        QCOMPARE(r.attempts.size(), 2);
        QCOMPARE(r.attempts[0].outcome, QStringLiteral("FAILED"));
        QVERIFY2(r.attempts[0].reason.contains(QLatin1String("signal")), qPrintable(r.attempts[0].reason));
        QVERIFY(r.attempts[1].resumedFromEpoch >= 1);
        QCOMPARE(r.attempts[1].agents.size(), 2); // spread again: rank 1 had no checkpoint of its own
        QCOMPARE(r.epochs.size(), 3); // epochs 1..3 once each, the resumed ones replacing nothing twice
        QCOMPARE(r.state, QStringLiteral("SUCCEEDED"));
    }

    // The agent of a run is killed with SIGKILL, never to return, once the console has
    // copied the run's checkpoint: the retry goes to the other agent, which is sent the
    // copy first, and resumes from it instead of starting afresh.
    void runResumesOnAnotherAgentWhenItsAgentIsGone()
    {
        LocalAgent first, second; // of this test only: one of them dies
        QList<AgentEndpoint> agents;
        for (LocalAgent *agent : { &first, &second })
            VERIFY_OK(startAgent(agent, QStringLiteral("gone-agent-%1").arg(agents.size() + 1), &agents));
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("gone/journal.sqlite"))));
        const v1::StudyPlan plan = resumablePlan();
        StudyRunner runner(&journal);
        runner.setAgents(agents);
        runner.setTickInterval(100);
        const auto createdStudy = runner.createStudy(plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();

        QStringList said;
        connect(&runner, &StudyRunner::message, this, [&](const QString &line) {
            qInfo("%s", qPrintable(line));
            said << line;
        });
        QString killed; // the agent that wrote the copied checkpoint, killed at once
        int copiedEpoch = 0;
        QString copyProblem = QStringLiteral("never checked");
        connect(&runner, &StudyRunner::stateChanged, this, [&](const JournalEvent &e) {
            if (!e.event.has_checkpoint_copied() || !killed.isEmpty())
                return;
            killed = QString::fromStdString(e.event.checkpoint_copied().agent());
            copiedEpoch = e.event.checkpoint_copied().epoch();
            // Journaled only once the copy is complete and verified on disk.
            v1::CheckpointManifest manifest;
            copyProblem = CheckpointTransfer::verifyCopy(
                QString::fromStdString(e.event.checkpoint_copied().dir()), &manifest)
                              .error();
            LocalAgent *victim = killed == first.endpoint() ? &first : &second;
            ::kill(pid_t(victim->processId()), SIGKILL);
        });
        QSignalSpy finished(&runner, &StudyRunner::finished);
        VERIFY_OK(runner.drive(studyId));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, test::endsWithin());
        QVERIFY2(!killed.isEmpty(), "no checkpoint was ever copied");
        QVERIFY2(copyProblem.isEmpty(), qPrintable(copyProblem));
        QVERIFY(copiedEpoch >= 1 && copiedEpoch < 4);
        const QString survivor = killed == first.endpoint() ? second.endpoint() : first.endpoint();
        QCOMPARE(finished.first().first().toString(), QStringLiteral("SUCCEEDED"));

        const RunProgress &run = runner.state().runs().first();
        QCOMPARE(runner.state().runs().size(), 1);
        QCOMPARE(run.phase, RunPhase::Succeeded);
        QCOMPARE(run.attempts.size(), 2);
        QCOMPARE(run.attempts[0].agents, QStringList { killed });
        QCOMPARE(run.attempts[0].outcome, QStringLiteral("FAILED"));
        // The reason names the agent; losing it is not one of the run's failures.
        QVERIFY2(run.attempts[0].reason.contains(QStringLiteral("agent %1").arg(killed))
                && run.attempts[0].reason.contains(QLatin1String("unreachable since")),
            qPrintable(run.attempts[0].reason));
        QCOMPARE(run.failures, 0);
        QCOMPARE(run.attempts[1].agents, QStringList { survivor });
        QCOMPARE(run.attempts[1].transferredFrom, killed);
        QVERIFY(run.attempts[1].transferredEpoch >= copiedEpoch);
        // The placement names the agent it left out, and why.
        const QString placed = said.filter(QStringLiteral("attempt 2 placed on")).value(0);
        QVERIFY2(
            placed.contains(QStringLiteral("placed on %1 (1 rank); not on agent %2").arg(survivor, killed))
                && placed.contains(QLatin1String(": unreachable (")),
            qPrintable(placed));

        // The worker of attempt 2 says it resumed from the transferred checkpoint.
        const auto [resumed, trained] = attemptTraining(journal, run.planned.runId, 2, survivor);
        QVERIFY2(resumed >= 1, qPrintable(QString::number(resumed)));
        QCOMPARE(resumed, run.attempts[1].transferredEpoch);
        QVERIFY(!trained.isEmpty());
        QCOMPARE(trained.first(), resumed + 1); // nothing trained twice
        QCOMPARE(trained.last(), 4);
        const StudySnapshot s = runner.snapshot();
        QCOMPARE(s.runs.first().epochs.size(), 4);
        QCOMPARE(s.runs.first().attempts[1].resumedFromEpoch, resumed);
        const QString words = QStringLiteral("resumed from epoch %1, checkpoint copied from agent %2")
                                  .arg(resumed)
                                  .arg(killed);
        QCOMPARE(s.runs.first().stateReason, words);

        // `study show` says so in words too.
        QProcess show;
        show.start(test::binary("scalelab-cli"),
            { QStringLiteral("study"), QStringLiteral("show"), studyId, QStringLiteral("--state-dir"),
                path(QStringLiteral("gone")) });
        QVERIFY(show.waitForFinished(60'000));
        const QString shown = QString::fromUtf8(show.readAllStandardOutput());
        QVERIFY2(show.exitCode() == 0 && shown.contains(words), qPrintable(shown));
        qInfo("%s", qPrintable(shown));
        QVERIFY2(shown.contains(QStringLiteral("attempt 2 on %1: SUCCEEDED; %2").arg(survivor, words)),
            qPrintable(shown));
        // The run is done: the console keeps no copy of it any more.
        QVERIFY(!QFileInfo::exists(runner.checkpointRoot() + QLatin1Char('/') + run.planned.runId));
        first.stop();
        second.stop();
    }

    // maxFailures 0: the worker dies after the console has copied a checkpoint, so the run
    // ends FAILED; then its agent dies for good. The console keeps its copy of a FAILED
    // run's checkpoint, so `study retry` on the other agent resumes from it instead of
    // training the finished epochs again.
    void retryOfFailedRunResumesFromTheConsoleCopy()
    {
        LocalAgent first, second;
        QList<AgentEndpoint> agents;
        for (LocalAgent *agent : { &first, &second })
            VERIFY_OK(startAgent(agent, QStringLiteral("failed-agent-%1").arg(agents.size() + 1), &agents));
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("failed/journal.sqlite"))));
        v1::StudyPlan plan = resumablePlan();
        plan.set_max_failures(0);
        QString studyId, runId;
        int copiedEpoch = 0;
        QString copiedDir;
        {
            StudyRunner runner(&journal);
            runner.setAgents({ agents.first() }); // the run lands on `first`
            runner.setTickInterval(100);
            connect(&runner, &StudyRunner::message, this,
                [](const QString &line) { qInfo("%s", qPrintable(line)); });
            const auto createdStudy = runner.createStudy(plan);
            VERIFY_OK(createdStudy);
            studyId = createdStudy.value();
            bool killed = false;
            connect(&runner, &StudyRunner::stateChanged, this, [&](const JournalEvent &e) {
                if (!e.event.has_checkpoint_copied() || killed)
                    return;
                runId = QString::fromStdString(e.event.checkpoint_copied().run_id());
                copiedEpoch = e.event.checkpoint_copied().epoch();
                copiedDir = QString::fromStdString(e.event.checkpoint_copied().dir());
                for (const QString &p :
                    test::processesMentioning(QStringLiteral("/runs/") + runId + QLatin1Char('/')))
                    if (p.contains(QLatin1String("scalelab-worker"))) {
                        ::kill(p.section(QLatin1Char(':'), 0, 0).toInt(), SIGKILL);
                        killed = true;
                    }
            });
            QSignalSpy finished(&runner, &StudyRunner::finished);
            VERIFY_OK(runner.drive(studyId));
            QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, test::endsWithin());
            QVERIFY2(killed, "the worker was never found to kill");
            QCOMPARE(finished.first().first().toString(), QStringLiteral("FAILED"));
            QCOMPARE(runner.state().run(runId)->phase, RunPhase::Failed);
            QVERIFY(copiedEpoch >= 1 && copiedEpoch < 4);
            // The study has ended, the run failed: the verified copy is still there.
            v1::CheckpointManifest manifest;
            VERIFY_OK(CheckpointTransfer::verifyCopy(runner.state().run(runId)->checkpoint.dir, &manifest));
            QVERIFY(runner.state().run(runId)->checkpoint.epoch >= copiedEpoch);
        }
        const QString gone = first.endpoint();
        first.stop(); // gone for good, with the checkpoint it wrote

        // The retry may use `second`, which the study did not have.
        VERIFY_OK(StudyRunner::requestRetry(&journal, studyId, runId, { second.endpoint() }));
        StudyRunner retry(&journal);
        retry.setAgents(agents);
        retry.setTickInterval(100);
        connect(
            &retry, &StudyRunner::message, this, [](const QString &line) { qInfo("%s", qPrintable(line)); });
        QSignalSpy finished(&retry, &StudyRunner::finished);
        VERIFY_OK(retry.drive(studyId));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, test::endsWithin());
        QCOMPARE(finished.first().first().toString(), QStringLiteral("SUCCEEDED"));
        const RunProgress &run = *retry.state().run(runId);
        QCOMPARE(run.attempts.size(), 2);
        QCOMPARE(run.attempts[1].agents, QStringList { second.endpoint() });
        QCOMPARE(run.attempts[1].transferredFrom, gone);
        QVERIFY(run.attempts[1].transferredEpoch >= copiedEpoch);
        const auto [resumed, trained] = attemptTraining(journal, runId, 2, second.endpoint());
        QCOMPARE(resumed, run.attempts[1].transferredEpoch);
        QVERIFY(!trained.isEmpty());
        QCOMPARE(trained.first(), resumed + 1); // the finished epochs are not trained again
        QCOMPARE(trained.last(), 4);
        // Now it succeeded, the console's copies are removed.
        QVERIFY(!QFileInfo::exists(retry.checkpointRoot() + QLatin1Char('/') + runId));
        second.stop();
    }

    void cliKilledMidStudyAndRestarted()
    {
        const v1::StudyPlan plan = tinyPlan({ 2, 4 });
        VERIFY_OK(savePlan(plan, path(QStringLiteral("plan.json"))));
        const QStringList common { QStringLiteral("--state-dir"), path(QStringLiteral("cli")),
            QStringLiteral("--agent"), m_a.endpoint(), QStringLiteral("--agent"), m_b.endpoint() };
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SCALELAB_TOKEN"), kToken);

        QProcess first;
        first.setProcessEnvironment(env);
        first.start(test::binary("scalelab-cli"),
            QStringList { QStringLiteral("study"), QStringLiteral("run"), path(QStringLiteral("plan.json")) }
                + common);
        QVERIFY(first.waitForStarted());
        // Kill it once the 2-worker run has started (the baseline is done by then).
        QByteArray seen;
        QTRY_VERIFY_WITH_TIMEOUT(
            (seen += first.readAllStandardOutput()).contains("-r02 w2"), test::endsWithin());
        ::kill(pid_t(first.processId()), SIGKILL);
        QVERIFY(first.waitForFinished());
        const QString studyId
            = QString::fromUtf8(seen).section(QLatin1String("study "), 1, 1).section(QLatin1Char(' '), 0, 0);
        QVERIFY2(studyId.startsWith(QLatin1String("st-")), seen.constData());

        QProcess second;
        second.setProcessEnvironment(env);
        second.start(test::binary("scalelab-cli"),
            QStringList {
                QStringLiteral("study"), QStringLiteral("watch"), studyId, QStringLiteral("--json") }
                + common);
        QVERIFY(second.waitForFinished(test::endsWithin()));
        const QByteArray output = second.readAllStandardOutput();
        QVERIFY2(second.exitCode() == 0, (output + second.readAllStandardError()).constData());
        const QJsonObject study = QJsonDocument::fromJson(output.trimmed().split('\n').last()).object();
        QCOMPARE(study.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
        QCOMPARE(study.value(QLatin1String("synthetic")).toBool(), true);
        const QJsonArray runs = study.value(QLatin1String("runs")).toArray();
        QCOMPARE(runs.size(), 3);
        for (const auto &value : runs) {
            const QJsonObject run = value.toObject();
            QCOMPARE(run.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
            QCOMPARE(run.value(QLatin1String("attempts")).toArray().size(), 1); // none duplicated
        }
        // The 4-worker run needed both agents (2 slots each on this 2-core machine or more).
        const QJsonArray agents4 = runs[2]
                                       .toObject()
                                       .value(QLatin1String("attempts"))
                                       .toArray()[0]
                                       .toObject()
                                       .value(QLatin1String("agents"))
                                       .toArray();
        AgentClient probe(m_a.endpoint(), kToken);
        v1::DescribeResponse node;
        QVERIFY(probe.describe(&node).ok());
        if (node.cpu_cores() < 4) // one worker slot per core: 4 workers need both agents
            QCOMPARE(agents4.size(), 2);
        else
            QVERIFY(agents4.size() >= 1);

        QJsonObject report;
        reportAgreesWithTheJournal(studyId, runs, &report);
        if (QTest::currentTestFailed())
            return;
        reportExplainsTheScaling(report, studyId);
        if (QTest::currentTestFailed())
            return;
        showSaysNoiseAndTimeToTarget(studyId);
        if (QTest::currentTestFailed())
            return;
        reportRerunsItsStudy(report, studyId, int(runs.size()), common, env);
    }

private:
    // cliKilledMidStudyAndRestarted's study, read back: the journal and the report say what
    // the CLI said (the report's JSON in `json`).
    void reportAgreesWithTheJournal(const QString &studyId, const QJsonArray &runs, QJsonObject *out)
    {
        // The journal says the same as the CLI.
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("cli/journal.sqlite"))));
        const StudySnapshot s = buildSnapshot(StudyState::replay(journal.events(studyId)), journal);
        for (int i = 0; i < s.runs.size(); ++i)
            QCOMPARE(runs[i].toObject().value(QLatin1String("finalTestAccuracy")).toDouble(),
                s.runs[i].finalTestAccuracy);

        // So does the report: the same runs, accuracies and wall-clock times.
        QProcess report;
        report.start(test::binary("scalelab-cli"),
            { QStringLiteral("report"), studyId, QStringLiteral("--format"), QStringLiteral("json"),
                QStringLiteral("--state-dir"), path(QStringLiteral("cli")) });
        QVERIFY(report.waitForFinished(60'000));
        QCOMPARE(report.exitCode(), 0);
        *out = QJsonDocument::fromJson(report.readAllStandardOutput()).object();
        const QJsonObject &json = *out;
        QCOMPARE(json.value(QLatin1String("synthetic")).toBool(), true);
        const QJsonArray reported = json.value(QLatin1String("runs")).toArray();
        QCOMPARE(reported.size(), s.runs.size());
        for (int i = 0; i < s.runs.size(); ++i) {
            const QJsonObject r = reported[i].toObject();
            QCOMPARE(r.value(QLatin1String("run_id")).toString(), s.runs[i].runId);
            QCOMPARE(r.value(QLatin1String("final_test_accuracy")).toDouble(), s.runs[i].finalTestAccuracy);
            QCOMPARE(r.value(QLatin1String("wall_seconds")).toDouble(), s.runs[i].wallSeconds);
            // One definition of images/s: CLI, journal and report agree, and it is the one
            // over the run's epochs (not the last epoch's).
            QCOMPARE(r.value(QLatin1String("images_per_second")).toDouble(), s.runs[i].imagesPerSecond);
            QCOMPARE(runs[i].toObject().value(QLatin1String("imagesPerSecond")).toDouble(),
                s.runs[i].imagesPerSecond);
            QCOMPARE(s.runs[i].imagesPerSecond, runImagesPerSecond(s.runs[i].epochs));
            // Reproducible from the report: the recipe after defaults, the data set's
            // checksum and normalisation, and the worker's command line.
            const QJsonObject recipe = r.value(QLatin1String("recipe")).toObject();
            QCOMPARE(recipe.value(QLatin1String("learning_rate")).toDouble(), rules::kDefaultLearningRate);
            QCOMPARE(recipe.value(QLatin1String("momentum")).toDouble(), rules::kDefaultMomentum);
            QCOMPARE(
                recipe.value(QLatin1String("warmup_epochs")).toDouble(), 0.5); // a 1-epoch run: half of it
            QCOMPARE(recipe.value(QLatin1String("dataset_sha256")).toString().size(), 64);
            QCOMPARE(recipe.value(QLatin1String("normalize_mean")).toArray().size(), 3);
            QVERIFY(!recipe.value(QLatin1String("worker_torch")).toString().isEmpty());
            QVERIFY(r.value(QLatin1String("worker_command"))
                        .toArray()
                        .contains(QStringLiteral("--normalize-mean")));
        }
        QVERIFY(
            json.value(QLatin1String("software")).toObject().contains(QStringLiteral("agent: git_commit")));
        QVERIFY(!json.value(QLatin1String("nodes"))
                     .toArray()[0]
                     .toObject()
                     .value(QLatin1String("cpu_model"))
                     .toString()
                     .isEmpty());
        QVERIFY(json.value(QLatin1String("definitions"))
                    .toObject()
                    .contains(QStringLiteral("images_per_second")));
        QCOMPARE(json.value(QLatin1String("plan")).toObject().value(QLatin1String("name")).toString(),
            QStringLiteral("tiny"));
    }

    void reportExplainsTheScaling(const QJsonObject &json, const QString &studyId)
    {
        const QJsonArray reported = json.value(QLatin1String("runs")).toArray();
        // Why it scales (issue 37): every run's step anatomy (each rank of the multi-worker
        // ones, a slowest one named), their network probes, and the scaling model fitted on
        // them, each multi-worker run predicted without itself.
        for (int i = 0; i < reported.size(); ++i) {
            const QJsonObject r = reported[i].toObject();
            const int workers
                = r.value(QLatin1String("config")).toObject().value(QLatin1String("workers")).toInt();
            const QJsonObject anatomy = r.value(QLatin1String("anatomy")).toObject();
            const QJsonObject perStep = anatomy.value(QLatin1String("perStep")).toObject();
            QVERIFY2(perStep.value(QLatin1String("stepSeconds")).toDouble() > 0,
                qPrintable(QJsonDocument(r).toJson()));
            QVERIFY(perStep.value(QLatin1String("backwardSeconds")).toDouble() > 0);
            QCOMPARE(anatomy.value(QLatin1String("ranks")).toArray().size(), workers);
            QVERIFY(anatomy.value(QLatin1String("evaluationSeconds")).toDouble() > 0);
            if (workers > 1) {
                QVERIFY(anatomy.value(QLatin1String("slowestRank")).toInt() >= 0);
                const QJsonObject network = r.value(QLatin1String("network_probe")).toObject();
                QCOMPARE(network.value(QLatin1String("world_size")).toInt(), workers);
                QVERIFY(network.value(QLatin1String("samples")).toArray().size() >= 3);
            }
        }
        // Every agent on this host: nothing between hosts to probe at the study's start, which
        // the report says (each multi-worker run probed its own ranks, above).
        QVERIFY2(json.value(QLatin1String("network_survey"))
                     .toObject()
                     .value(QLatin1String("note"))
                     .toString()
                     .contains(QLatin1String("not probed: every agent is on ")),
            qPrintable(QJsonDocument(json.value(QLatin1String("network_survey")).toObject()).toJson()));
        const QJsonArray scaling = json.value(QLatin1String("scaling")).toArray();
        QCOMPARE(scaling.size(), 1);
        QVERIFY2(scaling[0]
                     .toObject()
                     .value(QLatin1String("fit"))
                     .toObject()
                     .value(QLatin1String("valid"))
                     .toBool(),
            qPrintable(QJsonDocument(scaling[0].toObject()).toJson()));
        QCOMPARE(scaling[0].toObject().value(QLatin1String("heldOut")).toArray().size(),
            2); // the 2- and 4-worker runs
        QCOMPARE(scaling[0]
                     .toObject()
                     .value(QLatin1String("predictions"))
                     .toArray()
                     .last()
                     .toObject()
                     .value(QLatin1String("workers"))
                     .toInt(),
            512);
        QProcess predict;
        predict.start(test::binary("scalelab-cli"),
            { QStringLiteral("study"), QStringLiteral("predict"), studyId, QStringLiteral("--workers"),
                QStringLiteral("8,64"), QStringLiteral("--bandwidth"), QStringLiteral("10Gbit"),
                QStringLiteral("--json"), QStringLiteral("--state-dir"), path(QStringLiteral("cli")) });
        QVERIFY(predict.waitForFinished(60'000));
        const QByteArray predicted = predict.readAllStandardOutput();
        QVERIFY2(predict.exitCode() == 0, (predicted + predict.readAllStandardError()).constData());
        const QJsonArray points = QJsonDocument::fromJson(predicted)
                                      .object()
                                      .value(QLatin1String("models"))
                                      .toArray()[0]
                                      .toObject()
                                      .value(QLatin1String("predictions"))
                                      .toArray();
        QCOMPARE(points.size(), 2);
        for (int i = 0; i < 2; ++i) {
            const QJsonObject p = points[i].toObject();
            QCOMPARE(p.value(QLatin1String("workers")).toInt(), i == 0 ? 8 : 64);
            QCOMPARE(p.value(QLatin1String("bandwidthBytesPerSecond")).toDouble(), 1.25e9);
            const double efficiency = p.value(QLatin1String("efficiency")).toDouble();
            QVERIFY2(efficiency > 0 && efficiency <= 1, predicted.constData());
            QVERIFY(p.value(QLatin1String("efficiencyLow")).toDouble()
                <= p.value(QLatin1String("efficiencyHigh")).toDouble());
        }
    }

    void showSaysNoiseAndTimeToTarget(const QString &studyId)
    {
        QProcess show;
        show.start(test::binary("scalelab-cli"),
            { QStringLiteral("study"), QStringLiteral("show"), studyId, QStringLiteral("--state-dir"),
                path(QStringLiteral("cli")) });
        QVERIFY(show.waitForFinished(60'000));
        const QString shown = QString::fromUtf8(show.readAllStandardOutput());
        QVERIFY2(shown.contains(QStringLiteral("where the time goes"))
                && shown.contains(QStringLiteral("predicted efficiency at batch 16")),
            qPrintable(shown));
        // Every run measured its gradient noise scale (issue 54), said in text and in JSON.
        QVERIFY2(shown.contains(QStringLiteral("gradient noise scale B_simple")), qPrintable(shown));
        QProcess showJson;
        showJson.start(test::binary("scalelab-cli"),
            { QStringLiteral("study"), QStringLiteral("show"), studyId, QStringLiteral("--json"),
                QStringLiteral("--state-dir"), path(QStringLiteral("cli")) });
        QVERIFY(showJson.waitForFinished(60'000));
        const QJsonObject shownStudy = QJsonDocument::fromJson(showJson.readAllStandardOutput()).object();
        const QJsonArray shownRuns = shownStudy.value(QLatin1String("runs")).toArray();
        // Per configuration, time to the target beside throughput (issue 54 item 7).
        const QJsonArray configurations = shownStudy.value(QLatin1String("configurations")).toArray();
        QCOMPARE(configurations.size(), 3);
        for (const QJsonValue &c : configurations)
            QVERIFY2(c.toObject().contains(QLatin1String("efficiencyByTimeToTarget"))
                    && c.toObject().value(QLatin1String("succeeded")).toInt() == 1,
                qPrintable(QJsonDocument(c.toObject()).toJson()));
        QVERIFY(!shownRuns.isEmpty());
        for (const QJsonValue &v : shownRuns) {
            const QJsonObject noise = v.toObject().value(QLatin1String("gradientNoiseScale")).toObject();
            // Known, or (these runs train a dozen steps) said not to be yet, and why.
            QVERIFY2(noise.value(QLatin1String("samples")).toInt() > 0
                    && (noise.value(QLatin1String("bSimple")).toDouble() > 0
                        || noise.value(QLatin1String("note"))
                               .toString()
                               .startsWith(QLatin1String("not known: "))),
                qPrintable(QJsonDocument(noise).toJson()));
            const int workers = v.toObject()
                                    .value(QLatin1String("config"))
                                    .toObject()
                                    .value(QLatin1String("workers"))
                                    .toInt();
            QCOMPARE(noise.value(QLatin1String("estimator")).toString(),
                workers == 1 ? QStringLiteral("differenced") : QStringLiteral("two-batch"));
            QCOMPARE(noise.value(QLatin1String("batchesPerStep")).toInt(), workers);
        }
    }

    void reportRerunsItsStudy(const QJsonObject &json, const QString &studyId, int runCount,
        const QStringList &common, const QProcessEnvironment &env)
    {
        // The report reruns its study: the same plan, as a new study, to its end.
        const QString reportFile = path(QStringLiteral("report.json"));
        {
            QFile f(reportFile);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QJsonDocument(json).toJson());
        }
        QProcess rerun;
        rerun.setProcessEnvironment(env);
        rerun.start(test::binary("scalelab-cli"),
            QStringList {
                QStringLiteral("study"), QStringLiteral("rerun"), reportFile, QStringLiteral("--json") }
                + common);
        QVERIFY(rerun.waitForFinished(test::endsWithin()));
        const QByteArray rerunOutput = rerun.readAllStandardOutput();
        QVERIFY2(rerun.exitCode() == 0, (rerunOutput + rerun.readAllStandardError()).constData());
        const QJsonObject again = QJsonDocument::fromJson(rerunOutput.trimmed().split('\n').last()).object();
        QCOMPARE(again.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
        QVERIFY(again.value(QLatin1String("studyId")).toString() != studyId);
        QCOMPARE(again.value(QLatin1String("runs")).toArray().size(), runCount);
        QVERIFY(!json.value(QLatin1String("seed_study_comparison")).toArray().isEmpty());
        for (const char *format : { "html", "pdf" }) {
            const QString file = path(QStringLiteral("report.") + QLatin1String(format));
            QProcess p;
            p.start(test::binary("scalelab-cli"),
                { QStringLiteral("report"), studyId, QStringLiteral("-o"), file,
                    QStringLiteral("--state-dir"), path(QStringLiteral("cli")) });
            QVERIFY(p.waitForFinished(60'000));
            QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
            QVERIFY(QFileInfo(file).size() > 1000);
        }
    }
};

QTEST_GUILESS_MAIN(TestStudyProcessRecovery)
#include "tst_study_process_recovery.moc"
