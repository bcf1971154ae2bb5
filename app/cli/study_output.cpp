#include "study_output.h"

#include "cli_common.h"
#include "study_cli.h"

#include "report.h"
#include "scaling_model.h"
#include "study_results.h"
#include "study_state.h"
#include "tune_plan.h"

#include <QJsonArray>

#include <cmath>

namespace scalelab::app {

using namespace scalelab::core;

namespace {

// A global batch this many times its run's measured B_simple is past the critical batch.
constexpr double kPastCriticalBatch = 4.0;

QString noiseUnknownNote(const GradientNoise &n)
{
    return QStringLiteral(
        "not known: |G|² averaged over %1 steps is %2, not positive (the gradient is lost in its "
        "noise over so few steps; a longer run tells)")
        .arg(n.samples)
        .arg(n.gradSquared, 0, 'g', 3);
}

QJsonValue noiseJson(const RunResult &r)
{
    if (!r.noise.measured())
        return QJsonValue();
    const int globalBatch = r.config.globalBatch();
    QJsonObject o { { QStringLiteral("gradSquared"), r.noise.gradSquared },
        { QStringLiteral("traceSigma"), r.noise.traceSigma }, { QStringLiteral("samples"), r.noise.samples },
        { QStringLiteral("batchesPerStep"), r.noise.batchesPerStep },
        { QStringLiteral("estimator"),
            r.noise.differenced ? QStringLiteral("differenced") : QStringLiteral("two-batch") },
        { QStringLiteral("globalBatch"), globalBatch } };
    if (r.noise.known()) {
        o.insert(QStringLiteral("bSimple"), r.noise.bSimple);
        o.insert(QStringLiteral("globalBatchOverBSimple"), globalBatch / r.noise.bSimple);
        o.insert(QStringLiteral("pastCriticalBatch"), globalBatch >= kPastCriticalBatch * r.noise.bSimple);
    } else {
        o.insert(QStringLiteral("bSimple"), QJsonValue());
        o.insert(QStringLiteral("note"), noiseUnknownNote(r.noise));
    }
    return o;
}

// Each run's gradient noise scale, and where its global batch stands against it.
void printNoise(const StudySnapshot &s)
{
    bool any = false;
    for (const RunResult &r : s.runs)
        any = any || r.noise.measured();
    if (!any)
        return;
    out() << "\n  gradient noise scale B_simple = tr(Σ)/|G|² (about the critical batch, in images; moving "
             "averages "
             "over the last ~100 steps; docs/scaling.md):\n";
    bool anyPast = false;
    for (const RunResult &r : s.runs) {
        if (!r.noise.measured())
            continue;
        const int globalBatch = r.config.globalBatch();
        if (!r.noise.known()) {
            out() << QStringLiteral("  %1 %2\n").arg(r.runId, -28).arg(noiseUnknownNote(r.noise));
            continue;
        }
        const bool past = globalBatch >= kPastCriticalBatch * r.noise.bSimple;
        anyPast = anyPast || past;
        out() << QStringLiteral("  %1 B_simple %2  global batch %3 = %4x it  (%5, %6 steps)%7\n")
                     .arg(r.runId, -28)
                     .arg(num(r.noise.bSimple, 0), 8)
                     .arg(globalBatch, 5)
                     .arg(num(globalBatch / r.noise.bSimple, 2))
                     .arg(r.noise.differenced
                             ? QStringLiteral("one rank: differenced, biased while the gradient moves")
                             : QStringLiteral("two-batch over %1 batches").arg(r.noise.batchesPerStep))
                     .arg(r.noise.samples)
                     .arg(past ? QStringLiteral("  PAST THE CRITICAL BATCH") : QString());
    }
    if (anyPast)
        out() << "  past the critical batch (global batch ≥ 4× B_simple): more workers buy images per "
                 "second, not "
                 "time to accuracy\n";
}

QJsonObject runJson(const RunResult &r)
{
    auto finite = [](double v) { return std::isfinite(v) ? QJsonValue(v) : QJsonValue(); };
    QJsonArray attempts;
    for (const auto &a : r.attempts)
        attempts.append(QJsonObject { { QStringLiteral("attempt"), a.attempt },
            { QStringLiteral("agents"), QJsonArray::fromStringList(a.agents) },
            { QStringLiteral("outcome"), a.outcome }, { QStringLiteral("reason"), a.reason },
            { QStringLiteral("resumedFromEpoch"), a.resumedFromEpoch },
            { QStringLiteral("transferredEpoch"), a.transferredEpoch },
            { QStringLiteral("transferredFrom"), a.transferredFrom },
            { QStringLiteral("resume"), resumeNote(a) }, { QStringLiteral("worldSize"), a.worldSize },
            { QStringLiteral("resize"), a.resize } });
    QJsonObject o { { QStringLiteral("runId"), r.runId },
        { QStringLiteral("config"), configToJson(r.config) }, { QStringLiteral("key"), r.config.key() },
        { QStringLiteral("repeat"), r.repeat }, { QStringLiteral("state"), r.state },
        { QStringLiteral("reason"), r.stateReason },
        { QStringLiteral("finalTestAccuracy"), finite(r.finalTestAccuracy) },
        { QStringLiteral("bestTestAccuracy"), finite(r.bestTestAccuracy) },
        { QStringLiteral("wallSeconds"), finite(r.wallSeconds) },
        { QStringLiteral("imagesPerSecond"), finite(r.imagesPerSecond) },
        { QStringLiteral("timeToTargetSeconds"),
            r.timeToTargetSeconds ? QJsonValue(*r.timeToTargetSeconds) : QJsonValue() },
        { QStringLiteral("gradientNoiseScale"), noiseJson(r) }, { QStringLiteral("attempts"), attempts } };
    if (r.anatomy.measured())
        o.insert(QStringLiteral("anatomy"), anatomyJson(r.anatomy));
    if (r.network.worldSize > 1)
        o.insert(QStringLiteral("network"), networkJson(r.network));
    if (r.recipe.contains(QLatin1String("core_share"))) // how its ranks shared cores (the scaling model's s)
        o.insert(QStringLiteral("coreShare"),
            QJsonObject { { QStringLiteral("reported"), r.recipe.value(QLatin1String("core_share")) },
                { QStringLiteral("slowdown"), r.coreShare } });
    if (r.trial) {
        QJsonArray decisions;
        for (const auto &d : r.decisions)
            decisions.append(d.toJson());
        o.insert(QStringLiteral("params"), r.params);
        o.insert(QStringLiteral("trialState"), trialStatus(r));
        o.insert(QStringLiteral("decisions"), decisions);
    }
    return o;
}

} // namespace

// Per configuration: its repeats' time to the target and its speedups, by time to accuracy
// beside by throughput (study_results.h's definitions).
QJsonArray configurationsJson(const StudySnapshot &s)
{
    const auto finite = [](double v) { return std::isfinite(v) ? QJsonValue(v) : QJsonValue(); };
    const auto stat = [&](const Stat &t) {
        return QJsonObject { { QStringLiteral("count"), t.count }, { QStringLiteral("mean"), finite(t.mean) },
            { QStringLiteral("stddev"), finite(t.stddev) }, { QStringLiteral("min"), finite(t.min) },
            { QStringLiteral("max"), finite(t.max) } };
    };
    QJsonArray out;
    for (const ConfigResult &c : computeStudyResults(s).configs)
        out.append(QJsonObject { { QStringLiteral("key"), c.key }, { QStringLiteral("repeats"), c.repeats },
            { QStringLiteral("succeeded"), c.succeeded },
            { QStringLiteral("reachedTarget"), c.reachedTarget },
            { QStringLiteral("timeToTargetSeconds"), stat(c.timeToTargetSeconds) },
            { QStringLiteral("imagesPerSecond"), stat(c.imagesPerSecond) },
            { QStringLiteral("speedupByTimeToTarget"), finite(c.byTimeToAccuracy.speedup) },
            { QStringLiteral("efficiencyByTimeToTarget"), finite(c.byTimeToAccuracy.efficiency) },
            { QStringLiteral("speedupByThroughput"), finite(c.byThroughput.speedup) },
            { QStringLiteral("efficiencyByThroughput"), finite(c.byThroughput.efficiency) },
            { QStringLiteral("speedupByWallClock"), finite(c.byWallClock.speedup) } });
    return out;
}

QJsonObject studyJson(const StudySnapshot &s)
{
    QJsonArray runs;
    for (const auto &r : s.runs)
        runs.append(runJson(r));
    QJsonObject tune;
    if (s.tune) {
        const int best = bestTrialIndex(s);
        tune = QJsonObject { { QStringLiteral("metric"), s.tuneMetric },
            { QStringLiteral("mode"), s.tuneMaximize ? QStringLiteral("max") : QStringLiteral("min") },
            { QStringLiteral("scheduler"), s.tuneScheduler },
            { QStringLiteral("epochsSpent"), epochsSpent(s) },
            { QStringLiteral("epochsWithoutStopping"), epochsWithoutStopping(s) },
            { QStringLiteral("bestTrial"), best >= 0 ? s.runs[best].runId : QString() } };
        if (best >= 0) {
            tune.insert(QStringLiteral("bestParams"), s.runs[best].params);
            const double v = trialMetric(s, s.runs[best].epochs.last());
            tune.insert(QStringLiteral("bestValue"), std::isfinite(v) ? QJsonValue(v) : QJsonValue());
            tune.insert(QStringLiteral("bestEpochs"), int(s.runs[best].epochs.size()));
        }
    }
    QJsonObject study { { QStringLiteral("studyId"), s.studyId }, { QStringLiteral("name"), s.name },
        { QStringLiteral("state"), s.state }, { QStringLiteral("dataset"), s.dataset },
        { QStringLiteral("synthetic"), s.synthetic },
        { QStringLiteral("createdUnixMs"), double(s.createdUnixMs) },
        { QStringLiteral("finishedUnixMs"), double(s.finishedUnixMs) }, { QStringLiteral("runs"), runs } };
    if (s.tune)
        study.insert(QStringLiteral("tune"), tune);
    else
        study.insert(QStringLiteral("configurations"), configurationsJson(s));
    if (!s.networkProbes.isEmpty() || !s.networkNote.isEmpty())
        study.insert(QStringLiteral("networkSurvey"),
            QJsonObject {
                { QStringLiteral("probes"), s.networkProbes }, { QStringLiteral("note"), s.networkNote } });
    if (!s.unreadableEvents.isEmpty())
        study.insert(QStringLiteral("unreadableEvents"), QJsonArray::fromStringList(s.unreadableEvents));
    return study;
}

// A tune's trials: hyperparameters, state, the metric at each rung, the best so far.
QStringList tuneTable(const StudySnapshot &s)
{
    QStringList lines;
    const int best = bestTrialIndex(s);
    lines << QStringLiteral("  %1 %2 %3 %4  %5")
                 .arg(QStringLiteral("trial"), -6)
                 .arg(QStringLiteral("state"), -30)
                 .arg(QStringLiteral("epochs"), 6)
                 .arg(s.tuneMetric, 13)
                 .arg(QStringLiteral("hyperparameters | metric at each rung"));
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        const QString label
            = r.runId.startsWith(s.studyId + QLatin1Char('-')) ? r.runId.mid(s.studyId.size() + 1) : r.runId;
        const double last = r.epochs.isEmpty() ? kNotMeasured : trialMetric(s, r.epochs.last());
        lines << QStringLiteral("  %1 %2 %3 %4  %5 | %6")
                     .arg(label + (i == best ? QStringLiteral("*") : QString()), -6)
                     .arg(trialStatus(r), -30)
                     .arg(r.epochs.size(), 6)
                     .arg(metricText(s.tuneMetric, last), 13)
                     .arg(paramsText(r.params), rungValuesText(s, r));
        if (r.state == QLatin1String("STOPPED") && !r.decisions.isEmpty())
            lines << QStringLiteral("         %1").arg(r.decisions.last().reason);
    }
    lines << QStringLiteral(
        "  * best so far (the best %1 at a trial's last epoch, as Ray's get_best_result); "
        "scheduler: %2; epochs trained: %3 of %4 without early stopping")
                 .arg(s.tuneMetric, s.tuneScheduler)
                 .arg(epochsSpent(s))
                 .arg(epochsWithoutStopping(s));
    return lines;
}

