// The PDF report: A4 landscape, the same content as the HTML report, charts painted by the
// same chart painter. Laid out with a cursor that moves down the page and breaks pages
// before a block that does not fit (tables repeat their header on the next page). A last
// page that would carry only a few lines is avoided by laying the report out again a little
// smaller, when that saves the page.
#include "report.h"
#include "report_content.h"

#include <QBuffer>
#include <QFont>
#include <QFontMetricsF>
#include <QPageLayout>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>

#include <algorithm>

namespace scalelab::core {

namespace {

// Device units per point: the writer runs at 720 dpi so text is laid out at a fine grid.
constexpr int kDpi = 720;
constexpr qreal kUnit = kDpi / 72.0;
// Chart lengths are in chart units (CSS px in the HTML); one chart unit is this many points.
constexpr qreal kChartUnitPt = 0.8;
constexpr qreal kMarginMm = 10;
// Two charts side by side, two rows to a page.
constexpr qreal kChartHeightPt = 225;
// A last page filled less than this (a fraction of its height) is worth a second layout...
constexpr qreal kSparseLastPage = 0.3;
// ... at these scales (everything, type included, shrinks alike); the first that saves a page wins.
constexpr qreal kShrinkSteps[] = { 0.95, 0.9 };

const QColor kInk(0x1D, 0x24, 0x30);
const QColor kMuted(0x5B, 0x64, 0x72);
const QColor kRule(0xD9, 0xDD, 0xE3);
const QColor kZebra(0xF6, 0xF7, 0xF9);
const QColor kMutedRow(0x8A, 0x91, 0x9C);
const QColor kAlert(0xB4, 0x23, 0x18);
const QColor kAlertFill(0xFE, 0xF3, 0xF2);
const QColor kNote(0xB5, 0x47, 0x08);
const QColor kNoteFill(0xFF, 0xFA, 0xEB);

QFont font(qreal points, bool bold = false)
{
    QFont f(QStringLiteral("DejaVu Sans"));
    f.setStyleHint(QFont::SansSerif);
    f.setPixelSize(qRound(points * kUnit));
    f.setBold(bold);
    return f;
}

class PdfLayout {
public:
    // `scale` < 1 paints everything that much smaller, so a page holds more.
    PdfLayout(QPdfWriter &writer, QPainter &painter, const ReportContent &content, qreal scale = 1.0)
        : m_writer(writer)
        , m_p(painter)
        , m_content(content)
    {
        m_p.scale(scale, scale);
        m_page = QRectF(0, 0, writer.width() / scale, writer.height() / scale);
        startPage();
    }

    int pageCount() const { return m_pageNumber; }
    // How much of the current (last) page's content area is used, 0 to 1.
    qreal pageFill() const { return (m_y - m_top) / (m_bottom - m_top); }

    void titleBlock();
    void banner(const QString &title, const QString &text, const QColor &line, const QColor &fill);
    void headlines();
    // `keepWith`: device units of what follows that must fit on the heading's page.
    void heading(const QString &text, qreal points = 14, bool ruled = true, qreal keepWith = 60 * kUnit);
    void paragraph(const QString &text, const QFont &f, const QColor &color, qreal afterPt = 6);
    void table(const ReportTable &t, bool subHeading = false);
    void charts(const QList<ChartSpec> &charts);
    void newPage();
    void space(qreal points) { m_y += points * kUnit; }

private:
    void startPage();
    bool fits(qreal height) const { return m_y + height <= m_bottom; }
    void ensure(qreal height)
    {
        if (!fits(height))
            newPage();
    }
    qreal textHeight(const QFont &f, qreal width, const QString &text) const
    {
        return QFontMetricsF(f, &m_writer)
            .boundingRect(QRectF(0, 0, width, 1e9), Qt::TextWordWrap, text)
            .height();
    }
    QList<qreal> columnWidths(const ReportTable &t, const QFont &body, const QFont &head) const;
    qreal rowHeight(
        const QStringList &cells, const QList<qreal> &widths, const QFont &f, const QFont &sub) const;
    void drawRow(const QStringList &cells, const QList<qreal> &widths, const QList<bool> &numeric,
        const QFont &f, const QFont &sub, const QColor &color, qreal height);

