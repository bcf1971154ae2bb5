// The study journal's typed events (proto/scalelab/v1/journal.proto): every event is written
// and read back as itself, journals written before the typed events (JSON rows) still open
// and replay to the state they had, and an event that cannot be read is named, not fatal.
#include "journal.h"
#include "journal_codec.h"
#include "journal_events.h"
#include "study_plan.h"
#include "study_state.h"
#include "verify_ok.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

#include <cmath>

using namespace scalelab;
using namespace scalelab::core;

namespace {

const QString kOldJournal = QStringLiteral(SCALELAB_SOURCE_DIR "/tests/journal/journal-b987923.sqlite");
const QString kOldRows
    = QStringLiteral(SCALELAB_SOURCE_DIR "/tests/fuzz/corpus/fuzz_journal_replay/whole-study.tsv");

v1::StudyPlan smallPlan()
{
    auto plan = parsePlanJson(R"({"name": "p", "dataset": "synthetic", "baseline": {"batchSize": 32},
        "grid": {"workers": [2, {"min": 1, "max": 2}], "batchSize": [32], "epochs": [2]}})");
    return plan ? plan.value() : v1::StudyPlan();
}

// One event of every type, as the runner builds them.
QList<v1::StudyEvent> oneOfEach()
{
    const v1::StudyPlan plan = smallPlan();
    QList<PlannedRun> runs = expandPlan(plan, QStringLiteral("s"));
    runs[0].trial = true;
    runs[0].params = QJsonObject { { QStringLiteral("learningRate"), 0.05 } };
    runs[0].bracket = 1;
    NodeInfo node;
    node.agent = QStringLiteral("10.0.0.1:50051");
    node.hostname = QStringLiteral("h1");
    node.cpuCores = 16;
    node.memoryBytes = 64LL << 30;
    node.gpus << QStringLiteral("0: NVIDIA H200 (139 GiB)");
    node.software.insert(QStringLiteral("torch"), QStringLiteral("2.1"));
    const QString r = runs[1].runId;
    const QList<Portion> portions { Portion { QStringLiteral("a"), { 0, 1 } },
        Portion { QStringLiteral("b"), { 2 } } };
    v1::StudyEvent failed = journal_events::attemptEnded(r, 1, v1::ATTEMPT_FAILED, QStringLiteral("killed"));
    failed.mutable_attempt_ended()->set_retry(true);
    failed.mutable_attempt_ended()->set_counts(false);
    failed.mutable_attempt_ended()->add_unreachable("b");
    failed.mutable_attempt_ended()->mutable_no_space()->set_bytes_needed(1LL << 40);
    v1::StudyEvent lr;
    lr.mutable_lr_found()->set_learning_rate(0.05);
    lr.mutable_lr_found()->set_conclusive(false);
    lr.mutable_lr_found()->add_points()->set_smoothed_loss(2.3);
    TrialDecision decision;
    decision.runId = runs[0].runId;
    decision.action = QStringLiteral("stop");
    decision.value = std::nan("");
    decision.seen = { 0.5, std::nan("") };
    decision.cutoff = 0.4;
    return {
        journal_events::studyCreated(
            QStringLiteral("p"), plan, { QStringLiteral("a"), QStringLiteral("b") }, runs),
        journal_events::nodesSeen({ node }),
        journal_events::runPending(r, QStringLiteral("waiting for 3 slots")),
        journal_events::attemptStarting(r, 1, portions, QStringLiteral("shrank from 3 to 2")),
        journal_events::attemptRunning(r, 1, QStringLiteral("10.0.0.1:29500")),
        journal_events::attemptResizing(r, 1, QStringLiteral("grows back")),
        journal_events::runStalled(r, 1, 1'700'000'000'123, 42, QStringLiteral("rank 2 on b unreachable")),
        journal_events::runUnstalled(r, 1, 20.5),
        journal_events::checkpointCopied(r, 1, 1, QStringLiteral("a"), QStringLiteral("/state/c/e1")),
        failed,
        journal_events::checkpointUploaded(r, 2, 1, QStringLiteral("b"), QStringLiteral("a")),
        journal_events::cancelRequested(r),
        journal_events::retryRequested(r),
        journal_events::agentsAdded({ QStringLiteral("c") }),
        lr,
        journal_events::lrFindFailed(QStringLiteral("no data"), QStringLiteral("a"), true),
        journal_events::networkProbed(QJsonArray { QJsonObject { { QStringLiteral("world_size"), 2 },
                                          { QStringLiteral("latency_seconds"), QJsonValue() } } },
            QStringLiteral("probed")),
        journal_events::trialDecision(decision),
        journal_events::trialContinued(runs[0].runId, 5),
        journal_events::studyEnded(QStringLiteral("SUCCEEDED")),
    };
}