namespace {

// Where each run's time went, and in words where efficiency goes between worker counts.
void printAnatomy(const StudySnapshot &s)
{
    bool any = false;
    for (const RunResult &r : s.runs)
        any = any || r.anatomy.measured();
    if (!any)
        return;
    const auto ms = [](double seconds) { return num(seconds * 1000, 1); };
    out() << "\n  where the time goes: per step (ms, rank 0's mean), and outside the steps (s, the whole "
             "run)\n";
    out() << QStringLiteral("  %1 %2 %3 %4 %5 %6 %7 %8 %9  %10\n")
                 .arg(QStringLiteral("run"), -28)
                 .arg(QStringLiteral("data"), 7)
                 .arg(QStringLiteral("forward"), 8)
                 .arg(QStringLiteral("backward"), 8)
                 .arg(QStringLiteral("exposed"), 8)
                 .arg(QStringLiteral("optim."), 7)
                 .arg(QStringLiteral("step"), 7)
                 .arg(QStringLiteral("eval s"), 7)
                 .arg(QStringLiteral("ckpt s"), 7)
                 .arg(QStringLiteral("slowest rank"));
    for (const RunResult &r : s.runs) {
        if (!r.anatomy.measured())
            continue;
        const RunAnatomy &a = r.anatomy;
        out() << QStringLiteral("  %1 %2 %3 %4 %5 %6 %7 %8 %9  %10\n")
                     .arg(r.runId, -28)
                     .arg(ms(a.perStep.data), 7)
                     .arg(ms(a.perStep.forward), 8)
                     .arg(ms(a.perStep.backward), 8)
                     .arg(ms(a.perStep.exposedAllReduce), 8)
                     .arg(ms(a.perStep.optimizer), 7)
                     .arg(ms(a.perStep.total()), 7)
                     .arg(num(a.evaluationSeconds, 1), 7)
                     .arg(num(a.checkpointSeconds, 1), 7)
                     .arg(a.slowestRank >= 0 ? QStringLiteral("rank %1, +%2 ms a step")
                                                   .arg(a.slowestRank)
                                                   .arg(ms(a.slowestLagSeconds))
                                             : QStringLiteral("-"));
    }
    out() << "  data: waiting for the batch; backward: to its last gradient; exposed: the all-reduce "
             "backward did "
             "not hide; slowest rank: its own work (all but that wait) against the median rank's\n";
    for (const StudyScaling &scaling : studyScaling(s)) {
        for (const QString &loss : scaling.losses)
            out() << "  " << loss << "\n";
        if (scaling.fit.valid) {
            const QList<ScalingPoint> next
                = predictWithBand(scaling.runs, { 8, 64 }, scaling.batchPerWorker, 0, 100);
            out() << "  predicted efficiency at batch " << scaling.batchPerWorker << " per worker: 8 workers "
                  << pct(next[0].efficiency) << " [" << pct(next[0].efficiencyLow) << ", "
                  << pct(next[0].efficiencyHigh) << "], 64 workers " << pct(next[1].efficiency) << " ["
                  << pct(next[1].efficiencyLow) << ", " << pct(next[1].efficiencyHigh)
                  << "] (scalelab-cli study predict " << s.studyId << ")\n";
        }
    }
}

} // namespace

