#include "report_content.h"
#include "report_tables.h"

#include "goodput_model.h"
#include "report_scaling.h"

#include "plan_models.h"
#include "report_tune.h"
#include "study_plan.h"
#include "tune_plan.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QGuiApplication>
#include <QJsonArray>
#include <QTimeZone>

#include <cmath>
#include <functional>

namespace scalelab::core {

QString formatNumber(double value, int decimals)
{
    return std::isfinite(value) ? QString::number(value, 'f', decimals) : kDash;
}

QString formatPercent(double fraction, int decimals)
{
    return std::isfinite(fraction) ? QString::number(fraction * 100, 'f', decimals) + QLatin1Char('%')
                                   : kDash;
}

QString formatSeconds(double seconds)
{
    return formatNumber(seconds, 1);
}

QString formatUnixMs(qint64 ms)
{
    if (ms <= 0)
        return kDash;
    return QDateTime::fromMSecsSinceEpoch(ms, QTimeZone::utc())
        .toString(QStringLiteral("yyyy-MM-dd HH:mm:ss 'UTC'"));
}

Status checkPainting()
{
    if (qobject_cast<QGuiApplication *>(QCoreApplication::instance()))
        return Status::success();
    return Status::failure(Status::Code::FailedPrecondition,
        QStringLiteral("charts are painted with QPainter, which needs a QGuiApplication "
                       "(a headless program can create one with QT_QPA_PLATFORM=offscreen)"));
}

QString formatSpeedup(double s)
{
    return std::isfinite(s) ? QString::number(s, 'f', 2) + QStringLiteral("×") : kDash;
}

namespace {

// "mean ± sd" with "min–max" on a second line when there are several values.
QString statCell(const Stat &s, const std::function<QString(double)> &format)
{
    if (s.count == 0)
        return kDash;
    if (s.count == 1)
        return format(s.mean);
    return QStringLiteral("%1 ± %2\n%3–%4")
        .arg(format(s.mean), format(s.stddev), format(s.min), format(s.max));
}

QString gpusText(const RunConfig &c)
{
    if (c.gpusPerWorker <= 0)
        return QStringLiteral("CPU");
    return QStringLiteral("%1\n%2 per worker").arg(c.workers * c.gpusPerWorker).arg(c.gpusPerWorker);
}

QString batchText(const RunConfig &c)
{
    const QString accumulated
        = c.accumulationSteps > 1 ? QStringLiteral("\n×%1 accumulated").arg(c.accumulationSteps) : QString();
    return QStringLiteral("%1 / %2").arg(c.batchSize).arg(c.globalBatch()) + accumulated;
}

// The workers of a run: the planned count, an elastic run's range and the sizes it ran at.
QString workersText(const RunResult &run)
{
    const RunConfig &c = run.config;
    if (!c.elastic())
        return QString::number(c.workers);
    const QString sizes = elasticSizesText(run);
    return QStringLiteral("%1–%2 elastic").arg(c.minWorkers).arg(c.workers)
        + (sizes.isEmpty() ? QString() : QStringLiteral("\nran ") + sizes);
}

QString runsText(const ConfigResult &c)
{
    return QStringLiteral("%1 / %2").arg(c.succeeded).arg(c.repeats);
}

ReportTable comparisonTable(const StudyResults &r)
{
    ReportTable t;
    t.title = QStringLiteral("Scale-up against the baseline");
    t.caption = QStringLiteral(
        "Means over succeeded repeats. Speedup = baseline mean ÷ configuration mean; efficiency = speedup ÷ "
        "(workers ÷ baseline workers). Accuracy is the final test accuracy.");
    const QString target = formatPercent(r.targetAccuracy);
    t.headers = QStringList { QStringLiteral("Configuration"), QStringLiteral("Workers"),
        QStringLiteral("Baseline time (s)"), QStringLiteral("Distributed time (s)"),
        QStringLiteral("Speedup"), QStringLiteral("Efficiency"), QStringLiteral("Speedup to %1").arg(target),
        QStringLiteral("Efficiency to %1").arg(target), QStringLiteral("Baseline accuracy"),
        QStringLiteral("Distributed accuracy"), QStringLiteral("Note") };
    t.numeric = { false, true, true, true, true, true, true, true, true, true, false };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], QStringLiteral("Baseline\ntime (s)"),
        QStringLiteral("Distributed\ntime (s)"), t.headers[4], t.headers[5],
        QStringLiteral("Speedup\nto %1").arg(target), QStringLiteral("Efficiency\nto %1").arg(target),
        QStringLiteral("Baseline\naccuracy"), QStringLiteral("Distributed\naccuracy"), t.headers[10] };
    for (const SeedComparison &s : r.comparisons) {
        const ConfigResult *c = r.config(s.configKey);
        QStringList notes;
        if (!s.note.isEmpty())
            notes << QStringLiteral("wall-clock: ") + s.note;
        if (!c->byTimeToAccuracy.available())
            notes << QStringLiteral("time to target: ") + c->byTimeToAccuracy.unavailableReason;
        t.rows.append({ configLabel(c->config, r.configs), QString::number(s.workers),
            formatSeconds(s.baselineSeconds), formatSeconds(s.distributedSeconds), formatSpeedup(s.speedup),
            formatPercent(s.efficiency), formatSpeedup(c->byTimeToAccuracy.speedup),
            formatPercent(c->byTimeToAccuracy.efficiency), formatPercent(s.baselineAccuracy, 2),
            formatPercent(s.distributedAccuracy, 2), notes.join(QStringLiteral("; ")) });
        t.mutedRows.append(c->succeeded == 0);
    }
    t.emptyText = QStringLiteral("The study has no distributed configuration.");
    return t;
}