    QPdfWriter &m_writer;
    QPainter &m_p;
    const ReportContent &m_content;
    QRectF m_page;
    qreal m_y = 0;
    qreal m_top = 0;
    qreal m_bottom = 0;
    int m_pageNumber = 0;
    qreal m_cellPad = 4 * kUnit; // per table: wide tables pad less
};

void PdfLayout::startPage()
{
    ++m_pageNumber;
    // Running header: what this is, and the synthetic flag on every page.
    const QFont small = font(7.5);
    const QFontMetricsF fm(small, &m_writer);
    m_p.setFont(small);
    m_p.setPen(kMuted);
    const QRectF header(m_page.left(), m_page.top(), m_page.width(), fm.height());
    m_p.drawText(header, Qt::AlignLeft | Qt::AlignVCenter,
        QStringLiteral("ScaleLab · %1 · %2").arg(m_content.title, m_content.studyName));
    if (!m_content.syntheticBanner.isEmpty()) {
        m_p.setFont(font(7.5, true));
        m_p.setPen(kAlert);
        m_p.drawText(header, Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("SYNTHETIC DATA"));
    }
    m_p.setPen(QPen(kRule, 0.5 * kUnit));
    m_p.drawLine(QPointF(m_page.left(), header.bottom() + 2 * kUnit),
        QPointF(m_page.right(), header.bottom() + 2 * kUnit));

    const QRectF footer(m_page.left(), m_page.bottom() - fm.height(), m_page.width(), fm.height());
    m_p.setFont(small);
    m_p.setPen(kMuted);
    m_p.drawText(footer, Qt::AlignLeft | Qt::AlignVCenter, m_content.footer);
    m_p.drawText(footer, Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("Page %1").arg(m_pageNumber));

    m_y = m_top = header.bottom() + 10 * kUnit;
    m_bottom = footer.top() - 8 * kUnit;
}

void PdfLayout::newPage()
{
    m_writer.newPage();
    startPage();
}

void PdfLayout::paragraph(const QString &text, const QFont &f, const QColor &color, qreal afterPt)
{
    const qreal h = textHeight(f, m_page.width(), text);
    ensure(h);
    m_p.setFont(f);
    m_p.setPen(color);
    m_p.drawText(QRectF(m_page.left(), m_y, m_page.width(), h), Qt::TextWordWrap, text);
    m_y += h + afterPt * kUnit;
}

void PdfLayout::heading(const QString &text, qreal points, bool ruled, qreal keepWith)
{
    const QFont f = font(points, true);
    const qreal h = QFontMetricsF(f, &m_writer).height();
    ensure(h + 14 * kUnit + keepWith);
    m_y += 6 * kUnit;
    m_p.setFont(f);
    m_p.setPen(kInk);
    m_p.drawText(QRectF(m_page.left(), m_y, m_page.width(), h), Qt::AlignLeft | Qt::AlignVCenter, text);
    m_y += h + 2 * kUnit;
    if (ruled) {
        m_p.setPen(QPen(kInk, 1.2 * kUnit));
        m_p.drawLine(QPointF(m_page.left(), m_y), QPointF(m_page.right(), m_y));
    }
    m_y += 6 * kUnit;
}

void PdfLayout::titleBlock()
{
    paragraph(QStringLiteral("SCALELAB · %1").arg(m_content.title.toUpper()), font(8, true), kMuted, 2);
    paragraph(m_content.studyName, font(22, true), kInk, 10);

    // The facts in a grid of four columns: a small caption over each value.
    const int columns = 4;
    const qreal colW = m_page.width() / columns;
    const QFont key = font(7, true), value = font(9.5);
    const qreal keyH = QFontMetricsF(key, &m_writer).height();
    for (int i = 0; i < m_content.facts.size(); i += columns) {
        qreal rowH = 0;
        for (int j = i; j < std::min<int>(i + columns, m_content.facts.size()); ++j)
            rowH = std::max(rowH, keyH + textHeight(value, colW - 12 * kUnit, m_content.facts[j].second));
        ensure(rowH);
        for (int j = i; j < std::min<int>(i + columns, m_content.facts.size()); ++j) {
            const qreal x = m_page.left() + (j - i) * colW;
            m_p.setFont(key);
            m_p.setPen(kMuted);
            m_p.drawText(QRectF(x, m_y, colW, keyH), Qt::AlignLeft, m_content.facts[j].first.toUpper());
            m_p.setFont(value);
            m_p.setPen(kInk);
            m_p.drawText(
                QRectF(x, m_y + keyH, colW - 12 * kUnit, rowH), Qt::TextWordWrap, m_content.facts[j].second);
        }
        m_y += rowH + 8 * kUnit;
    }
}

void PdfLayout::banner(const QString &title, const QString &text, const QColor &line, const QColor &fill)
{
    const QFont titleFont = font(10, true), body = font(9);
    const qreal pad = 8 * kUnit, bar = 6 * kUnit;
    const qreal innerW = m_page.width() - 2 * pad - bar;
    const qreal titleH = title.isEmpty() ? 0 : QFontMetricsF(titleFont, &m_writer).height() + 2 * kUnit;
    const qreal h = 2 * pad + titleH + textHeight(body, innerW, text);
    ensure(h);
    const QRectF box(m_page.left(), m_y, m_page.width(), h);
    m_p.setPen(QPen(line, 1.2 * kUnit));
    m_p.setBrush(fill);
    m_p.drawRect(box);
    m_p.fillRect(QRectF(box.left(), box.top(), bar, box.height()), line);
    m_p.setBrush(Qt::NoBrush);
    const qreal x = box.left() + bar + pad;
    if (!title.isEmpty()) {
        m_p.setFont(titleFont);
        m_p.setPen(line);
        m_p.drawText(QRectF(x, box.top() + pad, innerW, titleH), Qt::AlignLeft, title);
    }
    m_p.setFont(body);
    m_p.setPen(kInk);
    m_p.drawText(QRectF(x, box.top() + pad + titleH, innerW, h), Qt::TextWordWrap, text);
    m_y += h + 8 * kUnit;
}

void PdfLayout::headlines()
{
    if (m_content.headlines.isEmpty())
        return;
    const QFont key = font(7.5), value = font(9.5, true);
    const qreal gap = 8 * kUnit, pad = 6 * kUnit;
    const int perRow = std::min<int>(3, m_content.headlines.size());
    const qreal w = (m_page.width() - gap * (perRow - 1)) / perRow;
    const qreal keyH = QFontMetricsF(key, &m_writer).height();
    for (int i = 0; i < m_content.headlines.size(); i += perRow) {
        qreal h = 0;
        for (int j = i; j < std::min<int>(i + perRow, m_content.headlines.size()); ++j)
            h = std::max(h, 2 * pad + keyH + textHeight(value, w - 2 * pad, m_content.headlines[j].second));
        ensure(h);
        for (int j = i; j < std::min<int>(i + perRow, m_content.headlines.size()); ++j) {
            const QRectF box(m_page.left() + (j - i) * (w + gap), m_y, w, h);
            m_p.setPen(QPen(kRule, 0.8 * kUnit));
            m_p.setBrush(Qt::NoBrush);
            m_p.drawRoundedRect(box, 3 * kUnit, 3 * kUnit);
            m_p.setFont(key);
            m_p.setPen(kMuted);
            m_p.drawText(QRectF(box.left() + pad, box.top() + pad, w - 2 * pad, keyH), Qt::AlignLeft,
                m_content.headlines[j].first);
            m_p.setFont(value);
            m_p.setPen(kInk);
            m_p.drawText(QRectF(box.left() + pad, box.top() + pad + keyH, w - 2 * pad, h), Qt::TextWordWrap,
                m_content.headlines[j].second);
        }
        m_y += h + gap;
    }
}

QList<qreal> PdfLayout::columnWidths(const ReportTable &t, const QFont &body, const QFont &head) const
{
    const QFontMetricsF bodyFm(body, &m_writer), headFm(head, &m_writer);
    const int n = int(t.headers.size());
    QList<qreal> natural(n, 0), minimum(n, 0);
    const auto measure = [&](int col, const QString &text, const QFontMetricsF &fm, bool wrapAllowed) {
        for (const QString &line : text.split(QLatin1Char('\n'))) {
            natural[col] = std::max(natural[col], fm.horizontalAdvance(line) + 2 * m_cellPad);
            qreal longestWord = 0;
            for (const QString &word : line.split(QLatin1Char(' ')))
                longestWord = std::max(longestWord, fm.horizontalAdvance(word));
            minimum[col] = std::max(
                minimum[col], (wrapAllowed ? longestWord : fm.horizontalAdvance(line)) + 2 * m_cellPad);
        }
    };
    for (int c = 0; c < n; ++c)
        measure(c, t.headers[c], headFm, true);
    for (const QStringList &row : t.rows) {
        for (int c = 0; c < n && c < row.size(); ++c)
            measure(c, row[c], bodyFm, !(c < t.numeric.size() && t.numeric[c]));
    }
    // Headers wrap before numbers do: a column is as wide as its widest value or word.
    for (int c = 0; c < n; ++c)
        natural[c] = std::max(natural[c], minimum[c]);

    const qreal available = m_page.width();
    qreal sumNatural = 0, sumMinimum = 0;
    for (int c = 0; c < n; ++c) {
        sumNatural += natural[c];
        sumMinimum += minimum[c];
    }
    QList<qreal> widths(n);
    if (sumNatural <= available) {
        // Wide tables fill the page; short ones (software versions) keep their size.
        const qreal stretch = sumNatural > 0.6 * available ? available / sumNatural : 1.0;
        for (int c = 0; c < n; ++c)
            widths[c] = natural[c] * stretch;
    } else if (sumMinimum <= available) {
        const qreal share = (available - sumMinimum) / (sumNatural - sumMinimum);
        for (int c = 0; c < n; ++c)
            widths[c] = minimum[c] + (natural[c] - minimum[c]) * share;
    } else {
        for (int c = 0; c < n; ++c)
            widths[c] = minimum[c] * available / sumMinimum;
    }
    return widths;
}

qreal PdfLayout::rowHeight(
    const QStringList &cells, const QList<qreal> &widths, const QFont &f, const QFont &sub) const
{
    qreal h = 0;
    for (int c = 0; c < cells.size() && c < widths.size(); ++c) {
        const QStringList lines = cells[c].split(QLatin1Char('\n'));
        qreal cell = textHeight(f, widths[c] - 2 * m_cellPad, lines.first());
        for (int i = 1; i < lines.size(); ++i)
            cell += textHeight(sub, widths[c] - 2 * m_cellPad, lines[i]);
        h = std::max(h, cell);
    }
    return h + 2 * 3 * kUnit;
}

void PdfLayout::drawRow(const QStringList &cells, const QList<qreal> &widths, const QList<bool> &numeric,
    const QFont &f, const QFont &sub, const QColor &color, qreal height)
{
    qreal x = m_page.left();
    for (int c = 0; c < cells.size() && c < widths.size(); ++c) {
        const Qt::Alignment align = c < numeric.size() && numeric[c] ? Qt::AlignRight : Qt::AlignLeft;
        const qreal w = widths[c] - 2 * m_cellPad;
        qreal y = m_y + 3 * kUnit;
        const QStringList lines = cells[c].split(QLatin1Char('\n'));
        for (int i = 0; i < lines.size(); ++i) {
            const QFont &lineFont = i == 0 ? f : sub;
            const qreal h = textHeight(lineFont, w, lines[i]);
            m_p.setFont(lineFont);
            m_p.setPen(i == 0 ? color : kMuted);
            m_p.drawText(QRectF(x + m_cellPad, y, w, h), align | Qt::TextWordWrap, lines[i]);
            y += h;
        }
        x += widths[c];
    }
    m_y += height;
}

void PdfLayout::table(const ReportTable &t, bool subHeading)
{
    if (t.keepTogether && !t.rows.isEmpty()) {
        // The whole table, measured as it will be laid out: a new page when it does not fit
        // what is left of this one but would fit a page of its own.
        const bool wide = t.headers.size() > 10;
        const qreal size = wide ? 7 : 8.5;
        const qreal pad = m_cellPad;
        m_cellPad = (wide ? 2.5 : 4) * kUnit;
        const QFont body = font(size), head = font(size, true), sub = font(size - 1);
        const QList<qreal> widths = columnWidths(t, body, head);
        qreal h = QFontMetricsF(font(subHeading ? 11 : 14, true), &m_writer).height() + 14 * kUnit
            + rowHeight(t.headers, widths, head, head);
        if (!t.caption.isEmpty())
            h += textHeight(font(8), m_page.width(), t.caption) + 4 * kUnit;
        for (const QStringList &row : t.rows)
            h += rowHeight(row, widths, body, sub);
        m_cellPad = pad;
        if (!fits(h) && h <= m_bottom - m_top)
            newPage();
    }
    heading(t.title, subHeading ? 11 : 14, !subHeading);
    const QFont caption = font(8);
    if (!t.caption.isEmpty())
        paragraph(t.caption, caption, kMuted, 4);
    if (t.rows.isEmpty()) {
        paragraph(t.emptyText, font(9), kMuted, 8);
        return;
    }
    // Many columns get smaller type so the table fits the page's width.
    const bool wide = t.headers.size() > 10;
    const qreal size = wide ? 7 : 8.5;
    m_cellPad = (wide ? 2.5 : 4) * kUnit;
    const QFont body = font(size), head = font(size, true), sub = font(size - 1);
    const QList<qreal> widths = columnWidths(t, body, head);
    const qreal headH = rowHeight(t.headers, widths, head, head);

    const auto drawHeader = [&] {
        drawRow(t.headers, widths, t.numeric, head, head, kInk, headH);
        m_p.setPen(QPen(kInk, 0.9 * kUnit));
        m_p.drawLine(QPointF(m_page.left(), m_y), QPointF(m_page.left() + m_page.width(), m_y));
    };
    ensure(headH + rowHeight(t.rows.first(), widths, body, sub));
    drawHeader();
    for (int r = 0; r < t.rows.size(); ++r) {
        const qreal h = rowHeight(t.rows[r], widths, body, sub);
        if (!fits(h)) {
            newPage();
            paragraph(t.title + QStringLiteral(" (continued)"), font(9, true), kMuted, 4);
            drawHeader();
        }
        const QRectF band(m_page.left(), m_y, m_page.width(), h);
        if (r % 2 == 1)
            m_p.fillRect(band, kZebra);
        const bool muted = r < t.mutedRows.size() && t.mutedRows[r];
        drawRow(t.rows[r], widths, t.numeric, body, sub, muted ? kMutedRow : kInk, h);
        m_p.setPen(QPen(kRule, 0.5 * kUnit));
        m_p.drawLine(band.bottomLeft(), band.bottomRight());
    }
    m_y += 10 * kUnit;
}

void PdfLayout::charts(const QList<ChartSpec> &charts)
{
    const qreal gap = 12 * kUnit;
    const qreal w = (m_page.width() - gap) / 2;
    const qreal h = kChartHeightPt * kUnit;
    for (int i = 0; i < charts.size(); i += 2) {
        ensure(h);
        for (int j = i; j < std::min<int>(i + 2, charts.size()); ++j) {
            const QRectF box(m_page.left() + (j - i) * (w + gap), m_y, w, h);
            paintChart(m_p, box, charts[j], kChartUnitPt * kUnit);
            m_p.setPen(QPen(kRule, 0.6 * kUnit));
            m_p.setBrush(Qt::NoBrush);
            m_p.drawRect(box);
        }
        m_y += h + gap;
    }
}

struct LaidOutPdf {
    Result<QByteArray> report;
    int pages = 0;
    qreal lastPageFill = 1;
};

LaidOutPdf layOutPdf(const ReportContent &content, qreal scale)
{
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QPdfWriter writer(&buffer);
    writer.setResolution(kDpi);
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Landscape,
        QMarginsF(kMarginMm, kMarginMm, kMarginMm, kMarginMm), QPageLayout::Millimeter));
    // The flag is in the document's title too, where tools that do not render pages see it.
    writer.setTitle(
        QStringLiteral("%1 — %2%3")
            .arg(content.title, content.studyName,
                content.syntheticBanner.isEmpty() ? QString() : QStringLiteral(" (SYNTHETIC DATA)")));
    writer.setCreator(QStringLiteral("ScaleLab %1").arg(QStringLiteral(SCALELAB_VERSION)));
    int pages = 0;
    qreal fill = 1;
    {
        QPainter painter;
        if (!painter.begin(&writer))
            return { Status::failure(QStringLiteral("the PDF writer could not start painting")) };
        painter.setRenderHint(QPainter::Antialiasing);
        PdfLayout layout(writer, painter, content, scale);
        layout.titleBlock();
        if (!content.syntheticBanner.isEmpty())
            layout.banner(QStringLiteral("SYNTHETIC DATA"), content.syntheticBanner, kAlert, kAlertFill);
        for (const QString &note : content.notes)
            layout.banner({}, note, kNote, kNoteFill);
        layout.heading(QStringLiteral("Summary"));
        layout.headlines();
        if (!content.tables.isEmpty())
            layout.table(content.tables.first(), true);
        // The configurations fill the first page; the HTML shows them after the charts.
        if (content.tables.size() > 1)
            layout.table(content.tables[1]);
        layout.heading(QStringLiteral("Charts"), 14, true, kChartHeightPt * kUnit);
        layout.charts(content.charts);
        for (qsizetype i = 2; i < content.tables.size(); ++i)
            layout.table(content.tables[i]);
        pages = layout.pageCount();
        fill = layout.pageFill();
    }
    return { buffer.data(), pages, fill };
}

} // namespace

Result<QByteArray> reportPdf(const StudySnapshot &snapshot)
{
    if (Status painting = checkPainting(); !painting)
        return painting;
    const ReportContent content = buildReportContent(snapshot);
    const LaidOutPdf full = layOutPdf(content, 1.0);
    if (!full.report.ok() || full.pages < 2 || full.lastPageFill >= kSparseLastPage)
        return full.report;
    for (const qreal scale : kShrinkSteps) {
        const LaidOutPdf smaller = layOutPdf(content, scale);
        if (smaller.report.ok() && smaller.pages < full.pages)
            return smaller.report;
    }
    return full.report;
}

} // namespace scalelab::core
