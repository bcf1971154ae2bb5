// Study reports: a StudySnapshot rendered as JSON, CSV, a self-contained HTML page or a PDF.
//
// Every number in a report comes from the snapshot or from computeStudyResults() over it;
// a value that was not measured is printed as "—" (HTML, PDF), empty (CSV) or null (JSON).
// A study on synthetic data says so in every format: a banner in HTML and PDF, a
// `synthetic` field in JSON and a `synthetic` column in both CSV files.
//
// Formats:
// - json      one document: study, seed study comparison (baseline_seconds,
//             distributed_seconds, speedup, efficiency, baseline_accuracy,
//             distributed_accuracy), configurations with mean and spread, runs with their
//             attempts, epochs and steps, nodes and software. Accuracies are fractions in
//             [0, 1], times in seconds.
// - csv       one row per run. writeReport() also writes the per-epoch metrics beside it,
//             to epochCsvPath(path) ("report.csv" -> "report.epochs.csv").
//
// A tune (snapshot.tune, issue 18) is reported as a search, not as a scale-up: no speedup
// or efficiency anywhere. JSON drops the baseline's comparison and configurations and adds
// a "tune" object (metric, mode, scheduler, searcher, samples, seed, the search space,
// best_trial, epochs_spent, epochs_without_stopping, rung_epochs, every decision in the
// order it was made) and, per trial run, params, trial_state, final_metric and its
// decisions (TrialDecision::toJson(), the journal's own form). The csv is one row per
// trial (a column per hyperparameter, named as in the plan, and one per epoch a trial
// was judged at: "<metric>_at_epoch_<N>"); writeReport() writes the decisions beside it too,
// to decisionsCsvPath(path) ("report.csv" -> "report.decisions.csv"). HTML and PDF show
// the search space, the trials, the decisions and the tune's charts.
// - epoch-csv one row per (run, epoch) alone.
// - html      one file, no external resource: CSS inline, charts as inline SVG.
// - pdf       A4 landscape, the same content and charts as the HTML.
//
// Html and Pdf paint with QPainter (fonts, SVG, PDF): they need a QGuiApplication to exist;
// headless programs get one with QT_QPA_PLATFORM=offscreen. Without one they fail with an
// error saying so instead of crashing. Call from the thread that owns the application.
#pragma once

#include "core_status.h"
#include "study_model.h"

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <optional>

namespace scalelab::core {

enum class ReportFormat { Json, Csv, EpochCsv, Html, Pdf };

// "json", "csv", "epoch-csv" (or "epochs-csv"), "html", "pdf"; case-insensitive.
std::optional<ReportFormat> parseReportFormat(const QString &name);
// The format a file name asks for by its suffix (".json", ".csv", ".html"/".htm", ".pdf");
// ".epochs.csv" is EpochCsv.
std::optional<ReportFormat> reportFormatForPath(const QString &path);
QString reportFormatName(ReportFormat format);
QStringList reportFormatNames();
// Where writeReport(Csv) puts the per-epoch metrics: "dir/x.csv" -> "dir/x.epochs.csv".
QString epochCsvPath(const QString &runsCsvPath);
// Where writeReport(Csv) puts a tune's decisions: "dir/x.csv" -> "dir/x.decisions.csv".
QString decisionsCsvPath(const QString &runsCsvPath);

// The report's bytes, or why it could not be rendered (Html and Pdf without a
// QGuiApplication: FailedPrecondition).
Result<QByteArray> renderReport(const StudySnapshot &snapshot, ReportFormat format);
// The files written (two for Csv, three for a tune's), or an error naming the path and the
// OS error. Writes atomically (a temporary file renamed into place), so a failed write
// leaves any earlier report at `path` as it was.
Result<QStringList> writeReport(const StudySnapshot &snapshot, ReportFormat format, const QString &path);

// The individual renderers (renderReport dispatches to them).
QByteArray reportJson(const StudySnapshot &snapshot);
QByteArray reportRunsCsv(const StudySnapshot &snapshot);
QByteArray reportEpochsCsv(const StudySnapshot &snapshot);
// A tune's decisions, one row each, in the order they were made (empty but for its header
// for a study).
QByteArray reportDecisionsCsv(const StudySnapshot &snapshot);
Result<QByteArray> reportHtml(const StudySnapshot &snapshot);
Result<QByteArray> reportPdf(const StudySnapshot &snapshot);

} // namespace scalelab::core
