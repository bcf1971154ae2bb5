// Report formats, the machine-readable renderers (JSON, CSV) and writing to disk.
// The HTML and PDF renderers live in report_html.cpp and report_pdf.cpp.
#include "report.h"

#include "goodput_model.h"

#include "scaling_model.h"

#include "report_tune.h"
#include "study_results.h"
#include "tune_plan.h"

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
        { QStringLiteral("precision"), c.precision }, { QStringLiteral("lr_rule"), c.lrRule },
        { QStringLiteral("model"), c.model }, { QStringLiteral("accumulation_steps"), c.accumulationSteps },
        { QStringLiteral("min_workers"), c.elastic() ? c.minWorkers : c.workers } };
}

// A run's gradient noise scale as of its last epoch that measured one (study_model.h's
// GradientNoise), with what a reader needs to weigh it.
QJsonObject noiseJson(const RunResult &run)
{
    const GradientNoise &n = run.noise;
    if (!n.measured())
        return { { QStringLiteral("measured"), false } };
    return { { QStringLiteral("measured"), true },
        { QStringLiteral("b_simple"), number(n.known() ? n.bSimple : kNotMeasured) },
        { QStringLiteral("grad_squared"), number(n.gradSquared) },
        { QStringLiteral("trace_sigma"), number(n.traceSigma) },
        { QStringLiteral("samples"), double(n.samples) },
        { QStringLiteral("batches_per_step"), n.batchesPerStep },
        { QStringLiteral("estimator"),
            n.differenced ? QStringLiteral("differenced") : QStringLiteral("two-batch") },
        { QStringLiteral("global_batch_over_b_simple"),
            number(n.known() ? run.config.globalBatch() / n.bSimple : kNotMeasured) } };
}

QJsonObject runJson(const StudySnapshot &snapshot, const RunResult &run, const RunOutcome &o)
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
            { QStringLiteral("ended_unix_ms"), a.endedUnixMs }, { QStringLiteral("world_size"), a.worldSize },
            { QStringLiteral("resize"), a.resize } });
    }
    for (const EpochPoint &e : run.epochs) {
        epochs.append(QJsonObject { { QStringLiteral("epoch"), e.epoch },
            { QStringLiteral("train_loss"), number(e.trainLoss) },
            { QStringLiteral("train_accuracy"), number(e.trainAccuracy) },
            { QStringLiteral("test_loss"), number(e.testLoss) },
            { QStringLiteral("test_accuracy"), number(e.testAccuracy) },
            { QStringLiteral("elapsed_seconds"), number(e.elapsedSeconds) },
            { QStringLiteral("images_per_second"), number(e.imagesPerSecond) },
            { QStringLiteral("gradient_noise_scale"),
                number(e.noise.known() ? e.noise.bSimple : kNotMeasured) } });
    }
    for (const StepPoint &s : run.steps) {
        steps.append(QJsonObject { { QStringLiteral("step"), s.step }, { QStringLiteral("epoch"), s.epoch },
            { QStringLiteral("loss"), number(s.loss) },
            { QStringLiteral("elapsed_seconds"), number(s.elapsedSeconds) } });
    }
    QJsonObject json { { QStringLiteral("run_id"), run.runId },
        { QStringLiteral("config"), configJson(run.config) }, { QStringLiteral("repeat"), run.repeat },
        { QStringLiteral("state"), run.state }, { QStringLiteral("state_reason"), run.stateReason },
        { QStringLiteral("final_test_accuracy"), number(run.finalTestAccuracy) },
        { QStringLiteral("best_test_accuracy"), number(run.bestTestAccuracy) },
        { QStringLiteral("wall_seconds"), number(run.wallSeconds) },
        { QStringLiteral("images_per_second"), number(run.imagesPerSecond) },
        { QStringLiteral("time_to_target_seconds"), number(o.timeToTargetSeconds) },
        { QStringLiteral("speedup_by_wall_clock"), speedupJson(o.byWallClock) },
        { QStringLiteral("speedup_by_time_to_accuracy"), speedupJson(o.byTimeToAccuracy) },
        { QStringLiteral("speedup_by_throughput"), speedupJson(o.byThroughput) },
        { QStringLiteral("same_work_as_baseline"), o.sameWork },
        { QStringLiteral("gradient_noise_scale"), noiseJson(run) }, { QStringLiteral("attempts"), attempts },
        { QStringLiteral("epochs"), epochs }, { QStringLiteral("steps"), steps },
        { QStringLiteral("recipe"), run.recipe },
        { QStringLiteral("worker_command"), QJsonArray::fromStringList(run.workerCommand) } };
    if (run.anatomy.measured())
        json.insert(QStringLiteral("anatomy"), anatomyJson(run.anatomy));
    if (run.network.worldSize > 1)
        json.insert(QStringLiteral("network_probe"), networkJson(run.network));
    if (snapshot.tune) {
        // A tune has no baseline: no speedup to report.
        json.remove(QStringLiteral("speedup_by_wall_clock"));
        json.remove(QStringLiteral("speedup_by_time_to_accuracy"));
        json.remove(QStringLiteral("speedup_by_throughput"));
        json.remove(QStringLiteral("same_work_as_baseline"));
    }
    if (run.trial) {
        QJsonArray decisions;
        for (const TrialDecision &d : run.decisions)
            decisions.append(d.toJson());
        json.insert(QStringLiteral("trial"), true);
        json.insert(QStringLiteral("params"), run.params);
        json.insert(QStringLiteral("trial_state"), trialStatus(run));
        json.insert(QStringLiteral("trial_target"), run.trialTarget);
        json.insert(QStringLiteral("epochs_trained"), int(run.epochs.size()));
        json.insert(QStringLiteral("final_metric"),
            number(run.epochs.isEmpty() ? kNotMeasured : trialMetric(snapshot, run.epochs.last())));
        json.insert(QStringLiteral("decisions"), decisions);
    }
    return json;
}

