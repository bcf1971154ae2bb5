// The console's JournalReader (the Study tab's redraws and a run's details dialog read
// through it): reads run on its own thread, never the asker's, and their answers come
// back on the asker's thread, in the order asked; an answer whose asker is gone is dropped.
#include "journal.h"
#include "journal_reader.h"
#include "run_events.h"
#include "verify_ok.h"

#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <memory>

using namespace scalelab;

class TestJournalReader : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void readsOffTheAskersThread()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("journal.sqlite"));
        {
            core::Journal journal;
            VERIFY_OK(journal.open(path));
            std::vector<v1::RunEvent> events;
            for (qint64 seq = 1; seq <= 3; ++seq) {
                v1::RunEvent e = test::stepEvent(1, seq, 1.0);
                e.set_seq(seq);
                events.push_back(e);
            }
            VERIFY_OK(journal.appendRunEvents({}, QStringLiteral("r1"), 1, QStringLiteral("a"), events));
        }
        app::JournalReader reader;
        VERIFY_OK(reader.open(path));
        QObject asker;
        QList<int> answers;
        QThread *readThread = nullptr;
        QThread *answerThread = nullptr;
        for (int after : { 0, 2 })
            reader.read(
                &asker,
                [after, &readThread](const core::Journal &journal) {
                    readThread = QThread::currentThread();
                    return int(journal.runEvents(QStringLiteral("r1"), 1, QStringLiteral("a"), after).size());
                },
                [&answers, &answerThread](int count) {
                    answerThread = QThread::currentThread();
                    answers << count;
                });
        QTRY_COMPARE_WITH_TIMEOUT(answers.size(), 2, 30'000);
        QCOMPARE(answers, (QList<int> { 3, 1 })); // in the order asked
        QCOMPARE(readThread, reader.workerThread());
        QVERIFY(readThread != QThread::currentThread());
        QCOMPARE(answerThread, QThread::currentThread());
        QCOMPARE(reader.reads(), 2);
        QCOMPARE(reader.lastReadThread(), reader.workerThread());
    }

    void answerToAGoneAskerIsDropped()
    {
        QTemporaryDir dir;
        app::JournalReader reader;
        VERIFY_OK(reader.open(dir.filePath(QStringLiteral("journal.sqlite"))));
        auto asker = std::make_unique<QObject>();
        bool answered = false;
        QObject other;
        bool laterAnswered = false;
        reader.read(
            asker.get(), [](const core::Journal &journal) { return journal.studyIds().size(); },
            [&answered](qsizetype) { answered = true; });
        asker.reset(); // before the answer can be delivered: this thread has not run its loop
        // A later read to a living asker comes back, so the first one's answer was due.
        reader.read(
            &other, [](const core::Journal &journal) { return journal.studyIds().size(); },
            [&laterAnswered](qsizetype) { laterAnswered = true; });
        QTRY_VERIFY_WITH_TIMEOUT(laterAnswered, 30'000);
        QVERIFY(!answered);
    }
};

QTEST_GUILESS_MAIN(TestJournalReader)
#include "tst_journal_reader.moc"
