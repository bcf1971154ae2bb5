// The docs against the tree and the program (issue 56 item 9): in every Markdown file of the
// repository (README.md, docs/, the READMEs beside the code; build folders and nested
// repositories left out), every relative link [text](path#anchor) names a file that exists and,
// into a .md file, a heading that exists (GitHub's anchors); every `scalelab-cli COMMAND
// [SUBCOMMAND] ... --option` in a code block or an inline code span names a command the
// program has (its --help lists it, or `scalelab-cli COMMAND --help` accepts it) and options
// that command's --help lists. Prose is not read for commands: only code. Each problem names
// FILE:LINE. And the top-level usage names every command and study subcommand there is.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include "test_support.h"

namespace {

// A piece of code the docs show: one line of a fenced block (its `\` continuations joined),
// or an inline code span; `line` is where it starts.
struct CodeText {
    int line = 0;
    QString text;
    bool span = false; // an inline code span
};

struct Link {
    int line = 0;
    QString target;
};

struct MarkdownFile {
    QList<CodeText> code;
    QList<Link> links;
    QSet<QString> anchors;
};

// GitHub's anchor of a heading: its text as rendered (code, links and emphasis marks gone),
// lower case, every character but letters, digits, '_', '-' and spaces dropped, spaces '-'.
QString slug(QString heading)
{
    static const QRegularExpression link(QStringLiteral("!?\\[([^\\]]*)\\]\\([^)]*\\)"));
    heading.replace(link, QStringLiteral("\\1"));
    heading.remove(QLatin1Char('`'));
    heading.remove(QLatin1Char('*'));
    QString out;
    for (const QChar c : heading.toLower()) {
        if (c.isLetterOrNumber() || c.isMark() || c == QLatin1Char('_') || c == QLatin1Char('-'))
            out += c;
        else if (c == QLatin1Char(' '))
            out += QLatin1Char('-');
    }
    return out;
}

// The line of `offset` in a block that starts at `firstLine`.
int lineAt(const QString &block, qsizetype offset, int firstLine)
{
    return firstLine + int(QStringView(block).left(offset).count(QLatin1Char('\n')));
}

// A block of text outside code fences (a paragraph, a table row, a heading): its inline code
// spans (CommonMark: a run of N backticks up to the next run of exactly N; a line break in
// one is a space) into `file.code`, its links, outside code, into `file.links`.
void readBlock(const QString &block, int firstLine, MarkdownFile *file)
{
    QString prose = block; // the block with its code spans blanked, newlines kept
    qsizetype i = 0;
    while ((i = block.indexOf(QLatin1Char('`'), i)) >= 0) {
        qsizetype n = 0;
        while (i + n < block.size() && block[i + n] == QLatin1Char('`'))
            ++n;
        qsizetype close = i + n;
        qsizetype closeRun = 0;
        while ((close = block.indexOf(QLatin1Char('`'), close)) >= 0) {
            closeRun = 0;
            while (close + closeRun < block.size() && block[close + closeRun] == QLatin1Char('`'))
                ++closeRun;
            if (closeRun == n)
                break;
            close += closeRun;
        }
        if (close < 0) {
            i += n; // unmatched: literal backticks
            continue;
        }
        QString span = block.mid(i + n, close - i - n);
        span.replace(QLatin1Char('\n'), QLatin1Char(' '));
        span.replace(QStringLiteral("\\|"), QStringLiteral("|")); // in a table cell, `\|` is a '|'
        file->code.append({ lineAt(block, i, firstLine), span.trimmed(), true });
        for (qsizetype k = i; k < close + n; ++k)
            if (prose[k] != QLatin1Char('\n'))
                prose[k] = QLatin1Char(' ');
        i = close + n;
    }
    static const QRegularExpression link(
        QStringLiteral(
            "\\]\\(\\s*<?([^)\\s>]*)>?(?:\\s+\"[^\"]*\")?\\s*\\)|^\\s{0,3}\\[[^\\]]+\\]:\\s*(\\S+)"),
        QRegularExpression::MultilineOption);
    for (auto it = link.globalMatch(prose); it.hasNext();) {
        const auto m = it.next();
        const int group = m.hasCaptured(1) && !m.captured(1).isEmpty() ? 1 : 2;
        file->links.append({ lineAt(prose, m.capturedStart(group), firstLine), m.captured(group) });
    }
}

bool startsBlockOfItsOwn(const QString &line)
{
    static const QRegularExpression item(QStringLiteral("^\\s*([-*+]|\\d+[.)])\\s"));
    const QString t = line.trimmed();
    return t.startsWith(QLatin1Char('#')) || t.startsWith(QLatin1Char('|')) || item.match(line).hasMatch();
}

MarkdownFile readMarkdown(const QString &path)
{
    MarkdownFile file;
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly | QIODevice::Text))
        return file;
    const QStringList lines = QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'));
    static const QRegularExpression fence(QStringLiteral("^\\s{0,3}(`{3,}|~{3,})"));
    static const QRegularExpression heading(QStringLiteral("^\\s{0,3}#{1,6}\\s+(.*?)(\\s+#+)?\\s*$"));
    static const QRegularExpression htmlAnchor(QStringLiteral("<a\\s+(?:name|id)=\"([^\"]+)\""));
    QHash<QString, int> seen; // GitHub numbers repeated anchors: x, x-1, x-2
    QString block;
    int blockLine = 0;
    auto flush = [&] {
        if (!block.isEmpty())
            readBlock(block, blockLine, &file);
        block.clear();
    };
    for (int i = 0; i < lines.size(); ++i) {
        const QString &line = lines[i];
        if (const auto open = fence.match(line); open.hasMatch()) {
            flush();
            const QString marker = open.captured(1);
            for (++i; i < lines.size() && !lines[i].trimmed().startsWith(marker); ++i) {
                CodeText code { i + 1, lines[i] };
                while (code.text.endsWith(QLatin1Char('\\')) && i + 1 < lines.size()) {
                    code.text.chop(1);
                    code.text += QLatin1Char(' ') + lines[++i];
                }
                file.code.append(code);
            }
            continue;
        }
        for (auto it = htmlAnchor.globalMatch(line); it.hasNext();)
            file.anchors.insert(it.next().captured(1));
        if (const auto h = heading.match(line); h.hasMatch()) {
            const QString s = slug(h.captured(1));
            const int n = seen[s]++;
            file.anchors.insert(n == 0 ? s : s + QLatin1Char('-') + QString::number(n));
        }
        if (line.trimmed().isEmpty() || startsBlockOfItsOwn(line))
            flush();
        if (line.trimmed().isEmpty())
            continue;
        if (block.isEmpty())
            blockLine = i + 1;
        else
            block += QLatin1Char('\n');
        block += line;
    }
    flush();
    return file;
}