ReportTable configTable(const StudyResults &r)
{
    ReportTable t;
    t.title = QStringLiteral("Configurations");
    t.caption = QStringLiteral("Repeats of one configuration grouped: mean ± sample standard deviation, "
                               "min–max below. Only succeeded "
                               "runs enter the statistics; time to target counts the runs that reached it.");
    t.headers = QStringList { QStringLiteral("Configuration"), QStringLiteral("Key"), QStringLiteral("GPUs"),
        QStringLiteral("Batch (worker / global)"), QStringLiteral("Epochs"),
        QStringLiteral("Runs (ok / all)"), QStringLiteral("Final accuracy"), QStringLiteral("Best accuracy"),
        QStringLiteral("Wall-clock (s)"), QStringLiteral("Images / s"), QStringLiteral("Time to target (s)"),
        QStringLiteral("Reached target") };
    t.numeric = { false, false, true, true, true, true, true, true, true, true, true, true };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], t.headers[2],
        QStringLiteral("Batch\nworker/global"), t.headers[4], QStringLiteral("Runs\nok / all"),
        QStringLiteral("Final\naccuracy"), QStringLiteral("Best\naccuracy"),
        QStringLiteral("Wall-clock\n(s)"), QStringLiteral("Images\n/ s"),
        QStringLiteral("Time to\ntarget (s)"), QStringLiteral("Reached\ntarget") };
    const auto pct = [](double v) { return formatPercent(v, 2); };
    const auto secs = [](double v) { return formatSeconds(v); };
    const auto rate = [](double v) { return formatNumber(v, 1); };
    for (const ConfigResult &c : r.configs) {
        t.rows.append({ configLabel(c.config, r.configs), c.key, gpusText(c.config), batchText(c.config),
            QString::number(c.config.epochs), runsText(c), statCell(c.finalTestAccuracy, pct),
            statCell(c.bestTestAccuracy, pct), statCell(c.wallSeconds, secs),
            statCell(c.imagesPerSecond, rate), statCell(c.timeToTargetSeconds, secs),
            std::isfinite(r.targetAccuracy) ? QStringLiteral("%1 / %2").arg(c.reachedTarget).arg(c.succeeded)
                                            : kDash });
        t.mutedRows.append(c.succeeded == 0);
    }
    t.emptyText = QStringLiteral("The study has no runs yet.");
    return t;
}

