// Helpers shared by the tests that run real processes.
#pragma once

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace scalelab::test {

// Calls `visit` with the id of every process in /proc.
template <typename F> void forEachProcess(F &&visit)
{
    const auto entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString &pid : entries) {
        bool numeric = false;
        pid.toInt(&numeric);
        if (numeric)
            visit(pid);
    }
}

// Processes (pid: command line) whose command line contains `needle`. Tests put a
// unique temporary folder on every command line they start, so "nothing left" is
// checkable without touching other processes on the machine.
inline QStringList processesMentioning(const QString &needle)
{
    QStringList found;
    forEachProcess([&](const QString &pid) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!cmdline.open(QIODevice::ReadOnly))
            return;
        QByteArray raw = cmdline.readAll();
        raw.replace('\0', ' ');
        const QString text = QString::fromLocal8Bit(raw);
        if (text.contains(needle))
            found << pid + QStringLiteral(": ") + text;
    });
    return found;
}

// Children of `parent` (pid: state), zombies included: a zombie has no command line,
// so processesMentioning() cannot see it, but /proc/PID/stat still names its parent.
inline QStringList childProcesses(qint64 parent)
{
    QStringList found;
    forEachProcess([&](const QString &pid) {
        QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
        if (!stat.open(QIODevice::ReadOnly))
            return;
        const QByteArray text = stat.readAll();
        // "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
        const auto fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
        if (fields.size() > 1 && fields[1].toLongLong() == parent)
            found << pid + QStringLiteral(": ") + QString::fromLatin1(fields[0]);
    });
    return found;
}

// A test's own time limit for waiting on a process, scaled by SCALELAB_TEST_TIME_SCALE
// (ctest sets 3 in sanitizer builds, whose processes run 2-3 times slower).
inline int timeLimit(int milliseconds)
{
    bool ok = false;
    const int scale = qEnvironmentVariableIntValue("SCALELAB_TEST_TIME_SCALE", &ok);
    return ok && scale > 1 ? milliseconds * scale : milliseconds;
}

inline QString binary(const char *name)
{
    return QStringLiteral(SCALELAB_BIN_DIR "/") + QLatin1String(name);
}

// Runs a tool (openssl, tar, …) to its end, at most a minute: empty when it succeeded,
// else what it printed.
inline QString runTool(const QString &program, const QStringList &args)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    p.waitForFinished(60'000);
    return p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0 ? QString()
                                                                       : QString::fromLocal8Bit(p.readAll());
}

} // namespace scalelab::test
