// Helpers shared by the tests: free ports, files, test certificates, the processes a test
// left. The ones declared without a body are compiled once, in test_support.cpp.
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

// How long a test waits at most for a whole run, study or tune to end, or for a program that
// runs one: far beyond a correct one on the slowest machine under load (the suite's longest
// take ~35 s on an idle machine; under scripts/test-under-load.sh one took 7.5 times that),
// and below the 900 s ctest gives each function of the process tests. Scaled as timeLimit().
inline int endsWithin()
{
    return timeLimit(600'000);
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

// A TCP port free on 127.0.0.1 now, taken and given back at once (so another process may
// take it before the caller binds it); 0 when none could be taken, which every caller checks.
[[nodiscard]] int freePort();

// Writes `bytes` to `path` (its folder must exist), then sets `permissions` when given.
[[nodiscard]] bool writeFile(
    const QString &path, const QByteArray &bytes, QFile::Permissions permissions = {});

// TLS material in `dir`, made with openssl (EC P-256 keys, valid for 2 days): for each name of
// `selfSigned`, NAME.pem and NAME.key, a self-signed pair that can serve as a CA; for each of
// `signedByCa`, NAME.pem and NAME.key signed by ca.pem (so "ca" must be among `selfSigned`)
// for localhost and 127.0.0.1 (san.ext), "server"'s subject being localhost. Empty when all
// were made, else what went wrong (openssl's words).
QString makeTestCertificates(
    const QString &dir, const QStringList &selfSigned, const QStringList &signedByCa);

} // namespace scalelab::test
