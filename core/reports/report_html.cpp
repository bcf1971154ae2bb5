// The HTML report: one self-contained file (inline CSS, charts as inline SVG, no script,
// no external resource). Every string from the snapshot is escaped.
#include "report.h"
#include "report_content.h"

#include <QSizeF>

namespace scalelab::core {

namespace {

// The size charts are painted at, in CSS pixels; the page scales them to its column width.
const QSizeF kChartSize(580, 350);

const char kStyle[] = R"css(
:root { --ink: #1d2430; --muted: #5b6472; --rule: #d9dde3; }
* { box-sizing: border-box; }
body { margin: 0; background: #eef0f3; color: var(--ink);
  font: 14px/1.45 "Inter", "Segoe UI", "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; }
main { max-width: 1360px; margin: 0 auto; padding: 32px 28px 40px; background: #fff; }
.kicker { text-transform: uppercase; letter-spacing: .08em; font-size: 12px; color: var(--muted); font-weight: 600; }
h1 { font-size: 28px; margin: 2px 0 18px; font-weight: 650; }
h2 { font-size: 18px; margin: 34px 0 8px; padding-bottom: 5px; border-bottom: 2px solid var(--ink); }
h3 { font-size: 15px; margin: 22px 0 4px; }
.caption { color: var(--muted); font-size: 12.5px; margin: 0 0 10px; max-width: 95ch; }
.facts { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 12px 24px; margin: 0; }
.facts dt { font-size: 11px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
.facts dd { margin: 2px 0 0; font-weight: 500; overflow-wrap: anywhere; }
.banner { margin: 22px 0 8px; padding: 12px 16px; border: 2px solid #b42318; border-left-width: 8px;
  background: #fef3f2; color: #7a1a12; }
.banner strong { display: block; letter-spacing: .08em; font-size: 14px; margin-bottom: 2px; }
.note { border-left: 4px solid #b54708; background: #fffaeb; padding: 8px 12px; margin: 12px 0; }
.headlines { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0 4px; }
.headline { border: 1px solid var(--rule); border-radius: 6px; padding: 10px 14px; min-width: 240px; }
.headline .k { font-size: 12px; color: var(--muted); }
.headline .v { font-size: 15px; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--rule); border-radius: 6px; padding: 4px; break-inside: avoid; }
figure svg { width: 100%; height: auto; display: block; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
/* Headers break only where the report puts a <br>: two lines at most. */
th { text-align: left; font-weight: 600; border-bottom: 1.5px solid var(--ink); padding: 6px 8px;
  vertical-align: bottom; white-space: nowrap; }
th[title] { cursor: help; }
td { padding: 5px 8px; border-bottom: 1px solid var(--rule); vertical-align: top; overflow-wrap: break-word; }
td:first-child { white-space: nowrap; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
/* Tables of many columns (the runs) in compact type, so they fit a 1400-px window. */
table.compact { font-size: 12px; }
table.compact th { font-size: 11.5px; }
table.compact th, table.compact td { padding: 5px 6px; }
table.compact .sub { font-size: 10.5px; }
.legend { color: var(--muted); font-size: 11.5px; margin: 4px 0 0; }
tbody tr:nth-child(even) { background: #f8f9fb; }
tr.muted td { color: #8a919c; }
.sub { display: block; font-size: 11px; color: var(--muted); }
.empty { color: var(--muted); font-style: italic; }
footer { margin-top: 40px; padding-top: 8px; border-top: 1px solid var(--rule); font-size: 12px; color: var(--muted); }
@media print {
  @page { size: A4 landscape; margin: 12mm; }
  body { background: #fff; font-size: 11px; }
  main { max-width: none; padding: 0; }
  table { font-size: 9px; }
  th, td { padding: 3px 4px; }
  .sub { font-size: 8px; }
  .table-wrap { overflow: visible; }
  .banner, .note, tbody tr { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  h2 { break-after: avoid; }
  tr, figure { break-inside: avoid; }
}
)css";

QString esc(const QString &s)
{
    return s.toHtmlEscaped();
}

// A cell's first line, and its second line (after '\n') in smaller type.
QString cellHtml(const QString &cell)
{
    const qsizetype nl = cell.indexOf(QLatin1Char('\n'));
    if (nl < 0)
        return esc(cell);
    QString html = esc(cell.left(nl));
    for (const QString &line : cell.mid(nl + 1).split(QLatin1Char('\n')))
        html += QStringLiteral("<span class=\"sub\">%1</span>").arg(esc(line));
    return html;
}

QString tableHtml(const ReportTable &t, const QString &heading)
{
    QString html = QStringLiteral("<%1>%2</%1>\n").arg(heading, esc(t.title));
    if (!t.caption.isEmpty())
        html += QStringLiteral("<p class=\"caption\">%1</p>\n").arg(esc(t.caption));
    if (t.rows.isEmpty())
        return html + QStringLiteral("<p class=\"empty\">%1</p>\n").arg(esc(t.emptyText));
    const auto cls = [&](int column) {
        return column < t.numeric.size() && t.numeric[column] ? QStringLiteral(" class=\"num\"") : QString();
    };
    // Tables this wide get compact type (see the style sheet).
    constexpr int kCompactColumns = 12;
    html += t.headers.size() >= kCompactColumns
        ? QStringLiteral("<div class=\"table-wrap\"><table class=\"compact\">\n<thead><tr>")
        : QStringLiteral("<div class=\"table-wrap\"><table>\n<thead><tr>");
    for (int i = 0; i < t.headers.size(); ++i) {
        // The short header, its lines joined by <br>, with the full name as its tooltip.
        const QString shown
            = i < t.shortHeaders.size() && !t.shortHeaders[i].isEmpty() ? t.shortHeaders[i] : t.headers[i];
        QStringList lines;
        for (const QString &line : shown.split(QLatin1Char('\n')))
            lines << esc(line);
        const QString title
            = shown == t.headers[i] ? QString() : QStringLiteral(" title=\"%1\"").arg(esc(t.headers[i]));
        html += QStringLiteral("<th%1%2>%3</th>").arg(cls(i), title, lines.join(QStringLiteral("<br>")));
    }
    html += QStringLiteral("</tr></thead>\n<tbody>\n");
    for (int r = 0; r < t.rows.size(); ++r) {
        const bool muted = r < t.mutedRows.size() && t.mutedRows[r];
        html += muted ? QStringLiteral("<tr class=\"muted\">") : QStringLiteral("<tr>");
        for (int i = 0; i < t.rows[r].size(); ++i)
            html += QStringLiteral("<td%1>%2</td>").arg(cls(i), cellHtml(t.rows[r][i]));
        html += QStringLiteral("</tr>\n");
    }
    html += QStringLiteral("</tbody></table></div>\n");
    if (!t.legend.isEmpty())
        html += QStringLiteral("<p class=\"legend\">%1</p>\n").arg(esc(t.legend));
    return html;
}

} // namespace

Result<QByteArray> reportHtml(const StudySnapshot &snapshot)
{
    if (Status painting = checkPainting(); !painting)
        return painting;
    const ReportContent c = buildReportContent(snapshot);

    QString html;
    html += QStringLiteral("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                           "<meta name=\"generator\" content=\"ScaleLab\">\n");
    html += QStringLiteral("<title>%1 — %2</title>\n").arg(esc(c.title), esc(c.studyName));
    html += QStringLiteral("<style>%1</style>\n</head>\n<body>\n<main>\n").arg(QLatin1String(kStyle));

    html += QStringLiteral(
        "<header>\n<div class=\"kicker\">ScaleLab · %1</div>\n<h1>%2</h1>\n<dl class=\"facts\">\n")
                .arg(esc(c.title), esc(c.studyName));
    for (const auto &[key, value] : c.facts)
        html += QStringLiteral("<div><dt>%1</dt><dd>%2</dd></div>\n").arg(esc(key), esc(value));
    html += QStringLiteral("</dl>\n</header>\n");

    if (!c.syntheticBanner.isEmpty()) {
        html += QStringLiteral("<div class=\"banner\" role=\"alert\" id=\"synthetic-data\"><strong>SYNTHETIC "
                               "DATA</strong>%1</div>\n")
                    .arg(esc(c.syntheticBanner));
    }
    for (const QString &note : c.notes)
        html += QStringLiteral("<p class=\"note\">%1</p>\n").arg(esc(note));

    html += QStringLiteral("<section>\n<h2>Summary</h2>\n");
    if (!c.headlines.isEmpty()) {
        html += QStringLiteral("<div class=\"headlines\">\n");
        for (const auto &[key, value] : c.headlines) {
            html
                += QStringLiteral(
                    "<div class=\"headline\"><div class=\"k\">%1</div><div class=\"v\">%2</div></div>\n")
                       .arg(esc(key), cellHtml(value)); // a second line (a tune's best configuration) smaller
        }
        html += QStringLiteral("</div>\n");
    }
    // The first table (scale-up against the baseline) belongs to the summary.
    if (!c.tables.isEmpty())
        html += tableHtml(c.tables.first(), QStringLiteral("h3"));
    html += QStringLiteral("</section>\n");

    html += QStringLiteral("<section>\n<h2>Charts</h2>\n<div class=\"charts\">\n");
    for (const ChartSpec &chart : c.charts)
        html += QStringLiteral("<figure>%1</figure>\n").arg(QString::fromUtf8(chartSvg(chart, kChartSize)));
    html += QStringLiteral("</div>\n</section>\n");

    for (qsizetype i = 1; i < c.tables.size(); ++i)
        html += QStringLiteral("<section>\n%1</section>\n").arg(tableHtml(c.tables[i], QStringLiteral("h2")));

    html += QStringLiteral("<footer>%1</footer>\n</main>\n</body>\n</html>\n").arg(esc(c.footer));
    return html.toUtf8();
}

} // namespace scalelab::core
