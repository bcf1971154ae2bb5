// Report formats, the machine-readable renderers (JSON, CSV) and writing to disk.
// The HTML and PDF renderers live in report_html.cpp and report_pdf.cpp.
#include "report.h"

#include "study_results.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include <cmath>

namespace scalelab::core {

namespace {

struct FormatName {
    ReportFormat format;
    const char *name;
};
constexpr FormatName kFormatNames[] = { { ReportFormat::Json, "json" }, { ReportFormat::Csv, "csv" },
    { ReportFormat::EpochCsv, "epoch-csv" }, { ReportFormat::Html, "html" }, { ReportFormat::Pdf, "pdf" } };

// ---- JSON ---------------------------------------------------------------------------------

// NaN (not measured) is null: JSON has no NaN.
QJsonValue number(double v)
{
    return std::isfinite(v) ? QJsonValue(v) : QJsonValue(QJsonValue::Null);
}

QJsonValue number(const std::optional<double> &v)
{
    return v ? number(*v) : QJsonValue(QJsonValue::Null);
}

QJsonObject statJson(const Stat &s)
{
    return QJsonObject { { QStringLiteral("count"), s.count }, { QStringLiteral("mean"), number(s.mean) },
        { QStringLiteral("stddev"), number(s.stddev) }, { QStringLiteral("min"), number(s.min) },
        { QStringLiteral("max"), number(s.max) } };
}

QJsonObject speedupJson(const Speedup &s)
{
    QJsonObject o { { QStringLiteral("speedup"), number(s.speedup) },
        { QStringLiteral("efficiency"), number(s.efficiency) } };
    if (!s.available())
        o.insert(QStringLiteral("unavailable_reason"), s.unavailableReason);
    return o;
}

QJsonObject configJson(const RunConfig &c)
{
    return QJsonObject { { QStringLiteral("key"), c.key() }, { QStringLiteral("baseline"), c.baseline },
        { QStringLiteral("workers"), c.workers }, { QStringLiteral("batch_size"), c.batchSize },
        { QStringLiteral("global_batch"), c.globalBatch() }, { QStringLiteral("epochs"), c.epochs },
        { QStringLiteral("gpus_per_worker"), c.gpusPerWorker },
        { QStringLiteral("threads_per_worker"), c.threadsPerWorker },
        { QStringLiteral("precision"), c.precision }, { QStringLiteral("lr_rule"), c.lrRule } };
}

QJsonObject runJson(const RunResult &run, const RunOutcome &o)
{
    QJsonArray attempts, epochs, steps;
    for (const AttemptRecord &a : run.attempts) {
        attempts.append(QJsonObject { { QStringLiteral("attempt"), a.attempt },
            { QStringLiteral("agents"), QJsonArray::fromStringList(a.agents) },
            { QStringLiteral("outcome"), a.outcome }, { QStringLiteral("reason"), a.reason },
            { QStringLiteral("resumed_from_epoch"), a.resumedFromEpoch },
            { QStringLiteral("checkpoint_transferred_epoch"), a.transferredEpoch },
            { QStringLiteral("checkpoint_transferred_from"), a.transferredFrom },
            { QStringLiteral("started_unix_ms"), a.startedUnixMs },
            { QStringLiteral("ended_unix_ms"), a.endedUnixMs } });
    }
    for (const EpochPoint &e : run.epochs) {
        epochs.append(QJsonObject { { QStringLiteral("epoch"), e.epoch },
            { QStringLiteral("train_loss"), number(e.trainLoss) },
            { QStringLiteral("train_accuracy"), number(e.trainAccuracy) },
            { QStringLiteral("test_loss"), number(e.testLoss) },
            { QStringLiteral("test_accuracy"), number(e.testAccuracy) },
            { QStringLiteral("elapsed_seconds"), number(e.elapsedSeconds) },
            { QStringLiteral("images_per_second"), number(e.imagesPerSecond) } });
    }
    for (const StepPoint &s : run.steps) {
        steps.append(QJsonObject { { QStringLiteral("step"), s.step }, { QStringLiteral("epoch"), s.epoch },
            { QStringLiteral("loss"), number(s.loss) },
            { QStringLiteral("elapsed_seconds"), number(s.elapsedSeconds) } });
    }
    return QJsonObject { { QStringLiteral("run_id"), run.runId },
        { QStringLiteral("config"), configJson(run.config) }, { QStringLiteral("repeat"), run.repeat },
        { QStringLiteral("state"), run.state }, { QStringLiteral("state_reason"), run.stateReason },
        { QStringLiteral("final_test_accuracy"), number(run.finalTestAccuracy) },
        { QStringLiteral("best_test_accuracy"), number(run.bestTestAccuracy) },
        { QStringLiteral("wall_seconds"), number(run.wallSeconds) },
        { QStringLiteral("images_per_second"), number(run.imagesPerSecond) },
        { QStringLiteral("time_to_target_seconds"), number(o.timeToTargetSeconds) },
        { QStringLiteral("speedup_by_wall_clock"), speedupJson(o.byWallClock) },
        { QStringLiteral("speedup_by_time_to_accuracy"), speedupJson(o.byTimeToAccuracy) },
        { QStringLiteral("attempts"), attempts }, { QStringLiteral("epochs"), epochs },
        { QStringLiteral("steps"), steps }, { QStringLiteral("recipe"), run.recipe },
        { QStringLiteral("worker_command"), QJsonArray::fromStringList(run.workerCommand) } };
}

// What each number means, written into every JSON report (the README says the same).
QJsonObject definitionsJson()
{
    return QJsonObject {
        { QStringLiteral("images_per_second"),
            QStringLiteral("training images per second of training time (evaluation and checkpoints excluded), "
                           "over every completed epoch of the run, across attempts: the harmonic mean of the "
                           "epochs' rates") },
        { QStringLiteral("wall_seconds"),
            QStringLiteral("from the start of training of the run's first attempt to the end of its last, "
                           "failures, their detection and restarts included") },
        { QStringLiteral("speedup"),
            QStringLiteral("the baseline's mean wall_seconds divided by the configuration's (or the run's); "
                           "only succeeded runs count") },
        { QStringLiteral("efficiency"), QStringLiteral("speedup divided by (workers / the baseline's workers)") },
        { QStringLiteral("time_to_target_seconds"),
            QStringLiteral("wall-clock from the start of training to the end of the first epoch whose test "
                           "accuracy reached target_accuracy") },
    };
}

// ---- CSV (RFC 4180) -----------------------------------------------------------------------

QByteArray csvField(const QString &value)
{
    QString v = value;
    const bool quote = v.contains(QLatin1Char(',')) || v.contains(QLatin1Char('"'))
        || v.contains(QLatin1Char('\n')) || v.contains(QLatin1Char('\r'));
    if (quote)
        v = QLatin1Char('"') + v.replace(QLatin1Char('"'), QStringLiteral("\"\"")) + QLatin1Char('"');
    return v.toUtf8();
}

QString csvNumber(double v)
{
    return std::isfinite(v) ? QString::number(v, 'g', 12) : QString();
}

QByteArray csvLine(const QStringList &fields)
{
    QByteArray line;
    for (int i = 0; i < fields.size(); ++i) {
        if (i > 0)
            line += ',';
        line += csvField(fields[i]);
    }
    return line + "\r\n";
}

QString boolText(bool b)
{
    return b ? QStringLiteral("true") : QStringLiteral("false");
}

bool hasSuffix(const QString &path, const char *suffix)
{
    return path.endsWith(QLatin1String(suffix), Qt::CaseInsensitive);
}

QString writeFile(const QString &path, const QByteArray &bytes)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        return QStringLiteral("cannot write report to %1: %2").arg(path, file.errorString());
    if (file.write(bytes) != bytes.size()) {
        const QString reason = file.errorString();
        file.cancelWriting();
        return QStringLiteral("cannot write report to %1: %2").arg(path, reason);
    }
    if (!file.commit())
        return QStringLiteral("cannot write report to %1: %2").arg(path, file.errorString());
    return {};
}

} // namespace

