// scalelab-cli study predict ID: what more workers would give, from the study's own
// measurements (core/studies/scaling_model.h).
#include "cli_common.h"
#include "study_cli.h"

#include "goodput_model.h"
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

// Time to the target at each point, after the throughput table.
void printGoodput(const GoodputBasis &basis, const QList<GoodputPoint> &points)
{
    if (!basis.valid) {
        out() << "  time to " << pct(basis.target) << ": no prediction: " << basis.problem << "\n";
        return;
    }
    out() << "  time to " << pct(basis.target) << " test accuracy: the reference, " << basis.referenceWorkers
          << " worker(s) x " << basis.referenceBatch << ", reached it in " << num(basis.epochs.value, 2)
          << " epochs [" << num(basis.epochs.low, 2) << ", " << num(basis.epochs.high, 2) << "] over "
          << basis.epochRuns << " run(s); B_noise " << num(basis.noiseScale.value, 0) << " ["
          << num(basis.noiseScale.low, 0) << ", " << num(basis.noiseScale.high, 0) << "] images ("
          << basis.noiseEstimator << ", " << basis.noiseRuns << " run(s))\n";
    out() << QStringLiteral("  %1 %2 %3 %4 %5 %6 %7 %8\n")
                 .arg(QStringLiteral("workers"), 7)
                 .arg(QStringLiteral("global"), 6)
                 .arg(QStringLiteral("stat. eff."), 10)
                 .arg(QStringLiteral("epochs [band]"), -22)
                 .arg(QStringLiteral("goodput img/s"), 13)
                 .arg(QStringLiteral("time to target [band]"), -30)
                 .arg(QStringLiteral("speedup [band]"), -20)
                 .arg(QStringLiteral("efficiency"));
    for (const GoodputPoint &p : points)
        out() << QStringLiteral("  %1 %2 %3 %4 %5 %6 %7 %8%9\n")
                     .arg(p.workers, 7)
                     .arg(p.globalBatch, 6)
                     .arg(pct(p.efficiency.value), 10)
                     .arg(QStringLiteral("%1 [%2, %3]")
                              .arg(num(p.epochs.value, 2), num(p.epochs.low, 2), num(p.epochs.high, 2)),
                         -22)
                     .arg(num(p.goodput.value, 1), 13)
                     .arg(QStringLiteral("%1 [%2, %3]")
                              .arg(durationText(p.seconds.value), durationText(p.seconds.low),
                                  durationText(p.seconds.high)),
                         -30)
                     .arg(QStringLiteral("%1 [%2, %3]")
                              .arg(num(p.speedup.value, 2), num(p.speedup.low, 2), num(p.speedup.high, 2)),
                         -20)
                     .arg(pct(p.scalingEfficiency.value), 10)
                     .arg(p.pastCritical() ? QStringLiteral("  past the critical batch") : QString());
    for (const QString &note : basis.notes)
        out() << "  note: " << note << "\n";
}

// "0.9", "90%" or "90" as a fraction; NaN when it is none.
double parseTarget(const QString &text)
{
    QString t = text.trimmed();
    const bool percent = t.endsWith(u'%');
    if (percent)
        t.chop(1);
    bool ok = false;
    double v = t.toDouble(&ok);
    if (!ok)
        return kNotMeasured;
    if (percent || v > 1)
        v /= 100;
    return v > 0 && v <= 1 ? v : kNotMeasured;
}

// "30m", "2h", "90s", "1.5h" in seconds; NaN when it is none.
double parseDuration(const QString &text)
{
    const QString t = text.trimmed();
    if (t.isEmpty())
        return kNotMeasured;
    const QChar unit = t.back();
    const double scale = unit == u's' ? 1
        : unit == u'm'                ? 60
        : unit == u'h'                ? 3600
        : unit == u'd'                ? 86400
                                      : 0;
    bool ok = false;
    const double v = t.left(t.size() - 1).toDouble(&ok);
    return ok && scale > 0 && v > 0 ? v * scale : kNotMeasured;
}

// What predict and recommend share: which study, which worker counts, batch and link.
struct PredictOptions {
    QList<int> workers = defaultPredictionWorkers();
    int batch = 0;
    double bandwidth = 0;
    CorePlacement placement;
    double target = kNotMeasured; // NaN: the study's own
};

void addPredictOptions(QCommandLineParser &parser)
{
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
    parser.addOption({ QStringLiteral("target"),
        QStringLiteral("Test accuracy to predict the time to (0.9, 90%; default: the study's target): epochs "
                       "to it from the measured gradient noise scale, and time to it from the throughput."),
        QStringLiteral("acc") });
}