QString copyOf(const QString &from, const QTemporaryDir &dir)
{
    const QString to = dir.filePath(QStringLiteral("journal.sqlite"));
    QFile::remove(to);
    return QFile::copy(from, to) ? to : QString();
}

} // namespace

class TestJournalEvents : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // Each of StudyEvent's events, appended and read back, is itself (NaN included), under
    // its type's name; and the list above has them all, so a new event gets tested here.
    void everyEventReadsBackAsWritten()
    {
        QTemporaryDir dir;
        Journal journal;
        VERIFY_OK(journal.open(dir.filePath(QStringLiteral("j.sqlite"))));
        const QList<v1::StudyEvent> events = oneOfEach();
        QSet<QString> types;
        for (const auto &e : events) {
            types.insert(eventType(e));
            VERIFY_OK(journal.append(QStringLiteral("s"), e));
        }
        const auto *oneof = v1::StudyEvent::descriptor()->FindOneofByName("event");
        QCOMPARE(types.size(), oneof->field_count());
        const QList<JournalEvent> back = journal.events(QStringLiteral("s"));
        QCOMPARE(back.size(), events.size());
        for (int i = 0; i < events.size(); ++i) {
            QVERIFY2(back[i].unreadable.isEmpty(), qPrintable(back[i].unreadable));
            QCOMPARE(encodeEvent(back[i].event), encodeEvent(events[i]));
        }
        QVERIFY(std::isnan(back[17].event.trial_decision().value()));
        QCOMPARE(journal.studyIds(), QStringList { QStringLiteral("s") });
        // And they replay: the study as the handlers make it.
        const StudyState state = StudyState::replay(back);
        QCOMPARE(state.runs().size(), 3);
        QCOMPARE(state.nodes().value(0).memoryBytes, 64LL << 30);
        QCOMPARE(state.runs()[0].planned.params.value(QLatin1String("learningRate")).toDouble(), 0.05);
        QCOMPARE(state.state(), QStringLiteral("SUCCEEDED"));
        QVERIFY(!state.learningRateSearch().conclusive);
        QVERIFY(state.unreadableEvents().isEmpty());
    }

    // The rows an earlier release wrote (the fuzzer's seed corpus, made by that release's
    // make_corpus) read as the typed events, each field where it belongs.
    void rowsOfAnEarlierReleaseReadAsTypedEvents()
    {
        QFile file(kOldRows);
        QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(kOldRows));
        QList<JournalEvent> events;
        for (const QByteArray &line : file.readAll().split('\n')) {
            const QList<QByteArray> fields = line.split('\t');
            if (fields.size() < 3)
                continue;
            const QString type = QString::fromUtf8(fields[0]);
            auto decoded = decodeLegacyEvent(type, QJsonDocument::fromJson(fields[2]).object());
            VERIFY_OK(decoded);
            QCOMPARE(eventType(decoded.value()), type);
            JournalEvent e;
            e.id = events.size() + 1;
            e.unixMs = fields[1].toLongLong();
            e.event = decoded.value();
            events << e;
        }
        QCOMPARE(events.size(), 17);
        const v1::StudyEvent &created = events[0].event;
        QCOMPARE(created.study_created().plan().name(), std::string("example-scaleup"));
        QCOMPARE(created.study_created().runs_size(), 2);
        QVERIFY(!created.study_created().runs(0).config().has_model()); // before models: the default
        QCOMPARE(events[1].event.nodes_seen().nodes(0).memory_bytes(), 8'000'000'000LL);
        const v1::AttemptEnded &failed = events[7].event.attempt_ended();
        QCOMPARE(failed.outcome(), v1::ATTEMPT_FAILED);
        QVERIFY(failed.has_counts() && !failed.counts());
        QCOMPARE(failed.unreachable_since(), 1'700'000'000'000LL);
        QCOMPARE(events[11].event.attempt_ended().outcome(), v1::ATTEMPT_SUCCEEDED);
        const v1::LrFound &lr = events[14].event.lr_found();
        QCOMPARE(lr.points_size(), 2);
        QCOMPARE(lr.points(1).learning_rate(), 0.1);
        QCOMPARE(lr.points(1).smoothed_loss(), 1.9);
        QVERIFY(!lr.has_conclusive()); // absent then: conclusive
        QVERIFY(events[15].event.lr_find_failed().final_attempt());
        const StudyState state = StudyState::replay(events);
        QCOMPARE(state.runs().value(0).planned.config.model, QString::fromLatin1(kDefaultModelName));
        QCOMPARE(state.runs().value(0).phase, RunPhase::Succeeded);
        QCOMPARE(state.runs().value(0).attempts.size(), 2);
        QCOMPARE(state.runs().value(0).attempts[0].outcome, QStringLiteral("FAILED"));
        QVERIFY(state.learningRateSearch().conclusive);
        QCOMPARE(state.state(), QStringLiteral("SUCCEEDED"));
    }

    // A field of a JSON row that does not fit its type (a string for a number, a number out
    // of range) reads as its default, as the earlier releases read it, so the row is not lost;
    // a type no release knows is skipped (a later release's event), as in a binary row; a
    // plan that is not one is an error that says so.
    void legacyRowsThatDoNotFitAreReadAsBefore()
    {
        const auto wrong = decodeLegacyEvent(QStringLiteral("attempt_ended"),
            QJsonObject { { QStringLiteral("runId"), QStringLiteral("r") },
                { QStringLiteral("attempt"), QStringLiteral("first") },
                { QStringLiteral("outcome"), QStringLiteral("FAILED") }, { QStringLiteral("retry"), 1 },
                { QStringLiteral("unreachable"), QJsonArray { QStringLiteral("a"), 7 } },
                { QStringLiteral("noSpace"), QJsonObject { { QStringLiteral("bytesNeeded"), 1e300 } } } });
        VERIFY_OK(wrong);
        const v1::AttemptEnded &ended = wrong.value().attempt_ended();
        QCOMPARE(ended.run_id(), std::string("r"));
        QCOMPARE(ended.attempt(), 0);
        QCOMPARE(ended.outcome(), v1::ATTEMPT_FAILED);
        QVERIFY(!ended.retry());
        QCOMPARE(ended.unreachable_size(), 1);
        QCOMPARE(ended.no_space().bytes_needed(), 0);
        const auto later = decodeLegacyEvent(QStringLiteral("from_a_later_release"), QJsonObject {});
        VERIFY_OK(later);
        QCOMPARE(later.value().event_case(), v1::StudyEvent::EVENT_NOT_SET);
        const auto badPlan = decodeLegacyEvent(
            QStringLiteral("study_created"), QJsonObject { { QStringLiteral("plan"), QStringLiteral("{") } });
        QVERIFY(!badPlan);
        QVERIFY2(badPlan.error().startsWith(QLatin1String("study_created: its plan does not parse")),
            qPrintable(badPlan.error()));
    }

    // A journal of the release before the typed events, written by that release's
    // scalelab-cli (tests/journal/README.md says how): it opens (gaining the column new rows
    // use), replays to the state that release showed, and takes new typed events beside the
    // old rows.
    void journalOfAnEarlierReleaseStillOpens()
    {
        QTemporaryDir dir;
        const QString path = copyOf(kOldJournal, dir);
        QVERIFY2(!path.isEmpty(), qPrintable(kOldJournal));
        Journal journal;
        VERIFY_OK(journal.open(path));
        const QStringList ids = journal.studyIds();
        QCOMPARE(ids.size(), kExpectedStudies);
        for (const QString &id : ids) {
            const QList<JournalEvent> events = journal.events(id);
            for (const auto &e : events)
                QVERIFY2(e.unreadable.isEmpty(), qPrintable(e.unreadable));
            const StudyState state = StudyState::replay(events);
            QVERIFY(state.unreadableEvents().isEmpty());
            checkOldStudy(state);
            if (QTest::currentTestFailed())
                return;
        }
        // New events go beside the old rows and replay with them: the study left running.
        const QString study = ids.last();
        const QString run = StudyState::replay(journal.events(study)).runs().last().planned.runId;
        VERIFY_OK(
            journal.append(study, journal_events::runPending(run, QStringLiteral("after the upgrade"))));
        QCOMPARE(
            StudyState::replay(journal.events(study)).run(run)->reason, QStringLiteral("after the upgrade"));
        VERIFY_OK(journal.append(study, journal_events::cancelRequested(run)));
        const StudyState after = StudyState::replay(journal.events(study));
        QCOMPARE(after.run(run)->phase, RunPhase::Cancelled);
        QCOMPARE(after.state(), QStringLiteral("FAILED")); // a run did not succeed: as before
        journal.close();
        VERIFY_OK(journal.open(path)); // the migration ran once: opening again changes nothing
        QCOMPARE(StudyState::replay(journal.events(study)).lastEventId(), after.lastEventId());
    }

    // A row whose event cannot be read (a damaged body) is skipped and named; the events
    // around it still apply.
    void anUnreadableEventIsNamedAndSkipped()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("j.sqlite"));
        Journal journal;
        VERIFY_OK(journal.open(path));
        const QList<v1::StudyEvent> events = oneOfEach();
        VERIFY_OK(journal.append(QStringLiteral("s"), events[0]));
        const auto damaged
            = journal.append(QStringLiteral("s"), journal_events::runPending(QStringLiteral("x"), {}));
        VERIFY_OK(damaged);
        VERIFY_OK(journal.append(QStringLiteral("s"), journal_events::studyEnded(QStringLiteral("FAILED"))));
        journal.close();
        sqlite3 *db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        const QByteArray sql
            = "UPDATE study_events SET body = x'ffffffff' WHERE id = " + QByteArray::number(damaged.value());
        QCOMPARE(sqlite3_exec(db, sql.constData(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
        VERIFY_OK(journal.open(path));
        const StudyState state = StudyState::replay(journal.events(QStringLiteral("s")));
        QCOMPARE(state.unreadableEvents().size(), 1);
        QVERIFY2(state.unreadableEvents()[0].contains(QLatin1String("run_pending")),
            qPrintable(state.unreadableEvents()[0]));
        QCOMPARE(state.runs().size(), 3);
        QCOMPARE(state.state(), QStringLiteral("FAILED"));
    }

private:
    static constexpr int kExpectedStudies = 3;

    // What `study show` of b987923 said of each study of that journal.
    static void checkOldStudy(const StudyState &s)
    {
        const QList<RunProgress> &runs = s.runs();
        if (s.name() == QLatin1String("before-typed-events")) {
            QCOMPARE(s.state(), QStringLiteral("SUCCEEDED"));
            QCOMPARE(runs.size(), 2);
            for (const RunProgress &r : runs) {
                QCOMPARE(r.phase, RunPhase::Succeeded);
                QCOMPARE(r.attempts.size(), 1);
                QCOMPARE(r.attempts[0].outcome, QStringLiteral("SUCCEEDED"));
                QCOMPARE(r.checkpoint.epoch, 1); // the last epoch's is not copied
            }
            QCOMPARE(runs[1].attempts[0].worldSize, 2);
            QCOMPARE(runs[1].planned.config.workers, 2);
            QCOMPARE(runs[1].planned.config.batchSize, 32);
            QCOMPARE(runs[1].planned.config.model, QString::fromLatin1(kDefaultModelName));
            QVERIFY(s.plan().learning_rate_auto());
            const LearningRateSearch &lr = s.learningRateSearch();
            QVERIFY(lr.found);
            QCOMPARE(lr.found->batch, 32);
            QCOMPARE(lr.found->learningRate, 1.0000000000000002e-06);
            QVERIFY(lr.conclusive);
            QVERIFY(lr.points.size() > 50);
            QVERIFY(s.networkNote().startsWith(QLatin1String("not probed: every agent is on")));
            QCOMPARE(s.nodes().size(), 1);
            QCOMPARE(s.nodes()[0].cpuCores, 2);
            QVERIFY(s.nodes()[0].memoryBytes > (1LL << 30));
        } else if (s.name() == QLatin1String("tune-before-typed-events")) {
            QCOMPARE(s.state(), QStringLiteral("SUCCEEDED"));
            QVERIFY(s.isTune());
            QCOMPARE(runs.size(), 3);
            QCOMPARE(runs[0].phase, RunPhase::Stopped);
            QVERIFY2(
                runs[0].reason.startsWith(QLatin1String("stopped at rung 1 (epoch 1): 3.125% is below the "
                                                        "cutoff 18.75%")),
                qPrintable(runs[0].reason));
            const auto actions = [](const RunProgress &r) {
                QStringList a;
                for (const TrialDecision &d : r.decisions)
                    a << QStringLiteral("%1@%2").arg(d.action).arg(d.epoch);
                return a.join(QLatin1Char(' '));
            };
            QCOMPARE(actions(runs[0]), QStringLiteral("stop@1"));
            QCOMPARE(actions(runs[1]), QStringLiteral("continue@1 finish@3 finish@4"));
            QCOMPARE(actions(runs[2]), QStringLiteral("continue@1 finish@3"));
            QCOMPARE(runs[1].continuedTo, 4);
            QCOMPARE(runs[1].attempts.size(), 3);
            QCOMPARE(runs[1].phase, RunPhase::Succeeded);
            QVERIFY(runs[0].planned.trial);
            QVERIFY(runs[0].planned.params.contains(QLatin1String("learningRate")));
        } else {
            QCOMPARE(s.name(), QStringLiteral("cancelled-before-typed-events"));
            // r02 was cancelled before it started, then retried: left for `study watch`.
            QCOMPARE(s.state(), QStringLiteral("RUNNING"));
            QCOMPARE(runs.size(), 2);
            QCOMPARE(runs[0].phase, RunPhase::Succeeded);
            QCOMPARE(runs[1].phase, RunPhase::Pending);
            QCOMPARE(runs[1].reason, QStringLiteral("retry requested by the user"));
            QCOMPARE(runs[1].extraAttempts, 1);
            QVERIFY(!runs[1].cancelRequested);
            QVERIFY(runs[1].attempts.isEmpty());
            QVERIFY(!s.cancelRequested());
        }
    }
};

QTEST_GUILESS_MAIN(TestJournalEvents)
#include "tst_journal_events.moc"