std::optional<ReportFormat> parseReportFormat(const QString &name)
{
    const QString n = name.trimmed().toLower();
    if (n == QLatin1String("epochs-csv"))
        return ReportFormat::EpochCsv;
    for (const FormatName &f : kFormatNames) {
        if (n == QLatin1String(f.name))
            return f.format;
    }
    return std::nullopt;
}

std::optional<ReportFormat> reportFormatForPath(const QString &path)
{
    if (hasSuffix(path, ".epochs.csv"))
        return ReportFormat::EpochCsv;
    if (hasSuffix(path, ".htm"))
        return ReportFormat::Html;
    return parseReportFormat(QFileInfo(path).suffix());
}

QString reportFormatName(ReportFormat format)
{
    for (const FormatName &f : kFormatNames) {
        if (f.format == format)
            return QLatin1String(f.name);
    }
    return {};
}

QStringList reportFormatNames()
{
    QStringList names;
    for (const FormatName &f : kFormatNames)
        names << QLatin1String(f.name);
    return names;
}

QString epochCsvPath(const QString &runsCsvPath)
{
    QString base = runsCsvPath;
    if (hasSuffix(base, ".csv"))
        base.chop(4);
    return base + QStringLiteral(".epochs.csv");
}

QByteArray reportJson(const StudySnapshot &snapshot)
{
    const StudyResults r = computeStudyResults(snapshot);

    QJsonArray comparisons;
    for (const SeedComparison &s : r.comparisons) {
        QJsonObject o { { QStringLiteral("config_key"), s.configKey },
            { QStringLiteral("workers"), s.workers },
            { QStringLiteral("baseline_seconds"), number(s.baselineSeconds) },
            { QStringLiteral("distributed_seconds"), number(s.distributedSeconds) },
            { QStringLiteral("speedup"), number(s.speedup) },
            { QStringLiteral("efficiency"), number(s.efficiency) },
            { QStringLiteral("baseline_accuracy"), number(s.baselineAccuracy) },
            { QStringLiteral("distributed_accuracy"), number(s.distributedAccuracy) } };
        if (!s.note.isEmpty())
            o.insert(QStringLiteral("note"), s.note);
        comparisons.append(o);
    }
    QJsonArray configs;
    for (const ConfigResult &c : r.configs) {
        configs.append(QJsonObject { { QStringLiteral("key"), c.key },
            { QStringLiteral("config"), configJson(c.config) },
            { QStringLiteral("run_ids"), QJsonArray::fromStringList(c.runIds) },
            { QStringLiteral("repeats"), c.repeats }, { QStringLiteral("succeeded"), c.succeeded },
            { QStringLiteral("failed"), c.failed }, { QStringLiteral("unfinished"), c.unfinished },
            { QStringLiteral("reached_target"), c.reachedTarget },
            { QStringLiteral("final_test_accuracy"), statJson(c.finalTestAccuracy) },
            { QStringLiteral("best_test_accuracy"), statJson(c.bestTestAccuracy) },
            { QStringLiteral("wall_seconds"), statJson(c.wallSeconds) },
            { QStringLiteral("images_per_second"), statJson(c.imagesPerSecond) },
            { QStringLiteral("time_to_target_seconds"), statJson(c.timeToTargetSeconds) },
            { QStringLiteral("speedup_by_wall_clock"), speedupJson(c.byWallClock) },
            { QStringLiteral("speedup_by_time_to_accuracy"), speedupJson(c.byTimeToAccuracy) } });
    }
    QJsonArray runs;
    for (int i = 0; i < snapshot.runs.size(); ++i)
        runs.append(runJson(snapshot.runs[i], r.runs[i]));
    QJsonArray nodes;
    for (const NodeInfo &n : snapshot.nodes) {
        nodes.append(QJsonObject { { QStringLiteral("agent"), n.agent },
            { QStringLiteral("hostname"), n.hostname }, { QStringLiteral("agent_version"), n.agentVersion },
            { QStringLiteral("cpu_cores"), n.cpuCores }, { QStringLiteral("memory_bytes"), n.memoryBytes },
            { QStringLiteral("gpus"), QJsonArray::fromStringList(n.gpus) },
            { QStringLiteral("cpu_model"), n.cpuModel }, { QStringLiteral("os"), n.os },
            { QStringLiteral("gpu_status"), n.gpuStatus } });
    }
    QJsonObject software;
    for (auto it = snapshot.software.cbegin(); it != snapshot.software.cend(); ++it)
        software.insert(it.key(), it.value());

    QJsonObject root { { QStringLiteral("format"), QStringLiteral("scalelab-study-report") },
        { QStringLiteral("format_version"), 1 }, { QStringLiteral("study_id"), snapshot.studyId },
        { QStringLiteral("name"), snapshot.name }, { QStringLiteral("state"), snapshot.state },
        { QStringLiteral("dataset"), snapshot.dataset }, { QStringLiteral("synthetic"), snapshot.synthetic },
        { QStringLiteral("target_accuracy"), number(snapshot.targetAccuracy) },
        { QStringLiteral("created_unix_ms"), snapshot.createdUnixMs },
        { QStringLiteral("finished_unix_ms"), snapshot.finishedUnixMs },
        { QStringLiteral("baseline_key"), r.baseline() ? QJsonValue(r.baseline()->key) : QJsonValue() },
        { QStringLiteral("seed_study_comparison"), comparisons },
        { QStringLiteral("configurations"), configs }, { QStringLiteral("runs"), runs },
        { QStringLiteral("nodes"), nodes }, { QStringLiteral("software"), software },
        // The plan as it was run: `scalelab-cli study rerun REPORT.json` starts it again.
        { QStringLiteral("plan"), QJsonDocument::fromJson(snapshot.planJson).object() },
        { QStringLiteral("definitions"), definitionsJson() } };
    if (!snapshot.learningRateNote.isEmpty()) {
        QJsonArray curve;
        for (const auto &[lr, loss] : snapshot.learningRateCurve)
            curve.append(QJsonArray { lr, loss });
        root.insert(QStringLiteral("learning_rate_search"),
            QJsonObject { { QStringLiteral("note"), snapshot.learningRateNote }, { QStringLiteral("curve"), curve } });
    }
    if (!r.baselineNote.isEmpty())
        root.insert(QStringLiteral("baseline_note"), r.baselineNote);
    if (!r.baselineWarning.isEmpty())
        root.insert(QStringLiteral("baseline_warning"), r.baselineWarning);
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

QByteArray reportRunsCsv(const StudySnapshot &snapshot)
{
    const StudyResults r = computeStudyResults(snapshot);
    QByteArray out = csvLine({ QStringLiteral("study_id"), QStringLiteral("synthetic"),
        QStringLiteral("run_id"), QStringLiteral("config_key"), QStringLiteral("baseline"),
        QStringLiteral("repeat"), QStringLiteral("state"), QStringLiteral("workers"),
        QStringLiteral("gpus_per_worker"), QStringLiteral("batch_size"), QStringLiteral("global_batch"),
        QStringLiteral("epochs"), QStringLiteral("precision"), QStringLiteral("lr_rule"),
        QStringLiteral("attempts"), QStringLiteral("final_test_accuracy"),
        QStringLiteral("best_test_accuracy"), QStringLiteral("wall_seconds"),
        QStringLiteral("target_accuracy"), QStringLiteral("time_to_target_seconds"),
        QStringLiteral("images_per_second"), QStringLiteral("speedup_wall_clock"),
        QStringLiteral("efficiency_wall_clock"), QStringLiteral("speedup_time_to_accuracy"),
        QStringLiteral("efficiency_time_to_accuracy"), QStringLiteral("state_reason") });
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const RunResult &run = snapshot.runs[i];
        const RunOutcome &o = r.runs[i];
        const RunConfig &c = run.config;
        out += csvLine({ snapshot.studyId, boolText(snapshot.synthetic), run.runId, c.key(),
            boolText(c.baseline), QString::number(run.repeat), run.state, QString::number(c.workers),
            csvNumber(c.gpusPerWorker), QString::number(c.batchSize), QString::number(c.globalBatch()),
            QString::number(c.epochs), c.precision, c.lrRule, QString::number(run.attempts.size()),
            csvNumber(run.finalTestAccuracy), csvNumber(run.bestTestAccuracy), csvNumber(run.wallSeconds),
            csvNumber(snapshot.targetAccuracy),
            o.timeToTargetSeconds ? csvNumber(*o.timeToTargetSeconds) : QString(),
            csvNumber(run.imagesPerSecond), csvNumber(o.byWallClock.speedup),
            csvNumber(o.byWallClock.efficiency), csvNumber(o.byTimeToAccuracy.speedup),
            csvNumber(o.byTimeToAccuracy.efficiency), run.stateReason });
    }
    return out;
}