ReportTable runTable(const StudySnapshot &snapshot, const StudyResults &r)
{
    ReportTable t;
    t.title = QStringLiteral("Runs");
    t.caption = QStringLiteral(
        "Speedup and efficiency of each run against the baseline's mean, by wall-clock and by time to the "
        "target accuracy. A run's wall-clock spans from its first attempt's start of training to its end: "
        "for a retried run, the failure, its detection and the restart are included. Images / s are training "
        "images per second of training time (evaluation and checkpoints excluded) over every epoch the run "
        "completed: the harmonic mean of its epochs' rates. Runs that did not succeed (failed, diverged or "
        "cancelled) are greyed out and never enter a speedup.");
    t.headers = QStringList { QStringLiteral("Run"), QStringLiteral("State"), QStringLiteral("Workers"),
        QStringLiteral("GPUs"), QStringLiteral("Batch (worker / global)"), QStringLiteral("Epochs"),
        QStringLiteral("Attempts"), QStringLiteral("Final accuracy"), QStringLiteral("Best accuracy"),
        QStringLiteral("Wall-clock (s)"), QStringLiteral("Time to target (s)"), QStringLiteral("Images / s"),
        QStringLiteral("Speedup (wall)"), QStringLiteral("Efficiency (wall)"),
        QStringLiteral("Speedup (to target)"), QStringLiteral("Efficiency (to target)") };
    t.numeric = { false, false, true, true, true, true, true, true, true, true, true, true, true, true, true,
        true };
    // Sixteen columns: the HTML page fits them in a 1400-px window with two-line headers.
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], t.headers[2], t.headers[3],
        QStringLiteral("Batch\nworker/global"), t.headers[5], t.headers[6], QStringLiteral("Final\naccuracy"),
        QStringLiteral("Best\naccuracy"), QStringLiteral("Wall-clock\n(s)"),
        QStringLiteral("Time to\ntarget (s)"), QStringLiteral("Images\n/ s"), QStringLiteral("Speedup\nwall"),
        QStringLiteral("Eff.\nwall"), QStringLiteral("Speedup\nto target"),
        QStringLiteral("Eff.\nto target") };
    t.legend = QStringLiteral(
        "Eff. = scaling efficiency; wall = by wall-clock; to target = by time to the target "
        "accuracy. A run that trains other epochs than the baseline did other work, and an elastic "
        "run that changed size ran part of its time on fewer workers: their wall columns show the "
        "speedup and efficiency by images/s instead, marked \"by img/s\".");
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const RunResult &run = snapshot.runs[i];
        const RunOutcome &o = r.runs[i];
        const RunConfig &c = run.config;
        t.rows.append({ run.runId, run.state,
            workersText(run) + (c.baseline ? QStringLiteral("\nbaseline") : QString()), gpusText(c),
            batchText(c), QString::number(c.epochs), QString::number(run.attempts.size()),
            formatPercent(run.finalTestAccuracy, 2), formatPercent(run.bestTestAccuracy, 2),
            formatSeconds(run.wallSeconds),
            o.timeToTargetSeconds ? formatSeconds(*o.timeToTargetSeconds) : kDash,
            formatNumber(run.imagesPerSecond, 1),
            formatSpeedup(o.shown().speedup)
                + (o.byThroughputShown() ? QStringLiteral("\nby img/s") : QString()),
            formatPercent(o.shown().efficiency)
                + (o.byThroughputShown() ? QStringLiteral("\nby img/s") : QString()),
            formatSpeedup(o.byTimeToAccuracy.speedup), formatPercent(o.byTimeToAccuracy.efficiency) });
        t.mutedRows.append(!o.succeeded);
    }
    t.emptyText = QStringLiteral("The study has no runs yet.");
    return t;
}

// ---- A tune (issue 18) ----------------------------------------------------------------------

bool isStoppedEarly(const RunResult &run)
{
    return run.state == QLatin1String("STOPPED");
}

QString searchText(const TuneReport &t)
{
    if (!t.planRead)
        return kDash;
    return QStringLiteral("%1, %2 sample%3, seed %4")
        .arg(t.searcher)
        .arg(t.samples)
        .arg(t.samples == 1 ? QString() : QStringLiteral("s"))
        .arg(t.seed);
}

