// The Debian packages as `cmake --build build --target package` makes them: what each
// holds, Depends computed by dpkg-shlibdeps (the agent package without Qt Widgets), the
// agent's maintainer scripts and conffile, and its systemd unit through
// `systemd-analyze verify`.
//
// Then both installed into a fresh Debian 12 root and used there.
//
// Needs dpkg-dev (dpkg-shlibdeps), systemd-analyze, and for the fresh root: root,
// debootstrap and the Debian mirror: ctest label `packaging`; where something is missing
// the cases that need it fail saying what (`ctest -LE packaging` there).
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>

namespace {

struct Result {
    int code = -1;
    QString output;
};

Result run(const QString &program, const QStringList &args, int timeoutMs = 60'000)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
        QString::fromLocal8Bit(p.readAll()) };
}

QString field(const QString &control, const QString &name)
{
    return QRegularExpression(QStringLiteral("(?m)^%1: (.*)$").arg(name)).match(control).captured(1);
}

} // namespace

class TestPackaging : public QObject {
    Q_OBJECT
private:
    QString m_missing;
    QString m_agentDeb;
    QString m_consoleDeb;
    QTemporaryDir m_tmp;

private Q_SLOTS:
    void initTestCase()
    {
        for (const char *tool : { "dpkg-deb", "dpkg-shlibdeps", "systemd-analyze" })
            if (QStandardPaths::findExecutable(QLatin1String(tool)).isEmpty())
                m_missing += QStringLiteral("%1 missing (apt-get install dpkg-dev systemd); ")
                                 .arg(QLatin1String(tool));
        if (!m_missing.isEmpty())
            return;
        const Result built = run(QStringLiteral("cmake"),
            { QStringLiteral("--build"), QStringLiteral(SCALELAB_BUILD_DIR), QStringLiteral("--target"),
                QStringLiteral("package") },
            900'000);
        QVERIFY2(built.code == 0, qPrintable(built.output.right(3000)));
        const QDir build(QStringLiteral(SCALELAB_BUILD_DIR));
        const auto agent
            = build.entryList({ QStringLiteral("scalelab-agent_*.deb") }, QDir::Files, QDir::Time);
        const auto console = build.entryList({ QStringLiteral("scalelab_*.deb") }, QDir::Files, QDir::Time);
        QVERIFY2(!agent.isEmpty() && !console.isEmpty(), qPrintable(built.output.right(3000)));
        m_agentDeb = build.filePath(agent.first());
        m_consoleDeb = build.filePath(console.first());
    }

    void init() { QVERIFY2(m_missing.isEmpty(), qPrintable(m_missing)); }

    void agentPackage()
    {
        const QString control = run(QStringLiteral("dpkg-deb"), { QStringLiteral("-f"), m_agentDeb }).output;
        QCOMPARE(field(control, QStringLiteral("Package")), QStringLiteral("scalelab-agent"));
        const QString depends = field(control, QStringLiteral("Depends"));
        // Computed from the binaries, plus what no binary links.
        for (const char *needed :
            { "libtorch1.13", "libgrpc++1.51", "libqt6core6", "libc6", "libopenblas0-pthread", "adduser" })
            QVERIFY2(depends.contains(QLatin1String(needed)),
                qPrintable(QLatin1String(needed) + QStringLiteral(": ") + depends));
        for (const char *unwanted : { "libqt6widgets6", "libqt6gui6", "libqt6charts6" })
            QVERIFY2(!depends.contains(QLatin1String(unwanted)), qPrintable(depends));
        const QString files = run(QStringLiteral("dpkg-deb"), { QStringLiteral("-c"), m_agentDeb }).output;
        for (const char *path : { "./usr/bin/scalelab-agent", "./usr/bin/scalelab-worker",
                 "./usr/bin/scalelab-slurm", "./usr/share/scalelab/slurm/scalelab-study.sbatch",
                 "./usr/lib/systemd/system/scalelab-agent.service", "./etc/scalelab/agent.conf" })
            QVERIFY2(files.contains(QLatin1String(path)), path);
        QVERIFY(!files.contains(QLatin1String("./usr/bin/scalelab\n")));

        const QString meta = m_tmp.filePath(QStringLiteral("agent-control"));
        QCOMPARE(run(QStringLiteral("dpkg-deb"), { QStringLiteral("-e"), m_agentDeb, meta }).code, 0);
        QFile conffiles(meta + QStringLiteral("/conffiles"));
        QVERIFY(conffiles.open(QIODevice::ReadOnly));
        QCOMPARE(conffiles.readAll().trimmed(), QByteArray("/etc/scalelab/agent.conf"));
        QFile postinst(meta + QStringLiteral("/postinst"));
        QVERIFY(postinst.open(QIODevice::ReadOnly));
        QVERIFY(postinst.readAll().contains("adduser --system --group"));
        QVERIFY(QFileInfo(postinst.fileName()).isExecutable());
        QCOMPARE(run(QStringLiteral("sh"), { QStringLiteral("-n"), postinst.fileName() }).code, 0);
        QCOMPARE(
            run(QStringLiteral("sh"), { QStringLiteral("-n"), meta + QStringLiteral("/postrm") }).code, 0);
    }

    // The unit as installed, with its ExecStart pointed at the unpacked agent (verify
    // checks that the program exists), through systemd's own checker; then the agent
    // from the package answers --version.
    void agentUnitVerifies()
    {
        const QString root = m_tmp.filePath(QStringLiteral("agent-root"));
        QCOMPARE(run(QStringLiteral("dpkg-deb"), { QStringLiteral("-x"), m_agentDeb, root }).code, 0);
        QFile unit(root + QStringLiteral("/usr/lib/systemd/system/scalelab-agent.service"));
        QVERIFY(unit.open(QIODevice::ReadOnly));
        QString text = QString::fromUtf8(unit.readAll());
        for (const char *setting :
            { "User=scalelab", "ProtectSystem=strict", "StateDirectory=scalelab", "NoNewPrivileges=true",
                "ExecStart=/usr/bin/scalelab-agent --config /etc/scalelab/agent.conf" })
            QVERIFY2(text.contains(QLatin1String(setting)), setting);
        text.replace(
            QStringLiteral("ExecStart=/usr/bin/"), QStringLiteral("ExecStart=%1/usr/bin/").arg(root));
        const QString copy = m_tmp.filePath(QStringLiteral("scalelab-agent.service"));
        QFile out(copy);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(text.toUtf8());
        out.close();
        const Result verified = run(QStringLiteral("systemd-analyze"), { QStringLiteral("verify"), copy });
        QVERIFY2(verified.code == 0 && verified.output.trimmed().isEmpty(), qPrintable(verified.output));

        const Result version
            = run(root + QStringLiteral("/usr/bin/scalelab-agent"), { QStringLiteral("--version") });
        QVERIFY2(version.code == 0 && version.output.contains(QLatin1String("scalelab-agent")),
            qPrintable(version.output));
    }

    void consolePackage()
    {
        const QString control
            = run(QStringLiteral("dpkg-deb"), { QStringLiteral("-f"), m_consoleDeb }).output;
        QCOMPARE(field(control, QStringLiteral("Package")), QStringLiteral("scalelab"));
        const QString depends = field(control, QStringLiteral("Depends"));
        for (const char *needed : { "libqt6widgets6", "libqt6charts6", "libgrpc++1.51", "qt6-qpa-plugins" })
            QVERIFY2(depends.contains(QLatin1String(needed)),
                qPrintable(QLatin1String(needed) + QStringLiteral(": ") + depends));
        QVERIFY2(!depends.contains(QLatin1String("libtorch")),
            qPrintable(depends)); // the app never includes torch
        const QString files = run(QStringLiteral("dpkg-deb"), { QStringLiteral("-c"), m_consoleDeb }).output;
        for (const char *path :
            { "./usr/bin/scalelab", "./usr/bin/scalelab-cli", "./usr/share/applications/scalelab.desktop",
                "./usr/share/icons/hicolor/scalable/apps/scalelab.svg" })
            QVERIFY2(files.contains(QLatin1String(path)), path);
        const QString root = m_tmp.filePath(QStringLiteral("console-root"));
        QCOMPARE(run(QStringLiteral("dpkg-deb"), { QStringLiteral("-x"), m_consoleDeb, root }).code, 0);
        QFile desktop(root + QStringLiteral("/usr/share/applications/scalelab.desktop"));
        QVERIFY(desktop.open(QIODevice::ReadOnly));
        const QByteArray entry = desktop.readAll();
        QVERIFY(entry.contains("\nExec=scalelab"));
        QVERIFY(entry.contains("\nIcon=scalelab\n"));
    }

    // Both packages installed into a fresh Debian 12 root (debootstrap; `apt-get install
    // ./x.deb` resolves the dependencies), the installed agent started and the installed
    // CLI running a 1-epoch synthetic run against it (tests/packaging/fresh-root-install.sh).
    // Needs root, debootstrap and the Debian mirror.
    void installsIntoFreshDebianRoot()
    {
        const QString script = QStringLiteral(SCALELAB_SOURCE_DIR "/tests/packaging/fresh-root-install.sh");
        const Result can = run(QStringLiteral("bash"), { script, QStringLiteral("check") });
        QVERIFY2(can.code == 0, qPrintable(QStringLiteral("cannot make a Debian root here: ") + can.output));
        const QString root = m_tmp.filePath(QStringLiteral("bookworm"));
        const Result installed
            = run(QStringLiteral("bash"), { script, root, m_agentDeb, m_consoleDeb }, 900'000);
        const QByteArray shown = installed.output.toLocal8Bit();
        if (installed.code != 0)
            std::fprintf(stderr, "%s\n", shown.constData());
        QVERIFY2(installed.code == 0, "fresh-root-install.sh failed (its output is above)");
        for (const char *line : { "scalelab-agent 0.1.0 install ok installed",
                 "scalelab 0.1.0 install ok installed", "system user scalelab: made by postinst",
                 "every program finds its libraries", "scalelab-agent listening on 127.0.0.1:7459",
                 "SUCCEEDED workers=1", "data=SYNTHETIC", "ScaleLab 0.1.0" })
            QVERIFY2(installed.output.contains(QLatin1String(line)),
                qPrintable(QLatin1String(line) + QStringLiteral("\n") + installed.output.right(1500)));
    }
};

QTEST_GUILESS_MAIN(TestPackaging)
#include "tst_packaging.moc"
