// The tables a study's report and a tune's share (report_tables.h).
#include "report_tables.h"

#include "plan_models.h"
#include "study_plan.h"

#include <QJsonArray>
#include <QJsonObject>

#include <cmath>

namespace scalelab::core {

namespace {

QString memoryText(qint64 bytes)
{
    return bytes > 0 ? QStringLiteral("%1 GiB").arg(double(bytes) / (1024.0 * 1024 * 1024), 0, 'f', 1)
                     : kDash;
}

// Why an attempt ended (or how it resumed), after why its size changed, if it did.
QString attemptReason(const AttemptRecord &a)
{
    QStringList parts;
    if (!a.resize.isEmpty())
        parts
            << QStringLiteral("%1 worker%2: %3").arg(a.worldSize).arg(a.worldSize == 1 ? "" : "s", a.resize);
    if (!a.reason.isEmpty())
        parts << a.reason;
    else if (!resumeNote(a).isEmpty())
        parts << resumeNote(a);
    return parts.isEmpty() ? kDash : parts.join(QStringLiteral("\n"));
}

} // namespace

ReportTable attemptTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("Retries and failures");
    t.caption = snapshot.tune
        ? QStringLiteral(
            "Every attempt of a trial that failed or was cancelled. A trial's other attempts are its "
            "rungs: each ends at a rung, and the next resumes from its checkpoint.")
        : QStringLiteral("Every attempt of the runs that were retried, changed size (elastic runs: a RESIZED "
                         "attempt was stopped at a checkpoint to grow back) or did not succeed.");
    t.headers = QStringList { QStringLiteral("Run"), QStringLiteral("Attempt"), QStringLiteral("Outcome"),
        QStringLiteral("Agents"), QStringLiteral("Resumed from epoch"), QStringLiteral("Started"),
        QStringLiteral("Duration (s)"), QStringLiteral("Reason") };
    t.numeric = { false, true, false, false, true, false, true, false };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], t.headers[2], t.headers[3],
        QStringLiteral("Resumed\nfrom epoch"), t.headers[5], QStringLiteral("Duration\n(s)"), t.headers[7] };
    for (const RunResult &run : snapshot.runs) {
        if (run.attempts.size() <= 1 && isSucceeded(run))
            continue;
        if (snapshot.tune) {
            // A trial's attempts end at its rungs: only those that did not get there count.
            for (const AttemptRecord &a : run.attempts) {
                if (a.outcome == QLatin1String("SUCCEEDED") || a.outcome == QLatin1String("RUNNING"))
                    continue;
                const double seconds = a.endedUnixMs > 0 && a.startedUnixMs > 0
                    ? double(a.endedUnixMs - a.startedUnixMs) / 1000.0
                    : kNotMeasured;
                t.rows.append(
                    { run.runId, QString::number(a.attempt), a.outcome, a.agents.join(QStringLiteral("\n")),
                        a.resumedFromEpoch > 0 ? QString::number(a.resumedFromEpoch)
                                               : QStringLiteral("fresh start"),
                        formatUnixMs(a.startedUnixMs), formatSeconds(seconds),
                        a.reason.isEmpty() ? kDash : a.reason });
                t.mutedRows.append(true);
            }
            continue;
        }
        if (run.attempts.isEmpty()) {
            t.rows.append({ run.runId, kDash, run.state, kDash, kDash, kDash, kDash, run.stateReason });
            t.mutedRows.append(true);
        }
        for (const AttemptRecord &a : run.attempts) {
            const double seconds = a.endedUnixMs > 0 && a.startedUnixMs > 0
                ? double(a.endedUnixMs - a.startedUnixMs) / 1000.0
                : kNotMeasured;
            t.rows.append({ run.runId, QString::number(a.attempt), a.outcome,
                a.agents.join(QStringLiteral("\n")),
                a.resumedFromEpoch > 0 ? QString::number(a.resumedFromEpoch) : QStringLiteral("fresh start"),
                formatUnixMs(a.startedUnixMs), formatSeconds(seconds), attemptReason(a) });
            t.mutedRows.append(a.outcome != QLatin1String("SUCCEEDED"));
        }
    }
    t.emptyText = snapshot.tune ? QStringLiteral("No attempt of a trial failed.")
                                : QStringLiteral("Every run succeeded on its first attempt.");
    return t;
}

