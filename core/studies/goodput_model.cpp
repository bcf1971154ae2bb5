#include "goodput_model.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <set>

namespace scalelab::core {

namespace {

Banded bandOf(const QList<double> &values)
{
    if (values.isEmpty())
        return {};
    return { finiteMedian(values), *std::min_element(values.begin(), values.end()),
        *std::max_element(values.begin(), values.end()) };
}

// The lowest and highest of f over the corners of two bands (f monotonic in each).
template <typename F> Banded corners(const Banded &a, const Banded &b, F f)
{
    const double values[] = { f(a.low, b.low), f(a.low, b.high), f(a.high, b.low), f(a.high, b.high) };
    return { f(a.value, b.value), *std::min_element(std::begin(values), std::end(values)),
        *std::max_element(std::begin(values), std::end(values)) };
}

bool sameFit(const RunConfig &config, const StudyScaling &scaling)
{
    return config.model == scaling.model && config.precision == scaling.precision;
}

// Images an epoch trains: the data set's training split, or the runs' cap on it.
double imagesPerEpoch(const RunResult &run)
{
    const double split = run.recipe.value(QLatin1String("dataset_train_images")).toDouble();
    const double cap = run.recipe.value(QLatin1String("max_train_images")).toDouble();
    if (split > 0 && cap > 0)
        return std::min(split, cap);
    return split > 0 ? split : cap > 0 ? cap : kNotMeasured;
}

QString rounded(double v)
{
    return QString::number(v, 'g', v >= 100 ? 4 : 3);
}

} // namespace

std::optional<double> epochsToTarget(const RunResult &run, double target)
{
    double before = kNotMeasured;
    for (const EpochPoint &e : run.epochs) {
        if (std::isfinite(e.testAccuracy) && e.testAccuracy >= target) {
            if (e.epoch <= 1 || !std::isfinite(before) || !(e.testAccuracy > before))
                return double(std::max(1, e.epoch));
            return e.epoch - 1 + (target - before) / (e.testAccuracy - before);
        }
        before = e.testAccuracy;
    }
    return std::nullopt;
}

double runNoiseScale(const RunResult &run, double target)
{
    const std::optional<double> reached = epochsToTarget(run, target);
    const int last = reached ? int(std::ceil(*reached - 1e-9)) : std::numeric_limits<int>::max();
    QList<double> values;
    for (const EpochPoint &e : run.epochs)
        if (e.epoch <= last && e.noise.known())
            values << e.noise.bSimple;
    if (values.isEmpty())
        return run.noise.known() ? run.noise.bSimple : kNotMeasured;
    double sum = 0;
    for (double v : values)
        sum += v;
    return sum / double(values.size());
}

namespace {

// The reference configuration: the baseline when it reached the target, else the smallest
// global batch that did. Its runs' epochs to the target go into `epochs`.
std::optional<RunConfig> referenceOf(
    const StudySnapshot &snapshot, const StudyScaling &scaling, double target, QList<double> *epochs)
{
    std::optional<RunConfig> best;
    for (const RunResult &r : snapshot.runs) {
        if (r.state != QLatin1String("SUCCEEDED") || !sameFit(r.config, scaling)
            || !epochsToTarget(r, target))
            continue;
        const auto rank = [](const RunConfig &c) { return std::make_pair(!c.baseline, c.globalBatch()); };
        if (!best || rank(r.config) < rank(*best))
            best = r.config;
    }
    if (best)
        for (const RunResult &r : snapshot.runs)
            if (r.state == QLatin1String("SUCCEEDED") && r.config.key() == best->key())
                if (const auto e = epochsToTarget(r, target))
                    *epochs << *e;
    return best;
}

} // namespace

GoodputBasis goodputBasis(const StudySnapshot &snapshot, const StudyScaling &scaling, double target)
{
    GoodputBasis b;
    b.target = target;
    if (!(target > 0 && target <= 1)) {
        b.problem = QStringLiteral("no target accuracy: give one (a fraction such as 0.8, or 80%)");
        return b;
    }
    QList<double> epochs;
    const std::optional<RunConfig> reference = referenceOf(snapshot, scaling, target, &epochs);
    if (!reference) {
        b.problem = QStringLiteral("no run of this model reached %1 % test accuracy: no epochs to the target "
                                   "to scale from (train longer, or ask for a lower target)")
                        .arg(rounded(100 * target));
        return b;
    }
    b.referenceWorkers = reference->workers;
    b.referenceBatch = reference->batchSize;
    b.referenceGlobalBatch = reference->globalBatch();
    b.epochs = bandOf(epochs);
    b.epochRuns = int(epochs.size());
    if (!reference->baseline)
        b.notes << QStringLiteral(
            "the baseline did not reach the target: epochs scale from %1 worker(s) × %2")
                       .arg(reference->workers)
                       .arg(reference->batchSize);
    // Several ranks' estimate is unbiased; one rank's differenced one is biased while the
    // gradient moves, so it is used only when no run has several ranks.
    QList<double> twoBatch, differenced;
    for (const RunResult &r : snapshot.runs) {
        if (r.state != QLatin1String("SUCCEEDED") || !sameFit(r.config, scaling))
            continue;
        const double v = runNoiseScale(r, target);
        if (std::isfinite(v) && v > 0)
            (r.noise.differenced || r.config.workers == 1 ? differenced : twoBatch) << v;
        if (!std::isfinite(b.imagesPerEpoch))
            b.imagesPerEpoch = imagesPerEpoch(r);
    }
    const QList<double> &noise = twoBatch.isEmpty() ? differenced : twoBatch;
    b.noiseEstimator = twoBatch.isEmpty() ? QStringLiteral("differenced") : QStringLiteral("two-batch");
    b.noiseScale = bandOf(noise);
    b.noiseRuns = int(noise.size());
    if (!b.noiseScale.known()) {
        b.problem = QStringLiteral("no run measured the gradient noise scale (runs recorded before it was "
                                   "measured, or too short): run the study again");
        return b;
    }
    if (!std::isfinite(b.imagesPerEpoch)) {
        b.problem = QStringLiteral("the runs did not report their data set's size: run the study again");
        return b;
    }
    if (twoBatch.isEmpty())
        b.notes << QStringLiteral("B_noise from one-rank runs only (the differenced estimator, biased while "
                                  "the gradient moves)");
    if (b.epochRuns == 1)
        b.notes << QStringLiteral("one run reached the target at the reference batch: the epochs' band is "
                                  "that run alone (repeats give it a spread)");
    b.notes << QStringLiteral("assumes a learning rate suited to each batch (McCandlish et al. 2018's model "
                              "is of the best a batch can do)");
    b.valid = true;
    return b;
}

double statisticalEfficiency(double noiseScale, double referenceGlobalBatch, double globalBatch)
{
    return (noiseScale + referenceGlobalBatch) / (noiseScale + globalBatch);
}

QList<GoodputPoint> predictGoodput(
    const GoodputBasis &basis, const QList<ScalingPoint> &points, const ScalingPoint &reference)
{
    QList<GoodputPoint> out;
    if (!basis.valid)
        return out;
    const double m0 = basis.referenceGlobalBatch;
    const auto secondsOf = [&](double epochs, double ips) { return epochs * basis.imagesPerEpoch / ips; };
    const double referenceIps = reference.imagesPerSecond;
    const double referenceSeconds = secondsOf(basis.epochs.value, referenceIps);
    for (const ScalingPoint &s : points) {
        GoodputPoint p;
        p.workers = s.workers;
        p.batchPerWorker = s.batchPerWorker;
        p.globalBatch = s.workers * s.batchPerWorker;
        const double m = p.globalBatch;
        const Banded noise = basis.noiseScale;
        p.overNoiseScale = m / noise.value;
        p.efficiency
            = corners(noise, noise, [&](double b, double) { return statisticalEfficiency(b, m0, m); });
        p.epochs = corners(
            basis.epochs, noise, [&](double e, double b) { return e / statisticalEfficiency(b, m0, m); });
        const bool band = std::isfinite(s.imagesPerSecondLow) && std::isfinite(s.imagesPerSecondHigh);
        p.imagesPerSecond = { s.imagesPerSecond, band ? s.imagesPerSecondLow : s.imagesPerSecond,
            band ? s.imagesPerSecondHigh : s.imagesPerSecond };
        p.goodput = corners(p.imagesPerSecond, p.efficiency, [](double ips, double e) { return ips * e; });
        p.seconds = { secondsOf(p.epochs.value, p.imagesPerSecond.value),
            secondsOf(p.epochs.low, p.imagesPerSecond.high),
            secondsOf(p.epochs.high, p.imagesPerSecond.low) };
        p.speedup = { referenceSeconds / p.seconds.value, referenceSeconds / p.seconds.high,
            referenceSeconds / p.seconds.low };
        const double workers = double(p.workers) / basis.referenceWorkers;
        p.scalingEfficiency
            = { p.speedup.value / workers, p.speedup.low / workers, p.speedup.high / workers };
        out << p;
    }
    return out;
}

StudyGoodput studyGoodput(const StudySnapshot &snapshot, const StudyScaling &scaling, double target,
    const QList<int> &workers, int rounds)
{
    StudyGoodput g;
    g.basis = goodputBasis(snapshot, scaling, target);
    if (!scaling.fit.valid) {
        g.basis.valid = false;
        g.basis.problem = scaling.fit.problem;
        return g;
    }
    g.throughput = predictWithBand(scaling.runs, workers, scaling.batchPerWorker, 0, rounds);
    if (g.basis.valid)
        g.points = predictGoodput(g.basis, g.throughput,
            predictScaling(scaling.fit, g.basis.referenceWorkers, g.basis.referenceBatch));
    return g;
}

QList<int> candidateBatches(const StudyScaling &scaling)
{
    std::set<int> batches;
    for (const ScalingRun &r : scaling.runs)
        for (int b : { r.batchPerWorker / 2, r.batchPerWorker, r.batchPerWorker * 2 })
            if (b >= 8 && b <= 1024)
                batches.insert(b);
    return QList<int>(batches.begin(), batches.end());
}

namespace {

// The rule to train `best` with: what the study's own runs at larger batches than the
// reference reached the target with, else the literature's by how far past B_noise it is.
void chooseLrRule(
    const GoodputBasis &basis, const StudySnapshot &snapshot, const StudyScaling &scaling, Recommendation *r)
{
    if (r->best.globalBatch <= basis.referenceGlobalBatch) {
        r->lrRule = QStringLiteral("none");
        r->lrRuleReason = QStringLiteral("the reference batch's own rate: the global batch is not larger");
        return;
    }
    QMap<QString, int> reached;
    for (const RunResult &run : snapshot.runs)
        if (run.state == QLatin1String("SUCCEEDED") && sameFit(run.config, scaling)
            && run.config.globalBatch() > basis.referenceGlobalBatch && epochsToTarget(run, basis.target))
            ++reached[run.config.lrRule];
    if (!reached.isEmpty()) {
        const auto most = std::max_element(reached.begin(), reached.end());
        r->lrRule = most.key();
        r->lrRuleReason
            = QStringLiteral("%1 of the study's runs at a larger global batch than %2 reached the "
                             "target with it")
                  .arg(most.value())
                  .arg(basis.referenceGlobalBatch);
        return;
    }
    if (r->best.globalBatch <= basis.noiseScale.value) {
        r->lrRule = QStringLiteral("linear");
        r->lrRuleReason
            = QStringLiteral("below B_noise a step's gradient is noise-bound, and scaling the rate "
                             "with the batch keeps the progress per example (Goyal et al. 2017); "
                             "no run of the study tested a rule at a larger batch");
    } else {
        r->lrRule = QStringLiteral("adascale");
        r->lrRuleReason
            = QStringLiteral("past B_noise the linear rule overshoots; AdaScale scales the rate by the "
                             "measured gain (Johnson et al. 2020); no run of the study tested a "
                             "rule at a larger batch");
    }
}

QString pointText(const GoodputPoint &p, double target)
{
    return QStringLiteral("%1 worker(s) × %2 (global batch %3): %4 [%5, %6] to %7 %, %8 epochs")
        .arg(p.workers)
        .arg(p.batchPerWorker)
        .arg(p.globalBatch)
        .arg(durationText(p.seconds.value), durationText(p.seconds.low), durationText(p.seconds.high),
            rounded(100 * target), rounded(p.epochs.value));
}

} // namespace

Recommendation recommend(const GoodputBasis &basis, const StudyScaling &scaling,
    const StudySnapshot &snapshot, const QList<int> &workers, const QList<int> &batches,
    double deadlineSeconds)
{
    Recommendation r;
    if (!basis.valid || !scaling.fit.valid) {
        r.problem = !basis.valid ? basis.problem : scaling.fit.problem;
        return r;
    }
    const ScalingPoint reference = predictScaling(scaling.fit, basis.referenceWorkers, basis.referenceBatch);
    for (int b : batches)
        r.considered << predictGoodput(basis, predictWithBand(scaling.runs, workers, b, 0, 100), reference);
    r.considered.removeIf([](const GoodputPoint &p) { return !std::isfinite(p.seconds.value); });
    if (r.considered.isEmpty()) {
        r.problem = QStringLiteral("the throughput model predicts no configuration asked for");
        return r;
    }
    std::sort(r.considered.begin(), r.considered.end(),
        [](const GoodputPoint &a, const GoodputPoint &b) { return a.seconds.value < b.seconds.value; });
    const GoodputPoint fastest = r.considered.first();
    if (deadlineSeconds > 0) {
        std::optional<GoodputPoint> fewest;
        for (const GoodputPoint &p : r.considered)
            if (p.seconds.value <= deadlineSeconds
                && (!fewest || p.workers < fewest->workers
                    || (p.workers == fewest->workers && p.seconds.value < fewest->seconds.value)))
                fewest = p;
        if (!fewest) {
            r.problem
                = QStringLiteral("no configuration considered meets the deadline of %1: the fastest, %2")
                      .arg(durationText(deadlineSeconds), pointText(fastest, basis.target));
            return r;
        }
        r.best = *fewest;
        r.reason = QStringLiteral("the fewest workers predicted within %1; the fastest overall is %2")
                       .arg(durationText(deadlineSeconds), pointText(fastest, basis.target));
    } else {
        // The fewest workers within 10 % of the soonest: past that, workers buy little time
        // (and the bands are wider than what they buy).
        r.best = fastest;
        for (const GoodputPoint &p : r.considered)
            if (p.seconds.value <= 1.1 * fastest.seconds.value && p.workers < r.best.workers)
                r.best = p;
        // What the next doubling of workers would give, at the same batch per worker.
        QString next;
        for (const GoodputPoint &p : r.considered)
            if (p.batchPerWorker == r.best.batchPerWorker && p.workers == 2 * r.best.workers)
                next = QStringLiteral("; %1 workers would take %2 (global batch %3, %4× B_noise: more "
                                      "images/s, but each epoch counts for less)")
                           .arg(p.workers)
                           .arg(durationText(p.seconds.value))
                           .arg(p.globalBatch)
                           .arg(rounded(p.overNoiseScale));
        r.reason = r.best.workers == fastest.workers
            ? QStringLiteral("the soonest to the target of %1 configurations considered%2")
                  .arg(r.considered.size())
                  .arg(next)
            : QStringLiteral(
                "the fewest workers within 10 % of the soonest of %1 configurations considered, %2")
                  .arg(r.considered.size())
                  .arg(pointText(fastest, basis.target));
    }
    chooseLrRule(basis, snapshot, scaling, &r);
    r.found = true;
    return r;
}

QString pastCriticalText(double globalBatch, double noiseScale)
{
    if (!(noiseScale > 0) || globalBatch < 4 * noiseScale)
        return {};
    return QStringLiteral(
        "past the critical batch: global batch %1 is %2× the measured B_noise %3; more workers "
        "buy images per second, not time to accuracy")
        .arg(int(globalBatch))
        .arg(rounded(globalBatch / noiseScale), rounded(noiseScale));
}

QJsonObject goodputPointJson(const GoodputPoint &p)
{
    const auto band = [](const Banded &b) {
        const auto v = [](double x) { return std::isfinite(x) ? QJsonValue(x) : QJsonValue(); };
        return QJsonArray { v(b.low), v(b.high) };
    };
    const auto v = [](double x) { return std::isfinite(x) ? QJsonValue(x) : QJsonValue(); };
    return QJsonObject { { QStringLiteral("workers"), p.workers },
        { QStringLiteral("batchPerWorker"), p.batchPerWorker },
        { QStringLiteral("globalBatch"), p.globalBatch },
        { QStringLiteral("statisticalEfficiency"), v(p.efficiency.value) },
        { QStringLiteral("statisticalEfficiencyBand"), band(p.efficiency) },
        { QStringLiteral("epochsToTarget"), v(p.epochs.value) },
        { QStringLiteral("epochsToTargetBand"), band(p.epochs) },
        { QStringLiteral("imagesPerSecond"), v(p.imagesPerSecond.value) },
        { QStringLiteral("goodput"), v(p.goodput.value) }, { QStringLiteral("goodputBand"), band(p.goodput) },
        { QStringLiteral("timeToTargetSeconds"), v(p.seconds.value) },
        { QStringLiteral("timeToTargetSecondsBand"), band(p.seconds) },
        { QStringLiteral("timeToTargetSpeedup"), v(p.speedup.value) },
        { QStringLiteral("timeToTargetSpeedupBand"), band(p.speedup) },
        { QStringLiteral("timeToTargetEfficiency"), v(p.scalingEfficiency.value) },
        { QStringLiteral("timeToTargetEfficiencyBand"), band(p.scalingEfficiency) },
        { QStringLiteral("globalBatchOverNoiseScale"), v(p.overNoiseScale) },
        { QStringLiteral("pastCriticalBatch"), p.pastCritical() } };
}

QJsonObject goodputJson(const GoodputBasis &basis, const QList<GoodputPoint> &points)
{
    QJsonObject o { { QStringLiteral("valid"), basis.valid },
        { QStringLiteral("targetAccuracy"), basis.target } };
    if (!basis.valid) {
        o.insert(QStringLiteral("problem"), basis.problem);
        return o;
    }
    QJsonArray rows;
    for (const GoodputPoint &p : points)
        rows.append(goodputPointJson(p));
    o.insert(QStringLiteral("reference"),
        QJsonObject { { QStringLiteral("workers"), basis.referenceWorkers },
            { QStringLiteral("batchPerWorker"), basis.referenceBatch },
            { QStringLiteral("globalBatch"), basis.referenceGlobalBatch },
            { QStringLiteral("epochsToTarget"), basis.epochs.value },
            { QStringLiteral("epochsToTargetBand"), QJsonArray { basis.epochs.low, basis.epochs.high } },
            { QStringLiteral("runs"), basis.epochRuns } });
    o.insert(QStringLiteral("gradientNoiseScale"),
        QJsonObject { { QStringLiteral("bNoise"), basis.noiseScale.value },
            { QStringLiteral("band"), QJsonArray { basis.noiseScale.low, basis.noiseScale.high } },
            { QStringLiteral("runs"), basis.noiseRuns },
            { QStringLiteral("estimator"), basis.noiseEstimator } });
    o.insert(QStringLiteral("imagesPerEpoch"), basis.imagesPerEpoch);
    o.insert(QStringLiteral("timeToTarget"), rows);
    o.insert(QStringLiteral("notes"), QJsonArray::fromStringList(basis.notes));
    o.insert(QStringLiteral("definitions"),
        QJsonObject {
            { QStringLiteral("statisticalEfficiency"),
                QStringLiteral("(B_noise + M0) / (B_noise + M): the progress an image gives at global "
                               "batch M against the reference's M0 (McCandlish et al. 2018; Pollux)") },
            { QStringLiteral("epochsToTarget"),
                QStringLiteral("the reference's measured epochs to the target / statistical efficiency") },
            { QStringLiteral("timeToTargetSeconds"),
                QStringLiteral("epochs to target × images per epoch / predicted images/s (training time: "
                               "evaluation and checkpoints excluded)") },
            { QStringLiteral("goodput"), QStringLiteral("predicted images/s × statistical efficiency") },
            { QStringLiteral("timeToTargetEfficiency"),
                QStringLiteral("time-to-target speedup / (workers / the reference's workers): scaling "
                               "efficiency by time to accuracy, beside the throughput's") },
            { QStringLiteral("bands"),
                QStringLiteral("lowest and highest over the reference's repeats, the runs' noise scales and "
                               "the throughput model's 95 % bootstrap band") } });
    return o;
}

QString durationText(double seconds)
{
    if (!std::isfinite(seconds))
        return QStringLiteral("-");
    if (seconds < 120)
        return QStringLiteral("%1 s").arg(rounded(seconds));
    if (seconds < 7200)
        return QStringLiteral("%1 min").arg(rounded(seconds / 60));
    return QStringLiteral("%1 h").arg(rounded(seconds / 3600));
}

} // namespace scalelab::core
