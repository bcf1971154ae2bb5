// A journal connection on a thread of its own (one connection per thread, journal.h): what
// the console's JournalWriter and JournalReader carry out there, in the order posted.
//
// Every member function: the thread that made it. The destructor lets what was posted
// run, closes the connection on its thread and ends the thread.
#pragma once

#include "core_status.h"
#include "journal.h"

#include <QObject>
#include <QThread>

#include <utility>

namespace scalelab::app {

class JournalThread {
public:
    explicit JournalThread(const QString &name);
    ~JournalThread();
    JournalThread(const JournalThread &) = delete;
    JournalThread &operator=(const JournalThread &) = delete;

    // Opens `path` on the thread; waits for the answer (once, when a journal is chosen).
    core::Status open(const QString &path);
    bool isOpen() const { return m_open; }

    // Runs `work(Journal &)` on the thread, after what was posted before.
    template <typename Work> void post(Work work)
    {
        QMetaObject::invokeMethod(m_worker, [this, work = std::move(work)]() mutable { work(*m_journal); });
    }
    // Waits until what was posted so far has run.
    void wait();

    QThread *thread() { return &m_thread; }

private:
    QThread m_thread;
    QObject *m_worker = nullptr; // lives on m_thread, deleted there
    core::Journal *m_journal = nullptr; // made, used and destroyed on m_thread
    bool m_open = false;
};

} // namespace scalelab::app
