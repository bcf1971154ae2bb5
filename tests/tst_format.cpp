// The tree is formatted as `.clang-format` says (issue 56 item 9): `clang-format --dry-run
// --Werror` over every C++ file the repository tracks (`git ls-files`, or the source folder
// walked where it is not a git checkout), but `remote-agent/trainer/compat/` (a header of
// PyTorch's, kept as PyTorch writes it). clang-format comes with the test packages
// (scripts/setup.sh); without it the test fails saying so. Fix what it names with
// `clang-format -i FILE`, or `git clang-format` before a commit.
#include <QDirIterator>
#include <QProcess>
#include <QStandardPaths>
#include <QTest>

namespace {

const QString kSource = QStringLiteral(SCALELAB_SOURCE_DIR);

bool isCpp(const QString &path)
{
    return path.endsWith(QLatin1String(".cpp")) || path.endsWith(QLatin1String(".h"));
}

bool formatted(const QString &path)
{
    return !path.startsWith(QLatin1String("remote-agent/trainer/compat/"));
}

// The C++ files of the tree, relative to it.
QStringList sources()
{
    QStringList files;
    QProcess git;
    git.setWorkingDirectory(kSource);
    git.start(QStringLiteral("git"),
        { QStringLiteral("ls-files"), QStringLiteral("*.cpp"), QStringLiteral("*.h") });
    if (git.waitForFinished(30'000) && git.exitStatus() == QProcess::NormalExit && git.exitCode() == 0) {
        for (const QByteArray &line : git.readAllStandardOutput().split('\n'))
            if (const QString path = QString::fromUtf8(line.trimmed()); isCpp(path) && formatted(path))
                files << path;
        return files;
    }
    for (const char *folder : { "app", "bench", "common", "core", "proto", "remote-agent", "tests" }) {
        QDirIterator it(
            kSource + QLatin1Char('/') + QLatin1String(folder), QDir::Files, QDirIterator::Subdirectories);
        while (it.hasNext())
            if (const QString path = it.next().mid(kSource.size() + 1); isCpp(path) && formatted(path))
                files << path;
    }
    return files;
}

} // namespace

class TestFormat : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void sourcesFollowClangFormat()
    {
        QString tool = QStandardPaths::findExecutable(QStringLiteral("clang-format"));
        if (tool.isEmpty())
            tool = QStandardPaths::findExecutable(QStringLiteral("clang-format-14"));
        QVERIFY2(!tool.isEmpty(),
            "clang-format is not installed: `sudo apt-get install clang-format` (scripts/setup.sh installs "
            "it "
            "with the test packages)");
        const QStringList files = sources();
        QVERIFY2(files.size() > 100,
            qPrintable(QStringLiteral("only %1 C++ files found in %2").arg(files.size()).arg(kSource)));
        QProcess format;
        format.setWorkingDirectory(kSource);
        format.setProcessChannelMode(QProcess::MergedChannels);
        format.start(tool, QStringList { QStringLiteral("--dry-run"), QStringLiteral("--Werror") } + files);
        QVERIFY(format.waitForFinished(300'000));
        const QString out = QString::fromUtf8(format.readAll());
        QStringList unformatted;
        for (const QString &line : out.split(QLatin1Char('\n')))
            if (line.contains(QLatin1String(": error:")))
                unformatted << line.section(QLatin1Char(':'), 0, 1);
        unformatted.removeDuplicates();
        QVERIFY2(format.exitCode() == 0 && unformatted.isEmpty(),
            qPrintable(QStringLiteral("%1 place(s) not as .clang-format says (clang-format -i FILE): %2")
                           .arg(unformatted.size())
                           .arg(unformatted.mid(0, 40).join(QLatin1String(", ")))));
        qInfo("%d C++ files formatted as .clang-format says", int(files.size()));
    }
};

QTEST_GUILESS_MAIN(TestFormat)
#include "tst_format.moc"
