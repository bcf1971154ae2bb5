// What the HTML and PDF reports show, as plain text and numbers already formatted, so the
// two renderers print the same content and only differ in layout. Built from a snapshot by
// buildReportContent(); the renderers never compute a number themselves.
#pragma once

#include "core_status.h"
#include "report_charts.h"
#include "study_model.h"
#include "study_results.h"

#include <QList>
#include <QPair>
#include <QString>
#include <QStringList>

namespace scalelab::core {

// A table of text cells. A cell may hold a second line after '\n' (e.g. a min–max range
// under a mean), which renderers print smaller.
struct ReportTable {
    QString title;
    QString caption; // one or two sentences under the title
    QStringList headers;
    // Per column, optional: a header of at most two lines ('\n' between them) for layouts
    // short of width (the HTML page), which show `headers` as the full name beside it.
    QStringList shortHeaders;
    QString legend; // explains abbreviations in shortHeaders; empty when there are none
    QList<bool> numeric; // per column: right-aligned, tabular figures
    QList<QStringList> rows;
    QList<bool> mutedRows; // per row: failed, cancelled or unfinished runs
    QString emptyText; // printed instead of an empty table
    // PDF: start the table on a new page rather than split it, when it fits on one.
    bool keepTogether = false;
};

struct ReportContent {
    QString title; // "Scale-up study report"
    QString studyName;
    QList<QPair<QString, QString>> facts; // study id, state, dataset, target, dates, runs
    QString syntheticBanner; // empty when the data is real
    QStringList notes; // e.g. why speedups are not available
    QList<QPair<QString, QString>> headlines; // "4 workers" -> "3.42× faster, 86% efficient"
    QList<ChartSpec> charts;
    QList<ReportTable> tables;
    QString footer; // "ScaleLab 0.1.0 · study s1"
};

ReportContent buildReportContent(const StudySnapshot &snapshot);

// Formatting shared by the report renderers. NaN prints as kDash.
inline const QString kDash = QStringLiteral("—");
QString formatPercent(double fraction, int decimals = 1);
QString formatSpeedup(double speedup); // "1.93×"
QString formatSeconds(double seconds);
QString formatNumber(double value, int decimals);
QString formatUnixMs(qint64 ms);

// Success when QPainter-based rendering can run now (there is a QGuiApplication), else
// why not and how a headless program gets one.
Status checkPainting();

} // namespace scalelab::core
