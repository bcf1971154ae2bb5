// Tunes end to end (issue 18) against two real agents and real workers on a small
// synthetic set: 9 trials, η = 3, grace 1, at most 9 epochs, with ASHA promotion (the
// budget is then exact: 9·1 + 3·2 + 1·6 = 21 epochs) and with ASHA stopping; and a tune
// whose runner "crashes" after every journal event it commits, continued by the next.
// Each checks that no trial trains past the rung it stopped at, that no epoch is trained
// twice (paused trials resume from their checkpoints), and that the journal replays to
// the same decisions. The trials train mini-cnn: what is checked is the scheduling, and the
// seed CNN's compute would be most of the test's time. (With trials that fast, the last
// rung-1 result's promotion used to be followed at once by the close-out that stops every
// paused trial, a rung-2 one the promoted trial would have let through among them.)
#include "agent_client.h"
#include "journal.h"
#include "journal_events.h"
#include "local_agent.h"
#include "study_driver.h"
#include "study_runner.h"
#include "test_support.h"
#include "tune_plan.h"
#include "verify_ok.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace scalelab;
using namespace scalelab::core;

namespace {

const QString kToken = QStringLiteral("tune-test-token-0123456789abcdef");

v1::StudyPlan tunePlan(const QString &variant, int samples, double eta, int maxEpochs)
{
    v1::StudyPlan plan;
    plan.set_name("tune");
    plan.set_dataset("synth");
    plan.mutable_baseline()->set_skip(true);
    plan.mutable_training()->set_max_train_images(128);
    plan.mutable_training()->set_max_test_images(64);
    plan.mutable_training()->set_threads_per_worker(1);
    plan.mutable_training()->set_batch_size(32);
    plan.mutable_training()->set_model("mini-cnn");
    auto *t = plan.mutable_tune();
    auto &lr = (*t->mutable_space())["learningRate"];
    lr.set_kind("loguniform");
    lr.set_low(0.005);
    lr.set_high(0.5);
    auto &momentum = (*t->mutable_space())["momentum"];
    momentum.set_kind("quniform");
    momentum.set_low(0.5);
    momentum.set_high(0.8);
    momentum.set_q(0.1);
    t->set_samples(samples);
    t->set_seed(11);
    t->set_max_concurrent_trials(2);
    auto *s = t->mutable_scheduler();
    s->set_kind("asha");
    s->set_variant(variant.toStdString());
    s->set_grace_period(1);
    s->set_reduction_factor(eta);
    s->set_max_epochs(maxEpochs);
    return plan;
}

// Every epoch a trial's workers reported, over its attempts in order, and the epoch each
// attempt resumed from.
struct TrialTraining {
    QList<int> epochs;
    QList<int> resumedFrom;
};

TrialTraining trialTraining(const Journal &journal, const RunProgress &run)
{
    TrialTraining t;
    for (const auto &a : run.attempts) {
        if (a.agents.isEmpty())
            continue;
        for (const auto &e : journal.runEvents(run.planned.runId, a.attempt, a.agents.first())) {
            if (e.has_started())
                t.resumedFrom << e.started().resumed_from_epoch();
            if (e.has_epoch())
                t.epochs << e.epoch().epoch();
        }
    }
    return t;
}

// How many promotions out of `rung` (0-based) the tune's scheduler journalled.
int promotionsFrom(const StudyState &state, int rung)
{
    int n = 0;
    for (const RunProgress &run : state.runs())
        for (const TrialDecision &d : run.decisions)
            n += d.action == QLatin1String("promote") && d.rung == rung ? 1 : 0;
    return n;
}

QString joined(const QList<int> &values)
{
    QStringList parts;
    for (int v : values)
        parts << QString::number(v);
    return parts.join(QLatin1Char(','));
}

// Replays the journal up to each trial_decision and decides again: "" when every
// decision comes out the same, else the first that does not.
QString replayDecisions(const QList<JournalEvent> &events, int *count)
{
    *count = 0;
    for (int i = 0; i < events.size(); ++i) {
        if (!events[i].event.has_trial_decision())
            continue;
        const StudyState before = StudyState::replay(events.mid(0, i));
        const TrialDecision made = journal_events::decisionFromRecord(events[i].event.trial_decision());
        std::optional<TrialDecision> again;
        if (made.action == QLatin1String("promote"))
            again = before.scheduler().nextPromotion();
        else if (made.action == QLatin1String("stop") && before.scheduler().settings().promotion())
            again = before.scheduler().closeOut(made.runId, made.epoch, made.value);
        else
            again = before.scheduler().decide(
                made.runId, made.epoch, made.value, before.run(made.runId)->continuedTo);
        if (!again || again->toJson() != made.toJson())
            return QStringLiteral("event %1 (%2 %3) decides differently on replay")
                .arg(i)
                .arg(made.action, made.runId);
        ++*count;
    }
    return {};
}

} // namespace