QByteArray reportEpochsCsv(const StudySnapshot &snapshot)
{
    QByteArray out = csvLine({ QStringLiteral("study_id"), QStringLiteral("synthetic"),
        QStringLiteral("run_id"), QStringLiteral("config_key"), QStringLiteral("workers"),
        QStringLiteral("repeat"), QStringLiteral("epoch"), QStringLiteral("train_loss"),
        QStringLiteral("train_accuracy"), QStringLiteral("test_loss"), QStringLiteral("test_accuracy"),
        QStringLiteral("elapsed_seconds"), QStringLiteral("images_per_second") });
    for (const RunResult &run : snapshot.runs) {
        for (const EpochPoint &e : run.epochs) {
            out += csvLine({ snapshot.studyId, boolText(snapshot.synthetic), run.runId, run.config.key(),
                QString::number(run.config.workers), QString::number(run.repeat), QString::number(e.epoch),
                csvNumber(e.trainLoss), csvNumber(e.trainAccuracy), csvNumber(e.testLoss),
                csvNumber(e.testAccuracy), csvNumber(e.elapsedSeconds), csvNumber(e.imagesPerSecond) });
        }
    }
    return out;
}

RenderedReport renderReport(const StudySnapshot &snapshot, ReportFormat format)
{
    switch (format) {
    case ReportFormat::Json:
        return { reportJson(snapshot), {} };
    case ReportFormat::Csv:
        return { reportRunsCsv(snapshot), {} };
    case ReportFormat::EpochCsv:
        return { reportEpochsCsv(snapshot), {} };
    case ReportFormat::Html:
        return reportHtml(snapshot);
    case ReportFormat::Pdf:
        return reportPdf(snapshot);
    }
    return { {}, QStringLiteral("unknown report format") };
}

WrittenReport writeReport(const StudySnapshot &snapshot, ReportFormat format, const QString &path)
{
    WrittenReport written;
    const RenderedReport main = renderReport(snapshot, format);
    if (!main.ok()) {
        written.error = QStringLiteral("cannot render the %1 report for %2: %3")
                            .arg(reportFormatName(format), path, main.error);
        return written;
    }
    written.error = writeFile(path, main.bytes);
    if (!written.ok())
        return written;
    written.paths << path;
    if (format == ReportFormat::Csv) {
        const QString epochs = epochCsvPath(path);
        written.error = writeFile(epochs, reportEpochsCsv(snapshot));
        if (!written.ok())
            return written;
        written.paths << epochs;
    }
    return written;
}

} // namespace scalelab::core
