// Pieces shared by scalelab-cli's commands: output streams and exit codes.
#pragma once

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFile>
#include <QStandardPaths>
#include <QString>
#include <QTextStream>

namespace scalelab::app {

// And 128 + a signal's number when a second Ctrl-C or SIGTERM ends a command at once
// (InterruptGuard::exitCodeFor, interrupts.h); a first one ends it in order, with RunFailed.
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

// The agents' token: the file --token-file names when given, else $SCALELAB_TOKEN. Ok, or
// BadInput after saying why the file cannot be read.
inline int readToken(const QCommandLineParser &parser, QString *token)
{
    *token = QString::fromLocal8Bit(qgetenv("SCALELAB_TOKEN"));
    if (!parser.isSet(QStringLiteral("token-file")))
        return Ok;
    QFile f(parser.value(QStringLiteral("token-file")));
    if (!f.open(QIODevice::ReadOnly))
        return badInput(QStringLiteral("cannot read token file %1: %2").arg(f.fileName(), f.errorString()));
    *token = QString::fromUtf8(f.readAll()).trimmed();
    return Ok;
}

// The parser's --help text with its usage line naming the command as the dispatch put it in
// `arguments`' first element ("Usage: scalelab-cli study show [options] id"), where Qt would
// name the program's path.
inline QString commandHelp(const QCommandLineParser &parser, const QStringList &arguments)
{
    QString text = parser.helpText();
    const QString usage = QStringLiteral("Usage: ") + QCoreApplication::arguments().value(0);
    if (!arguments.isEmpty() && arguments.first().startsWith(QLatin1String("scalelab-cli "))
        && text.startsWith(usage))
        text.replace(7, usage.size() - 7, arguments.first());
    return text;
}

// "Environment:" and the variables scalelab-cli reads, a line each: the end of every --help.
QString environmentHelp();

// The commands, each in a file of its own: the arguments after the command's name.
int runCommand(QStringList arguments); // run_command.cpp
int describeCommand(QStringList arguments); // agent_commands.cpp
int runsCommand(QStringList arguments); // agent_commands.cpp
int gcCommand(QStringList arguments); // agent_commands.cpp
int lrFindCommand(QStringList arguments); // lr_find_command.cpp
int studyCommand(QStringList arguments);
int reportCommand(QStringList arguments);
int exportCommand(QStringList arguments);
int probeCommand(const QStringList &arguments);

} // namespace scalelab::app
