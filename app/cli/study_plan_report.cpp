// scalelab-cli study plan and scalelab-cli report: a plan file in, a study's report out;
// neither talks to an agent or drives a study.
#include "cli_common.h"
#include "study_cli.h"

#include "model_upload.h"
#include "plan_models.h"
#include "report.h"
#include "study_plan.h"
#include "tune_plan.h"

#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>

namespace scalelab::app {

using namespace scalelab::core;

int planCommand(const QStringList &arguments)
{
    QCommandLineParser parser;
    parser.addOption({ QStringLiteral("example"), QStringLiteral("Print an example plan.") });
    parser.addOption({ QStringLiteral("example-tune"),
        QStringLiteral("Print an example tune: 9 trials, ASHA early stopping, 9 epochs at most.") });
    parser.addOption({ QStringLiteral("dataset"), QStringLiteral("Data set of the example plan."),
        QStringLiteral("name"), QStringLiteral("synthetic") });
    parser.addOption({ QStringLiteral("check"), QStringLiteral("Validate a plan file and list its runs."),
        QStringLiteral("plan.json") });
    int code = Ok;
    if (!parse(parser, arguments, QStringLiteral("Write an example plan, or check one."), &code))
        return code;
    if (parser.isSet(QStringLiteral("check"))) {
        const auto plan = loadPlan(parser.value(QStringLiteral("check")));
        if (!plan)
            return badInput(
                QStringLiteral("%1:\n  %2")
                    .arg(parser.value(QStringLiteral("check")), plan.error().join(QLatin1String("\n  "))));
        const auto runs = expandPlan(*plan, QStringLiteral("ID"));
        out() << parser.value(QStringLiteral("check")) << ": valid, " << runs.size()
              << (isTune(*plan) ? " trials\n" : " runs\n");
        for (const auto &r : runs)
            if (r.trial)
                out() << "  " << r.runId << "  " << paramsText(r.params) << "  (" << r.config.workers
                      << " worker(s), " << r.config.epochs << " epochs at most)\n";
            else
                out() << "  " << r.runId << "  " << r.config.key() << "  repeat " << r.repeat + 1 << "\n";
        if (const QStringList specs = planAgentSpecs(*plan); !specs.isEmpty()) {
            out() << "agents: " << specs.join(QLatin1String(", "))
                  << " (files are read and names resolved when the study runs)\n";
        }
        // The modules it names by file: read, and checked by the worker as an agent would.
        const QString planDir = QFileInfo(parser.value(QStringLiteral("check"))).absolutePath();
        QStringList problems;
        for (const QString &value : planModelFiles(*plan)) {
            const QString path = QDir(planDir).absoluteFilePath(modelFilePath(value));
            const auto file = readModelFile(path);
            if (!file) {
                problems << file.error();
                continue;
            }
            const CheckedModel checked = checkModelWithWorker(path);
            if (!checked.problem.isEmpty())
                problems << QStringLiteral("%1: %2").arg(path, checked.problem);
            else
                out() << "model " << value << ": sha256 " << file->sha256.left(12) << "…, " << file->size
                      << " bytes, " << checked.summary << "\n";
        }
        if (!problems.isEmpty())
            return badInput(
                QStringLiteral("%1:\n  %2")
                    .arg(parser.value(QStringLiteral("check")), problems.join(QLatin1String("\n  "))));
        return Ok;
    }
    if (parser.isSet(QStringLiteral("example-tune"))) {
        out() << planToJson(exampleTunePlan(parser.value(QStringLiteral("dataset"))));
        return Ok;
    }
    out() << planToJson(examplePlan(parser.value(QStringLiteral("dataset"))));
    return Ok;
}

int reportCommand(QStringList arguments)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    parser.addOption({ QStringLiteral("format"),
        QStringLiteral("One of: %1 (default: from the output's extension, else json).")
            .arg(reportFormatNames().join(QLatin1String(", "))),
        QStringLiteral("format") });
    parser.addOption({ { QStringLiteral("o"), QStringLiteral("output") },
        QStringLiteral(
            "File to write (default: standard output for json and csv; STUDY.FORMAT for html and pdf)."),
        QStringLiteral("path") });
    parser.addPositionalArgument(QStringLiteral("id"),
        QStringLiteral("Study id (see `study list`), or the id of a run started with `scalelab-cli run`."));
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral(
                "Export a study's (or a run's) report: JSON, CSV (runs, plus per-epoch rows), HTML or PDF."),
            &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(QStringLiteral("give one study id: scalelab-cli report ID --format html"));
    const QString output = parser.value(QStringLiteral("output"));
    std::optional<ReportFormat> format;
    if (parser.isSet(QStringLiteral("format"))) {
        format = parseReportFormat(parser.value(QStringLiteral("format")));
        if (!format)
            return badInput(QStringLiteral("--format '%1' is not one of: %2")
                                .arg(parser.value(QStringLiteral("format")),
                                    reportFormatNames().join(QLatin1String(", "))));
    } else {
        format = output.isEmpty() ? std::optional(ReportFormat::Json) : reportFormatForPath(output);
        if (!format)
            return badInput(QStringLiteral("cannot tell the format from '%1'; add --format (%2)")
                                .arg(output, reportFormatNames().join(QLatin1String(", "))));
    }
    StudySnapshot snapshot;
    QString studyId;
    if (!openSnapshot(parser, &snapshot, &studyId))
        return BadInput;
    const bool binary = *format == ReportFormat::Html || *format == ReportFormat::Pdf;
    if (output.isEmpty() && !binary) {
        const Result<QByteArray> report = renderReport(snapshot, *format);
        if (!report)
            return badInput(report.error());
        QFile stdoutFile;
        stdoutFile.open(stdout, QIODevice::WriteOnly);
        stdoutFile.write(*report);
        return Ok;
    }
    const QString path
        = output.isEmpty() ? QStringLiteral("%1.%2").arg(studyId, reportFormatName(*format)) : output;
    const Result<QStringList> written = writeReport(snapshot, *format, path);
    if (!written) {
        err() << "scalelab-cli: " << written.error() << "\n";
        return BadInput;
    }
    for (const QString &p : *written)
        out() << "wrote " << p
              << (snapshot.synthetic ? QStringLiteral(" (SYNTHETIC data, flagged in the report)") : QString())
              << "\n";
    return Ok;
}

} // namespace scalelab::app