// The Markdown files of the repository at `root`, relative to it: every *.md but those in
// hidden folders, build folders (a CMakeCache.txt, or a name starting with "build") and nested
// repositories (a .git of their own: third-party code).
QStringList markdownFiles(const QString &root)
{
    QStringList found;
    QStringList folders { root };
    while (!folders.isEmpty()) {
        const QDir dir(folders.takeFirst());
        for (const QFileInfo &entry : dir.entryInfoList(QDir::Files | QDir::Dirs | QDir::NoDotAndDotDot)) {
            if (entry.isDir()) {
                const QDir sub(entry.filePath());
                if (!entry.fileName().startsWith(QLatin1Char('.'))
                    && !entry.fileName().startsWith(QLatin1String("build"))
                    && !sub.exists(QStringLiteral("CMakeCache.txt")) && !sub.exists(QStringLiteral(".git")))
                    folders << entry.filePath();
            } else if (entry.suffix() == QLatin1String("md")) {
                found << QDir(root).relativeFilePath(entry.filePath());
            }
        }
    }
    found.sort();
    return found;
}

// Every relative link of the files `names` (relative to `root`): "FILE:LINE: what is wrong".
QStringList brokenLinks(const QString &root, const QStringList &names)
{
    QHash<QString, MarkdownFile> files;
    auto parsed = [&](const QString &path) -> const MarkdownFile & {
        if (!files.contains(path))
            files.insert(path, readMarkdown(path));
        return files[path];
    };
    static const QRegularExpression scheme(QStringLiteral("^[A-Za-z][A-Za-z0-9+.-]*:"));
    QStringList problems;
    for (const QString &name : names) {
        const QString path = QDir(root).filePath(name);
        const QList<Link> links = parsed(path).links;
        for (const Link &link : links) {
            if (link.target.isEmpty() || scheme.match(link.target).hasMatch())
                continue; // http:, https:, mailto:
            const qsizetype hash = link.target.indexOf(QLatin1Char('#'));
            const QString file = QUrl::fromPercentEncoding(link.target.left(hash).toUtf8());
            const QString anchor = hash < 0 ? QString() : link.target.mid(hash + 1);
            const QString where
                = QStringLiteral("%1:%2: link (%3)").arg(name).arg(link.line).arg(link.target);
            const QString resolved = file.isEmpty() ? path
                : file.startsWith(QLatin1Char('/')) ? QDir(root).filePath(file.mid(1))
                                                    : QFileInfo(path).dir().filePath(file);
            if (!QFileInfo::exists(resolved)) {
                problems << where + QStringLiteral(": no file %1").arg(QDir(root).relativeFilePath(resolved));
                continue;
            }
            if (anchor.isEmpty() || !resolved.endsWith(QLatin1String(".md")))
                continue;
            if (!parsed(QDir::cleanPath(resolved)).anchors.contains(anchor))
                problems << where
                        + QStringLiteral(": %1 has no heading with the anchor #%2")
                              .arg(QDir(root).relativeFilePath(QDir::cleanPath(resolved)), anchor);
        }
    }
    return problems;
}

