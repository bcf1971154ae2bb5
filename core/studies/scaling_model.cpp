#include "scaling_model.h"

#include <QJsonArray>
#include <QMap>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

namespace scalelab::core {

namespace {

// c10d's reducer: a first bucket of 1 MB, then 4 MB each (data_parallel.cpp).
constexpr double kFirstBucketBytes = 1 << 20;
constexpr double kBucketBytes = 4 << 20;

// Least squares of y ≈ a·x1 + b·x2 with relative errors (weights 1/y²); nullopt when the
// system is singular.
std::optional<std::pair<double, double>> fitTwo(
    const QList<double> &x1, const QList<double> &x2, const QList<double> &y)
{
    double s11 = 0, s12 = 0, s22 = 0, t1 = 0, t2 = 0;
    for (int i = 0; i < y.size(); ++i) {
        const double w = 1 / (y[i] * y[i]);
        s11 += w * x1[i] * x1[i];
        s12 += w * x1[i] * x2[i];
        s22 += w * x2[i] * x2[i];
        t1 += w * x1[i] * y[i];
        t2 += w * x2[i] * y[i];
    }
    const double det = s11 * s22 - s12 * s12;
    if (!(std::abs(det) > 1e-300 * std::max(1.0, s11 * s22)))
        return std::nullopt;
    return std::pair { (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det };
}

// Least squares of y ≈ b·x2 alone (relative errors).
double fitOne(const QList<double> &x2, const QList<double> &y)
{
    double s22 = 0, t2 = 0;
    for (int i = 0; i < y.size(); ++i) {
        const double w = 1 / (y[i] * y[i]);
        s22 += w * x2[i] * x2[i];
        t2 += w * x2[i] * y[i];
    }
    return s22 > 0 ? t2 / s22 : kNotMeasured;
}

double overlap(double compute, double allReduce, double gamma)
{
    if (!(allReduce > 0))
        return compute;
    return std::pow(std::pow(compute, gamma) + std::pow(allReduce, gamma), 1 / gamma);
}

QString wholePercent(double fraction)
{
    return QString::number(100 * fraction, 'f', 0) + QStringLiteral(" %");
}

} // namespace

double finiteMedian(QList<double> values)
{
    values.removeIf([](double v) { return !std::isfinite(v); });
    if (values.isEmpty())
        return kNotMeasured;
    std::sort(values.begin(), values.end());
    const auto n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double allReduceSeconds(const ScalingModel &model, int workers, double bytes)
{
    if (workers <= 1 || !(bytes > 0))
        return 0;
    const double buckets
        = bytes <= kFirstBucketBytes ? 1 : 1 + std::ceil((bytes - kFirstBucketBytes) / kBucketBytes);
    const double p = workers;
    return buckets * 2 * (p - 1) * model.latency + 2 * (p - 1) / p * bytes / model.bandwidth;
}

LinkFit fitLink(const QList<RunNetwork> &probes)
{
    LinkFit fit;
    // Every size, and apart the bulk sizes (1 MB up, the reducer's buckets): below that, a
    // shaper's burst and the socket buffers carry a message faster than the link's rate
    // (at 100 Mbit/s, 4-16 KB went through at 20-50 MB/s), and relative least squares over
    // every size let them set the bandwidth: 19-24 MB/s fitted where 1-16 MB all took 12.
    constexpr double kBulkBytes = 1 << 20;
    QList<double> phases, volume, seconds, messageBytes, bulkPhases, bulkVolume, bulkSeconds;
    for (const RunNetwork &probe : probes) {
        if (probe.worldSize < 2)
            continue;
        const double p = probe.worldSize;
        for (const NetworkSample &s : probe.samples) {
            const double t = finiteMedian(s.seconds);
            if (!(t > 0))
                continue;
            phases << 2 * (p - 1);
            volume << 2 * (p - 1) / p * double(s.bytes);
            seconds << t;
            messageBytes << double(s.bytes);
            if (double(s.bytes) >= kBulkBytes) {
                bulkPhases << phases.last();
                bulkVolume << volume.last();
                bulkSeconds << t;
            }
        }
    }
    if (seconds.size() < 2) {
        fit.problem
            = QStringLiteral("no network probe among the runs: a run of 2 or more workers measures one "
                             "before training unless the plan skips it (training.skipNetworkProbe)");
        return fit;
    }
    // The bandwidth from the bulk sizes when two or more were measured (the probe goes up to
    // a step's gradients), else from every size.
    const bool bulk = std::set<double>(bulkVolume.begin(), bulkVolume.end()).size() >= 2;
    const QList<double> &fitPhases = bulk ? bulkPhases : phases;
    const QList<double> &fitVolume = bulk ? bulkVolume : volume;
    const QList<double> &fitSeconds = bulk ? bulkSeconds : seconds;
    auto network = fitTwo(fitPhases, fitVolume, fitSeconds);
    if (network && network->first < 0)
        network = std::pair { 0.0, fitOne(fitVolume, fitSeconds) };
    if (!network || !(network->second > 0)) {
        fit.problem
            = QStringLiteral("the network probe's times do not grow with the message size: no bandwidth "
                             "can be fitted");
        return fit;
    }
    fit.latency = network->first;
    fit.bandwidth = 1 / network->second;
    // The latency from the small sizes, which show it: what they took beyond the bandwidth
    // term, per ring phase (their median; none below zero).
    if (bulk) {
        QList<double> perPhase;
        for (int i = 0; i < seconds.size(); ++i)
            if (messageBytes[i] < kBulkBytes)
                perPhase << std::max(0.0, (seconds[i] - volume[i] / fit.bandwidth) / phases[i]);
        if (!perPhase.isEmpty())
            fit.latency = finiteMedian(perPhase);
    }
    // How well the ring's two terms describe what was measured: the worst size's error.
    for (int i = 0; i < seconds.size(); ++i)
        fit.worstRelativeError = std::max(fit.worstRelativeError,
            std::abs(phases[i] * fit.latency + volume[i] / fit.bandwidth - seconds[i]) / seconds[i]);
    return fit;
}

namespace {

// Compute and data: linear in the batch per worker, from single-worker runs (nothing
// shares their cores), or from all when there is none; those runs returned.
QList<ScalingRun> fitCompute(const QList<ScalingRun> &runs, ScalingModel &m)
{
    QList<ScalingRun> alone = runs;
    alone.removeIf([](const ScalingRun &r) { return r.workers > 1; });
    if (alone.isEmpty()) {
        alone = runs;
        m.notes << QStringLiteral(
            "No single-worker run: compute fitted on multi-worker runs, and any slowdown "
            "their communication causes is taken as the model's own compute");
    }
    // A run whose ranks shared cores computed s times slower than on cores of their own.
    QList<double> threads;
    QStringList shared;
    for (const ScalingRun &r : runs) {
        if (r.threads > 0)
            threads << r.threads;
        if (r.coreShare > 1.001) {
            shared << r.runId;
            m.largestCoreShare = std::max(m.largestCoreShare, r.coreShare);
        }
    }
    if (!threads.isEmpty())
        m.threadsPerRank = std::max(1, int(std::lround(finiteMedian(threads))));
    if (!shared.isEmpty())
        m.notes << QStringLiteral(
            "%1 ran with more compute threads than cores on a machine (up to %2 per core): "
            "their compute is divided by that before the fit")
                       .arg(shared.size() == 1 ? QStringLiteral("Run ") + shared.first()
                                               : QStringLiteral("Runs ") + shared.join(QStringLiteral(", ")))
                       .arg(m.largestCoreShare, 0, 'f', 2);
    QList<double> ones, batch, compute, data;
    QList<int> batches;
    for (const ScalingRun &r : alone) {
        ones << 1;
        batch << r.batchPerWorker;
        compute << r.perStep.compute() / r.coreShare;
        data << std::max(0.0, r.perStep.data) / r.batchPerWorker / r.coreShare;
        if (!batches.contains(r.batchPerWorker))
            batches << r.batchPerWorker;
    }
    m.dataPerImage = finiteMedian(data);
    std::optional<std::pair<double, double>> line;
    if (batches.size() >= 2)
        line = fitTwo(ones, batch, compute);
    if (line && line->first >= 0 && line->second > 0) {
        m.computeIntercept = line->first;
        m.computePerImage = line->second;
    } else {
        m.computeIntercept = 0;
        m.computePerImage = fitOne(batch, compute);
        m.notes << (batches.size() < 2 ? QStringLiteral("One batch size per worker measured: compute assumed "
                                                        "proportional to the batch")
                                       : QStringLiteral("Compute against batch fitted through the origin"));
    }
    return alone;
}

// Contention: the multi-worker runs' compute beyond a single worker's, per byte reduced.
double fittedContention(const QList<const ScalingRun *> &parallel, const ScalingModel &m)
{
    double sxx = 0, sxy = 0;
    for (const ScalingRun *r : parallel) {
        const double x = 2.0 * (r->workers - 1) / r->workers * m.gradientBytes;
        const double excess = r->perStep.compute() / r->coreShare
            - (m.computeIntercept + m.computePerImage * r->batchPerWorker);
        sxx += x * x;
        sxy += x * excess;
    }
    return sxx > 0 ? std::max(0.0, sxy / sxx) : 0;
}

// Overlap: the γ in [1, 10] whose step times fit the multi-worker runs best (log errors).
double fittedGamma(const QList<const ScalingRun *> &parallel, const ScalingModel &m)
{
    double fitted = 1;
    double best = HUGE_VAL;
    for (int i = 0; i <= 400; ++i) {
        const double gamma = std::pow(10.0, i / 400.0); // 1 .. 10, log-spaced
        double error = 0;
        for (const ScalingRun *r : parallel) {
            const double tc = r->coreShare
                * (m.computeIntercept + m.computePerImage * r->batchPerWorker
                    + m.contention * 2.0 * (r->workers - 1) / r->workers * m.gradientBytes);
            const double predicted = r->coreShare * m.dataPerImage * r->batchPerWorker
                + overlap(tc, allReduceSeconds(m, r->workers, m.gradientBytes), gamma);
            error += std::pow(std::log(predicted / r->stepSeconds()), 2);
        }
        if (error < best) {
            best = error;
            fitted = gamma;
        }
    }
    return fitted;
}

} // namespace

ScalingModel fitScalingModel(const QList<ScalingRun> &input)
{
    ScalingModel m;
    QList<ScalingRun> runs = input;
    runs.removeIf([](const ScalingRun &r) { return !r.perStep.measured() || r.batchPerWorker <= 0; });
    if (runs.isEmpty()) {
        m.problem
            = QStringLiteral("no run has a measured step anatomy yet (runs of ScaleLab before 0.1 did not "
                             "record one): the model has nothing to fit");
        return m;
    }
    for (const ScalingRun &r : runs)
        if (std::isfinite(r.gradientBytes))
            m.gradientBytes = r.gradientBytes;

    const QList<ScalingRun> alone = fitCompute(runs, m);

    // The network: every probe's median time per size, against the ring all-reduce.
    QList<RunNetwork> probes;
    for (const ScalingRun &r : runs)
        if (r.network.worldSize >= 2) {
            probes << r.network;
            m.probeHosts = std::max(m.probeHosts, r.network.hosts);
        }
    const LinkFit link = fitLink(probes);
    if (!link.ok()) {
        m.problem = link.problem;
        return m;
    }
    m.latency = link.latency;
    m.bandwidth = link.bandwidth;
    if (!std::isfinite(m.gradientBytes)) {
        m.problem = QStringLiteral("the runs do not say how many gradient bytes a step all-reduces");
        return m;
    }

    QList<const ScalingRun *> parallel;
    for (const ScalingRun &r : runs)
        if (r.workers > 1)
            parallel << &r;
    if (!parallel.isEmpty() && alone.size() < runs.size())
        m.contention = fittedContention(parallel, m);
    if (parallel.isEmpty()) {
        m.gamma = 1;
        m.notes << QStringLiteral("No multi-worker run: no overlap assumed (γ = 1), which errs slow");
    } else {
        m.gamma = fittedGamma(parallel, m);
        m.gammaFitted = true;
    }
    if (m.probeHosts <= 1)
        m.notes << QStringLiteral(
            "The probes ran between ranks of one node: a network between nodes is slower");
    m.valid = true;
    return m;
}

double CorePlacement::share(int workers, int threads) const
{
    if (dedicated() || workers < 1)
        return 1;
    const int perRank = threadsPerRank > 0 ? threadsPerRank : std::max(1, threads);
    const int ranksOnBusiest = (workers + machines - 1) / machines;
    return std::max(1.0, double(ranksOnBusiest) * perRank / std::max(coresPerMachine, perRank));
}

QString CorePlacement::text() const
{
    if (dedicated())
        return {};
    return QStringLiteral("ranks dealt over %1 machine%2 of %3 cores")
        .arg(machines)
        .arg(machines == 1 ? QString() : QStringLiteral("s"))
        .arg(coresPerMachine);
}

namespace {

// The prediction for ranks whose compute runs `share` times slower than alone (s), against
// one worker whose own runs `shareOfOne` times slower.
ScalingPoint predictAt(const ScalingModel &model, int workers, int batchPerWorker, double bandwidth,
    double share, double shareOfOne)
{
    ScalingPoint point;
    point.workers = workers;
    point.batchPerWorker = batchPerWorker;
    if (!model.valid || workers < 1 || batchPerWorker < 1)
        return point;
    ScalingModel m = model;
    if (bandwidth > 0)
        m.bandwidth = bandwidth;
    point.bandwidth = m.bandwidth;
    point.coreShare = share;
    const double alone = m.computeIntercept + m.computePerImage * batchPerWorker;
    point.computeSeconds = share * (alone + m.contention * 2.0 * (workers - 1) / workers * m.gradientBytes);
    point.allReduceSeconds = allReduceSeconds(m, workers, m.gradientBytes);
    const double data = m.dataPerImage * batchPerWorker;
    const double combined = overlap(point.computeSeconds, point.allReduceSeconds, m.gamma);
    point.exposedSeconds = combined - point.computeSeconds;
    point.stepSeconds = share * data + combined;
    point.imagesPerSecond = double(workers) * batchPerWorker / point.stepSeconds;
    const double one = shareOfOne * (data + alone);
    point.efficiency = one / point.stepSeconds;
    point.speedup = workers * point.efficiency;
    return point;
}

} // namespace

ScalingPoint predictScaling(const ScalingModel &model, int workers, int batchPerWorker, double bandwidth,
    const CorePlacement &placement)
{
    return predictAt(model, workers, batchPerWorker, bandwidth,
        placement.share(workers, model.threadsPerRank), placement.share(1, model.threadsPerRank));
}

QList<ScalingPoint> predictWithBand(const QList<ScalingRun> &runs, const QList<int> &workers,
    int batchPerWorker, double bandwidth, int rounds, const CorePlacement &placement)
{
    const ScalingModel model = fitScalingModel(runs);
    QList<ScalingPoint> points;
    for (int p : workers)
        points << predictScaling(model, p, batchPerWorker, bandwidth, placement);
    if (!model.valid || rounds < 2)
        return points;
    // Stratified: single- and multi-worker runs are resampled within their kind, so every
    // round has both.
    QList<int> single, multi;
    for (int i = 0; i < runs.size(); ++i)
        (runs[i].workers > 1 ? multi : single) << i;
    std::mt19937 random(20261126);
    const auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(random); };
    QList<QList<double>> ips(workers.size()), efficiency(workers.size());
    for (int round = 0; round < rounds; ++round) {
        QList<ScalingRun> sample;
        for (const QList<int> *group : { &single, &multi })
            for (int k = 0; k < group->size(); ++k) {
                ScalingRun r = runs[(*group)[pick(int(group->size()))]];
                if (r.steps.size() >= 2) {
                    StepTimes sum = StepTimes::zero();
                    int n = 0;
                    for (int s = 0; s < r.steps.size(); ++s) {
                        const StepTimes &t = r.steps[pick(int(r.steps.size()))];
                        if (t.measured()) {
                            sum += t;
                            ++n;
                        }
                    }
                    if (n > 0)
                        r.perStep = sum.dividedBy(n);
                }
                for (NetworkSample &s : r.network.samples) {
                    const QList<double> repeats = s.seconds;
                    for (double &t : s.seconds)
                        t = repeats[pick(int(repeats.size()))];
                }
                sample << r;
            }
        const ScalingModel refitted = fitScalingModel(sample);
        if (!refitted.valid)
            continue;
        for (int i = 0; i < workers.size(); ++i) {
            const ScalingPoint p = predictScaling(refitted, workers[i], batchPerWorker, bandwidth, placement);
            ips[i] << p.imagesPerSecond;
            efficiency[i] << p.efficiency;
        }
    }
    const auto quantile = [](QList<double> v, double q) {
        if (v.isEmpty())
            return kNotMeasured;
        std::sort(v.begin(), v.end());
        return v[std::clamp(int(std::floor(q * (v.size() - 1) + 0.5)), 0, int(v.size()) - 1)];
    };
    for (int i = 0; i < points.size(); ++i) {
        points[i].imagesPerSecondLow = quantile(ips[i], 0.025);
        points[i].imagesPerSecondHigh = quantile(ips[i], 0.975);
        points[i].efficiencyLow = quantile(efficiency[i], 0.025);
        points[i].efficiencyHigh = quantile(efficiency[i], 0.975);
    }
    return points;
}

QList<HeldOutError> leaveOneOut(const QList<ScalingRun> &runs)
{
    QList<HeldOutError> errors;
    for (int i = 0; i < runs.size(); ++i) {
        const ScalingRun &held = runs[i];
        if (held.workers < 2 || !held.perStep.measured())
            continue;
        QList<ScalingRun> rest = runs;
        rest.removeAt(i);
        const ScalingModel model = fitScalingModel(rest);
        HeldOutError e { held.runId, held.workers, held.batchPerWorker, held.imagesPerSecond(), kNotMeasured,
            {} };
        if (model.valid)
            e.predicted
                = predictAt(model, held.workers, held.batchPerWorker, 0, held.coreShare, 1).imagesPerSecond;
        else
            e.problem = QStringLiteral("the other runs alone cannot be fitted: ") + model.problem;
        errors << e;
    }
    return errors;
}

QString efficiencyLossText(const ScalingRun &fewer, const ScalingRun &more, const ScalingModel &model)
{
    if (fewer.workers >= more.workers || fewer.batchPerWorker != more.batchPerWorker
        || !fewer.perStep.measured() || !more.perStep.measured())
        return {};
    const double perWorkerFewer = fewer.imagesPerSecond() / fewer.workers;
    const double perWorkerMore = more.imagesPerSecond() / more.workers;
    const double efficiency = perWorkerMore / perWorkerFewer;
    QString text = QStringLiteral("%1 → %2 workers (batch %3 per worker) ")
                       .arg(fewer.workers)
                       .arg(more.workers)
                       .arg(more.batchPerWorker);
    if (efficiency >= 0.995)
        return text
            + QStringLiteral("keep their efficiency (%1 → %2 images/s per worker)")
                  .arg(perWorkerFewer, 0, 'f', 1)
                  .arg(perWorkerMore, 0, 'f', 1);
    const double added = more.stepSeconds() - fewer.stepSeconds();
    const double exposed = more.perStep.exposedAllReduce - fewer.perStep.exposedAllReduce;
    const double compute = more.perStep.compute() - fewer.perStep.compute();
    const double data = more.perStep.data - fewer.perStep.data;
    text += QStringLiteral("lose %1 efficiency (%2 → %3 images/s per worker): of the %4 ms a step grew by, ")
                .arg(wholePercent(1 - efficiency))
                .arg(perWorkerFewer, 0, 'f', 1)
                .arg(perWorkerMore, 0, 'f', 1)
                .arg(added * 1000, 0, 'f', 0);
    text
        += QStringLiteral("%1 is exposed all-reduce, %2 compute, %3 waiting for data")
               .arg(wholePercent(exposed / added), wholePercent(compute / added), wholePercent(data / added));
    if (std::isfinite(model.gradientBytes) && std::isfinite(model.bandwidth))
        text += QStringLiteral("; each step all-reduces %1 MB of gradients at %2")
                    .arg(model.gradientBytes / 1e6, 0, 'f', 1)
                    .arg(bandwidthText(model.bandwidth));
    if (more.coreShare > fewer.coreShare + 0.001)
        text += QStringLiteral("; the %1 workers shared cores (%2 compute threads per core, against %3)")
                    .arg(more.workers)
                    .arg(more.coreShare, 0, 'f', 2)
                    .arg(fewer.coreShare, 0, 'f', 2);
    return text;
}

QJsonObject anatomyJson(const RunAnatomy &a)
{
    if (!a.measured())
        return {};
    const auto times = [](const StepTimes &t) {
        return QJsonObject { { QStringLiteral("dataSeconds"), t.data },
            { QStringLiteral("forwardSeconds"), t.forward },
            { QStringLiteral("backwardSeconds"), t.backward },
            { QStringLiteral("exposedAllReduceSeconds"), t.exposedAllReduce },
            { QStringLiteral("optimizerSeconds"), t.optimizer },
            { QStringLiteral("stepSeconds"), t.total() } };
    };
    QJsonArray ranks;
    for (const RankTimes &r : a.ranks) {
        QJsonObject o = times(r.perStep);
        o.insert(QStringLiteral("rank"), r.rank);
        o.insert(QStringLiteral("steps"), double(r.steps));
        ranks.append(o);
    }
    QJsonObject o { { QStringLiteral("steps"), double(a.steps) },
        { QStringLiteral("perStep"), times(a.perStep) }, { QStringLiteral("ranks"), ranks },
        { QStringLiteral("trainSeconds"), a.trainSeconds },
        { QStringLiteral("evaluationSeconds"), a.evaluationSeconds },
        { QStringLiteral("checkpointSeconds"), a.checkpointSeconds } };
    if (a.slowestRank >= 0) {
        o.insert(QStringLiteral("slowestRank"), a.slowestRank);
        o.insert(QStringLiteral("slowestLagSeconds"), a.slowestLagSeconds);
    }
    return o;
}

QJsonObject networkJson(const RunNetwork &network)
{
    QJsonArray samples;
    for (const NetworkSample &sample : network.samples) {
        QJsonArray seconds;
        for (double t : sample.seconds)
            seconds.append(t);
        samples.append(QJsonObject {
            { QStringLiteral("bytes"), double(sample.bytes) }, { QStringLiteral("seconds"), seconds } });
    }
    return QJsonObject { { QStringLiteral("world_size"), network.worldSize },
        { QStringLiteral("backend"), network.backend }, { QStringLiteral("hosts"), network.hosts },
        { QStringLiteral("samples"), samples } };
}

QList<int> defaultPredictionWorkers()
{
    QList<int> workers;
    for (int p = 1; p <= 512; p *= 2)
        workers << p;
    return workers;
}

QJsonObject scalingJson(const StudyScaling &scaling, const QList<ScalingPoint> &predictions)
{
    const auto finite = [](double v) { return std::isfinite(v) ? QJsonValue(v) : QJsonValue(); };
    const ScalingModel &m = scaling.fit;
    QJsonArray points;
    for (const ScalingPoint &p : predictions)
        points.append(QJsonObject { { QStringLiteral("workers"), p.workers },
            { QStringLiteral("batchPerWorker"), p.batchPerWorker },
            { QStringLiteral("bandwidthBytesPerSecond"), finite(p.bandwidth) },
            { QStringLiteral("stepSeconds"), finite(p.stepSeconds) },
            { QStringLiteral("computeSeconds"), finite(p.computeSeconds) },
            { QStringLiteral("allReduceSeconds"), finite(p.allReduceSeconds) },
            { QStringLiteral("exposedAllReduceSeconds"), finite(p.exposedSeconds) },
            { QStringLiteral("imagesPerSecond"), finite(p.imagesPerSecond) },
            { QStringLiteral("imagesPerSecondLow"), finite(p.imagesPerSecondLow) },
            { QStringLiteral("imagesPerSecondHigh"), finite(p.imagesPerSecondHigh) },
            { QStringLiteral("speedup"), finite(p.speedup) },
            { QStringLiteral("efficiency"), finite(p.efficiency) },
            { QStringLiteral("efficiencyLow"), finite(p.efficiencyLow) },
            { QStringLiteral("efficiencyHigh"), finite(p.efficiencyHigh) },
            { QStringLiteral("coreShare"), p.coreShare } });
    QJsonArray held;
    QList<double> errors;
    for (const HeldOutError &e : scaling.heldOut) {
        held.append(QJsonObject { { QStringLiteral("runId"), e.runId },
            { QStringLiteral("workers"), e.workers }, { QStringLiteral("batchPerWorker"), e.batchPerWorker },
            { QStringLiteral("measuredImagesPerSecond"), finite(e.measured) },
            { QStringLiteral("predictedImagesPerSecond"), finite(e.predicted) },
            { QStringLiteral("relativeError"), finite(e.relativeError()) },
            { QStringLiteral("problem"), e.problem } });
        if (std::isfinite(e.relativeError()))
            errors << std::abs(e.relativeError());
    }
    QJsonObject fit { { QStringLiteral("valid"), m.valid }, { QStringLiteral("problem"), m.problem },
        { QStringLiteral("computeInterceptSeconds"), m.computeIntercept },
        { QStringLiteral("computeSecondsPerImage"), m.computePerImage },
        { QStringLiteral("dataSecondsPerImage"), m.dataPerImage },
        { QStringLiteral("contentionSecondsPerByte"), m.contention },
        { QStringLiteral("latencySeconds"), finite(m.latency) },
        { QStringLiteral("bandwidthBytesPerSecond"), finite(m.bandwidth) },
        { QStringLiteral("gamma"), m.gamma }, { QStringLiteral("gammaFitted"), m.gammaFitted },
        { QStringLiteral("gradientBytes"), finite(m.gradientBytes) },
        { QStringLiteral("probeHosts"), m.probeHosts }, { QStringLiteral("runs"), int(scaling.runs.size()) },
        { QStringLiteral("threadsPerRank"), m.threadsPerRank },
        { QStringLiteral("largestCoreShare"), m.largestCoreShare },
        { QStringLiteral("notes"), QJsonArray::fromStringList(m.notes) } };
    return QJsonObject { { QStringLiteral("model"), scaling.model },
        { QStringLiteral("precision"), scaling.precision }, { QStringLiteral("fit"), fit },
        { QStringLiteral("heldOut"), held },
        { QStringLiteral("heldOutMedianAbsoluteError"), finite(finiteMedian(errors)) },
        { QStringLiteral("losses"), QJsonArray::fromStringList(scaling.losses) },
        { QStringLiteral("predictions"), points },
        { QStringLiteral("definitions"),
            QJsonObject {
                { QStringLiteral("model"),
                    QStringLiteral(
                        "T_step(p, b) = s*data_per_image*b + ((s*(c0 + c1*b + "
                        "contention*2(p-1)/p*gradient_bytes))^gamma "
                        "+ T_ar(p)^gamma)^(1/gamma); s = coreShare, compute threads per core on the "
                        "busiest machine (at least 1; 1 when every rank has cores of its own); "
                        "T_ar(p) = k*2(p-1)*latency + 2(p-1)/p * gradient_bytes/bandwidth, k the reducer's "
                        "buckets (1 MB, then 4 MB); AdaptDL/Pollux's form (OSDI 2021)") },
                { QStringLiteral("speedup"),
                    QStringLiteral(
                        "predicted images/s of p workers / predicted images/s of one worker at the same "
                        "batch per worker") },
                { QStringLiteral("efficiency"), QStringLiteral("speedup / workers") },
                { QStringLiteral("band"),
                    QStringLiteral(
                        "2.5th and 97.5th percentiles of 200 refits on resampled runs, steps and probe "
                        "repeats") },
                { QStringLiteral("heldOut"),
                    QStringLiteral(
                        "each multi-worker run's images/s (its mean step) predicted by the model fitted "
                        "without it; relativeError = predicted / measured - 1") } } } };
}

double parseBandwidth(const QString &text)
{
    static const QRegularExpression re(QStringLiteral(
        "^\\s*([0-9]*\\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\\s*([kKmMgGtT]?)(bit|bits|b|B|bps|Bps)?(/s)?\\s*$"));
    const auto match = re.match(text);
    if (!match.hasMatch())
        return 0;
    double value = match.captured(1).toDouble();
    const QString prefix = match.captured(2).toLower();
    value *= prefix == QLatin1String("k") ? 1e3
        : prefix == QLatin1String("m")    ? 1e6
        : prefix == QLatin1String("g")    ? 1e9
        : prefix == QLatin1String("t")    ? 1e12
                                          : 1;
    const QString unit = match.captured(3);
    const bool bits
        = unit.startsWith(QLatin1String("bit")) || unit == QLatin1String("b") || unit == QLatin1String("bps");
    return bits ? value / 8 : value;
}

QString bandwidthText(double bytesPerSecond)
{
    if (!std::isfinite(bytesPerSecond))
        return QStringLiteral("unknown bandwidth");
    return QStringLiteral("%1 MB/s (%2 Gbit/s)")
        .arg(bytesPerSecond / 1e6, 0, 'f',
            bytesPerSecond < 1e7       ? 2
                : bytesPerSecond < 1e8 ? 1
                                       : 0)
        .arg(bytesPerSecond * 8 / 1e9, 0, 'g', 3);
}

} // namespace scalelab::core