ReportTable searchSpaceTable(const StudySnapshot &s, const TuneReport &t)
{
    ReportTable table;
    table.title = QStringLiteral("Search space");
    table.caption = t.planRead
        ? QStringLiteral(
            "Searcher: %1. Each trial draws every dimension (a grid searcher crosses the choices); "
            "quantized kinds round to a multiple of the step in the space they are drawn in. The "
            "last column is the best trial's configuration.")
              .arg(searchText(t))
        : QString();
    table.headers = QStringList { QStringLiteral("Hyperparameter"), QStringLiteral("Distribution"),
        QStringLiteral("Range or values"), QStringLiteral("Step"), QStringLiteral("Scale"),
        QStringLiteral("Best trial") };
    table.numeric = { false, false, false, true, false, true };
    const RunResult *best = t.best >= 0 ? &s.runs[t.best] : nullptr;
    for (const TuneDimension &d : t.space) {
        table.rows.append({ d.label + QLatin1Char('\n') + d.name, d.kind, dimensionRangeText(d),
            std::isfinite(d.q) ? QString::number(d.q, 'g', 4) : kDash,
            d.choice()       ? QStringLiteral("categories")
                : d.logScale ? QStringLiteral("log")
                             : QStringLiteral("linear"),
            best && best->params.contains(d.name) ? paramValueText(best->params.value(d.name)) : kDash });
        table.mutedRows.append(false);
    }
    table.emptyText = QStringLiteral("The plan's search space could not be read from the study.");
    table.keepTogether = true;
    return table;
}

ReportTable trialTable(const StudySnapshot &s, const TuneReport &t)
{
    ReportTable table;
    const QString metric = tuneMetricName(t.metric);
    table.title = QStringLiteral("Trials");
    table.caption = QStringLiteral(
        "Every trial with its hyperparameters, its state, the epochs it trained and its %1 at each epoch the "
        "scheduler judged it at. The best trial (best %1 at its last epoch) is marked; trials stopped early "
        "are "
        "greyed out, with the cutoff they missed.")
                        .arg(metric);
    const QStringList params = tuneParamNames(s, t);
    table.headers << QStringLiteral("Trial");
    table.shortHeaders << QStringLiteral("Trial");
    table.numeric << false;
    for (const QString &name : params) {
        table.headers << QStringLiteral("%1 (%2)").arg(paramLabel(name), name);
        table.shortHeaders << paramLabel(name);
        table.numeric << true;
    }
    table.headers << QStringLiteral("State") << QStringLiteral("Epochs")
                  << QStringLiteral("Final %1").arg(metric);
    table.shortHeaders << QStringLiteral("State") << QStringLiteral("Epochs")
                       << QStringLiteral("Final\n%1").arg(metric);
    table.numeric << false << true << true;
    for (const int e : t.judgedEpochs) {
        table.headers << QStringLiteral("%1 at epoch %2").arg(metric).arg(e);
        table.shortHeaders << QStringLiteral("At\nepoch %1").arg(e);
        table.numeric << true;
    }
    table.headers << QStringLiteral("Reason");
    table.shortHeaders << QStringLiteral("Reason");
    table.numeric << false;
    if (!t.judgedEpochs.isEmpty())
        table.legend
            = QStringLiteral("At epoch N = the %1 the scheduler judged the trial by at epoch N.").arg(metric);

    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &run = s.runs[i];
        if (!run.trial)
            continue;
        QStringList row { run.runId + (i == t.best ? QStringLiteral("\nbest") : QString()) };
        for (const QString &name : params) {
            const QString v = paramValueText(run.params.value(name));
            row << (v.isEmpty() ? kDash : v);
        }
        const TrialDecision *last = run.decisions.isEmpty() ? nullptr : &run.decisions.last();
        QString state = trialStatus(run);
        if (isStoppedEarly(run) && last && last->cutoff)
            state += QStringLiteral("\nmissed the cutoff %1").arg(tuneMetricCell(t.metric, *last->cutoff));
        row << state << QString::number(run.epochs.size())
            << tuneMetricCell(t.metric, t.finalMetric.value(i));
        for (const int e : t.judgedEpochs) {
            bool judged = false;
            const double v = judgedValue(run, e, &judged);
            row << (judged ? tuneMetricCell(t.metric, v) : QString());
        }
        const bool failed = run.state == QLatin1String("FAILED") || run.state == QLatin1String("CANCELLED");
        const QString reason = !failed && last ? last->reason : run.stateReason;
        row << (reason.isEmpty() ? kDash : reason);
        table.rows << row;
        table.mutedRows << (isStoppedEarly(run) || failed);
    }
    table.emptyText = QStringLiteral("The tune has no trials yet.");
    table.keepTogether = true;
    return table;
}