// What `scalelab-cli ARGS` says and how it ends, each asked once.
struct Answer {
    int exitCode = -1;
    QString text;
};

class Cli {
public:
    explicit Cli(QString program)
        : m_program(std::move(program))
    { }

    const Answer &ask(const QStringList &args)
    {
        const QString key = args.join(QLatin1Char('\x1f'));
        if (!m_answers.contains(key)) {
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(m_program, args);
            Answer a;
            if (p.waitForFinished(scalelab::test::timeLimit(30'000))
                && p.exitStatus() == QProcess::NormalExit)
                a = { p.exitCode(), QString::fromLocal8Bit(p.readAll()) };
            else
                p.kill();
            m_answers.insert(key, a);
        }
        return m_answers[key];
    }

    // The commands the top-level usage lists: the first word of each line under "Commands:".
    QStringList commands()
    {
        QStringList names;
        static const QRegularExpression entry(QStringLiteral("^  ([a-z][a-z0-9-]*)\\s"));
        bool inCommands = false;
        for (const QString &line : ask({ QStringLiteral("--help") }).text.split(QLatin1Char('\n'))) {
            if (line == QLatin1String("Commands:"))
                inCommands = true;
            else if (inCommands && line.isEmpty())
                break;
            else if (const auto m = entry.match(line); inCommands && m.hasMatch())
                names << m.captured(1);
        }
        return names;
    }

    // The top-level usage's entry of `command`: its line and the deeper-indented ones after it.
    QString usageEntry(const QString &command)
    {
        const QStringList lines = ask({ QStringLiteral("--help") }).text.split(QLatin1Char('\n'));
        QString text;
        for (const QString &line : lines) {
            if (line.startsWith(QStringLiteral("  %1 ").arg(command)))
                text = line;
            else if (!text.isEmpty() && line.startsWith(QLatin1String("   ")))
                text += QLatin1Char('\n') + line;
            else if (!text.isEmpty())
                break;
        }
        return text;
    }

    // A command with subcommands (study, export) says so on its --help's first line,
    // "usage: scalelab-cli study SUBCOMMAND [options]", and lists each at an indent of two.
    QStringList subcommands(const QString &command)
    {
        const Answer &help = ask({ command, QStringLiteral("--help") });
        const QStringList lines = help.text.split(QLatin1Char('\n'));
        static const QRegularExpression first(QStringLiteral("^usage: scalelab-cli \\S+ [A-Z_]+ "));
        static const QRegularExpression entry(QStringLiteral("^  ([a-z][a-z0-9-]*)(\\s|$)"));
        QStringList names;
        if (help.exitCode != 0 || !first.match(lines.value(0)).hasMatch())
            return names;
        for (const QString &line : lines.mid(1)) {
            if (line.startsWith(QLatin1String("Environment:")))
                break;
            if (const auto m = entry.match(line); m.hasMatch())
                names << m.captured(1);
        }
        return names;
    }

    // The options `scalelab-cli PATH --help` lists (QCommandLineParser's table: "  -o, --output
    // <file>  Text"), "--output" and "-o"; for a command with subcommands, only -h, --help.
    QSet<QString> options(const QStringList &path)
    {
        QSet<QString> names { QStringLiteral("--help"), QStringLiteral("-h") };
        static const QRegularExpression row(QStringLiteral("^\\s{1,4}(-.*?)(\\s{2,}|$)"));
        static const QRegularExpression option(QStringLiteral("(--?[A-Za-z0-9][A-Za-z0-9-]*)"));
        for (const QString &line :
            ask(path + QStringList { QStringLiteral("--help") }).text.split(QLatin1Char('\n')))
            if (const auto m = row.match(line); m.hasMatch())
                for (auto it = option.globalMatch(m.captured(1)); it.hasNext();)
                    names.insert(it.next().captured(1));
        return names;
    }

private:
    QString m_program;
    QHash<QString, Answer> m_answers;
};

bool isPlaceholder(const QString &word)
{
    return word == QStringLiteral("…") || word == QLatin1String("...") || word.toUpper() == word;
}

// The words of a command line after "scalelab-cli", up to where the shell ends it: a pipe, a
// list (&&, ||, ;), a redirection or a comment. A '|' followed by an option or '[' is a
// synopsis's "either", not a pipe. Brackets and quotes go; "--opt=value" is "--opt".
QStringList commandWords(const QString &rest)
{
    const QStringList tokens = rest.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
    static const QRegularExpression stop(QStringLiteral("^(\\|\\|?|&&|;|#.*|[0-9]?>.*|<.*)$"));
    QStringList words;
    for (int i = 0; i < tokens.size(); ++i) {
        QString t = tokens[i];
        if (t == QLatin1String("|") && i + 1 < tokens.size()
            && (tokens[i + 1].startsWith(QLatin1Char('-')) || tokens[i + 1].startsWith(QLatin1Char('['))))
            continue;
        if (stop.match(t).hasMatch() || (i == 0 && t.startsWith(QLatin1Char('('))))
            break; // the end of the command, or a diagram's "scalelab-cli (headless)"
        const bool last = t.endsWith(QLatin1Char(';')) || t.endsWith(QLatin1Char(')'));
        t.remove(QRegularExpression(QStringLiteral("[\\[\\]\"';)(]")));
        if (t.startsWith(QLatin1String("--")) && t.contains(QLatin1Char('=')))
            t.truncate(t.indexOf(QLatin1Char('=')));
        if (!t.isEmpty())
            words << t;
        if (last)
            break;
    }
    return words;
}

// The problems of one `scalelab-cli WORDS` the docs show, "what is wrong" each; the commands
// it names that exist ("run", "study show") into `named`.
QStringList checkInvocation(Cli &cli, const QStringList &words, QSet<QString> *named)
{
    QStringList problems;
    if (words.isEmpty())
        return problems;
    const QString &first = words.first();
    if (first.startsWith(QLatin1Char('-'))) { // scalelab-cli --help, --version
        if (cli.ask({ first }).exitCode != 0)
            problems << QStringLiteral("scalelab-cli refuses %1").arg(first);
        return problems;
    }
    if (isPlaceholder(first))
        return problems; // scalelab-cli COMMAND --help
    const QStringList known = cli.commands();
    for (const QString &command : first.split(QLatin1Char('|'))) {
        if (!known.contains(command) && cli.ask({ command, QStringLiteral("--help") }).exitCode != 0) {
            problems << QStringLiteral("no command '%1' (scalelab-cli --help lists: %2)")
                            .arg(command, known.join(QLatin1String(", ")));
            continue;
        }
        const QStringList subs = cli.subcommands(command);
        qsizetype next = 1;
        QStringList paths;
        if (!subs.isEmpty() && next < words.size() && !words[next].startsWith(QLatin1Char('-'))) {
            if (isPlaceholder(words[next]))
                continue;
            for (const QString &sub : words[next].split(QLatin1Char('|'))) {
                if (subs.contains(sub))
                    paths << QStringLiteral("%1 %2").arg(command, sub);
                else
                    problems << QStringLiteral("no command '%1 %2' (scalelab-cli %1 --help lists: %3)")
                                    .arg(command, sub, subs.join(QLatin1String(", ")));
            }
            ++next;
        } else {
            paths << command;
        }
        for (const QString &path : paths) {
            named->insert(path);
            const QSet<QString> options = cli.options(path.split(QLatin1Char(' ')));
            for (const QString &w : words.mid(next)) {
                static const QRegularExpression option(
                    QStringLiteral("^(--[A-Za-z0-9][A-Za-z0-9-]*|-[A-Za-z])$"));
                if (option.match(w).hasMatch() && !options.contains(w))
                    problems << QStringLiteral("'scalelab-cli %1 --help' has no option %2").arg(path, w);
            }
        }
    }
    return problems;
}

// Every `scalelab-cli ...` in the code of the files `names`: "FILE:LINE: `CODE`: what is wrong";
// the commands they name that exist into `named` when given.
QStringList wrongCommands(
    Cli &cli, const QString &root, const QStringList &names, QSet<QString> *named = nullptr)
{
    static const QRegularExpression program(QStringLiteral("(^|[\\s/(`$])scalelab-cli(?=\\s|$)"));
    QSet<QString> seen;
    QStringList problems;
    for (const QString &name : names) {
        const MarkdownFile file = readMarkdown(QDir(root).filePath(name));
        for (const CodeText &code : file.code) {
            QList<QStringList> invocations;
            for (auto it = program.globalMatch(code.text); it.hasNext();)
                invocations << commandWords(code.text.mid(it.next().capturedEnd()));
            // A span that starts with a command and one of its subcommands, `study watch ID
            // --tensorboard DIR`, is scalelab-cli's too.
            const QStringList words = commandWords(code.text);
            if (code.span && invocations.isEmpty() && words.size() > 1 && cli.commands().contains(words[0])
                && cli.subcommands(words[0]).contains(words[1]))
                invocations << words;
            for (const QStringList &invocation : invocations)
                for (const QString &problem : checkInvocation(cli, invocation, &seen))
                    problems << QStringLiteral("%1:%2: `%3`: %4")
                                    .arg(name)
                                    .arg(code.line)
                                    .arg(code.text.trimmed(), problem);
        }
    }
    if (named)
        *named = seen;
    return problems;
}

QString listed(const QStringList &problems)
{
    return QStringLiteral("\n  ") + problems.join(QStringLiteral("\n  "));
}

} // namespace

class TestDocs : public QObject {
    Q_OBJECT

private:
    const QString m_root = QStringLiteral(SCALELAB_SOURCE_DIR);

private Q_SLOTS:
    void relativeLinksResolve();
    void commandsAndOptionsExistInTheHelp();
    void usageNamesEveryCommand();
    void docsShowEveryCommand();
    void checksCatchWhatIsWrongAndOnlyThat();
};

void TestDocs::relativeLinksResolve()
{
    const QStringList files = markdownFiles(m_root);
    QVERIFY2(files.contains(QStringLiteral("README.md")) && files.contains(QStringLiteral("docs/testing.md")),
        qPrintable(files.join(QLatin1String(", "))));
    const QStringList problems = brokenLinks(m_root, files);
    QVERIFY2(problems.isEmpty(), qPrintable(listed(problems)));
}

void TestDocs::commandsAndOptionsExistInTheHelp()
{
    Cli cli(scalelab::test::binary("scalelab-cli"));
    QVERIFY2(cli.commands().contains(QStringLiteral("study")),
        qPrintable(cli.ask({ QStringLiteral("--help") }).text));
    const QStringList problems = wrongCommands(cli, m_root, markdownFiles(m_root));
    QVERIFY2(problems.isEmpty(), qPrintable(listed(problems)));
}

// The top-level usage names every command the program takes (those its "unknown command"
// error lists) and, in a command's entry, each of its subcommands (those `scalelab-cli
// COMMAND --help` lists: study run, rerun, predict, continue, ...).
void TestDocs::usageNamesEveryCommand()
{
    Cli cli(scalelab::test::binary("scalelab-cli"));
    const QStringList commands = cli.commands();
    const Answer &unknown = cli.ask({ QStringLiteral("no-such-command") });
    QCOMPARE(unknown.exitCode, 2);
    static const QRegularExpression list(QStringLiteral("commands: ([a-z, -]+)\\."));
    const auto m = list.match(unknown.text);
    QVERIFY2(m.hasMatch(), qPrintable(unknown.text));
    QStringList problems;
    for (const QString &command : m.captured(1).split(QStringLiteral(", ")))
        if (!commands.contains(command))
            problems << QStringLiteral("the usage does not list the command '%1'").arg(command);
    for (const QString &command : commands) {
        const QString entry = cli.usageEntry(command);
        for (const QString &sub : cli.subcommands(command))
            if (!entry.contains(QRegularExpression(QStringLiteral("\\b%1\\b").arg(sub))))
                problems << QStringLiteral("the usage's '%1' does not name its subcommand '%2':\n%3")
                                .arg(command, sub, entry);
    }
    QVERIFY(!cli.subcommands(QStringLiteral("study")).isEmpty());
    QVERIFY2(problems.isEmpty(), qPrintable(listed(problems)));
}

// And the other way round: every command and subcommand the program has is shown in the
// docs' code at least once (the alias `agents` aside), so that a new one gets its words.
void TestDocs::docsShowEveryCommand()
{
    Cli cli(scalelab::test::binary("scalelab-cli"));
    QSet<QString> named;
    wrongCommands(cli, m_root, markdownFiles(m_root), &named);
    QStringList missing;
    for (const QString &command : cli.commands()) {
        const QStringList subs = cli.subcommands(command);
        if (subs.isEmpty() && !named.contains(command))
            missing << command;
        for (const QString &sub : subs)
            if (!named.contains(command + QLatin1Char(' ') + sub))
                missing << command + QLatin1Char(' ') + sub;
    }
    QVERIFY2(missing.isEmpty(),
        qPrintable(QStringLiteral("no Markdown file shows `scalelab-cli %1` in code")
                       .arg(missing.join(QStringLiteral("`, `")))));
}

// The checks themselves, on a small tree of docs whose problems are known: each found, at
// its line, and nothing else (shell continuations, pipes, placeholders, prose, synopses).
void TestDocs::checksCatchWhatIsWrongAndOnlyThat()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("docs")));
    QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("build/docs")));
    const QByteArray guide = R"(# Guide