// A tune's search, scheduler, best trial and budget; its decisions in the order they were
// made (each is also under its run).
QJsonObject tuneJson(const StudySnapshot &snapshot)
{
    const TuneReport t = tuneReport(snapshot);
    QJsonArray space;
    for (const TuneDimension &d : t.space) {
        QJsonObject o { { QStringLiteral("name"), d.name }, { QStringLiteral("label"), d.label },
            { QStringLiteral("kind"), d.kind }, { QStringLiteral("log_scale"), d.logScale } };
        if (d.choice()) {
            o.insert(QStringLiteral("values"), d.values);
        } else {
            o.insert(QStringLiteral("low"), number(d.low));
            o.insert(QStringLiteral("high"), number(d.high));
            if (std::isfinite(d.q))
                o.insert(QStringLiteral("q"), d.q);
        }
        space.append(o);
    }
    QJsonValue best;
    if (t.best >= 0) {
        const RunResult &b = snapshot.runs[t.best];
        best = QJsonObject { { QStringLiteral("run_id"), b.runId }, { QStringLiteral("params"), b.params },
            { QStringLiteral("value"), number(t.bestValue) }, { QStringLiteral("epoch"), t.bestEpoch },
            { QStringLiteral("trial_state"), trialStatus(b) } };
    }
    QJsonArray rungs;
    for (const int e : t.rungEpochs)
        rungs.append(e);
    QJsonArray decisions;
    for (const TuneDecisionRef &ref : t.decisions)
        decisions.append(snapshot.runs[ref.run].decisions[ref.index].toJson());
    QJsonObject o { { QStringLiteral("metric"), t.metric },
        { QStringLiteral("mode"), t.maximize ? QStringLiteral("max") : QStringLiteral("min") },
        { QStringLiteral("scheduler"), t.scheduler }, { QStringLiteral("space"), space },
        { QStringLiteral("trials"), t.trials }, { QStringLiteral("best_trial"), best },
        { QStringLiteral("epochs_spent"), t.epochsSpent },
        { QStringLiteral("epochs_without_stopping"), t.epochsWithoutStopping },
        { QStringLiteral("rung_epochs"), rungs }, { QStringLiteral("decisions"), decisions } };
    if (t.planRead) {
        o.insert(QStringLiteral("searcher"), t.searcher);
        o.insert(QStringLiteral("samples"), t.samples);
        // JSON numbers are doubles: a seed past 2^53 is written as a string, as protobuf does.
        o.insert(QStringLiteral("seed"),
            t.seed <= (quint64(1) << 53) ? QJsonValue(double(t.seed)) : QJsonValue(QString::number(t.seed)));
        o.insert(QStringLiteral("trial_epochs"), t.trialEpochs);
    }
    return o;
}

