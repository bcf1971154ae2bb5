#include "journal_writer.h"

namespace scalelab::app {

JournalWriter::JournalWriter(QObject *parent)
    : QObject(parent)
{
    m_thread.setObjectName(QStringLiteral("journal-writer"));
    m_worker = new QObject;
    m_worker->moveToThread(&m_thread);
    m_thread.start();
    QMetaObject::invokeMethod(
        m_worker, [this] { m_journal = new core::Journal; }, Qt::BlockingQueuedConnection);
}

JournalWriter::~JournalWriter()
{
    // Queued writes run first: the connection is closed after them, on its thread.
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

core::Status JournalWriter::open(const QString &path)
{
    core::Status opened = core::Status::success();
    QMetaObject::invokeMethod(
        m_worker, [this, &opened, path] { opened = m_journal->open(path); }, Qt::BlockingQueuedConnection);
    m_open = opened.ok();
    return opened;
}

template <typename Write> void JournalWriter::queue(Write write)
{
    if (!m_open)
        return;
    QMetaObject::invokeMethod(m_worker, [this, write = std::move(write)] {
        m_lastWriteThread = QThread::currentThread();
        ++m_writes;
        if (const core::Status written = write(*m_journal); !written)
            QMetaObject::invokeMethod(this, [this, e = written.error()] { Q_EMIT failed(e); });
    });
}

void JournalWriter::recordSingleRun(const core::SingleRunEntry &entry)
{
    queue([entry](core::Journal &journal) { return journal.recordSingleRun(entry); });
}

void JournalWriter::setSingleRunState(const QString &runId, v1::RunState state, qint64 endedUnixMs)
{
    queue([runId, state, endedUnixMs](
              core::Journal &journal) { return journal.setSingleRunState(runId, state, endedUnixMs); });
}

void JournalWriter::forgetSingleRun(const QString &runId)
{
    queue([runId](core::Journal &journal) { return journal.forgetSingleRun(runId); });
}

void JournalWriter::appendRunEvents(
    const QString &runId, const QString &agent, std::vector<v1::RunEvent> events)
{
    if (events.empty())
        return;
    queue([runId, agent, events = std::move(events)](core::Journal &journal) {
        return journal.appendRunEvents(QString(), runId, 1, agent, events);
    });
}

void JournalWriter::flush()
{
    if (m_open)
        QMetaObject::invokeMethod(
            m_worker, [] {}, Qt::BlockingQueuedConnection);
}

} // namespace scalelab::app