## Two words: `code` & more

See [the other](other.md), [a part](other.md#a-part-too), [here](#two-words-code--more),
[missing](gone.md), [bad anchor](other.md#nowhere), [web](https://example.com/x.md),
[mail](mailto:a@b.c), ![image](../README.md), [split
link](other.md#a-part-too).

Prose names scalelab-cli study bogus --nothing, which is not code.
`scalelab-cli study show ID --json`, `scalelab-cli study run|rerun PLAN.json --synthetic`,
`scalelab-cli study plan --example \| --example-tune`, `scalelab-cli COMMAND --help`, `scalelab-cli
report ID --bogus-format`, `scalelab-cli nonsense`.

| a | `scalelab-cli report ID --format json\|csv [-o FILE]` |
| b | `study watch ID --synthetic`, `study show`, `export tensorboard ID DIR --json`, `run --bogus` |

```sh
SCALELAB_TOKEN=... build/bin/scalelab-cli describe --agent A:7450 \
    --json | grep --no-such-grep-flag x && scalelab-cli study list --wrong
scalelab-cli study frobnicate ID  # --comment-flag
scalelab-cli run --workers 2 > out.txt --after-redirect
```
)";
    QVERIFY(scalelab::test::writeFile(dir.filePath(QStringLiteral("docs/guide.md")), guide));
    QVERIFY(scalelab::test::writeFile(dir.filePath(QStringLiteral("docs/other.md")),
        "# Other\n\n```\n# not a heading\n```\n\n## A part, too\n"));
    QVERIFY(scalelab::test::writeFile(dir.filePath(QStringLiteral("README.md")), "[guide](docs/guide.md)\n"));
    QVERIFY(scalelab::test::writeFile(dir.filePath(QStringLiteral("build/docs/x.md")), "[x](nowhere.md)\n"));

    const QStringList files = markdownFiles(dir.path());
    QCOMPARE(files, (QStringList { "README.md", "docs/guide.md", "docs/other.md" }));
    QCOMPARE(brokenLinks(dir.path(), files),
        (QStringList { "docs/guide.md:6: link (gone.md): no file docs/gone.md",
            "docs/guide.md:6: link (other.md#nowhere): docs/other.md has no heading with the anchor "
            "#nowhere" }));

    Cli cli(scalelab::test::binary("scalelab-cli"));
    QStringList problems = wrongCommands(cli, dir.path(), files);
    for (QString &p : problems)
        p.truncate(p.indexOf(QLatin1String(" (")) < 0 ? p.size() : p.indexOf(QLatin1String(" (")));
    const QStringList expected { "docs/guide.md:12: `scalelab-cli report ID --bogus-format`: 'scalelab-cli "
                                 "report --help' has no option --bogus-format",
        "docs/guide.md:13: `scalelab-cli nonsense`: no command 'nonsense'",
        "docs/guide.md:16: `study watch ID --synthetic`: 'scalelab-cli study watch --help' has no option "
        "--synthetic",
        "docs/guide.md:19: `SCALELAB_TOKEN=... build/bin/scalelab-cli describe --agent A:7450      --json | "
        "grep "
        "--no-such-grep-flag x && scalelab-cli study list --wrong`: 'scalelab-cli study list --help' has no "
        "option --wrong",
        "docs/guide.md:21: `scalelab-cli study frobnicate ID  # --comment-flag`: no command 'study "
        "frobnicate'" };
    QCOMPARE(problems.join(QLatin1Char('\n')), expected.join(QLatin1Char('\n')));
}

QTEST_GUILESS_MAIN(TestDocs)
#include "tst_docs.moc"