namespace {

// The network between the hosts, probed at the study's start.
void printNetworkSurvey(const StudySnapshot &s)
{
    if (s.networkProbes.isEmpty()) {
        if (!s.networkNote.isEmpty())
            out() << "\n  network: " << s.networkNote << "\n";
        return;
    }
    out() << "\n  the network between the hosts (probed at the study's start; ring all-reduce fit):\n";
    for (const QJsonValue &value : s.networkProbes) {
        const QJsonObject p = value.toObject();
        QStringList hosts;
        for (const QJsonValue &h : p.value(QLatin1String("hosts")).toArray())
            hosts << h.toString();
        out() << QStringLiteral("  %1 ranks, %2 (%3): ")
                     .arg(p.value(QLatin1String("world_size")).toInt())
                     .arg(p.value(QLatin1String("layout")).toString(), hosts.join(QStringLiteral(", ")));
        if (p.contains(QLatin1String("error")))
            out() << "failed: " << p.value(QLatin1String("error")).toString() << "\n";
        else
            out() << "latency " << num(p.value(QLatin1String("latency_seconds")).toDouble() * 1e6, 0)
                  << " µs, " << bandwidthText(p.value(QLatin1String("bandwidth_bytes_per_second")).toDouble())
                  << "\n";
    }
    if (!s.networkNote.isEmpty())
        out() << "  " << s.networkNote << "\n";
}

} // namespace

