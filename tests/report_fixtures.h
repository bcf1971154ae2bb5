// The snapshots and the PDF and HTML helpers the report tests share (tst_reports_results,
// tst_reports_formats, tst_reports_tune): hand-computed runs of a study whose numbers those
// tests work out by hand, a PDF's pages and text (through poppler's pdftotext), and an HTML
// table's cells.
#pragma once

#include "study_results.h"

#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <optional>

namespace scalelab::test {

using core::AttemptRecord;
using core::EpochPoint;
using core::RunConfig;
using core::RunResult;
using core::StudySnapshot;

inline RunConfig config(int workers, bool baseline = false)
{
    RunConfig c;
    c.workers = workers;
    c.baseline = baseline;
    c.batchSize = 64;
    c.epochs = 2;
    return c;
}

inline RunResult run(const QString &id, const RunConfig &c, int repeat, double wall, double finalAcc,
    std::optional<double> timeToTarget, const QString &state = QStringLiteral("SUCCEEDED"))
{
    RunResult r;
    r.runId = id;
    r.config = c;
    r.repeat = repeat;
    r.state = state;
    r.wallSeconds = wall;
    r.finalTestAccuracy = finalAcc;
    r.bestTestAccuracy = finalAcc;
    r.imagesPerSecond = 1000.0 / wall;
    r.timeToTargetSeconds = timeToTarget;
    r.attempts.append(
        AttemptRecord { 1, { QStringLiteral("127.0.0.1:50051") }, state, {}, 0, 1000, 2000, 0, {}, 0, {} });
    r.epochs.append(EpochPoint { 1, 1.5, 0.5, 1.4, finalAcc - 0.1, wall / 2, 1000.0 / wall });
    r.epochs.append(EpochPoint { 2, 1.0, 0.7, 0.9, finalAcc, wall, 1000.0 / wall });
    return r;
}

// Target 70%. Baseline (1 worker): wall 100 and 110, time to target 60 and 70.
// 2 workers: wall 60 and 50; time to target 35 (given) and 40 (from its epochs).
// 4 workers: wall 40 (target at 20), 30 (never reaches the target), and a FAILED run.
inline StudySnapshot handSnapshot()
{
    StudySnapshot s;
    s.studyId = QStringLiteral("s-hand");
    s.name = QStringLiteral("hand computed");
    s.state = QStringLiteral("SUCCEEDED");
    s.dataset = QStringLiteral("cifar10");
    s.targetAccuracy = 0.7;
    s.runs << run(QStringLiteral("b0"), config(1, true), 0, 100, 0.72, 60)
           << run(QStringLiteral("b1"), config(1, true), 1, 110, 0.74, 70)
           << run(QStringLiteral("w2-0"), config(2), 0, 60, 0.71, 35);
    RunResult fromEpochs = run(QStringLiteral("w2-1"), config(2), 1, 50, 0.73, std::nullopt);
    fromEpochs.epochs[0].testAccuracy = 0.5;
    fromEpochs.epochs[0].elapsedSeconds = 20;
    fromEpochs.epochs[1].testAccuracy = 0.71;
    fromEpochs.epochs[1].elapsedSeconds = 40;
    s.runs << fromEpochs << run(QStringLiteral("w4-0"), config(4), 0, 40, 0.70, 20)
           << run(QStringLiteral("w4-1"), config(4), 1, 30, 0.60, std::nullopt)
           << run(QStringLiteral("w4-2"), config(4), 2, 10, 0.10, std::nullopt, QStringLiteral("FAILED"));
    s.runs.last().attempts.append(AttemptRecord { 2, { QStringLiteral("127.0.0.1:50051") },
        QStringLiteral("FAILED"), QStringLiteral("boom"), 1, 3000, 4000, 0, {}, 0, {} });
    return s;
}

inline int pdfPageCount(const QByteArray &pdf)
{
    // Page objects, not the /Pages tree node.
    return int(pdf.count("/Type /Page\n") + pdf.count("/Type /Page ") + pdf.count("/Type /Page/")
        + pdf.count("/Type /Page>"));
}

// The text of a PDF, through poppler's pdftotext (scripts/setup.sh installs it for the
// tests); a message saying what failed when it cannot be read.
// pdftotext's output for `pdf` with `options` (poppler-utils, which the test set-up
// installs); empty when the file cannot be written.
inline QString runPdfToText(const QByteArray &pdf, const QStringList &options)
{
    QTemporaryDir dir;
    QFile file(dir.filePath(QStringLiteral("r.pdf")));
    if (!file.open(QIODevice::WriteOnly) || file.write(pdf) != pdf.size())
        return {};
    file.close();
    QProcess p;
    p.start(QStandardPaths::findExecutable(QStringLiteral("pdftotext")),
        options + QStringList { file.fileName(), QStringLiteral("-") });
    p.waitForFinished(30000);
    return QString::fromUtf8(p.readAllStandardOutput());
}

inline QString pdfText(const QByteArray &pdf)
{
    if (QStandardPaths::findExecutable(QStringLiteral("pdftotext")).isEmpty())
        return QStringLiteral("(no pdftotext: apt-get install poppler-utils)");
    return runPdfToText(pdf, {});
}
// The text of every <th> (lines joined by '\n') and its title, and the lines of every <td>
// with the font each line is set in, of the HTML table whose caption paragraph follows
// `<h2>title</h2>`.
struct HtmlCell {
    QStringList lines;
    QList<bool> subLines; // per line: set in the smaller .sub type
    QString title;
    bool header = false;
    int column = 0;
};

inline QList<HtmlCell> htmlTableCells(const QString &html, const QString &title)
{
    const qsizetype at = html.indexOf(QStringLiteral(">%1</h").arg(title));
    const qsizetype start = html.indexOf(QStringLiteral("<table"), at);
    const qsizetype end = html.indexOf(QStringLiteral("</table>"), start);
    if (at < 0 || start < 0 || end < 0)
        return {};
    const QString table = html.mid(start, end - start);
    static const QRegularExpression row(QStringLiteral("<tr[^>]*>(.*?)</tr>"));
    static const QRegularExpression cell(
        QStringLiteral("<(th|td)([^>]*)>(.*?)</t[hd]>"), QRegularExpression::DotMatchesEverythingOption);
    static const QRegularExpression titleAttr(QStringLiteral("title=\"([^\"]*)\""));
    static const QRegularExpression sub(QStringLiteral("<span class=\"sub\">(.*?)</span>"));
    static const QRegularExpression tag(QStringLiteral("<[^>]+>"));
    const auto text = [](QString s) {
        s.remove(tag);
        return s.replace(QStringLiteral("&lt;"), QStringLiteral("<"))
            .replace(QStringLiteral("&gt;"), QStringLiteral(">"))
            .replace(QStringLiteral("&quot;"), QStringLiteral("\""))
            .replace(QStringLiteral("&amp;"), QStringLiteral("&"));
    };
    QList<HtmlCell> cells;
    for (auto r = row.globalMatch(table); r.hasNext();) {
        int column = 0;
        for (auto c = cell.globalMatch(r.next().captured(1)); c.hasNext(); ++column) {
            const auto m = c.next();
            HtmlCell out;
            out.header = m.captured(1) == QLatin1String("th");
            out.column = column;
            out.title = text(titleAttr.match(m.captured(2)).captured(1));
            QString body = m.captured(3);
            QStringList subs;
            for (auto s = sub.globalMatch(body); s.hasNext();)
                subs << text(s.next().captured(1));
            body.remove(sub);
            for (const QString &line : body.split(QStringLiteral("<br>"))) {
                out.lines << text(line);
                out.subLines << false;
            }
            for (const QString &line : std::as_const(subs)) {
                out.lines << line;
                out.subLines << true;
            }
            cells << out;
        }
    }
    return cells;
}

} // namespace scalelab::test