// What each number means, written into every JSON report (docs/results.md, "One definition per number", says
// the same).
QJsonObject definitionsJson()
{
    return QJsonObject {
        { QStringLiteral("images_per_second"),
            QStringLiteral(
                "training images per second of training time (evaluation and checkpoints excluded), "
                "over every completed epoch of the run, across attempts: the harmonic mean of the "
                "epochs' rates") },
        { QStringLiteral("wall_seconds"),
            QStringLiteral("from the start of training of the run's first attempt to the end of its last, "
                           "failures, their detection and restarts included") },
        { QStringLiteral("speedup"),
            QStringLiteral(
                "the baseline's mean wall_seconds divided by the configuration's (or the run's); "
                "only succeeded runs count, and only runs that train the baseline's epochs (the same "
                "work) have one") },
        { QStringLiteral("speedup_by_throughput"),
            QStringLiteral(
                "the configuration's (or the run's) images_per_second divided by the baseline's mean; "
                "its efficiency divides by (workers / the baseline's workers). What compares runs "
                "that do different work (same_work_as_baseline false)") },
        { QStringLiteral("efficiency"),
            QStringLiteral("speedup divided by (workers / the baseline's workers)") },
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

Status writeFile(const QString &path, const QByteArray &bytes)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        return Status::failure(QStringLiteral("cannot write report to %1: %2").arg(path, file.errorString()));
    if (file.write(bytes) != bytes.size()) {
        const QString reason = file.errorString();
        file.cancelWriting();
        return Status::failure(QStringLiteral("cannot write report to %1: %2").arg(path, reason));
    }
    if (!file.commit())
        return Status::failure(QStringLiteral("cannot write report to %1: %2").arg(path, file.errorString()));
    return Status::success();
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

QString decisionsCsvPath(const QString &runsCsvPath)
{
    QString base = runsCsvPath;
    if (hasSuffix(base, ".csv"))
        base.chop(4);
    return base + QStringLiteral(".decisions.csv");
}

namespace {

// The seed-study comparison: each distributed configuration beside its baseline.
QJsonArray comparisonsJson(const StudyResults &r)
{
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
    return comparisons;
}

QJsonArray configurationsJson(const StudyResults &r)
{
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
            { QStringLiteral("speedup_by_time_to_accuracy"), speedupJson(c.byTimeToAccuracy) },
            { QStringLiteral("speedup_by_throughput"), speedupJson(c.byThroughput) },
            { QStringLiteral("same_work_as_baseline"), c.sameWork },
            { QStringLiteral("baseline_key"),
                r.baselineFor(c.config) ? QJsonValue(r.baselineFor(c.config)->key) : QJsonValue() } });
    }
    return configs;
}

QJsonArray nodesJson(const StudySnapshot &snapshot)
{
    QJsonArray nodes;
    for (const NodeInfo &n : snapshot.nodes) {
        nodes.append(QJsonObject { { QStringLiteral("agent"), n.agent },
            { QStringLiteral("hostname"), n.hostname }, { QStringLiteral("agent_version"), n.agentVersion },
            { QStringLiteral("cpu_cores"), n.cpuCores }, { QStringLiteral("memory_bytes"), n.memoryBytes },
            { QStringLiteral("gpus"), QJsonArray::fromStringList(n.gpus) },
            { QStringLiteral("cpu_model"), n.cpuModel }, { QStringLiteral("os"), n.os },
            { QStringLiteral("gpu_status"), n.gpuStatus } });
    }
    return nodes;
}

// Why it scales and what more workers would give: per model, the fit on the study's own
// runs, each multi-worker run predicted without itself, and predictions out to 512.
QJsonArray scalingSectionJson(const StudySnapshot &snapshot)
{
    QJsonArray scaling;
    for (const StudyScaling &s : studyScaling(snapshot)) {
        QJsonObject fit
            = scalingJson(s, predictWithBand(s.runs, defaultPredictionWorkers(), s.batchPerWorker));
        // Time to the study's target at the same worker counts (goodput_model.h).
        if (snapshot.targetAccuracy > 0 && s.fit.valid) {
            const StudyGoodput g
                = studyGoodput(snapshot, s, snapshot.targetAccuracy, defaultPredictionWorkers());
            fit.insert(QStringLiteral("timeToTarget"), goodputJson(g.basis, g.points));
        }
        scaling.append(fit);
    }
    return scaling;
}

