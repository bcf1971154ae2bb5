// The Run tab's JournalWriter: its writes run on its own thread, never the caller's, in the
// order asked; what was queued is committed by the time the writer is gone (a restarted
// console finds it); a refused write is reported.
#include "journal.h"
#include "journal_writer.h"
#include "run_events.h"
#include "verify_ok.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

using namespace scalelab;

namespace {

core::SingleRunEntry entryOf(const QString &runId)
{
    core::SingleRunEntry entry;
    entry.runId = runId;
    entry.agent = QStringLiteral("local");
    entry.label = QStringLiteral("#1 · 1 worker · b25");
    entry.launchedUnixMs = 1'700'000'000'000;
    return entry;
}

// Events seq first..last: steps of one epoch.
std::vector<v1::RunEvent> steps(qint64 first, qint64 last)
{
    std::vector<v1::RunEvent> events;
    for (qint64 seq = first; seq <= last; ++seq) {
        v1::RunEvent e = test::stepEvent(1, seq, 2.0 / double(seq));
        e.set_seq(seq);
        events.push_back(e);
    }
    return events;
}

} // namespace

class TestJournalWriter : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void writesRunOnTheWritersThread()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("journal.sqlite"));
        app::JournalWriter writer;
        VERIFY_OK(writer.open(path));
        writer.recordSingleRun(entryOf(QStringLiteral("r1")));
        writer.appendRunEvents(QStringLiteral("r1"), QStringLiteral("local"), steps(1, 50));
        writer.setSingleRunState(QStringLiteral("r1"), v1::RUNNING, 0);
        writer.flush();
        QCOMPARE(writer.writes(), 3);
        QVERIFY(writer.lastWriteThread() != nullptr);
        QVERIFY(writer.lastWriteThread() != QThread::currentThread());
        QCOMPARE(writer.lastWriteThread(), writer.workerThread());
        // Committed: another connection reads them.
        core::Journal reader;
        VERIFY_OK(reader.open(path));
        QCOMPARE(reader.singleRuns().size(), 1);
        QCOMPARE(reader.singleRuns().first().state, v1::RUNNING);
        QCOMPARE(reader.runEvents(QStringLiteral("r1"), 1, QStringLiteral("local")).size(), std::size_t(50));
    }

    // A console closed right after its last events came: the writer commits what is queued
    // before it goes, so the console started again finds every event, in order.
    void queuedWritesSurviveARestart()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("journal.sqlite"));
        {
            app::JournalWriter writer;
            VERIFY_OK(writer.open(path));
            writer.recordSingleRun(entryOf(QStringLiteral("r1")));
            for (qint64 batch = 0; batch < 20; ++batch)
                writer.appendRunEvents(
                    QStringLiteral("r1"), QStringLiteral("local"), steps(batch * 10 + 1, batch * 10 + 10));
            writer.setSingleRunState(QStringLiteral("r1"), v1::SUCCEEDED, 1'700'000'100'000);
        } // no flush: the destructor commits
        app::JournalWriter again;
        VERIFY_OK(again.open(path));
        core::Journal reader;
        VERIFY_OK(reader.open(path));
        const auto events = reader.runEvents(QStringLiteral("r1"), 1, QStringLiteral("local"));
        QCOMPARE(events.size(), std::size_t(200));
        for (std::size_t i = 0; i < events.size(); ++i)
            QCOMPARE(events[i].seq(), qint64(i + 1));
        QCOMPARE(reader.singleRuns().first().state, v1::SUCCEEDED);
        // Forgotten through the writer: gone from the journal once committed.
        again.forgetSingleRun(QStringLiteral("r1"));
        again.flush();
        QVERIFY(reader.singleRuns().isEmpty());
        QVERIFY(reader.runEvents(QStringLiteral("r1"), 1, QStringLiteral("local")).empty());
    }

    void refusedWriteIsReported()
    {
        QTemporaryDir dir;
        app::JournalWriter writer;
        VERIFY_OK(writer.open(dir.filePath(QStringLiteral("journal.sqlite"))));
        QSignalSpy failed(&writer, &app::JournalWriter::failed);
        writer.recordSingleRun(entryOf(QStringLiteral("r1")));
        writer.recordSingleRun(entryOf(QStringLiteral("r1"))); // a run id twice is refused
        QTRY_COMPARE(failed.size(), 1);
        QVERIFY(!failed.first().first().toString().isEmpty());
    }

    void unopenedWriterWritesNothing()
    {
        app::JournalWriter writer;
        QVERIFY(!writer.isOpen());
        writer.recordSingleRun(entryOf(QStringLiteral("r1")));
        writer.flush();
        QCOMPARE(writer.writes(), 0);
    }
};

QTEST_MAIN(TestJournalWriter)
#include "tst_journal_writer.moc"
