// scalelab-cli study predict ID: what more workers would give, from the study's own
// measurements (core/studies/scaling_model.h).
#include "cli_common.h"
#include "study_cli.h"

#include "scaling_model.h"
#include "study_state.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>

namespace scalelab::app {

using namespace scalelab::core;

namespace {

QString ms(double seconds)
{
    return num(seconds * 1000, seconds < 0.01 ? 2 : 1);
}

void printScaling(const StudyScaling &s, const QList<ScalingPoint> &points, const QString &modelName,
    const CorePlacement &placement)
{
    const ScalingModel &m = s.fit;
    out() << "model " << modelName << ": fitted on " << s.runs.size() << " run(s)\n";
    if (!m.valid) {
        out() << "  no prediction: " << m.problem << "\n";
        return;
    }
    out() << "  compute   " << ms(m.computeIntercept) << " ms + " << ms(m.computePerImage)
          << " ms x batch per step; "
          << "waiting for data " << ms(m.dataPerImage) << " ms x batch\n";
    out() << "  sharing   " << num(m.contention * 1e12, 1) << " ms of compute per GB each rank reduces ("
          << ms(m.contention * m.gradientBytes)
          << " ms a step at 2 workers): collectives on the cores compute runs on\n";
    out() << "  network   latency " << num(m.latency * 1e6, 0) << " us per ring phase, "
          << bandwidthText(m.bandwidth) << ", from the runs' all-reduce probes (" << m.probeHosts
          << " host(s))\n";
    out() << "  overlap   gamma " << num(m.gamma, 2)
          << (m.gammaFitted
                     ? QStringLiteral(" (fitted; 1: the all-reduce adds to compute, large: hidden behind it)")
                     : QStringLiteral(" (assumed: no multi-worker run to fit it)"))
          << "\n";
    out() << "  gradients " << num(m.gradientBytes / 1e6, 1) << " MB all-reduced per step\n";
    if (placement.dedicated())
        out() << "  cores     each rank computes on cores of its own (--machines and --cores-per-machine "
                 "describe machines the ranks share)\n";
    else
        out() << "  cores     " << placement.text() << ", " << m.threadsPerRank
              << " compute thread(s) per rank: where a machine gets more threads than cores, its ranks "
                 "compute that much slower (column 'shared')\n";
    for (const QString &loss : s.losses)
        out() << "  measured: " << loss << "\n";
    for (const HeldOutError &e : s.heldOut)
        if (!e.problem.isEmpty())
            out() << "  check: " << e.runId << " cannot be predicted without it: " << e.problem << "\n";
        else
            out() << "  check: " << e.runId << " (" << e.workers << " workers, batch " << e.batchPerWorker
                  << ") predicted without it " << num(e.predicted, 1) << " img/s, measured "
                  << num(e.measured, 1) << " (" << (e.relativeError() >= 0 ? "+" : "")
                  << num(100 * e.relativeError(), 1) << " %)\n";
    const QString shared
        = placement.dedicated() ? QString() : QStringLiteral(" %1").arg(QStringLiteral("shared"), 6);
    out() << QStringLiteral("  %1 %2 %3 %4%5 %6 %7 %8\n")
                 .arg(QStringLiteral("workers"), 7)
                 .arg(QStringLiteral("batch"), 5)
                 .arg(QStringLiteral("step ms"), 8)
                 .arg(QStringLiteral("exposed ms"), 10)
                 .arg(shared)
                 .arg(QStringLiteral("img/s [95 %]"), -26)
                 .arg(QStringLiteral("speedup"), 7)
                 .arg(QStringLiteral("efficiency [95 %]"));
    for (const ScalingPoint &p : points)
        out() << QStringLiteral("  %1 %2 %3 %4%5 %6 %7 %8\n")
                     .arg(p.workers, 7)
                     .arg(p.batchPerWorker, 5)
                     .arg(ms(p.stepSeconds), 8)
                     .arg(ms(p.exposedSeconds), 10)
                     .arg(placement.dedicated() ? QString()
                                                : QStringLiteral(" %1").arg(num(p.coreShare, 2), 6))
                     .arg(QStringLiteral("%1 [%2, %3]")
                              .arg(num(p.imagesPerSecond, 1), num(p.imagesPerSecondLow, 1),
                                  num(p.imagesPerSecondHigh, 1)),
                         -26)
                     .arg(num(p.speedup, 2), 7)
                     .arg(QStringLiteral("%1 [%2, %3]")
                              .arg(pct(p.efficiency), pct(p.efficiencyLow), pct(p.efficiencyHigh)));
    for (const QString &note : m.notes)
        out() << "  note: " << note << "\n";
}

} // namespace

int predictStudy(const QStringList &arguments)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    parser.addPositionalArgument(QStringLiteral("id"), QStringLiteral("Study id."));
    parser.addOption({ QStringLiteral("workers"),
        QStringLiteral("Worker counts to predict, comma-separated (default 1,2,4,...,512)."),
        QStringLiteral("list") });
    parser.addOption({ QStringLiteral("batch-size"),
        QStringLiteral("Batch per worker (default: the study's most common)."), QStringLiteral("n") });
    parser.addOption({ QStringLiteral("bandwidth"),
        QStringLiteral(
            "The link to assume instead of the one measured: 10Gbit, 1Gbit/s, 100Mbit, 125MB/s, or "
            "bytes per second."),
        QStringLiteral("rate") });
    parser.addOption({ QStringLiteral("model"),
        QStringLiteral("Only the runs of this model (a study comparing models fits one model each)."),
        QStringLiteral("name") });
    parser.addOption({ QStringLiteral("machines"),
        QStringLiteral("Machines the ranks are dealt over, round-robin (with --cores-per-machine); by "
                       "default each rank computes on cores of its own."),
        QStringLiteral("n") });
    parser.addOption({ QStringLiteral("cores-per-machine"),
        QStringLiteral("Cores of each of those machines: ranks that get more compute threads than "
                       "cores on a machine share them and compute slower."),
        QStringLiteral("n") });
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral(
                "Predict step time, images/s, speedup and efficiency at other worker counts, batches and "
                "bandwidths, from the study's measured step anatomy and network probes (a ring all-reduce "
                "overlapped with compute, AdaptDL/Pollux's model), with a 95 % bootstrap band."),
            &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(
            QStringLiteral("give one study id: scalelab-cli study predict ID [--workers 8,16,64]"));
    QList<int> workers = defaultPredictionWorkers();
    if (parser.isSet(QStringLiteral("workers"))) {
        workers.clear();
        for (const QString &item : parser.value(QStringLiteral("workers")).split(u',', Qt::SkipEmptyParts)) {
            bool ok = false;
            const int p = item.trimmed().toInt(&ok);
            if (!ok || p < 1 || p > 65536)
                return badInput(QStringLiteral(
                    "--workers takes worker counts from 1 to 65536, comma-separated (got '%1')")
                                    .arg(item));
            workers << p;
        }
    }
    int batch = 0;
    if (parser.isSet(QStringLiteral("batch-size"))) {
        bool ok = false;
        batch = parser.value(QStringLiteral("batch-size")).toInt(&ok);
        if (!ok || batch < 1 || batch > 65536)
            return badInput(QStringLiteral("--batch-size takes images per worker, 1 to 65536"));
    }
    double bandwidth = 0;
    if (parser.isSet(QStringLiteral("bandwidth"))) {
        bandwidth = parseBandwidth(parser.value(QStringLiteral("bandwidth")));
        if (!(bandwidth > 0))
            return badInput(
                QStringLiteral("--bandwidth: '%1' is not a rate; write 10Gbit, 1Gbit/s, 100Mbit, 125MB/s or "
                               "bytes per second")
                    .arg(parser.value(QStringLiteral("bandwidth"))));
    }
    CorePlacement placement;
    if (parser.isSet(QStringLiteral("machines")) != parser.isSet(QStringLiteral("cores-per-machine")))
        return badInput(QStringLiteral("--machines and --cores-per-machine go together: the machines the "
                                       "ranks share, and the cores of each (e.g. --machines 4 "
                                       "--cores-per-machine 32)"));
    if (parser.isSet(QStringLiteral("machines"))) {
        bool okMachines = false, okCores = false;
        placement.machines = parser.value(QStringLiteral("machines")).toInt(&okMachines);
        placement.coresPerMachine = parser.value(QStringLiteral("cores-per-machine")).toInt(&okCores);
        if (!okMachines || placement.machines < 1 || placement.machines > 65536)
            return badInput(QStringLiteral("--machines takes a count of machines, 1 to 65536 (got '%1')")
                                .arg(parser.value(QStringLiteral("machines"))));
        if (!okCores || placement.coresPerMachine < 1 || placement.coresPerMachine > 65536)
            return badInput(QStringLiteral("--cores-per-machine takes the cores of one machine, 1 to 65536 "
                                           "(got '%1')")
                                .arg(parser.value(QStringLiteral("cores-per-machine"))));
    }
    Journal journal;
    QString studyId;
    if (!openStudy(parser, &journal, &studyId))
        return BadInput;
    const StudySnapshot snapshot = buildSnapshot(StudyState::replay(journal.events(studyId)), journal);
    QList<StudyScaling> all = studyScaling(snapshot);
    if (parser.isSet(QStringLiteral("model"))) {
        const QString wanted = parser.value(QStringLiteral("model"));
        all.removeIf([&](const StudyScaling &s) {
            return s.model != wanted && snapshot.modelNames.value(s.model) != wanted;
        });
        if (all.isEmpty())
            return badInput(QStringLiteral("no finished run of model '%1' in study %2").arg(wanted, studyId));
    }
    if (all.isEmpty()) {
        err() << "scalelab-cli: study " << studyId
              << " has no finished run with a measured step anatomy yet: "
              << "nothing to predict from\n";
        return RunFailed;
    }
    QJsonArray models;
    bool anyValid = false;
    if (!parser.isSet(QStringLiteral("json")))
        out() << "study " << studyId << " (" << snapshot.name << "): predictions from its own runs"
              << (snapshot.synthetic ? QStringLiteral(" [SYNTHETIC DATA]") : QString()) << "\n";
    for (const StudyScaling &s : all) {
        const QList<ScalingPoint> points = predictWithBand(
            s.runs, workers, batch > 0 ? batch : s.batchPerWorker, bandwidth, 200, placement);
        anyValid = anyValid || s.fit.valid;
        if (parser.isSet(QStringLiteral("json"))) {
            QJsonObject o = scalingJson(s, points);
            o.insert(QStringLiteral("placement"),
                placement.dedicated() ? QJsonObject { { QStringLiteral("dedicated"), true } }
                                      : QJsonObject { { QStringLiteral("machines"), placement.machines },
                                          { QStringLiteral("coresPerMachine"), placement.coresPerMachine },
                                          { QStringLiteral("threadsPerRank"), s.fit.threadsPerRank } });
            models.append(o);
        } else {
            printScaling(s, points, scalingLabel(s, snapshot.modelNames), placement);
        }
    }
    if (parser.isSet(QStringLiteral("json")))
        out() << QJsonDocument(
            QJsonObject { { QStringLiteral("studyId"), studyId }, { QStringLiteral("models"), models } })
                     .toJson(QJsonDocument::Compact)
              << "\n";
    else
        out() << "  speedup = predicted images/s / one worker's at the same batch per worker; efficiency = "
                 "speedup / "
                 "workers; [95 %]: bootstrap over runs, steps and probe repeats\n";
    out().flush();
    return anyValid ? Ok : RunFailed;
}

} // namespace scalelab::app