ReportTable nodeTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("Machines");
    t.headers = QStringList { QStringLiteral("Agent"), QStringLiteral("Host"),
        QStringLiteral("Agent version"), QStringLiteral("CPU"), QStringLiteral("CPU cores"),
        QStringLiteral("Memory"), QStringLiteral("GPUs"), QStringLiteral("OS") };
    t.numeric = { false, false, false, false, true, true, false, false };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], QStringLiteral("Agent\nversion"), t.headers[3],
        QStringLiteral("CPU\ncores"), t.headers[5], t.headers[6], t.headers[7] };
    for (const NodeInfo &n : snapshot.nodes) {
        const QString commit = n.software.value(QStringLiteral("git_commit"));
        t.rows.append({ n.agent, n.hostname.isEmpty() ? kDash : n.hostname,
            n.agentVersion.isEmpty()
                ? kDash
                : n.agentVersion + (commit.isEmpty() ? QString() : QStringLiteral(" (git %1)").arg(commit)),
            n.cpuModel.isEmpty() ? kDash : n.cpuModel, n.cpuCores > 0 ? QString::number(n.cpuCores) : kDash,
            memoryText(n.memoryBytes),
            n.gpus.isEmpty() ? (
                n.gpuStatus.isEmpty() ? QStringLiteral("none") : QStringLiteral("none (%1)").arg(n.gpuStatus))
                             : n.gpus.join(QStringLiteral("\n")),
            n.os.isEmpty() ? kDash : n.os });
        t.mutedRows.append(false);
    }
    t.emptyText = QStringLiteral("No machine details were recorded.");
    return t;
}

// One row per run: the recipe it trained with, as its worker reported it.
ReportTable recipeTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("Recipes");
    t.caption = QStringLiteral(
        "What each run trained with, after defaults and scaling rules, as its worker reported it. The JSON "
        "report adds every other setting and the worker's command line; `scalelab-cli study rerun "
        "REPORT.json` "
        "runs the study again.");
    t.headers = QStringList { QStringLiteral("Run"), QStringLiteral("Peak LR"), QStringLiteral("Momentum"),
        QStringLiteral("Weight decay"), QStringLiteral("Warm-up"), QStringLiteral("Schedule"),
        QStringLiteral("Label smoothing"), QStringLiteral("Seed"),
        QStringLiteral("Normalisation (mean / std)"), QStringLiteral("Data set") };
    t.numeric = { false, true, true, true, true, false, true, true, false, false };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], t.headers[2], QStringLiteral("Weight\ndecay"),
        t.headers[4], t.headers[5], QStringLiteral("Label\nsmoothing"), t.headers[7],
        QStringLiteral("Normalisation\n(mean / std)"), t.headers[9] };
    const auto number = [](const QJsonValue &v) {
        return v.isDouble() ? QString::number(v.toDouble(), 'g', QLocale::FloatingPointShortest) : kDash;
    };
    const auto triple = [](const QJsonValue &v) {
        QStringList parts;
        for (const auto &x : v.toArray())
            parts << QString::number(x.toDouble(), 'f', 4);
        return parts.join(QLatin1Char(' '));
    };
    for (const RunResult &run : snapshot.runs) {
        const QJsonObject &r = run.recipe;
        if (r.isEmpty())
            continue;
        const QString sha = r.value(QLatin1String("dataset_sha256")).toString();
        t.rows.append({ run.runId, number(r.value(QLatin1String("peak_learning_rate"))),
            number(r.value(QLatin1String("momentum"))), number(r.value(QLatin1String("weight_decay"))),
            QStringLiteral("%1 epochs (%2 steps)")
                .arg(number(r.value(QLatin1String("warmup_epochs"))),
                    number(r.value(QLatin1String("warmup_steps")))),
            r.value(QLatin1String("finetune_head_epochs")).toInt() > 0
                ? QStringLiteral("%1 after %2 head-only epoch(s): %3 at %4, the rest frozen")
                      .arg(r.value(QLatin1String("schedule")).toString(),
                          number(r.value(QLatin1String("finetune_head_epochs"))),
                          r.value(QLatin1String("finetune_head")).toString(),
                          number(r.value(QLatin1String("finetune_head_learning_rate"))))
                : r.value(QLatin1String("schedule")).toString(),
            number(r.value(QLatin1String("label_smoothing"))), r.value(QLatin1String("seed")).toString(),
            QStringLiteral("%1 / %2").arg(triple(r.value(QLatin1String("normalize_mean"))),
                triple(r.value(QLatin1String("normalize_std")))),
            QStringLiteral("%1: %2 train / %3 test images%4")
                .arg(r.value(QLatin1String("dataset")).toString(),
                    number(r.value(QLatin1String("dataset_train_images"))),
                    number(r.value(QLatin1String("dataset_test_images"))),
                    sha.isEmpty() ? QString() : QStringLiteral(", sha256 %1…").arg(sha.left(12))) });
        t.mutedRows.append(run.state != QLatin1String("SUCCEEDED"));
    }
    t.emptyText = QStringLiteral("No run has started yet.");
    return t;
}

