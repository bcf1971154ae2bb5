// Helpers shared by the tests that run real processes.
#pragma once

#include <QDir>
#include <QFile>
#include <QString>
#include <QStringList>

namespace scalelab::test {

// Processes (pid: command line) whose command line contains `needle`. Tests put a
// unique temporary folder on every command line they start, so "nothing left" is
// checkable without touching other processes on the machine.
inline QStringList processesMentioning(const QString &needle)
{
    QStringList found;
    const auto entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString &pid : entries) {
        bool numeric = false;
        pid.toInt(&numeric);
        if (!numeric)
            continue;
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!cmdline.open(QIODevice::ReadOnly))
            continue;
        QByteArray raw = cmdline.readAll();
        raw.replace('\0', ' ');
        const QString text = QString::fromLocal8Bit(raw);
        if (text.contains(needle))
            found << pid + QStringLiteral(": ") + text;
    }
    return found;
}

inline QString binary(const char *name)
{
    return QStringLiteral(SCALELAB_BIN_DIR "/") + QLatin1String(name);
}

} // namespace scalelab::test