// A tune compares trials with each other, not with a baseline: its own section and
// definitions instead of the baseline's.
void addTuneSections(QJsonObject &root, const StudySnapshot &snapshot)
{
    root.remove(QStringLiteral("baseline_key"));
    root.remove(QStringLiteral("seed_study_comparison"));
    root.remove(QStringLiteral("configurations"));
    root.insert(QStringLiteral("tune"), tuneJson(snapshot));
    QJsonObject definitions = root.value(QStringLiteral("definitions")).toObject();
    definitions.remove(QStringLiteral("speedup"));
    definitions.remove(QStringLiteral("efficiency"));
    definitions.insert(QStringLiteral("final_metric"),
        QStringLiteral("the tune's metric at the trial's last completed epoch"));
    definitions.insert(QStringLiteral("best_trial"),
        QStringLiteral("the trial whose last completed epoch has the best metric (as Ray Tune's "
                       "get_best_result with scope \"last\")"));
    definitions.insert(QStringLiteral("epochs_spent"),
        QStringLiteral("epochs trained by all trials together; epochs_without_stopping: what the same trials "
                       "would have trained without early stopping"));
    root.insert(QStringLiteral("definitions"), definitions);
}

} // namespace

QByteArray reportJson(const StudySnapshot &snapshot)
{
    const StudyResults r = computeStudyResults(snapshot);
    QJsonArray runs;
    for (int i = 0; i < snapshot.runs.size(); ++i)
        runs.append(runJson(snapshot, snapshot.runs[i], r.runs[i]));
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
        { QStringLiteral("seed_study_comparison"), comparisonsJson(r) },
        { QStringLiteral("configurations"), configurationsJson(r) }, { QStringLiteral("runs"), runs },
        { QStringLiteral("nodes"), nodesJson(snapshot) }, { QStringLiteral("software"), software },
        // The plan as it was run: `scalelab-cli study rerun REPORT.json` starts it again.
        { QStringLiteral("plan"), QJsonDocument::fromJson(snapshot.planJson).object() },
        { QStringLiteral("definitions"), definitionsJson() } };
    if (!snapshot.tune)
        if (const QJsonArray scaling = scalingSectionJson(snapshot); !scaling.isEmpty())
            root.insert(QStringLiteral("scaling"), scaling);
    if (!snapshot.networkProbes.isEmpty() || !snapshot.networkNote.isEmpty())
        root.insert(QStringLiteral("network_survey"),
            QJsonObject { { QStringLiteral("probes"), snapshot.networkProbes },
                { QStringLiteral("note"), snapshot.networkNote },
                { QStringLiteral("definition"),
                    QStringLiteral(
                        "probed once at the study's start: c10d all-reduces of 4 KB to 64 MB between "
                        "the ranks dealt over the hosts (2, 4 ... N) and 2 on one host; latency and "
                        "bandwidth of a "
                        "ring all-reduce, t = 2(p-1)*latency + 2(p-1)/p * bytes/bandwidth, fitted to "
                        "each size's median") } });
    if (!snapshot.learningRateNote.isEmpty()) {
        QJsonArray curve;
        for (const auto &[lr, loss] : snapshot.learningRateCurve)
            curve.append(QJsonArray { lr, loss });
        root.insert(QStringLiteral("learning_rate_search"),
            QJsonObject {
                { QStringLiteral("note"), snapshot.learningRateNote }, { QStringLiteral("curve"), curve } });
    }
    if (snapshot.tune) {
        addTuneSections(root, snapshot);
        return QJsonDocument(root).toJson(QJsonDocument::Indented);
    }
    if (!r.baselineNote.isEmpty())
        root.insert(QStringLiteral("baseline_note"), r.baselineNote);
    if (!r.baselineWarning.isEmpty())
        root.insert(QStringLiteral("baseline_warning"), r.baselineWarning);
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