// One row per model the study trains: its size and cost per step, as its first started
// run's worker measured them (model_zoo.h's ModelCost).
ReportTable modelTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("Models");
    t.caption = QStringLiteral(
        "Gradient: the bytes each rank all-reduces per step (every trainable parameter's gradient). "
        "Forward FLOPs: one 32×32 image, counted by libtorch's profiler (2 per multiply-add of convolutions "
        "and matrix products, 1 per element of additions and multiplications; normalisation and activations "
        "not counted). A training step costs about three forwards per image (backward about two).");
    t.headers = QStringList { QStringLiteral("Model"), QStringLiteral("Parameters"),
        QStringLiteral("Gradient per step"), QStringLiteral("Forward FLOPs / image"),
        QStringLiteral("Training FLOPs / image (≈3×)"), QStringLiteral("Runs") };
    t.numeric = { false, true, true, true, true, true };
    t.shortHeaders = QStringList { t.headers[0], t.headers[1], QStringLiteral("Gradient\nper step"),
        QStringLiteral("Forward\nFLOPs / image"), QStringLiteral("Training FLOPs\n/ image (≈3×)"),
        t.headers[5] };
    QStringList models;
    QMap<QString, QJsonObject> measured;
    QMap<QString, int> runs;
    for (const RunResult &run : snapshot.runs) {
        const QString model = run.config.model;
        if (!models.contains(model))
            models << model;
        ++runs[model];
        if (!measured.contains(model)
            && run.recipe.value(QLatin1String("forward_flops_per_image")).toDouble() > 0)
            measured.insert(model, run.recipe);
    }
    const auto giga = [](double flops) {
        return flops > 0 ? QStringLiteral("%1 GFLOP").arg(flops / 1e9, 0, 'f', 3) : kDash;
    };
    QLocale grouped = QLocale::c(); // 11,173,962
    grouped.setNumberOptions({});
    v1::StudyPlan plan;
    if (const auto parsed = parsePlanJson(snapshot.planJson))
        plan = *parsed;
    for (const QString &model : models) {
        const QJsonObject r = measured.value(model);
        const double parameters = r.value(QLatin1String("parameters")).toDouble();
        const double bytes = r.value(QLatin1String("gradient_bytes")).toDouble();
        const double flops = r.value(QLatin1String("forward_flops_per_image")).toDouble();
        const QString name = model.startsWith(QLatin1String("sha256:"))
            ? QStringLiteral("%1 (TorchScript, %2)").arg(modelDisplayName(plan, model), modelShortName(model))
            : model;
        t.rows.append({ name, parameters > 0 ? grouped.toString(qint64(parameters)) : kDash,
            bytes >= 1e6    ? QStringLiteral("%1 MB").arg(bytes / 1e6, 0, 'f', 1)
                : bytes > 0 ? QStringLiteral("%1 kB").arg(bytes / 1e3, 0, 'f', 1)
                            : kDash,
            giga(flops), giga(3 * flops), QString::number(runs.value(model)) });
        t.mutedRows.append(r.isEmpty());
    }
    t.emptyText = QStringLiteral("The study has no runs yet.");
    return t;
}

ReportTable softwareTable(const StudySnapshot &snapshot)
{
    ReportTable t;
    t.title = QStringLiteral("Software");
    t.headers = QStringList { QStringLiteral("Component"), QStringLiteral("Version") };
    t.numeric = { false, false };
    for (auto it = snapshot.software.cbegin(); it != snapshot.software.cend(); ++it) {
        t.rows.append({ it.key(), it.value() });
        t.mutedRows.append(false);
    }
    t.emptyText = QStringLiteral("No software versions were recorded.");
    return t;
}

} // namespace scalelab::core
