// Pieces shared by scalelab-cli's commands: output streams and exit codes.
#pragma once

#include <QStandardPaths>
#include <QString>
#include <QTextStream>

namespace scalelab::app {

enum ExitCode { Ok = 0, RunFailed = 1, BadInput = 2, AgentError = 3 };

inline QTextStream &out()
{
    static QTextStream s(stdout);
    return s;
}

inline QTextStream &err()
{
    static QTextStream s(stderr);
    return s;
}

inline int badInput(const QString &message)
{
    err() << "scalelab-cli: " << message << "\n";
    err().flush();
    return BadInput;
}

// The state folder of studies and local agents: $SCALELAB_STATE_DIR, else the user's data folder.
inline QString defaultStateDir()
{
    const QByteArray env = qgetenv("SCALELAB_STATE_DIR");
    if (!env.isEmpty())
        return QString::fromLocal8Bit(env);
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation)
        + QStringLiteral("/scalelab");
}

// "Environment:" and the variables scalelab-cli reads, a line each: the end of every --help.
QString environmentHelp();

int studyCommand(QStringList arguments);
int reportCommand(QStringList arguments);
int exportCommand(QStringList arguments);

} // namespace scalelab::app