namespace {

// A tune's runs CSV: one row per trial, a column per hyperparameter and per judged epoch.
QByteArray tuneTrialsCsv(const StudySnapshot &snapshot)
{
    const TuneReport t = tuneReport(snapshot);
    const QStringList params = tuneParamNames(snapshot, t);
    QStringList header { QStringLiteral("study_id"), QStringLiteral("synthetic"), QStringLiteral("run_id"),
        QStringLiteral("best"), QStringLiteral("state"), QStringLiteral("trial_state") };
    header << params;
    header << QStringLiteral("epochs_trained") << QStringLiteral("final_") + t.metric;
    for (const int e : t.judgedEpochs)
        header << QStringLiteral("%1_at_epoch_%2").arg(t.metric).arg(e);
    header << QStringLiteral("cutoff_missed") << QStringLiteral("workers") << QStringLiteral("attempts")
           << QStringLiteral("wall_seconds") << QStringLiteral("images_per_second")
           << QStringLiteral("reason");
    QByteArray out = csvLine(header);
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const RunResult &run = snapshot.runs[i];
        QStringList row { snapshot.studyId, boolText(snapshot.synthetic), run.runId, boolText(i == t.best),
            run.state, run.trial ? trialStatus(run) : QString() };
        for (const QString &name : params) {
            const QJsonValue v = run.params.value(name);
            row << (v.isString() ? v.toString() : v.isDouble() ? csvNumber(v.toDouble()) : QString());
        }
        row << QString::number(run.epochs.size()) << csvNumber(t.finalMetric.value(i, kNotMeasured));
        for (const int e : t.judgedEpochs)
            row << csvNumber(judgedValue(run, e));
        const TrialDecision *last = run.decisions.isEmpty() ? nullptr : &run.decisions.last();
        const bool stopped = last && last->action == QLatin1String("stop");
        row << (stopped && last->cutoff ? csvNumber(*last->cutoff) : QString())
            << QString::number(run.config.workers) << QString::number(run.attempts.size())
            << csvNumber(run.wallSeconds) << csvNumber(run.imagesPerSecond)
            << (stopped ? last->reason : run.stateReason);
        out += csvLine(row);
    }
    return out;
}

} // namespace

QByteArray reportDecisionsCsv(const StudySnapshot &snapshot)
{
    QByteArray out = csvLine({ QStringLiteral("study_id"), QStringLiteral("synthetic"),
        QStringLiteral("order"), QStringLiteral("run_id"), QStringLiteral("action"), QStringLiteral("epoch"),
        QStringLiteral("rung_index"), QStringLiteral("value"), QStringLiteral("cutoff"),
        QStringLiteral("seen"), QStringLiteral("next_target"), QStringLiteral("reason") });
    const TuneReport t = tuneReport(snapshot);
    for (int i = 0; i < t.decisions.size(); ++i) {
        const TrialDecision &d = snapshot.runs[t.decisions[i].run].decisions[t.decisions[i].index];
        QStringList seen;
        for (const double v : d.seen)
            seen << (std::isfinite(v) ? csvNumber(v) : QStringLiteral("nan"));
        out += csvLine({ snapshot.studyId, boolText(snapshot.synthetic), QString::number(i + 1),
            snapshot.runs[t.decisions[i].run].runId, d.action, QString::number(d.epoch),
            d.rung >= 0 ? QString::number(d.rung) : QString(), csvNumber(d.value),
            d.cutoff ? csvNumber(*d.cutoff) : QString(), seen.join(QLatin1Char(' ')),
            d.nextTarget > 0 ? QString::number(d.nextTarget) : QString(), d.reason });
    }
    return out;
}