int parseWorkerList(const QString &text, QList<int> *workers)
{
    workers->clear();
    for (const QString &item : text.split(u',', Qt::SkipEmptyParts)) {
        bool ok = false;
        const int p = item.trimmed().toInt(&ok);
        if (!ok || p < 1 || p > 65536)
            return badInput(
                QStringLiteral("--workers takes worker counts from 1 to 65536, comma-separated (got '%1')")
                    .arg(item));
        *workers << p;
    }
    return Ok;
}

int parsePlacement(const QCommandLineParser &parser, CorePlacement *placement)
{
    if (parser.isSet(QStringLiteral("machines")) != parser.isSet(QStringLiteral("cores-per-machine")))
        return badInput(QStringLiteral("--machines and --cores-per-machine go together: the machines the "
                                       "ranks share, and the cores of each (e.g. --machines 4 "
                                       "--cores-per-machine 32)"));
    if (!parser.isSet(QStringLiteral("machines")))
        return Ok;
    bool okMachines = false, okCores = false;
    placement->machines = parser.value(QStringLiteral("machines")).toInt(&okMachines);
    placement->coresPerMachine = parser.value(QStringLiteral("cores-per-machine")).toInt(&okCores);
    if (!okMachines || placement->machines < 1 || placement->machines > 65536)
        return badInput(QStringLiteral("--machines takes a count of machines, 1 to 65536 (got '%1')")
                            .arg(parser.value(QStringLiteral("machines"))));
    if (!okCores || placement->coresPerMachine < 1 || placement->coresPerMachine > 65536)
        return badInput(QStringLiteral("--cores-per-machine takes the cores of one machine, 1 to 65536 "
                                       "(got '%1')")
                            .arg(parser.value(QStringLiteral("cores-per-machine"))));
    return Ok;
}

int parsePredictOptions(const QCommandLineParser &parser, PredictOptions *o)
{
    if (parser.isSet(QStringLiteral("workers")))
        if (const int code = parseWorkerList(parser.value(QStringLiteral("workers")), &o->workers);
            code != Ok)
            return code;
    if (parser.isSet(QStringLiteral("batch-size"))) {
        bool ok = false;
        o->batch = parser.value(QStringLiteral("batch-size")).toInt(&ok);
        if (!ok || o->batch < 1 || o->batch > 65536)
            return badInput(QStringLiteral("--batch-size takes images per worker, 1 to 65536"));
    }
    if (parser.isSet(QStringLiteral("bandwidth"))) {
        o->bandwidth = parseBandwidth(parser.value(QStringLiteral("bandwidth")));
        if (!(o->bandwidth > 0))
            return badInput(
                QStringLiteral("--bandwidth: '%1' is not a rate; write 10Gbit, 1Gbit/s, 100Mbit, 125MB/s or "
                               "bytes per second")
                    .arg(parser.value(QStringLiteral("bandwidth"))));
    }
    if (parser.isSet(QStringLiteral("target"))) {
        o->target = parseTarget(parser.value(QStringLiteral("target")));
        if (!std::isfinite(o->target))
            return badInput(QStringLiteral("--target takes a test accuracy: a fraction (0.9) or a percentage "
                                           "(90%), above 0 and at most 100 % (got '%1')")
                                .arg(parser.value(QStringLiteral("target"))));
    }
    return parsePlacement(parser, &o->placement);
}

// The study's fits, of the model asked for; `code` says why there are none.
QList<StudyScaling> scalingsOf(
    const QCommandLineParser &parser, const StudySnapshot &snapshot, const QString &studyId, int *code)
{
    QList<StudyScaling> all = studyScaling(snapshot);
    if (parser.isSet(QStringLiteral("model"))) {
        const QString wanted = parser.value(QStringLiteral("model"));
        all.removeIf([&](const StudyScaling &s) {
            return s.model != wanted && snapshot.modelNames.value(s.model) != wanted;
        });
        if (all.isEmpty()) {
            *code
                = badInput(QStringLiteral("no finished run of model '%1' in study %2").arg(wanted, studyId));
            return all;
        }
    }
    if (all.isEmpty()) {
        err() << "scalelab-cli: study " << studyId
              << " has no finished run with a measured step anatomy yet: nothing to predict from\n";
        *code = RunFailed;
    }
    return all;
}

bool loadSnapshot(const QCommandLineParser &parser, StudySnapshot *snapshot, QString *studyId)
{
    Journal journal;
    if (!openStudy(parser, &journal, studyId))
        return false;
    *snapshot = buildSnapshot(StudyState::replay(journal.events(*studyId)), journal);
    return true;
}