ReportTable decisionTable(const StudySnapshot &s, const TuneReport &t)
{
    ReportTable table;
    table.title = QStringLiteral("Decisions");
    table.caption = QStringLiteral("Every decision of the scheduler, oldest first, with what it was decided "
                                   "on: the trial's %1 at the epoch, "
                                   "the values already recorded at that rung, and the cutoff (the (1 − 1/η) "
                                   "quantile of those values, NaN "
                                   "ignored; a trial stops only when strictly worse than it).")
                        .arg(tuneMetricName(t.metric));
    table.headers = QStringList { QStringLiteral("#"), QStringLiteral("Trial"), QStringLiteral("Action"),
        QStringLiteral("Epoch"), QStringLiteral("Rung"), QStringLiteral("Value"), QStringLiteral("Cutoff"),
        QStringLiteral("Values seen at the rung"), QStringLiteral("Next target"), QStringLiteral("Reason") };
    table.shortHeaders = QStringList { table.headers[0], table.headers[1], table.headers[2], table.headers[3],
        table.headers[4], table.headers[5], table.headers[6], QStringLiteral("Values seen\nat the rung"),
        QStringLiteral("Next\ntarget"), table.headers[9] };
    table.numeric = { true, false, false, true, true, true, true, false, true, false };
    for (int i = 0; i < t.decisions.size(); ++i) {
        const RunResult &run = s.runs[t.decisions[i].run];
        const TrialDecision &d = run.decisions[t.decisions[i].index];
        QStringList seen;
        for (const double v : d.seen)
            seen << tuneMetricCell(t.metric, v);
        table.rows.append({ QString::number(i + 1), run.runId, d.action, QString::number(d.epoch),
            d.rung >= 0 ? QString::number(d.rung + 1) : kDash, tuneMetricCell(t.metric, d.value),
            d.cutoff ? tuneMetricCell(t.metric, *d.cutoff) : kDash,
            seen.isEmpty() ? QStringLiteral("none") : seen.join(QStringLiteral(", ")),
            d.nextTarget > 0 ? QString::number(d.nextTarget) : kDash,
            d.reason.isEmpty() ? kDash : d.reason });
        table.mutedRows.append(false);
    }
    table.emptyText = QStringLiteral("The scheduler has not decided anything yet.");
    return table;
}

