#include "local_agent.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRandomGenerator>
#include <QStandardPaths>

#include <csignal>
#include <sys/prctl.h>
#include <unistd.h>

namespace scalelab::core {

LocalAgent::LocalAgent(QObject *parent)
    : QObject(parent)
{ }

LocalAgent::~LocalAgent()
{
    stop();
}

QString LocalAgent::findAgentBinary()
{
    const QString fromEnv = QString::fromLocal8Bit(qgetenv("SCALELAB_AGENT_BIN"));
    if (!fromEnv.isEmpty())
        return fromEnv;
    const QString sibling = QCoreApplication::applicationDirPath() + QStringLiteral("/scalelab-agent");
    if (QFileInfo(sibling).isExecutable())
        return sibling;
    return QStandardPaths::findExecutable(QStringLiteral("scalelab-agent"));
}

Status LocalAgent::start(const LocalAgentOptions &options, int timeoutMs)
{
    const QString binary = options.agentBinary.isEmpty() ? findAgentBinary() : options.agentBinary;
    if (binary.isEmpty() || !QFileInfo(binary).isExecutable()) {
        return Status::failure(
            QStringLiteral("cannot find scalelab-agent (looked at $SCALELAB_AGENT_BIN, next "
                           "to this program and on PATH); install it or set SCALELAB_AGENT_BIN"));
    }
    m_token.clear();
    if (options.withToken && !options.token.isEmpty()) {
        m_token = options.token;
    } else if (options.withToken) {
        quint32 words[8];
        QRandomGenerator::system()->fillRange(words);
        m_token
            = QString::fromLatin1(QByteArray(reinterpret_cast<const char *>(words), sizeof words).toHex());
    }
    m_endpoint.clear();
    m_refused = false;

    QStringList args
        = { QStringLiteral("--listen"), options.listen, QStringLiteral("--port"), QStringLiteral("0") };
    if (!options.dataDir.isEmpty())
        args << QStringLiteral("--data-dir") << options.dataDir;
    if (!options.stateDir.isEmpty())
        args << QStringLiteral("--state-dir") << options.stateDir;
    args << options.extraArguments;
    m_logFile = options.logFile;
    if (m_logFile.isEmpty())
        m_logFile = (options.stateDir.isEmpty() ? QDir::tempPath() : options.stateDir)
            + QStringLiteral("/local-agent.log");
    QDir().mkpath(QFileInfo(m_logFile).absolutePath());

    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    if (m_token.isEmpty())
        env.remove(QStringLiteral("SCALELAB_AGENT_TOKEN"));
    else
        env.insert(QStringLiteral("SCALELAB_AGENT_TOKEN"), m_token); // not on the command line
    m_process.setProcessEnvironment(env);
    m_process.setStandardErrorFile(m_logFile, QIODevice::Append);
    m_process.setChildProcessModifier([] {
        // The agent (and through it its workers) dies with us, even on SIGKILL.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
    });
    m_process.start(binary, args);
    if (!m_process.waitForStarted(timeoutMs)) {
        return Status::failure(QStringLiteral("cannot start %1: %2").arg(binary, m_process.errorString()));
    }
    QDeadlineTimer deadline(timeoutMs);
    QByteArray output;
    while (!deadline.hasExpired()) {
        if (m_process.canReadLine()
            || m_process.waitForReadyRead(int(qMax<qint64>(1, deadline.remainingTime())))) {
            while (m_process.canReadLine()) {
                const QByteArray line = m_process.readLine().trimmed();
                output += line + '\n';
                const QByteArray marker = "listening on ";
                const int at = line.indexOf(marker);
                if (at >= 0) {
                    m_endpoint = QString::fromLatin1(line.mid(at + marker.size()));
                    return Status::success();
                }
            }
        }
        if (m_process.state() == QProcess::NotRunning)
            break;
    }
    QFile log(m_logFile);
    QString tail;
    if (log.open(QIODevice::ReadOnly)) {
        const QByteArray all = log.readAll();
        tail = QString::fromLocal8Bit(all.right(600)).trimmed();
    }
    m_refused = m_process.state() == QProcess::NotRunning && m_process.exitStatus() == QProcess::NormalExit
        && m_process.exitCode() == 2;
    stop();
    return Status::failure(
        QStringLiteral("the local agent did not start: %1")
            .arg(tail.isEmpty() ? QStringLiteral("no output (see %1)").arg(m_logFile) : tail));
}

void LocalAgent::stop()
{
    if (m_process.state() == QProcess::NotRunning)
        return;
    m_process.terminate(); // the agent stops its runs on SIGTERM
    if (!m_process.waitForFinished(8000)) {
        m_process.kill();
        m_process.waitForFinished(2000);
    }
}

} // namespace scalelab::core
