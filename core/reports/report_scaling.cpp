#include "report_scaling.h"

#include "goodput_model.h"

#include "scaling_model.h"

#include <QJsonArray>
#include <QJsonObject>

#include <cmath>

namespace scalelab::core {

// One row per run: where its steps' time went (rank 0's mean), the time outside them, and
// its slowest rank.
ReportTable networkTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("The network between the hosts");
    t.caption = QStringLiteral(
                    "Probed once at the study's start, before its runs: c10d all-reduces of 4 KB to "
                    "64 MB, the ranks dealt over the hosts (2, 4 … N of them) and 2 on one host, fitted to a "
                    "ring all-reduce, t = 2(p−1)·latency + 2(p−1)/p·bytes/bandwidth. Fit error: the "
                    "largest gap between that line and a measured size. ")
        + snapshot.networkNote;
    t.headers = QStringList { QStringLiteral("Ranks"), QStringLiteral("Layout"), QStringLiteral("Hosts"),
        QStringLiteral("Backend"), QStringLiteral("Latency (µs)"), QStringLiteral("Bandwidth"),
        QStringLiteral("Fit error") };
    t.numeric = { true, false, false, false, true, false, true };
    for (const QJsonValue &value : snapshot.networkProbes) {
        const QJsonObject p = value.toObject();
        QStringList hosts;
        for (const QJsonValue &h : p.value(QLatin1String("hosts")).toArray())
            hosts << h.toString();
        const QStringList start { QString::number(p.value(QLatin1String("world_size")).toInt()),
            p.value(QLatin1String("layout")).toString(), hosts.join(QStringLiteral(", ")),
            p.value(QLatin1String("network")).toObject().value(QLatin1String("backend")).toString() };
        if (p.contains(QLatin1String("error"))) {
            t.rows.append(start
                + QStringList { QStringLiteral("-"),
                    QStringLiteral("failed: ") + p.value(QLatin1String("error")).toString(),
                    QStringLiteral("-") });
            t.mutedRows.append(true);
            continue;
        }
        t.rows.append(start
            + QStringList {
                QString::number(p.value(QLatin1String("latency_seconds")).toDouble() * 1e6, 'f', 0),
                bandwidthText(p.value(QLatin1String("bandwidth_bytes_per_second")).toDouble()),
                QString::number(100 * p.value(QLatin1String("fit_worst_relative_error")).toDouble(), 'f', 0)
                    + QStringLiteral(" %") });
        t.mutedRows.append(false);
    }
    t.emptyText = snapshot.networkNote.isEmpty() ? QStringLiteral("Not probed.") : snapshot.networkNote;
    return t;
}

ReportTable anatomyTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("Where the time goes");
    t.caption = QStringLiteral("Per step, rank 0's mean in milliseconds: waiting for the batch (data), "
                               "forward, backward until its last "
                               "gradient, the all-reduce backward did not hide (exposed), the optimizer. "
                               "Outside the steps, over the run: "
                               "evaluation and checkpoints, in seconds. The slowest rank is the one whose "
                               "own work (all but the wait for "
                               "the others) took longest, with its lag behind the median rank per step: a "
                               "straggler every all-reduce waits "
                               "for.");
    t.headers = QStringList { QStringLiteral("Run"), QStringLiteral("Data"), QStringLiteral("Forward"),
        QStringLiteral("Backward"), QStringLiteral("Exposed all-reduce"), QStringLiteral("Optimizer"),
        QStringLiteral("Step"), QStringLiteral("Evaluation (s)"), QStringLiteral("Checkpoints (s)"),
        QStringLiteral("Slowest rank") };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], t.headers[2], t.headers[3],
        QStringLiteral("Exposed\nall-reduce"), t.headers[5], t.headers[6], QStringLiteral("Eval\n(s)"),
        QStringLiteral("Ckpt\n(s)"), QStringLiteral("Slowest\nrank") };
    t.numeric = { false, true, true, true, true, true, true, true, true, false };
    const auto ms = [](double seconds) { return QString::number(seconds * 1000, 'f', 1); };
    for (const RunResult &run : snapshot.runs) {
        const RunAnatomy &a = run.anatomy;
        if (!a.measured())
            continue;
        t.rows.append({ run.runId, ms(a.perStep.data), ms(a.perStep.forward), ms(a.perStep.backward),
            ms(a.perStep.exposedAllReduce), ms(a.perStep.optimizer), ms(a.perStep.total()),
            QString::number(a.evaluationSeconds, 'f', 1), QString::number(a.checkpointSeconds, 'f', 1),
            a.slowestRank >= 0
                ? QStringLiteral("rank %1, +%2 ms").arg(a.slowestRank).arg(ms(a.slowestLagSeconds))
                : kDash });
        t.mutedRows.append(run.state != QLatin1String("SUCCEEDED"));
    }
    t.emptyText = QStringLiteral("No run has finished an epoch with a measured step anatomy yet.");
    return t;
}

