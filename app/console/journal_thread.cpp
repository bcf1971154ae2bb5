#include "journal_thread.h"

namespace scalelab::app {

JournalThread::JournalThread(const QString &name)
{
    m_thread.setObjectName(name);
    m_worker = new QObject;
    m_worker->moveToThread(&m_thread);
    m_thread.start();
    QMetaObject::invokeMethod(
        m_worker, [this] { m_journal = new core::Journal; }, Qt::BlockingQueuedConnection);
}

JournalThread::~JournalThread()
{
    // What was posted runs first: the connection is closed after it, on its thread.
    QMetaObject::invokeMethod(
        m_worker,
        [this] {
            delete m_journal;
            m_journal = nullptr;
            delete m_worker;
        },
        Qt::BlockingQueuedConnection);
    m_thread.quit();
    m_thread.wait();
}

core::Status JournalThread::open(const QString &path)
{
    core::Status opened = core::Status::success();
    QMetaObject::invokeMethod(
        m_worker, [this, &opened, path] { opened = m_journal->open(path); }, Qt::BlockingQueuedConnection);
    m_open = opened.ok();
    return opened;
}

void JournalThread::wait()
{
    QMetaObject::invokeMethod(
        m_worker, [] {}, Qt::BlockingQueuedConnection);
}

} // namespace scalelab::app