ReportContent buildTuneContent(const StudySnapshot &snapshot)
{
    const TuneReport t = tuneReport(snapshot);
    ReportContent content;
    content.title = QStringLiteral("Hyperparameter tune report");
    content.studyName = snapshot.name.isEmpty() ? snapshot.studyId : snapshot.name;

    QMap<QString, int> states; // in words: finished, stopped early, …
    for (const RunResult &run : snapshot.runs) {
        if (!run.trial)
            continue;
        const QString word = run.state == QLatin1String("SUCCEEDED") ? QStringLiteral("finished")
            : isStoppedEarly(run)                                    ? QStringLiteral("stopped early")
                                                                     : run.state.toLower();
        ++states[word];
    }
    QStringList parts;
    for (auto it = states.cbegin(); it != states.cend(); ++it)
        parts << QStringLiteral("%1 %2").arg(it.value()).arg(it.key());
    content.facts = {
        { QStringLiteral("Tune"), snapshot.studyId },
        { QStringLiteral("State"), snapshot.state },
        { QStringLiteral("Dataset"),
            (snapshot.dataset.isEmpty() ? kDash : snapshot.dataset)
                + (snapshot.synthetic ? QStringLiteral(" (synthetic)") : QString()) },
        { QStringLiteral("Search"), searchText(t) },
        { QStringLiteral("Trials"),
            parts.isEmpty() ? QString::number(t.trials)
                            : QStringLiteral("%1 — %2").arg(t.trials).arg(parts.join(QStringLiteral(", "))) },
        { QStringLiteral("Created"), formatUnixMs(snapshot.createdUnixMs) },
        { QStringLiteral("Finished"), formatUnixMs(snapshot.finishedUnixMs) },
    };
    if (snapshot.synthetic) {
        content.syntheticBanner = QStringLiteral(
            "These trials trained on generated images, not on a real dataset. The metric, the ranking of the "
            "trials and the best configuration say nothing about real-data results.");
    }

    const QString metric = tuneMetricName(t.metric);
    if (t.best >= 0) {
        const RunResult &best = snapshot.runs[t.best];
        content.headlines.append({ QStringLiteral("Best trial"),
            QStringLiteral("%1: %2 %3 at epoch %4\n%5")
                .arg(best.runId, metricText(t.metric, t.bestValue), metric)
                .arg(t.bestEpoch)
                .arg(paramsText(best.params)) });
    } else {
        content.headlines.append({ QStringLiteral("Best trial"), QStringLiteral("none measured yet") });
    }
    content.headlines.append({ QStringLiteral("Metric"),
        QStringLiteral("%1, %2").arg(metric,
            t.maximize ? QStringLiteral("higher is better (max)")
                       : QStringLiteral("lower is better (min)")) });
    content.headlines.append({ QStringLiteral("Scheduler"), t.scheduler.isEmpty() ? kDash : t.scheduler });
    QString epochs = QStringLiteral("%1 of the %2 without early stopping")
                         .arg(t.epochsSpent)
                         .arg(t.epochsWithoutStopping);
    if (t.epochsWithoutStopping > 0 && t.epochsSpent < t.epochsWithoutStopping)
        epochs += QStringLiteral(" (%1 saved)")
                      .arg(formatPercent(1.0 - double(t.epochsSpent) / t.epochsWithoutStopping, 0));
    content.headlines.append({ QStringLiteral("Epochs trained"), epochs });

    content.charts = tuneCharts(snapshot, t);
    content.tables = { searchSpaceTable(snapshot, t), trialTable(snapshot, t), decisionTable(snapshot, t),
        attemptTable(snapshot), modelTable(snapshot), recipeTable(snapshot), nodeTable(snapshot),
        softwareTable(snapshot) };
    content.footer
        = QStringLiteral("ScaleLab %1 · tune %2").arg(QStringLiteral(SCALELAB_VERSION), snapshot.studyId);
    return content;
}

} // namespace

namespace {

// The run furthest past its measured critical batch, said once (goodput_model.h); empty when
// none is 4× or more past it.
QString pastCriticalNote(const StudySnapshot &snapshot)
{
    const RunResult *furthest = nullptr;
    for (const RunResult &run : snapshot.runs)
        if (run.state == QLatin1String("SUCCEEDED") && run.noise.known()
            && (!furthest
                || run.config.globalBatch() / run.noise.bSimple
                    > furthest->config.globalBatch() / furthest->noise.bSimple))
            furthest = &run;
    if (!furthest)
        return {};
    const QString text = pastCriticalText(furthest->config.globalBatch(), furthest->noise.bSimple);
    return text.isEmpty()
        ? QString()
        : QStringLiteral("%1 (run %2).").arg(text.left(1).toUpper() + text.mid(1), furthest->runId);
}

} // namespace