// Time to the target per configuration, over its repeats, with efficiency by time to
// accuracy beside efficiency by throughput (study_results.h).
void printTimeToTarget(const StudySnapshot &s, const StudyResults &results)
{
    if (!(s.targetAccuracy > 0) || s.tune)
        return;
    out() << "\n  time to " << pct(s.targetAccuracy)
          << " test accuracy, per configuration over its repeats (training start to the first epoch at or "
             "above it):\n";
    out() << QStringLiteral("  %1 %2 %3 %4 %5 %6\n")
                 .arg(QStringLiteral("configuration"), -50)
                 .arg(QStringLiteral("reached"), 7)
                 .arg(QStringLiteral("seconds: mean ± sd [min, max]"), -34)
                 .arg(QStringLiteral("speedup"), 7)
                 .arg(QStringLiteral("effic. by time"), 14)
                 .arg(QStringLiteral("by img/s"), 8);
    for (const ConfigResult &c : results.configs) {
        const Stat &t = c.timeToTargetSeconds;
        const QString time = t.count == 0
            ? QStringLiteral("-")
            : QStringLiteral("%1 ± %2 [%3, %4]")
                  .arg(num(t.mean, 1), num(t.stddev, 1), num(t.min, 1), num(t.max, 1));
        out() << QStringLiteral("  %1 %2 %3 %4 %5 %6\n")
                     .arg(c.key, -50)
                     .arg(QStringLiteral("%1/%2").arg(c.reachedTarget).arg(c.succeeded), 7)
                     .arg(time, -34)
                     .arg(num(c.byTimeToAccuracy.speedup, 2), 7)
                     .arg(pct(c.byTimeToAccuracy.efficiency), 14)
                     .arg(pct(c.byThroughput.efficiency), 8);
    }
}