class TestTuneProcess : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    LocalAgent m_a, m_b;
    QList<AgentEndpoint> m_agents;

    QString path(const QString &name) const { return m_tmp.filePath(name); }

    QString driveToEnd(Journal *journal, const QString &studyId, int crashAfter, int *runners = nullptr)
    {
        return test::driveStudyToEnd(journal, studyId, m_agents, crashAfter, runners);
    }

    // What every tune must satisfy, whatever its scheduler; returns the epochs trained.
    int checkTune(const Journal &journal, const QString &studyId)
    {
        const StudyState state = StudyState::replay(journal.events(studyId));
        QSet<QString> agentsUsed;
        int spent = 0;
        for (const RunProgress &run : state.runs()) {
            const QString id = run.planned.runId;
            if (run.phase != RunPhase::Succeeded && run.phase != RunPhase::Stopped) {
                QTest::qFail(qPrintable(QStringLiteral("%1 ended %2").arg(id, phaseName(run.phase))),
                    __FILE__, __LINE__);
                return -1;
            }
            const TrialTraining t = trialTraining(journal, run);
            // Epochs 1, 2, …, n exactly once each: resumed from where the last attempt
            // stopped, never past the epoch of its last decision.
            QList<int> expected;
            for (int e = 1; e <= run.epochsDone(); ++e)
                expected << e;
            if (t.epochs != expected) {
                QStringList attempts;
                for (const auto &a : run.attempts)
                    attempts << QStringLiteral("attempt %1 on %2 %3 transferred %4")
                                    .arg(a.attempt)
                                    .arg(a.agents.join(QLatin1Char(',')), a.outcome)
                                    .arg(a.transferredEpoch);
                QTest::qFail(
                    qPrintable(QStringLiteral("%1 trained epochs %2, expected 1..%3 (resumed from %4; %5)")
                                   .arg(id, joined(t.epochs))
                                   .arg(run.epochsDone())
                                   .arg(joined(t.resumedFrom), attempts.join(QLatin1String("; ")))),
                    __FILE__, __LINE__);
                return -1;
            }
            // Each attempt after the first resumed where the one before stopped.
            const QList<int> targets = state.scheduler().targets(id);
            for (int k = 1; k < t.resumedFrom.size(); ++k)
                if (!targets.contains(t.resumedFrom[k])) {
                    QTest::qFail(qPrintable(QStringLiteral("%1 attempt %2 resumed from epoch %3, not a rung")
                                                .arg(id)
                                                .arg(k + 1)
                                                .arg(t.resumedFrom[k])),
                        __FILE__, __LINE__);
                    return -1;
                }
            if (run.phase == RunPhase::Stopped
                && run.epochsDone() >= state.scheduler().settings().trialEpochs) {
                QTest::qFail(
                    qPrintable(id + QStringLiteral(" stopped after its last epoch")), __FILE__, __LINE__);
                return -1;
            }
            // Every decision was made on what the workers reported and the journal stored:
            // a runner started again reads the same inputs (the test accuracy of that epoch).
            QMap<int, double> reported;
            for (const auto &a : run.attempts)
                if (!a.agents.isEmpty())
                    for (const auto &e : journal.runEvents(id, a.attempt, a.agents.first()))
                        if (e.has_epoch())
                            reported[e.epoch().epoch()] = e.epoch().test_accuracy();
            for (const TrialDecision &d : run.decisions)
                if (d.action != QLatin1String("promote")
                    && (!reported.contains(d.epoch) || reported[d.epoch] != d.value)) {
                    QTest::qFail(
                        qPrintable(QStringLiteral("%1: %2 at epoch %3 with %4, but the stored events say %5")
                                       .arg(id, d.action)
                                       .arg(d.epoch)
                                       .arg(d.value)
                                       .arg(reported.value(d.epoch, -1))),
                        __FILE__, __LINE__);
                    return -1;
                }
            for (const auto &a : run.attempts)
                agentsUsed.unite(QSet<QString>(a.agents.begin(), a.agents.end()));
            spent += int(t.epochs.size());
        }
        int decisions = 0;
        const QString replay = replayDecisions(journal.events(studyId), &decisions);
        if (!replay.isEmpty()) {
            QTest::qFail(qPrintable(replay), __FILE__, __LINE__);
            return -1;
        }
        if (decisions < state.runs().size() || agentsUsed.size() != 2) {
            QTest::qFail(
                qPrintable(
                    QStringLiteral("%1 decisions, %2 agents used").arg(decisions).arg(agentsUsed.size())),
                __FILE__, __LINE__);
            return -1;
        }
        return spent;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        VERIFY_OK(test::startStudyAgents({ &m_a, &m_b }, m_tmp.path(), kToken, 128, &m_agents));
    }

    void cleanupTestCase()
    {
        m_a.stop();
        m_b.stop();
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
    }

    // Li et al.'s Algorithm 2 with 9 trials: exactly 3 reach epoch 3 and 1 reaches 9.
    void promotionTuneSpendsAshasBudget()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("promotion/journal.sqlite"))));
        const v1::StudyPlan plan = tunePlan(QStringLiteral("promotion"), 9, 3, 9);
        VERIFY_OK(checkPlan(plan));
        const auto createdStudy = test::createStudy(&journal, m_agents, plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        QCOMPARE(driveToEnd(&journal, studyId, 0), QStringLiteral("SUCCEEDED"));
        const int spent = checkTune(journal, studyId);
        const StudyState state = StudyState::replay(journal.events(studyId));
        int finished = 0, atThree = 0;
        for (const RunProgress &run : state.runs()) {
            finished += run.phase == RunPhase::Succeeded ? 1 : 0;
            atThree += run.epochsDone() >= 3 ? 1 : 0;
        }
        // ASHA's budget: every trial 1 epoch, 2 more for each promotion out of rung 1, 6
        // more out of rung 2 — at least ⌊9/3⌋ and ⌊3/3⌋ of them (21 epochs); asynchronous
        // promotion may add one that a later result pushed out of the top third.
        const int fromFirst = promotionsFrom(state, 0), fromSecond = promotionsFrom(state, 1);
        QCOMPARE(atThree, fromFirst);
        QCOMPARE(finished, fromSecond);
        QStringList decisions; // in the failure's words: each trial's decisions
        for (const RunResult &r : buildSnapshot(state, journal).runs)
            for (const auto &d : r.decisions)
                decisions << r.runId.right(3) + QStringLiteral(" ") + d.reason;
        QVERIFY2(fromFirst >= 3 && fromFirst <= 5 && fromSecond >= 1 && fromSecond <= 2,
            qPrintable(QStringLiteral("%1 and %2 promotions:\n%3")
                           .arg(fromFirst)
                           .arg(fromSecond)
                           .arg(decisions.join(u'\n'))));
        QCOMPARE(spent, 9 + 2 * fromFirst + 6 * fromSecond);
        // The trials table and the best trial, as the CLI and the console show them.
        const StudySnapshot snapshot = buildSnapshot(state, journal);
        QVERIFY(snapshot.tune);
        const int best = bestTrialIndex(snapshot);
        QVERIFY(best >= 0);
        QCOMPARE(epochsSpent(snapshot), spent);
        QCOMPARE(epochsWithoutStopping(snapshot), 81);
        for (const RunResult &r : snapshot.runs)
            QVERIFY2(trialStatus(r).startsWith(QLatin1String("finished"))
                    || trialStatus(r).startsWith(QLatin1String("stopped at rung")),
                qPrintable(trialStatus(r)));

        // "Continue the best trial for N more epochs" is one action: past its schedule
        // (stretched), and a trial stopped at rung 1 within its own (unchanged).
        const QString bestId = snapshot.runs[best].runId;
        QString stoppedId;
        for (const RunProgress &run : state.runs())
            if (run.phase == RunPhase::Stopped && run.epochsDone() == 1 && stoppedId.isEmpty()
                && run.planned.runId != bestId)
                stoppedId = run.planned.runId;
        QVERIFY(!stoppedId.isEmpty());
        const Status none = StudyRunner::requestContinue(&journal, studyId, bestId, 0);
        QVERIFY(!none);
        QVERIFY2(none.error().contains(QLatin1String("--epochs: give 1 to")), qPrintable(none.error()));
        const int bestBefore = state.run(bestId)->epochsDone();
        VERIFY_OK(StudyRunner::requestContinue(&journal, studyId, bestId, 2));
        VERIFY_OK(StudyRunner::requestContinue(&journal, studyId, stoppedId, 1));
        QCOMPARE(driveToEnd(&journal, studyId, 0), QStringLiteral("SUCCEEDED"));
        QCOMPARE(checkTune(journal, studyId), spent + 2 + 1); // nothing trained twice
        const StudyState after = StudyState::replay(journal.events(studyId));
        QCOMPARE(after.run(bestId)->epochsDone(), bestBefore + 2);
        QCOMPARE(
            after.run(bestId)->planned.config.epochs, std::max(9, bestBefore + 2)); // stretched only past 9
        QVERIFY2(after.run(bestId)->decisions.last().reason.contains(QLatin1String("as the user asked")),
            qPrintable(after.run(bestId)->decisions.last().reason));
        QCOMPARE(after.run(stoppedId)->epochsDone(), 2);
        QCOMPARE(after.run(stoppedId)->planned.config.epochs, 9); // its schedule as it was
        QCOMPARE(after.run(stoppedId)->phase, RunPhase::Succeeded);
        // Stopped trials keep their last checkpoint on their agent (what a continue resumes
        // from), even through a garbage collection told to keep nothing of finished runs;
        // only trials that trained their whole schedule lose theirs.
        for (const auto &agent : m_agents) {
            AgentClient client(agent.address, kToken);
            v1::CollectGarbageRequest gc;
            gc.set_finished_runs("none");
            v1::CollectGarbageResponse removed;
            QVERIFY(client.collectGarbage(gc, &removed).ok());
            for (const auto &r : removed.removed()) {
                const RunProgress *run = after.run(QString::fromStdString(r.run_id()));
                if (!run)
                    continue; // not this tune's
                QVERIFY2(run->phase == RunPhase::Succeeded && run->epochsDone() == run->planned.config.epochs,
                    qPrintable(QString::fromStdString(r.path() + ": " + r.why())));
            }
        }
    }

    void stoppingTuneStopsBelowTheCutoff()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("stopping/journal.sqlite"))));
        // As many trials at once as the agents have free slots (one per core): no cap.
        v1::StudyPlan plan = tunePlan(QStringLiteral("stopping"), 9, 3, 9);
        plan.mutable_tune()->set_max_concurrent_trials(0);
        const auto createdStudy = test::createStudy(&journal, m_agents, plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        QCOMPARE(driveToEnd(&journal, studyId, 0), QStringLiteral("SUCCEEDED"));
        {
            // Never more attempts at once than the two agents' cores (slots taken since the
            // last capacity refresh count), give or take the attempts whose end the journal
            // records a moment after their agent freed the slot: at most half as many again, and one.
            // Placing on the stale capacity alone started all 9 at once.
            const StudyState state = StudyState::replay(journal.events(studyId));
            QList<std::pair<qint64, int>> edges;
            for (const RunProgress &run : state.runs())
                for (const auto &a : run.attempts) {
                    edges.append({ a.startedUnixMs, +1 });
                    edges.append(
                        { a.endedUnixMs > 0 ? a.endedUnixMs : std::numeric_limits<qint64>::max(), -1 });
                }
            std::sort(edges.begin(), edges.end()); // an end before a start at the same moment
            int open = 0, most = 0;
            for (const auto &[at, change] : edges)
                most = std::max(most, open += change);
            v1::DescribeResponse a, b;
            QVERIFY(AgentClient(m_agents[0].address, kToken).describe(&a).ok());
            QVERIFY(AgentClient(m_agents[1].address, kToken).describe(&b).ok());
            const int cores = a.cpu_cores() + b.cpu_cores();
            QVERIFY2(most <= cores + cores / 2 + 1 && most < 9,
                qPrintable(QStringLiteral("%1 trials at once on %2 cores").arg(most).arg(cores)));
        }
        const int spent = checkTune(journal, studyId);
        QVERIFY(spent > 0);
        QVERIFY2(spent < 81, qPrintable(QString::number(spent)));
        // Every stop names the cutoff it missed, and the value was below it.
        const StudyState state = StudyState::replay(journal.events(studyId));
        int stopped = 0;
        for (const RunProgress &run : state.runs())
            if (run.phase == RunPhase::Stopped) {
                ++stopped;
                const TrialDecision &d = run.decisions.last();
                QVERIFY(d.cutoff);
                QVERIFY2(d.value < *d.cutoff, qPrintable(d.reason));
            }
        QVERIFY(stopped > 0);
    }

    // The runner dies after every journal event; fresh runners finish the tune with the
    // same decisions, no epoch trained twice, and each agent's attempts all succeeded.
    void crashAfterEveryJournalEvent()
    {
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("crash/journal.sqlite"))));
        const auto createdStudy
            = test::createStudy(&journal, m_agents, tunePlan(QStringLiteral("promotion"), 4, 2, 2));
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        int runners = 0;
        QCOMPARE(driveToEnd(&journal, studyId, 1, &runners), QStringLiteral("SUCCEEDED"));
        QVERIFY2(runners >= 20, qPrintable(QString::number(runners)));
        // 4 trials to epoch 1, the top 2 (or 3, asynchronously) to epoch 2.
        const int promoted = promotionsFrom(StudyState::replay(journal.events(studyId)), 0);
        QVERIFY2(promoted >= 2 && promoted <= 3, qPrintable(QString::number(promoted)));
        QCOMPARE(checkTune(journal, studyId), 4 + promoted);
        const auto agentRuns = test::agentRunsOf(m_agents, kToken, studyId);
        VERIFY_OK(agentRuns);
        for (const auto &r : agentRuns.value())
            QCOMPARE(r.state(), v1::SUCCEEDED);
    }
};

QTEST_GUILESS_MAIN(TestTuneProcess)
#include "tst_tune_process.moc"