ReportContent buildReportContent(const StudySnapshot &snapshot)
{
    if (snapshot.tune)
        return buildTuneContent(snapshot);
    const StudyResults r = computeStudyResults(snapshot);
    ReportContent content;
    content.title = QStringLiteral("Scale-up study report");
    content.studyName = snapshot.name.isEmpty() ? snapshot.studyId : snapshot.name;

    int succeeded = 0, failed = 0;
    for (const RunResult &run : snapshot.runs) {
        succeeded += isSucceeded(run) ? 1 : 0;
        failed += isFailedOrCancelled(run) ? 1 : 0;
    }
    const int unfinished = int(snapshot.runs.size()) - succeeded - failed;
    QString runs = QStringLiteral("%1 — %2 succeeded, %3 failed or cancelled")
                       .arg(snapshot.runs.size())
                       .arg(succeeded)
                       .arg(failed);
    if (unfinished > 0)
        runs += QStringLiteral(", %1 not finished").arg(unfinished);
    // One baseline per model when the study compares models.
    QStringList baselines;
    for (const ConfigResult &c : r.configs)
        if (c.config.baseline)
            baselines << configLabel(c.config, r.configs);
    const QString baselinesText = baselines.isEmpty() ? QStringLiteral("none")
        : baselines.size() == 1                       ? baselines.first()
                                : QStringLiteral("one per model: ") + baselines.join(QStringLiteral("; "));
    content.facts = {
        { QStringLiteral("Study"), snapshot.studyId },
        { QStringLiteral("State"), snapshot.state },
        { QStringLiteral("Dataset"),
            (snapshot.dataset.isEmpty() ? kDash : snapshot.dataset)
                + (snapshot.synthetic ? QStringLiteral(" (synthetic)") : QString()) },
        { QStringLiteral("Target accuracy"), formatPercent(snapshot.targetAccuracy) },
        { QStringLiteral("Learning rate"),
            snapshot.learningRateNote.isEmpty() ? QStringLiteral("as in the plan (see Recipes)")
                                                : snapshot.learningRateNote },
        { QStringLiteral("Baseline"), baselinesText },
        { QStringLiteral("Runs"), runs },
        { QStringLiteral("Created"), formatUnixMs(snapshot.createdUnixMs) },
        { QStringLiteral("Finished"), formatUnixMs(snapshot.finishedUnixMs) },
    };
    if (snapshot.synthetic) {
        content.syntheticBanner = QStringLiteral(
            "These runs trained on generated images, not on a real dataset. Throughput and "
            "speedup are meaningful; accuracy and time to accuracy say nothing about real-data results.");
    }
    if (!r.baselineNote.isEmpty())
        content.notes << r.baselineNote;
    if (!r.baselineWarning.isEmpty())
        content.notes << r.baselineWarning;
    if (const QString past = pastCriticalNote(snapshot); !past.isEmpty())
        content.notes << past;

    for (const SeedComparison &s : r.comparisons) {
        if (!std::isfinite(s.speedup))
            continue;
        const ConfigResult *c = r.config(s.configKey);
        QString line = QStringLiteral("%1 faster by wall-clock, %2 efficiency")
                           .arg(formatSpeedup(s.speedup), formatPercent(s.efficiency, 0));
        if (c->byTimeToAccuracy.available())
            line += QStringLiteral("; %1 to %2 (%3 efficiency by time to accuracy)")
                        .arg(formatSpeedup(c->byTimeToAccuracy.speedup), formatPercent(r.targetAccuracy),
                            formatPercent(c->byTimeToAccuracy.efficiency, 0));
        content.headlines.append({ configLabel(c->config, r.configs), line });
    }

    content.charts = studyCharts(snapshot, r);
    content.tables = { comparisonTable(r), configTable(r), runTable(snapshot, r), anatomyTable(snapshot) };
    if (!snapshot.networkProbes.isEmpty() || !snapshot.networkNote.isEmpty())
        content.tables += networkTable(snapshot);
    content.tables += scalingTables(snapshot);
    content.tables += timeToTargetTables(snapshot);
    content.tables += { attemptTable(snapshot), modelTable(snapshot), recipeTable(snapshot),
        nodeTable(snapshot), softwareTable(snapshot) };
    content.footer
        = QStringLiteral("ScaleLab %1 · study %2").arg(QStringLiteral(SCALELAB_VERSION), snapshot.studyId);
    return content;
}

} // namespace scalelab::core