namespace {

void printTune(const StudySnapshot &s)
{
    out() << "tune " << s.studyId << " (" << s.name << "): " << s.state << ", data set " << s.dataset
          << (s.synthetic ? QStringLiteral(" [SYNTHETIC DATA]") : QString()) << "\n";
    out() << tuneTable(s).join(QLatin1Char('\n')) << "\n";
    if (const int best = bestTrialIndex(s); best >= 0)
        out() << "  best trial: " << s.runs[best].runId << ": " << paramsText(s.runs[best].params) << "\n";
}

// A run of more than one attempt: a line each, where it ran and how it ended.
void printAttempts(const RunResult &r)
{
    if (r.attempts.size() < 2)
        return;
    for (const auto &a : r.attempts) {
        QStringList words { a.outcome };
        if (!a.resize.isEmpty())
            words << a.resize;
        if (const QString note = resumeNote(a); !note.isEmpty())
            words << note;
        if (!a.reason.isEmpty())
            words << a.reason;
        out() << "      attempt " << a.attempt << " on " << a.agents.join(QLatin1String(", "))
              << (a.worldSize > 0 && r.config.elastic()
                         ? QStringLiteral(" (%1 worker%2)").arg(a.worldSize).arg(a.worldSize == 1 ? "" : "s")
                         : QString())
              << ": " << words.join(QLatin1String("; ")) << "\n";
    }
}

} // namespace

