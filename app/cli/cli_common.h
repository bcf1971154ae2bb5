// Pieces shared by scalelab-cli's commands: output streams and exit codes.
#pragma once

#include <QString>
#include <QTextStream>

namespace scalelab::cli {

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

int studyCommand(QStringList arguments);
int reportCommand(QStringList arguments);

} // namespace scalelab::cli
