// The console's reads of the journal, off the GUI thread. A study's view replays its
// events and reads its runs' new events on every redraw while the study changes; a run's
// details dialog reads its new log lines every second. Each read is a few SQLite queries
// that may wait for the disk, so on the GUI thread they cost frames.
//
// A JournalThread (a connection of its own) runs each read asked for, in order; its result
// is handed back to the reader's thread. A result whose asker has gone by then is dropped.
//
// Every member function: the thread that made the reader (the GUI thread). The
// destructor lets the reads queued finish, drops their results, and ends the thread.
#pragma once

#include "journal_thread.h"

#include <QObject>
#include <QPointer>

#include <atomic>
#include <utility>

namespace scalelab::app {

class JournalReader : public QObject {
public:
    explicit JournalReader(QObject *parent = nullptr)
        : QObject(parent)
        , m_connection(QStringLiteral("journal-reader"))
    { }

    // Opens `path` on the reader's thread; waits for the answer (once, when a journal is chosen).
    core::Status open(const QString &path) { return m_connection.open(path); }
    bool isOpen() const { return m_connection.isOpen(); }

    // Runs `read(const Journal &)` on the reader's thread, then `done(result)` on this
    // object's thread, unless `context` (of that thread) has been destroyed meanwhile.
    template <typename Read, typename Done> void read(QObject *context, Read read, Done done)
    {
        if (!isOpen())
            return;
        m_connection.post([this, context = QPointer<QObject>(context), read = std::move(read),
                              done = std::move(done)](core::Journal &journal) mutable {
            m_lastReadThread = QThread::currentThread();
            ++m_reads;
            auto result = read(std::as_const(journal));
            // Handed over through this object, on the asker's thread: `context` is only
            // looked at there, where it is destroyed.
            QMetaObject::invokeMethod(
                this, [context, done = std::move(done), result = std::move(result)]() mutable {
                    if (context)
                        done(std::move(result));
                });
        });
    }

    // The thread the reads ran on, and how many ran (tests check it is not the GUI thread).
    QThread *workerThread() { return m_connection.thread(); }
    QThread *lastReadThread() const { return m_lastReadThread.load(); }
    int reads() const { return m_reads.load(); }

private:
    std::atomic<QThread *> m_lastReadThread = nullptr;
    std::atomic<int> m_reads = 0;
    // Last: its destructor runs what is queued, which counts in the members above.
    JournalThread m_connection;
};

} // namespace scalelab::app
