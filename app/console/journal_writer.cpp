#include "journal_writer.h"

namespace scalelab::app {

JournalWriter::JournalWriter(QObject *parent)
    : QObject(parent)
    , m_connection(QStringLiteral("journal-writer"))
{ }

template <typename Write> void JournalWriter::queue(Write write)
{
    if (!isOpen())
        return;
    m_connection.post([this, write = std::move(write)](core::Journal &journal) {
        m_lastWriteThread = QThread::currentThread();
        ++m_writes;
        if (const core::Status written = write(journal); !written)
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
    if (isOpen())
        m_connection.wait();
}

} // namespace scalelab::app