// One model's prediction: throughput, then time to the target.
QJsonObject predictOne(
    const StudyScaling &s, const StudySnapshot &snapshot, const PredictOptions &o, bool json)
{
    const QList<ScalingPoint> points = predictWithBand(
        s.runs, o.workers, o.batch > 0 ? o.batch : s.batchPerWorker, o.bandwidth, 200, o.placement);
    const double target = std::isfinite(o.target) ? o.target : snapshot.targetAccuracy;
    std::optional<GoodputBasis> basis;
    QList<GoodputPoint> goodput;
    if (std::isfinite(target) && target > 0 && s.fit.valid) {
        basis = goodputBasis(snapshot, s, target);
        goodput = predictGoodput(*basis, points,
            predictScaling(s.fit, basis->referenceWorkers, basis->referenceBatch, o.bandwidth, o.placement));
    }
    if (!json) {
        printScaling(s, points, scalingLabel(s, snapshot.modelNames), o.placement);
        if (basis)
            printGoodput(*basis, goodput);
        return {};
    }
    QJsonObject model = scalingJson(s, points);
    model.insert(QStringLiteral("placement"),
        o.placement.dedicated() ? QJsonObject { { QStringLiteral("dedicated"), true } }
                                : QJsonObject { { QStringLiteral("machines"), o.placement.machines },
                                    { QStringLiteral("coresPerMachine"), o.placement.coresPerMachine },
                                    { QStringLiteral("threadsPerRank"), s.fit.threadsPerRank } });
    if (basis)
        model.insert(QStringLiteral("timeToTarget"), goodputJson(*basis, goodput));
    return model;
}

} // namespace

int predictStudy(const QStringList &arguments)
{
    QCommandLineParser parser;
    addPredictOptions(parser);
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral(
                "Predict step time, images/s, speedup and efficiency at other worker counts, batches and "
                "bandwidths, from the study's measured step anatomy and network probes (a ring all-reduce "
                "overlapped with compute, AdaptDL/Pollux's model), with a 95 % bootstrap band; and, with a "
                "target accuracy (the study's, or --target), the epochs and time to it from the measured "
                "gradient noise scale (statistical efficiency, goodput)."),
            &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(
            QStringLiteral("give one study id: scalelab-cli study predict ID [--workers 8,16,64]"));
    PredictOptions options;
    if (const int bad = parsePredictOptions(parser, &options); bad != Ok)
        return bad;
    StudySnapshot snapshot;
    QString studyId;
    if (!loadSnapshot(parser, &snapshot, &studyId))
        return BadInput;
    const QList<StudyScaling> all = scalingsOf(parser, snapshot, studyId, &code);
    if (all.isEmpty())
        return code;
    const bool json = parser.isSet(QStringLiteral("json"));
    QJsonArray models;
    bool anyValid = false;
    if (!json)
        out() << "study " << studyId << " (" << snapshot.name << "): predictions from its own runs"
              << (snapshot.synthetic ? QStringLiteral(" [SYNTHETIC DATA]") : QString()) << "\n";
    for (const StudyScaling &s : all) {
        anyValid = anyValid || s.fit.valid;
        const QJsonObject model = predictOne(s, snapshot, options, json);
        if (json)
            models.append(model);
    }
    if (json)
        out() << QJsonDocument(
            QJsonObject { { QStringLiteral("studyId"), studyId }, { QStringLiteral("models"), models } })
                     .toJson(QJsonDocument::Compact)
              << "\n";
    else
        out()
            << "  speedup = predicted images/s / one worker's at the same batch per worker; efficiency = "
               "speedup / workers; [95 %]: bootstrap over runs, steps and probe repeats\n"
               "  time to target = epochs x images per epoch / predicted images/s; epochs = the reference's "
               "/ statistical efficiency (B_noise + M0) / (B_noise + M) (McCandlish et al. 2018); "
               "[band]: lowest and highest over the repeats, the noise scales and the throughput band; "
               "efficiency = time-to-target speedup / workers (against the reference's)\n";
    out().flush();
    return anyValid ? Ok : RunFailed;
}

