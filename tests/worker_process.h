#pragma once
// A scalelab-worker process driven by a test: started with the given arguments, its
// JSON-line events (proto/scalelab/v1/worker.proto) read as the agent reads them and
// collected as they arrive. Header-only, for tests that link scalelab_worker_channel.
#include "test_support.h"
#include "worker_channel.h"

#include <QByteArray>
#include <QElapsedTimer>
#include <QList>
#include <QProcess>
#include <QStringList>

namespace scalelab::test {

// One scalelab-worker process whose JSON-line events are collected as they arrive.
class Worker {
public:
    explicit Worker(const QStringList &args)
    {
        m_process.setProgram(test::binary("scalelab-worker"));
        m_process.setArguments(args);
        m_process.setProcessChannelMode(QProcess::SeparateChannels);
        m_process.start();
    }
    ~Worker()
    {
        if (m_process.state() != QProcess::NotRunning) {
            m_process.kill();
            m_process.waitForFinished(5000);
        }
    }

    // Reads what is available; returns the events of `type` (a WorkerEvent field name)
    // seen so far. Every line is read with worker.proto's generated code, as the agent
    // reads it; one that does not fit is kept in unreadable().
    QList<v1::WorkerEvent> events(const QString &type = {})
    {
        m_buffer += m_process.readAllStandardOutput();
        int newline;
        while ((newline = m_buffer.indexOf('\n')) >= 0) {
            const std::string line = m_buffer.left(newline).toStdString();
            m_lines << m_buffer.left(newline);
            if (auto event = worker::parseEventLine(line))
                m_events << *event;
            else
                m_unreadable << QString::fromStdString(event.error() + ": " + line);
            m_buffer.remove(0, newline + 1);
        }
        if (type.isEmpty())
            return m_events;
        QList<v1::WorkerEvent> matching;
        for (const auto &e : m_events) {
            const auto *field
                = e.GetReflection()->GetOneofFieldDescriptor(e, e.GetDescriptor()->oneof_decl(0));
            if (field && QString::fromStdString(field->name()) == type)
                matching << e;
        }
        return matching;
    }
    QStringList unreadable() const { return m_unreadable; }
    QList<QByteArray> lines() const { return m_lines; }

    bool waitFor(const QString &type, int timeoutMs)
    {
        QElapsedTimer timer;
        timer.start();
        while (events(type).isEmpty()) {
            if (timer.elapsed() > timeoutMs || m_process.state() == QProcess::NotRunning) {
                events();
                return !events(type).isEmpty();
            }
            m_process.waitForReadyRead(200);
        }
        return true;
    }

    bool finish(int timeoutMs)
    {
        const bool done = m_process.waitForFinished(test::timeLimit(timeoutMs));
        events();
        return done;
    }

    int exitCode() const
    {
        return m_process.exitStatus() == QProcess::NormalExit ? m_process.exitCode() : -1;
    }
    QString stderrText() { return QString::fromLocal8Bit(m_process.readAllStandardError()); }
    void kill()
    {
        m_process.kill();
        m_process.waitForFinished(5000);
    }

private:
    QProcess m_process;
    QByteArray m_buffer;
    QList<v1::WorkerEvent> m_events;
    QStringList m_unreadable;
    QList<QByteArray> m_lines;
};

// The weights' SHA-256 the worker's last `finished` event gives, or empty.
inline QString digest(Worker &w)
{
    const auto finished = w.events(QStringLiteral("finished"));
    return finished.isEmpty() ? QString()
                              : QString::fromStdString(finished.last().finished().weights_sha256());
}

} // namespace scalelab::test
