// The study control plane's journal: its event-sourced state replayed at every prefix, checkpoint
// copies, unreachable agents, stalls, full disks and added agents folded in, run events stored
// once and resumable, and a file it cannot use refused. Plans are tst_study_plan's.
#include "journal.h"
#include "journal_test_support.h"
#include "placement.h"
#include "plan_models.h"
#include "run_request.h"
#include "spec_rules.h"
#include "study_fixtures.h"
#include "study_model.h"
#include "study_plan.h"
#include "study_state.h"
#include "verify_ok.h"

#include <limits>

#include <QCryptographicHash>
#include <QDateTime>
#include <QFile>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

using namespace scalelab;
using namespace scalelab::core;
using test::validPlan;

namespace {

// Writes one run's journal events, as the runner would, for replay tests.
struct RunScript {
    Journal &journal;
    QString studyId;
    QString runId;
    template <class Payload> void add(const QString &type, const Payload &payload)
    {
        VERIFY_OK(journal.append(studyId, testing::testEvent(type, payload)));
    }
    QJsonObject event(int attempt, std::initializer_list<std::pair<const char *, QJsonValue>> fields) const
    {
        QJsonObject o { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt } };
        for (const auto &[key, value] : fields)
            o.insert(QLatin1String(key), value);
        return o;
    }
};

} // namespace

class TestStudyJournal : public QObject {
    Q_OBJECT

private Q_SLOTS:

    // A journal cut after any event replays to a consistent state, and the full
    // journal replays to the state it was written from.
    void journalReplaysEveryPrefix()
    {
        QTemporaryDir dir;
        Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("j.sqlite"))));
        v1::StudyPlan plan = validPlan();
        plan.set_max_failures(1);
        const auto runs = expandPlan(plan, QStringLiteral("s1"));
        QCOMPARE(runs.size(), 3);
        auto add = [&](const QString &type, const auto &payload) {
            VERIFY_OK(journal.append(QStringLiteral("s1"), testing::testEvent(type, payload)));
        };
        add(QStringLiteral("study_created"),
            journal_events::studyCreated(QStringLiteral("p"), plan, { QStringLiteral("a") }, runs));
        const QString r1 = runs[0].runId, r2 = runs[1].runId, r3 = runs[2].runId;
        const QList<Portion> onA { Portion { QStringLiteral("a"), { 0 } } };
        auto run
            = [](const QString &id, int attempt, const QString &extraKey = {}, const QJsonValue &extra = {}) {
                  QJsonObject o { { QStringLiteral("runId"), id }, { QStringLiteral("attempt"), attempt } };
                  if (!extraKey.isEmpty())
                      o.insert(extraKey, extra);
                  return o;
              };
        auto ended = [](const QString &id, int attempt, const char *outcome, bool retry) {
            return QJsonObject { { QStringLiteral("runId"), id }, { QStringLiteral("attempt"), attempt },
                { QStringLiteral("outcome"), QLatin1String(outcome) },
                { QStringLiteral("reason"), QStringLiteral("why") }, { QStringLiteral("retry"), retry } };
        };
        add(QStringLiteral("attempt_starting"), journal_events::attemptStarting(r1, 1, onA));
        add(QStringLiteral("attempt_running"),
            run(r1, 1, QStringLiteral("rendezvous"), QStringLiteral("127.0.0.1:1")));
        add(QStringLiteral("attempt_ended"), ended(r1, 1, "FAILED", true));
        add(QStringLiteral("attempt_starting"), journal_events::attemptStarting(r1, 2, onA));
        add(QStringLiteral("attempt_running"), run(r1, 2));
        add(QStringLiteral("attempt_ended"), ended(r1, 2, "SUCCEEDED", false));
        add(QStringLiteral("run_pending"),
            QJsonObject {
                { QStringLiteral("runId"), r2 }, { QStringLiteral("reason"), QStringLiteral("waiting") } });
        add(QStringLiteral("attempt_starting"), journal_events::attemptStarting(r2, 1, onA));
        add(QStringLiteral("attempt_ended"), ended(r2, 1, "FAILED", true));
        add(QStringLiteral("attempt_starting"), journal_events::attemptStarting(r2, 2, onA));
        add(QStringLiteral("attempt_running"), run(r2, 2));
        add(QStringLiteral("attempt_ended"), ended(r2, 2, "FAILED", false));
        add(QStringLiteral("cancel_requested"), QJsonObject {});
        add(QStringLiteral("study_ended"),
            QJsonObject { { QStringLiteral("state"), QStringLiteral("CANCELLED") } });

        const auto events = journal.events(QStringLiteral("s1"));
        QCOMPARE(events.size(), 15);
        for (int k = 1; k <= events.size(); ++k) {
            const StudyState s = StudyState::replay(events.mid(0, k));
            QCOMPARE(s.runs().size(), 3);
            QCOMPARE(s.lastEventId(), events[k - 1].id);
            for (const auto &r : s.runs()) {
                // At most one open attempt, numbered like the attempts recorded.
                QCOMPARE(r.attempts.size(), r.attempt);
                QVERIFY(r.failures <= r.planned.maxFailures + 1);
                if (r.attemptOpen())
                    QCOMPARE(r.attempts.last().endedUnixMs, 0);
            }
            // Replaying in two halves gives the same as in one go (no hidden state).
            StudyState halves = StudyState::replay(events.mid(0, k / 2));
            for (const auto &e : events.mid(k / 2, k - k / 2))
                halves.apply(e);
            for (int i = 0; i < 3; ++i) {
                QCOMPARE(halves.runs()[i].phase, s.runs()[i].phase);
                QCOMPARE(halves.runs()[i].attempt, s.runs()[i].attempt);
            }
        }
        const StudyState full = StudyState::replay(events);
        QCOMPARE(full.run(r1)->phase, RunPhase::Succeeded);
        QCOMPARE(full.run(r1)->attempts.size(), 2);
        QCOMPARE(full.run(r1)->attempts[0].outcome, QStringLiteral("FAILED"));
        QCOMPARE(full.run(r2)->phase, RunPhase::Failed);
        QCOMPARE(full.run(r2)->failures, 2);
        QCOMPARE(full.run(r3)->phase, RunPhase::Cancelled); // pending when the study was cancelled
        QCOMPARE(full.state(), QStringLiteral("CANCELLED"));
        // After attempt 1 of r2 failed with a retry allowed, r2 waits again.
        QCOMPARE(StudyState::replay(events.mid(0, 10)).run(r2)->phase, RunPhase::Pending);

        // Survives a reopen (another process, or after a crash).
        journal.close();
        Journal again;
        VERIFY_OK(again.open(dir.filePath(QStringLiteral("j.sqlite"))));
        QCOMPARE(again.events(QStringLiteral("s1")).size(), 15);
        QCOMPARE(again.studyIds(), QStringList { QStringLiteral("s1") });
    }

    // checkpoint_copied keeps the newest copy per run; checkpoint_uploaded marks the
    // attempt it was sent for, and the run's reason says so in words.
    void checkpointCopiesAndTransfersAreFolded()
    {
        QTemporaryDir dir;
        Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("j.sqlite"))));
        const auto runs = expandPlan(validPlan(), QStringLiteral("s2"));
        const QString r1 = runs[0].runId;
        RunScript script { journal, QStringLiteral("s2"), r1 };
        auto add = [&](const QString &type, const auto &payload) { script.add(type, payload); };
        auto event = [&](int attempt, std::initializer_list<std::pair<const char *, QJsonValue>> fields) {
            return script.event(attempt, fields);
        };
        const QString a = QStringLiteral("10.0.0.1:7450"), b = QStringLiteral("10.0.0.2:7450");
        add(QStringLiteral("study_created"),
            journal_events::studyCreated(QStringLiteral("p"), validPlan(), { a, b }, runs));
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(r1, 1, { Portion { a, { 0, 1 } } }));
        add(QStringLiteral("attempt_running"), event(1, {}));
        for (int epoch : { 1, 2, 1 }) // a late copy of an older epoch changes nothing
            add(QStringLiteral("checkpoint_copied"),
                event(1,
                    { { "epoch", epoch }, { "agent", a }, { "dir", QStringLiteral("/c/e%1").arg(epoch) } }));
        add(QStringLiteral("attempt_ended"),
            event(1,
                { { "outcome", QStringLiteral("FAILED") }, { "reason", QStringLiteral("lost agent") },
                    { "retry", true } }));
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(r1, 2, { Portion { b, { 0, 1 } } }));
        add(QStringLiteral("checkpoint_uploaded"),
            event(1, { { "epoch", 1 }, { "agent", b }, { "from", a } }));
        const StudyState before = StudyState::replay(journal.events(QStringLiteral("s2")));
        QCOMPARE(before.run(r1)->checkpoint.epoch, 2);
        QCOMPARE(before.run(r1)->checkpoint.agent, a);
        QCOMPARE(before.run(r1)->checkpoint.dir, QStringLiteral("/c/e2"));
        QCOMPARE(before.run(r1)->attempts.last().transferredEpoch, 0); // attempt 1's upload: not this one
        add(QStringLiteral("checkpoint_uploaded"),
            event(2, { { "epoch", 2 }, { "agent", b }, { "from", a } }));
        const StudyState sent = StudyState::replay(journal.events(QStringLiteral("s2")));
        QCOMPARE(sent.run(r1)->attempts.last().transferredEpoch, 2);
        QCOMPARE(sent.run(r1)->attempts.last().transferredFrom, a);
        QCOMPARE(sent.run(r1)->attempts.first().transferredEpoch, 0);
        QCOMPARE(
            sent.run(r1)->reason, QStringLiteral("resuming from epoch 2, checkpoint copied from agent ") + a);
        add(QStringLiteral("attempt_running"), event(2, {}));
        add(QStringLiteral("attempt_ended"),
            event(2,
                { { "outcome", QStringLiteral("SUCCEEDED") }, { "reason", QString() }, { "retry", false } }));
        const StudyState done = StudyState::replay(journal.events(QStringLiteral("s2")));
        QCOMPARE(done.run(r1)->phase, RunPhase::Succeeded);
        QCOMPARE(
            done.run(r1)->reason, QStringLiteral("resumed from epoch 2, checkpoint copied from agent ") + a);

        AttemptRecord record;
        QCOMPARE(resumeNote(record), QString());
        record.resumedFromEpoch = 3;
        QCOMPARE(resumeNote(record), QStringLiteral("resumed from epoch 3"));
        record.transferredEpoch = 3;
        record.transferredFrom = a;
        QCOMPARE(
            resumeNote(record), QStringLiteral("resumed from epoch 3, checkpoint copied from agent ") + a);
        record.resumedFromEpoch = 1; // the worker refused the copy and took an older one
        QCOMPARE(resumeNote(record),
            QStringLiteral(
                "resumed from epoch 1 (the checkpoint of epoch 3 copied from agent %1 was not used)")
                .arg(a));
    }

    // An attempt lost to an unreachable agent is not a failure: the run waits, saying for
    // whom; stalls are folded in and cleared; the backoff doubles up to a minute.
    void unreachableAgentsAndStallsAreFolded()
    {
        QTemporaryDir dir;
        Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("j.sqlite"))));
        v1::StudyPlan plan = validPlan();
        plan.set_max_failures(0);
        const auto runs = expandPlan(plan, QStringLiteral("s3"));
        const QString r1 = runs[0].runId;
        RunScript script { journal, QStringLiteral("s3"), r1 };
        auto add = [&](const QString &type, const auto &payload) { script.add(type, payload); };
        auto event = [&](int attempt, std::initializer_list<std::pair<const char *, QJsonValue>> fields) {
            return script.event(attempt, fields);
        };
        const QString a = QStringLiteral("10.0.0.1:7450"), b = QStringLiteral("10.0.0.2:7450");
        add(QStringLiteral("study_created"),
            journal_events::studyCreated(QStringLiteral("p"), plan, { a, b }, runs));
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(r1, 1, { Portion { a, { 0 } }, Portion { b, { 1 } } }));
        add(QStringLiteral("attempt_running"), event(1, {}));
        const qint64 since = QDateTime::currentMSecsSinceEpoch() - 20'000;
        add(QStringLiteral("run_stalled"),
            event(1,
                { { "since", double(since) }, { "lastStep", 16 },
                    { "detail", QStringLiteral("rank 1 on b unreachable") } }));
        StudyState stalled = StudyState::replay(journal.events(QStringLiteral("s3")));
        QCOMPARE(stalled.run(r1)->stalledSinceMs, since);
        QVERIFY2(stallText(*stalled.run(r1), since + 20'000)
                == QStringLiteral("stalled: no progress for 20 s; rank 1 on b unreachable"),
            qPrintable(stallText(*stalled.run(r1), since + 20'000)));
        QVERIFY(buildSnapshot(stalled, journal)
                    .runs.first()
                    .stateReason.startsWith(QLatin1String("stalled: no progress for")));
        add(QStringLiteral("run_unstalled"), event(1, { { "seconds", 27.0 } }));
        QCOMPARE(StudyState::replay(journal.events(QStringLiteral("s3"))).run(r1)->stalledSinceMs, 0);

        add(QStringLiteral("attempt_ended"),
            event(1,
                { { "outcome", QStringLiteral("FAILED") },
                    { "reason", QStringLiteral("agent b unreachable") }, { "retry", true },
                    { "counts", false }, { "unreachable", QJsonArray { b } },
                    { "unreachableSince", double(since) },
                    { "unreachableText", QStringLiteral("agent b (node2)") } }));
        const StudyState waiting = StudyState::replay(journal.events(QStringLiteral("s3")));
        const RunProgress *run = waiting.run(r1);
        QCOMPARE(run->phase, RunPhase::Pending);
        QCOMPARE(run->failures, 0);
        QCOMPARE(run->waitingFor, QStringList { b });
        QVERIFY2(
            run->reason.startsWith(
                QStringLiteral("waiting for agent b (node2) (unreachable since %1)").arg(clockTime(since))),
            qPrintable(run->reason));
        QVERIFY(waiting.shouldRetry(*run) == false); // maxFailures 0: only uncounted attempts go again

        // Another failure counts, and with maxFailures 0 the run is FAILED.
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(r1, 2, { Portion { a, { 0 } }, Portion { b, { 1 } } }));
        QVERIFY(StudyState::replay(journal.events(QStringLiteral("s3"))).run(r1)->waitingFor.isEmpty());
        add(QStringLiteral("attempt_running"), event(2, {}));
        add(QStringLiteral("attempt_ended"),
            event(2,
                { { "outcome", QStringLiteral("FAILED") }, { "reason", QStringLiteral("diverged") },
                    { "retry", false } }));
        const StudyState failed = StudyState::replay(journal.events(QStringLiteral("s3")));
        QCOMPARE(failed.run(r1)->phase, RunPhase::Failed);
        QCOMPARE(failed.run(r1)->failures, 1);

        QCOMPARE(retryBackoffMs(1, 0.5), qint64(2'000));
        QCOMPARE(retryBackoffMs(2, 0.5), qint64(4'000));
        QCOMPARE(retryBackoffMs(6, 0.5), qint64(60'000));
        QCOMPARE(retryBackoffMs(30, 0.5), qint64(60'000));
        QCOMPARE(retryBackoffMs(1, 0.0), qint64(1'600));
        QCOMPARE(retryBackoffMs(1, 1.0), qint64(2'400));
    }

    // A checkpoint that did not fit is not one of maxFailures: the run waits for space, and
    // says so. A retry may bring agents the study did not have.
    void fullDisksAndAddedAgentsAreFolded()
    {
        QTemporaryDir dir;
        Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("j.sqlite"))));
        v1::StudyPlan plan = validPlan();
        plan.set_max_failures(0);
        const auto runs = expandPlan(plan, QStringLiteral("s4"));
        const QString r1 = runs[0].runId;
        RunScript script { journal, QStringLiteral("s4"), r1 };
        auto add = [&](const QString &type, const auto &payload) { script.add(type, payload); };
        auto event = [&](int attempt, std::initializer_list<std::pair<const char *, QJsonValue>> fields) {
            return script.event(attempt, fields);
        };
        const QString a = QStringLiteral("10.0.0.1:7450"), b = QStringLiteral("10.0.0.2:7450");
        add(QStringLiteral("study_created"),
            journal_events::studyCreated(QStringLiteral("p"), plan, { a }, runs));
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(r1, 1, { Portion { a, { 0 } } }));
        add(QStringLiteral("attempt_running"), event(1, {}));
        add(QStringLiteral("attempt_ended"),
            event(1,
                { { "outcome", QStringLiteral("FAILED") },
                    { "reason", QStringLiteral("rank 0: no space left on device") }, { "retry", true },
                    { "counts", false },
                    { "noSpace", QJsonObject { { "agent", a }, { "bytesNeeded", 4.0e7 } } } }));
        const StudyState waiting = StudyState::replay(journal.events(QStringLiteral("s4")));
        const RunProgress *run = waiting.run(r1);
        QCOMPARE(run->phase, RunPhase::Pending);
        QCOMPARE(run->failures, 0);
        QCOMPARE(run->spaceNeeded, qint64(40'000'000));
        QCOMPARE(run->spaceShortOn, a);
        QVERIFY2(run->reason.startsWith(QLatin1String("waiting for disk space")), qPrintable(run->reason));
        // A number no disk has (a damaged journal) is refused, not undefined behaviour.
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(r1, 2, { Portion { a, { 0 } } }));
        QCOMPARE(StudyState::replay(journal.events(QStringLiteral("s4"))).run(r1)->spaceNeeded, qint64(0));
        add(QStringLiteral("attempt_running"), event(2, {}));
        add(QStringLiteral("attempt_ended"),
            event(2,
                { { "outcome", QStringLiteral("FAILED") }, { "reason", QStringLiteral("x") },
                    { "retry", true }, { "counts", false },
                    { "noSpace", QJsonObject { { "agent", a }, { "bytesNeeded", 1e300 } } } }));
        QCOMPARE(StudyState::replay(journal.events(QStringLiteral("s4"))).run(r1)->spaceNeeded, qint64(0));

        add(QStringLiteral("agents_added"),
            QJsonObject { { QStringLiteral("agents"), QJsonArray { b, a } } });
        QCOMPARE(StudyState::replay(journal.events(QStringLiteral("s4"))).agents(), QStringList({ a, b }));
    }

    void runEventsAreStoredOnceAndResumable()
    {
        QTemporaryDir dir;
        Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("j.sqlite"))));
        std::vector<v1::RunEvent> batch;
        for (int seq = 1; seq <= 5; ++seq) {
            v1::RunEvent e;
            e.set_seq(seq);
            e.mutable_step()->set_step(seq);
            batch.push_back(e);
        }
        v1::RunEvent heartbeat;
        heartbeat.mutable_heartbeat();
        batch.push_back(heartbeat); // seq 0: not stored
        VERIFY_OK(
            journal.appendRunEvents(QStringLiteral("s"), QStringLiteral("r"), 1, QStringLiteral("a"), batch));
        VERIFY_OK(journal.appendRunEvents(
            QStringLiteral("s"), QStringLiteral("r"), 1, QStringLiteral("a"), batch)); // again
        QCOMPARE(journal.lastRunEventSeq(QStringLiteral("r"), 1, QStringLiteral("a")), 5);
        QCOMPARE(journal.lastRunEventSeq(QStringLiteral("r"), 2, QStringLiteral("a")), 0);
        const auto stored = journal.runEvents(QStringLiteral("r"), 1, QStringLiteral("a"));
        QCOMPARE(int(stored.size()), 5);
        QCOMPARE(stored.back().step().step(), 5);
    }

    void journalRefusesAnUnusableFile()
    {
        QTemporaryDir dir;
        QFile junk(dir.filePath(QStringLiteral("junk.sqlite")));
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write(QByteArray(4096, 'x'));
        junk.close();
        Journal journal;
        const Status opened = journal.open(junk.fileName());
        QVERIFY(!opened);
        QVERIFY2(opened.error().contains(junk.fileName()), qPrintable(opened.error()));
    }
};

QTEST_GUILESS_MAIN(TestStudyJournal)
#include "tst_study_journal.moc"