namespace {

QJsonObject recommendationJson(const Recommendation &r, const GoodputBasis &basis, const QString &label)
{
    QJsonObject o { { QStringLiteral("model"), label }, { QStringLiteral("found"), r.found } };
    if (!r.found) {
        o.insert(QStringLiteral("problem"), r.problem);
        return o;
    }
    QJsonObject best = goodputPointJson(r.best);
    best.insert(QStringLiteral("lrRule"), r.lrRule);
    best.insert(QStringLiteral("lrRuleReason"), r.lrRuleReason);
    o.insert(QStringLiteral("recommended"), best);
    o.insert(QStringLiteral("reason"), r.reason);
    QJsonArray considered;
    for (const GoodputPoint &p : r.considered)
        considered.append(goodputPointJson(p));
    o.insert(QStringLiteral("considered"), considered);
    o.insert(QStringLiteral("basis"), goodputJson(basis, {}));
    return o;
}

void printRecommendation(const Recommendation &r, const GoodputBasis &basis, const QString &label)
{
    out() << "model " << label << ":\n";
    if (!r.found) {
        out() << "  no recommendation: " << r.problem << "\n";
        return;
    }
    const GoodputPoint &p = r.best;
    out() << "  recommended: " << p.workers << " worker(s) x batch " << p.batchPerWorker << " (global batch "
          << p.globalBatch << "), lr rule " << r.lrRule << "\n";
    out() << "  time to " << pct(basis.target) << ": " << durationText(p.seconds.value) << " ["
          << durationText(p.seconds.low) << ", " << durationText(p.seconds.high) << "], "
          << num(p.epochs.value, 2) << " epochs at " << num(p.imagesPerSecond.value, 1)
          << " img/s (statistical efficiency " << pct(p.efficiency.value) << ", " << num(p.speedup.value, 2)
          << "x the reference's speed to it)\n";
    out() << "  why: " << r.reason << "\n";
    out() << "  lr rule: " << r.lrRuleReason << "\n";
    if (const QString past = pastCriticalText(p.globalBatch, basis.noiseScale.value); !past.isEmpty())
        out() << "  " << past << "\n";
    for (const QString &note : basis.notes)
        out() << "  note: " << note << "\n";
}

} // namespace

int recommendStudy(const QStringList &arguments)
{
    QCommandLineParser parser;
    addPredictOptions(parser);
    parser.addOption({ QStringLiteral("max-workers"),
        QStringLiteral("The most workers to consider (default 64); worker counts are 1, 2, 4 ... up to it."),
        QStringLiteral("n") });
    parser.addOption({ QStringLiteral("deadline"),
        QStringLiteral("Reach the target within this time (30m, 2h, 90s) with the fewest workers, instead of "
                       "as soon as possible."),
        QStringLiteral("time") });
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral(
                "Name the workers x batch per worker x learning-rate rule that reaches a target "
                "accuracy soonest (or within --deadline with the fewest workers), from the study's "
                "measured throughput model and gradient noise scale."),
            &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(QStringLiteral("give one study id: scalelab-cli study recommend ID --target 0.9"));
    PredictOptions options;
    if (const int bad = parsePredictOptions(parser, &options); bad != Ok)
        return bad;
    int maxWorkers = 64;
    if (parser.isSet(QStringLiteral("max-workers"))) {
        bool ok = false;
        maxWorkers = parser.value(QStringLiteral("max-workers")).toInt(&ok);
        if (!ok || maxWorkers < 1 || maxWorkers > 65536)
            return badInput(QStringLiteral("--max-workers takes a worker count, 1 to 65536"));
    }
    double deadline = 0;
    if (parser.isSet(QStringLiteral("deadline"))) {
        deadline = parseDuration(parser.value(QStringLiteral("deadline")));
        if (!std::isfinite(deadline))
            return badInput(
                QStringLiteral("--deadline takes a time with its unit: 90s, 30m, 2h or 1d (got '%1')")
                    .arg(parser.value(QStringLiteral("deadline"))));
    }
    StudySnapshot snapshot;
    QString studyId;
    if (!loadSnapshot(parser, &snapshot, &studyId))
        return BadInput;
    const double target = std::isfinite(options.target) ? options.target : snapshot.targetAccuracy;
    if (!(target > 0))
        return badInput(
            QStringLiteral("study %1 has no target accuracy: give one with --target 0.9").arg(studyId));
    const QList<StudyScaling> all = scalingsOf(parser, snapshot, studyId, &code);
    if (all.isEmpty())
        return code;
    QList<int> workers;
    for (int w = 1; w <= maxWorkers; w *= 2)
        workers << w;
    const bool json = parser.isSet(QStringLiteral("json"));
    QJsonArray models;
    bool anyFound = false;
    if (!json)
        out() << "study " << studyId << " (" << snapshot.name << "): to " << pct(target) << " test accuracy"
              << (snapshot.synthetic ? QStringLiteral(" [SYNTHETIC DATA]") : QString()) << "\n";
    for (const StudyScaling &s : all) {
        const GoodputBasis basis = goodputBasis(snapshot, s, target);
        const QList<int> batches = options.batch > 0 ? QList<int> { options.batch } : candidateBatches(s);
        const Recommendation r = recommend(basis, s, snapshot, workers, batches, deadline);
        anyFound = anyFound || r.found;
        const QString label = scalingLabel(s, snapshot.modelNames);
        if (json)
            models.append(recommendationJson(r, basis, label));
        else
            printRecommendation(r, basis, label);
    }
    if (json)
        out() << QJsonDocument(
            QJsonObject { { QStringLiteral("studyId"), studyId },
                { QStringLiteral("targetAccuracy"), target }, { QStringLiteral("models"), models } })
                     .toJson(QJsonDocument::Compact)
              << "\n";
    out().flush();
    return anyFound ? Ok : RunFailed;
}

} // namespace scalelab::app