void printStudy(const StudySnapshot &s)
{
    // Said first: what is shown below is the study without these events.
    for (const QString &skipped : s.unreadableEvents)
        out() << "warning: a journal event could not be read and was skipped: " << skipped << "\n";
    if (s.tune) {
        printTune(s);
        out().flush();
        return;
    }
    out() << "study " << s.studyId << " (" << s.name << "): " << s.state << ", data set " << s.dataset
          << (s.synthetic ? QStringLiteral(" [SYNTHETIC DATA]") : QString()) << "\n";
    const StudyResults results = computeStudyResults(s);
    // The model column, when a run trains another than the default.
    QSet<QString> models;
    for (const RunResult &r : s.runs)
        models.insert(r.config.model);
    const bool modelColumn
        = models.size() > 1 || (models.size() == 1 && *models.cbegin() != QLatin1String(kDefaultModelName));
    const auto modelCell = [&](const QString &model) {
        return modelColumn ? QStringLiteral(" %1").arg(s.modelNames.value(model, modelShortName(model)), -15)
                           : QString();
    };
    out() << QStringLiteral("  %1 %2%3 %4 %5 %6 %7 %8 %9 %10 %11\n")
                 .arg(QStringLiteral("run"), -28)
                 .arg(QStringLiteral("state"), -10)
                 .arg(modelCell(QStringLiteral("model")))
                 .arg(QStringLiteral("workers"), 7)
                 .arg(QStringLiteral("batch"), 5)
                 .arg(QStringLiteral("epochs"), 6)
                 .arg(QStringLiteral("test acc"), 8)
                 .arg(QStringLiteral("wall s"), 8)
                 .arg(QStringLiteral("img/s"), 7)
                 .arg(QStringLiteral("speedup"), 7)
                 .arg(QStringLiteral("effic."), 6);
    bool anyByThroughput = false;
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        const RunOutcome outcome = i < results.runs.size() ? results.runs[i] : RunOutcome {};
        const Speedup &speedup = outcome.shown();
        const QString mark
            = outcome.byThroughputShown() && speedup.available() ? QStringLiteral("t") : QString();
        anyByThroughput = anyByThroughput || !mark.isEmpty();
        out() << QStringLiteral("  %1 %2%3 %4 %5 %6 %7 %8 %9 %10 %11")
                     .arg(r.runId + (r.config.baseline ? QStringLiteral("*") : QString()), -28)
                     .arg(r.state, -10)
                     .arg(modelCell(r.config.model))
                     .arg(r.config.elastic()
                             ? QStringLiteral("%1–%2").arg(r.config.minWorkers).arg(r.config.workers)
                             : QString::number(r.config.workers),
                         7)
                     .arg(r.config.batchSize, 5)
                     .arg(r.config.epochs, 6)
                     .arg(pct(r.finalTestAccuracy), 8)
                     .arg(num(r.wallSeconds, 1), 8)
                     .arg(num(r.imagesPerSecond, 1), 7)
                     .arg(num(speedup.speedup, 2) + mark, 7)
                     .arg(pct(speedup.efficiency) + mark, 6);
        if (r.attempts.size() > 1)
            out() << "  (" << r.attempts.size() << " attempts)";
        if (!r.stateReason.isEmpty())
            out() << "  " << r.stateReason;
        out() << "\n";
        printAttempts(r);
    }
    out() << "  * baseline; speedup = baseline wall-clock / run wall-clock (from the first start of training "
             "to the end: retries, their detection and restarts included); efficiency = speedup / workers\n";
    if (models.size() > 1)
        out() << "  each run is compared with the baseline of its own model\n";
    if (anyByThroughput)
        out()
            << "  t: by images/s (run / baseline): the run trains other epochs than the baseline, or changed "
               "size while it ran (an elastic run), so their wall-clocks do not compare\n";
    if (!results.baselineNote.isEmpty())
        out() << "  " << results.baselineNote << "\n";
    if (!results.baselineWarning.isEmpty())
        out() << "  WARNING: " << results.baselineWarning << "\n";
    printTimeToTarget(s, results);
    printNoise(s);
    printAnatomy(s);
    printNetworkSurvey(s);
    out().flush();
}

} // namespace scalelab::app