// Per model: the scaling model fitted on the study's runs, how well it predicts each of
// them held out, and what it predicts out to 512 workers.
QList<ReportTable> scalingTables(const StudySnapshot &snapshot)
{
    QList<ReportTable> tables;
    for (const StudyScaling &s : studyScaling(snapshot)) {
        const QString name = scalingLabel(s, snapshot.modelNames);
        ReportTable t;
        t.title = QStringLiteral("What more workers would give: %1").arg(name);
        if (!s.fit.valid) {
            t.caption = QStringLiteral("No prediction: %1.").arg(s.fit.problem);
            t.emptyText = t.caption;
            tables << t;
            continue;
        }
        const ScalingModel &m = s.fit;
        QStringList words = s.losses;
        QList<double> errors;
        for (const HeldOutError &e : s.heldOut) {
            if (!e.problem.isEmpty()) {
                words << QStringLiteral("%1 cannot be predicted without it (%2)").arg(e.runId, e.problem);
                continue;
            }
            words << QStringLiteral("%1 (%2 workers) predicted without it: %3 img/s, measured %4 (%5%6 %)")
                         .arg(e.runId)
                         .arg(e.workers)
                         .arg(e.predicted, 0, 'f', 1)
                         .arg(e.measured, 0, 'f', 1)
                         .arg(e.relativeError() >= 0 ? QStringLiteral("+") : QString())
                         .arg(100 * e.relativeError(), 0, 'f', 1);
            errors << std::abs(e.relativeError());
        }
        t.caption = QStringLiteral(
            "Step time = data + ((compute)^γ + (all-reduce)^γ)^(1/γ), a ring all-reduce of the gradients "
            "overlapped "
            "with compute (AdaptDL/Pollux's model), compute slowed by the communication it shares cores "
            "with. Fitted "
            "on %1 run(s): compute %2 ms + %3 ms × batch (+%10 ms a step at 2 workers); network "
            "latency %4 µs, %5 (from the runs' all-reduce probes, %6 host(s)); γ %7; %8 MB of gradients a "
            "step. %9 "
            "Band: 95 % of 200 bootstrap refits. Speedup: against one worker at the same batch per worker.")
                        .arg(s.runs.size())
                        .arg(m.computeIntercept * 1000, 0, 'f', 1)
                        .arg(m.computePerImage * 1000, 0, 'f', 2)
                        .arg(m.latency * 1e6, 0, 'f', 0)
                        .arg(bandwidthText(m.bandwidth))
                        .arg(m.probeHosts)
                        .arg(m.gamma, 0, 'f', 2)
                        .arg(m.gradientBytes / 1e6, 0, 'f', 1)
                        .arg((words + m.notes).join(QStringLiteral(". ")) + QStringLiteral("."))
                        .arg(m.contention * m.gradientBytes * 1000, 0, 'f', 1);
        t.headers = QStringList { QStringLiteral("Workers"), QStringLiteral("Batch per worker"),
            QStringLiteral("Step (ms)"), QStringLiteral("Exposed all-reduce (ms)"),
            QStringLiteral("Images/s"), QStringLiteral("Images/s, 95 % band"), QStringLiteral("Speedup"),
            QStringLiteral("Efficiency"), QStringLiteral("Efficiency, 95 % band") };
        t.numeric = { true, true, true, true, true, false, true, true, false };
        for (const ScalingPoint &p : predictWithBand(s.runs, defaultPredictionWorkers(), s.batchPerWorker))
            t.rows.append({ QString::number(p.workers), QString::number(p.batchPerWorker),
                QString::number(p.stepSeconds * 1000, 'f', 1),
                QString::number(p.exposedSeconds * 1000, 'f', 1), QString::number(p.imagesPerSecond, 'f', 1),
                QStringLiteral("%1 – %2")
                    .arg(p.imagesPerSecondLow, 0, 'f', 1)
                    .arg(p.imagesPerSecondHigh, 0, 'f', 1),
                formatSpeedup(p.speedup), formatPercent(p.efficiency, 0),
                QStringLiteral("%1 – %2").arg(
                    formatPercent(p.efficiencyLow, 0), formatPercent(p.efficiencyHigh, 0)) });
        tables << t;
    }
    return tables;
}

