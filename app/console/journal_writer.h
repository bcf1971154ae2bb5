// The Run tab's writes to the journal, off the GUI thread. The journal commits with
// synchronous=FULL: each commit waits for the disk (tens of milliseconds on a loaded or
// slow one), which on the GUI thread stalled every frame that brought run events.
//
// A worker thread owns a Journal connection of its own (one per thread, journal.h) and
// carries out the writes in the order they were asked for; a failed write is reported
// with `failed`, queued back to the GUI thread. flush() waits until everything asked for
// is committed: the tab calls it before it reads what it wrote through its own
// connection (opening or drawing a run of the history), which is rare and user-driven.
//
// Every member function: the thread that made the writer (the GUI thread). The
// destructor commits what is queued, closes the connection and ends the thread.
#pragma once

#include "journal_thread.h"

#include <QObject>

#include <atomic>
#include <vector>

namespace scalelab::app {

class JournalWriter : public QObject {
    Q_OBJECT
public:
    explicit JournalWriter(QObject *parent = nullptr);

    // Opens `path` on the worker thread; waits for the answer (once, at start-up).
    core::Status open(const QString &path) { return m_connection.open(path); }
    bool isOpen() const { return m_connection.isOpen(); }

    // Queued; a failure comes back as `failed`.
    void recordSingleRun(const core::SingleRunEntry &entry);
    void setSingleRunState(const QString &runId, v1::RunState state, qint64 endedUnixMs);
    void forgetSingleRun(const QString &runId);
    void appendRunEvents(const QString &runId, const QString &agent, std::vector<v1::RunEvent> events);

    // Waits until every write asked for so far is committed (or failed).
    void flush();

    // The thread the writes ran on, and how many ran (tests check it is not the GUI thread).
    QThread *workerThread() { return m_connection.thread(); }
    QThread *lastWriteThread() const { return m_lastWriteThread.load(); }
    int writes() const { return m_writes.load(); }

Q_SIGNALS:
    void failed(const QString &error);

private:
    // Runs `write` on the worker thread against its journal; reports a failure.
    template <typename Write> void queue(Write write);

    std::atomic<QThread *> m_lastWriteThread = nullptr;
    std::atomic<int> m_writes = 0;
    // Last: its destructor runs what is queued, which counts in the members above.
    JournalThread m_connection;
};

} // namespace scalelab::app