QByteArray reportRunsCsv(const StudySnapshot &snapshot)
{
    if (snapshot.tune)
        return tuneTrialsCsv(snapshot);
    const StudyResults r = computeStudyResults(snapshot);
    QByteArray out = csvLine({ QStringLiteral("study_id"), QStringLiteral("synthetic"),
        QStringLiteral("run_id"), QStringLiteral("config_key"), QStringLiteral("baseline"),
        QStringLiteral("repeat"), QStringLiteral("state"), QStringLiteral("workers"),
        QStringLiteral("gpus_per_worker"), QStringLiteral("batch_size"), QStringLiteral("global_batch"),
        QStringLiteral("epochs"), QStringLiteral("precision"), QStringLiteral("lr_rule"),
        QStringLiteral("model"), QStringLiteral("attempts"), QStringLiteral("final_test_accuracy"),
        QStringLiteral("best_test_accuracy"), QStringLiteral("wall_seconds"),
        QStringLiteral("target_accuracy"), QStringLiteral("time_to_target_seconds"),
        QStringLiteral("images_per_second"), QStringLiteral("speedup_wall_clock"),
        QStringLiteral("efficiency_wall_clock"), QStringLiteral("speedup_time_to_accuracy"),
        QStringLiteral("efficiency_time_to_accuracy"), QStringLiteral("speedup_throughput"),
        QStringLiteral("efficiency_throughput"), QStringLiteral("gradient_noise_scale"),
        QStringLiteral("noise_estimator"), QStringLiteral("state_reason") });
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const RunResult &run = snapshot.runs[i];
        const RunOutcome &o = r.runs[i];
        const RunConfig &c = run.config;
        out += csvLine({ snapshot.studyId, boolText(snapshot.synthetic), run.runId, c.key(),
            boolText(c.baseline), QString::number(run.repeat), run.state, QString::number(c.workers),
            csvNumber(c.gpusPerWorker), QString::number(c.batchSize), QString::number(c.globalBatch()),
            QString::number(c.epochs), c.precision, c.lrRule, c.model, QString::number(run.attempts.size()),
            csvNumber(run.finalTestAccuracy), csvNumber(run.bestTestAccuracy), csvNumber(run.wallSeconds),
            csvNumber(snapshot.targetAccuracy),
            o.timeToTargetSeconds ? csvNumber(*o.timeToTargetSeconds) : QString(),
            csvNumber(run.imagesPerSecond), csvNumber(o.byWallClock.speedup),
            csvNumber(o.byWallClock.efficiency), csvNumber(o.byTimeToAccuracy.speedup),
            csvNumber(o.byTimeToAccuracy.efficiency), csvNumber(o.byThroughput.speedup),
            csvNumber(o.byThroughput.efficiency),
            csvNumber(run.noise.known() ? run.noise.bSimple : kNotMeasured),
            run.noise.measured()
                ? (run.noise.differenced ? QStringLiteral("differenced") : QStringLiteral("two-batch"))
                : QString(),
            run.stateReason });
    }
    return out;
}

QByteArray reportEpochsCsv(const StudySnapshot &snapshot)
{
    QByteArray out
        = csvLine({ QStringLiteral("study_id"), QStringLiteral("synthetic"), QStringLiteral("run_id"),
            QStringLiteral("config_key"), QStringLiteral("workers"), QStringLiteral("repeat"),
            QStringLiteral("epoch"), QStringLiteral("train_loss"), QStringLiteral("train_accuracy"),
            QStringLiteral("test_loss"), QStringLiteral("test_accuracy"), QStringLiteral("elapsed_seconds"),
            QStringLiteral("images_per_second"), QStringLiteral("gradient_noise_scale") });
    for (const RunResult &run : snapshot.runs) {
        for (const EpochPoint &e : run.epochs) {
            out += csvLine({ snapshot.studyId, boolText(snapshot.synthetic), run.runId, run.config.key(),
                QString::number(run.config.workers), QString::number(run.repeat), QString::number(e.epoch),
                csvNumber(e.trainLoss), csvNumber(e.trainAccuracy), csvNumber(e.testLoss),
                csvNumber(e.testAccuracy), csvNumber(e.elapsedSeconds), csvNumber(e.imagesPerSecond),
                csvNumber(e.noise.known() ? e.noise.bSimple : kNotMeasured) });
        }
    }
    return out;
}

Result<QByteArray> renderReport(const StudySnapshot &snapshot, ReportFormat format)
{
    switch (format) {
    case ReportFormat::Json:
        return reportJson(snapshot);
    case ReportFormat::Csv:
        return reportRunsCsv(snapshot);
    case ReportFormat::EpochCsv:
        return reportEpochsCsv(snapshot);
    case ReportFormat::Html:
        return reportHtml(snapshot);
    case ReportFormat::Pdf:
        return reportPdf(snapshot);
    }
    return Status::failure(Status::Code::InvalidArgument, QStringLiteral("unknown report format"));
}

Result<QStringList> writeReport(const StudySnapshot &snapshot, ReportFormat format, const QString &path)
{
    const Result<QByteArray> main = renderReport(snapshot, format);
    if (!main.ok()) {
        return Status::failure(main.code(),
            QStringLiteral("cannot render the %1 report for %2: %3")
                .arg(reportFormatName(format), path, main.error()));
    }
    if (Status s = writeFile(path, *main); !s)
        return s;
    QStringList paths { path };
    if (format == ReportFormat::Csv) {
        const QString epochs = epochCsvPath(path);
        if (Status s = writeFile(epochs, reportEpochsCsv(snapshot)); !s)
            return s;
        paths << epochs;
        if (snapshot.tune) {
            const QString decisions = decisionsCsvPath(path);
            if (Status s = writeFile(decisions, reportDecisionsCsv(snapshot)); !s)
                return s;
            paths << decisions;
        }
    }
    return paths;
}

} // namespace scalelab::core