namespace {

QString band(const Banded &b, int decimals)
{
    return QStringLiteral("%1 – %2").arg(b.low, 0, 'f', decimals).arg(b.high, 0, 'f', decimals);
}

QString basisCaption(const GoodputBasis &b)
{
    return QStringLiteral(
        "Epochs to the target at global batch M = the reference's measured epochs / statistical efficiency "
        "(B_noise + M0) / (B_noise + M) (McCandlish et al. 2018; Pollux's goodput); time = epochs × %1 "
        "images / "
        "the predicted images/s (training time: evaluation and checkpoints excluded). Reference: %2 "
        "worker(s) × "
        "%3 (M0 = %4), %5 epochs to the target (%6 run(s), %7). B_noise = %8 images (%9 run(s), %10 "
        "estimator, "
        "%11): the runs' measured B_simple averaged over their epochs up to the target. Bands: the lowest "
        "and "
        "highest the repeats, the noise scales and the throughput's 95 % band allow. Efficiency by time: the "
        "time-to-target speedup / the workers' ratio; by throughput: as in the table above. %12.")
        .arg(b.imagesPerEpoch, 0, 'f', 0)
        .arg(b.referenceWorkers)
        .arg(b.referenceBatch)
        .arg(b.referenceGlobalBatch)
        .arg(b.epochs.value, 0, 'f', 2)
        .arg(b.epochRuns)
        .arg(band(b.epochs, 2))
        .arg(b.noiseScale.value, 0, 'f', 0)
        .arg(b.noiseRuns)
        .arg(b.noiseEstimator)
        .arg(band(b.noiseScale, 0))
        .arg(b.notes.join(QStringLiteral("; ")));
}

} // namespace

QList<ReportTable> timeToTargetTables(const StudySnapshot &snapshot)
{
    QList<ReportTable> tables;
    if (!(snapshot.targetAccuracy > 0) || snapshot.tune)
        return tables;
    for (const StudyScaling &s : studyScaling(snapshot)) {
        ReportTable t;
        t.title = QStringLiteral("Time to %1 test accuracy at more workers: %2")
                      .arg(formatPercent(snapshot.targetAccuracy, 0), scalingLabel(s, snapshot.modelNames));
        const StudyGoodput g = studyGoodput(snapshot, s, snapshot.targetAccuracy, defaultPredictionWorkers());
        if (!g.basis.valid) {
            t.caption = QStringLiteral("No prediction: %1.").arg(g.basis.problem);
            t.emptyText = t.caption;
            tables << t;
            continue;
        }
        t.caption = basisCaption(g.basis);
        t.headers = QStringList { QStringLiteral("Workers"), QStringLiteral("Global batch"),
            QStringLiteral("Statistical efficiency"), QStringLiteral("Epochs to target"),
            QStringLiteral("Epochs, band"), QStringLiteral("Goodput (images/s)"),
            QStringLiteral("Time to target"), QStringLiteral("Time, band"), QStringLiteral("Speedup by time"),
            QStringLiteral("Efficiency by time"), QStringLiteral("Efficiency by throughput"),
            QStringLiteral("Past the critical batch") };
        t.numeric = { true, true, true, true, false, true, true, false, true, true, true, false };
        for (int i = 0; i < g.points.size(); ++i) {
            const GoodputPoint &p = g.points[i];
            t.rows.append({ QString::number(p.workers), QString::number(p.globalBatch),
                formatPercent(p.efficiency.value, 0), QString::number(p.epochs.value, 'f', 2),
                band(p.epochs, 2), QString::number(p.goodput.value, 'f', 1), durationText(p.seconds.value),
                QStringLiteral("%1 – %2").arg(durationText(p.seconds.low), durationText(p.seconds.high)),
                formatSpeedup(p.speedup.value), formatPercent(p.scalingEfficiency.value, 0),
                formatPercent(g.throughput[i].efficiency, 0),
                p.pastCritical() ? QStringLiteral("yes: %1× B_noise").arg(p.overNoiseScale, 0, 'f', 1)
                                 : QString() });
        }
        tables << t;
    }
    return tables;
}

} // namespace scalelab::core
