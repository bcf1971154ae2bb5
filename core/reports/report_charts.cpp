#include "report_charts.h"

#include "goodput_model.h"

#include "scaling_model.h"

#include "downsample.h"
#include "report_tune.h"
#include "tune_plan.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace scalelab::core {

namespace {

// Lines that are not data (the ideal scaling, a tune's rungs).
const QColor kIdealColor(0x88, 0x88, 0x88);

} // namespace

// ---- The study's charts -------------------------------------------------------------------

namespace {

// Okabe–Ito: distinguishable with colour-blindness and in greyscale print (yellow left out).
const QList<QColor> &palette()
{
    static const QList<QColor> colors { QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00),
        QColor(0x00, 0x9E, 0x73), QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00),
        QColor(0x56, 0xB4, 0xE9), QColor(0x33, 0x33, 0x33) };
    return colors;
}

const QColor kTargetColor(0xB0, 0x30, 0x30);
// Step curves are thinned to what a chart's width can show.
constexpr int kMaxPointsPerCurve = 400;

// The axes of a configuration other than workers, each as (varies?, text).
QStringList variantParts(const RunConfig &c, const QList<ConfigResult> &configs)
{
    const auto varies = [&](auto field) {
        return std::any_of(configs.cbegin(), configs.cend(),
            [&](const ConfigResult &o) { return field(o.config) != field(c); });
    };
    QStringList parts;
    if (varies([](const RunConfig &x) { return x.batchSize; }))
        parts << QStringLiteral("batch %1").arg(c.batchSize);
    if (varies([](const RunConfig &x) { return x.epochs; }))
        parts << QStringLiteral("%1 epochs").arg(c.epochs);
    if (varies([](const RunConfig &x) { return x.gpusPerWorker; }))
        parts << (c.gpusPerWorker > 0 ? QStringLiteral("%1 GPU/worker").arg(c.gpusPerWorker)
                                      : QStringLiteral("CPU"));
    if (varies([](const RunConfig &x) { return x.threadsPerWorker; }))
        parts << (c.threadsPerWorker > 0 ? QStringLiteral("%1 threads").arg(c.threadsPerWorker)
                                         : QStringLiteral("auto threads"));
    if (varies([](const RunConfig &x) { return x.precision; }))
        parts << c.precision;
    if (varies([](const RunConfig &x) { return x.lrRule; }))
        parts << QStringLiteral("LR %1").arg(c.lrRule);
    if (varies([](const RunConfig &x) { return x.model; }))
        parts << modelShortName(c.model);
    return parts;
}

QString variantKey(RunConfig c)
{
    c.workers = 1;
    c.baseline = false;
    return c.key();
}

// Curves of every run, one colour per configuration.
struct CurveSet {
    const StudySnapshot &snapshot;
    const StudyResults &results;

    QColor colorOf(const QString &key) const
    {
        for (int i = 0; i < results.configs.size(); ++i) {
            if (results.configs[i].key == key)
                return palette()[i % palette().size()];
        }
        return palette().last();
    }

    template <typename PointsOf> QList<ChartSeries> curves(PointsOf pointsOf, bool markers) const
    {
        QList<ChartSeries> out;
        for (const RunResult &run : snapshot.runs) {
            ChartSeries s;
            s.name = configLabel(run.config, results.configs);
            s.color = colorOf(run.config.key());
            s.points = pointsOf(run);
            s.markers = markers;
            s.width = 1.4;
            // A repeat is drawn dashed so it can be told apart from the first.
            s.style = run.repeat % 2 == 0 ? Qt::SolidLine : Qt::DashLine;
            if (!s.points.isEmpty())
                out.append(s);
        }
        return out;
    }
};

QList<QPointF> lossPoints(const RunResult &run)
{
    std::vector<QPointF> fromSteps;
    for (const StepPoint &s : run.steps) {
        if (std::isfinite(s.elapsedSeconds) && std::isfinite(s.loss))
            fromSteps.emplace_back(s.elapsedSeconds, s.loss);
    }
    if (!fromSteps.empty()) {
        if (fromSteps.size() <= size_t(kMaxPointsPerCurve))
            return QList<QPointF>(fromSteps.begin(), fromSteps.end());
        return minMaxDownsample(fromSteps, kMaxPointsPerCurve / 4);
    }
    QList<QPointF> fromEpochs;
    for (const EpochPoint &e : run.epochs)
        fromEpochs.append({ e.elapsedSeconds, e.trainLoss });
    return fromEpochs;
}

QString percentText(double fraction)
{
    return QStringLiteral("%1%").arg(fraction * 100, 0, 'f', 1);
}

} // namespace

QString configLabel(const RunConfig &config, const QList<ConfigResult> &configs)
{
    QString label
        = config.workers == 1 ? QStringLiteral("1 worker") : QStringLiteral("%1 workers").arg(config.workers);
    if (config.baseline)
        label += QStringLiteral(" (baseline)");
    const QStringList parts = variantParts(config, configs);
    return parts.isEmpty() ? label : label + QStringLiteral(" · ") + parts.join(QStringLiteral(" · "));
}

QList<ChartSpec> criticalBatchCharts(const StudySnapshot &snapshot)
{
    QList<ChartSpec> charts;
    if (!(snapshot.targetAccuracy > 0) || snapshot.tune)
        return charts;
    const QList<StudyScaling> scalings = studyScaling(snapshot);
    for (const StudyScaling &s : scalings) {
        const GoodputBasis basis = goodputBasis(snapshot, s, snapshot.targetAccuracy);
        if (!basis.valid)
            continue;
        ChartSpec c;
        c.title = QStringLiteral("Epochs to %1 against the global batch%2")
                      .arg(percentText(snapshot.targetAccuracy),
                          scalings.size() > 1 ? QStringLiteral(": ") + s.model : QString());
        c.xLabel = QStringLiteral("Global batch, log2 (6 = 64, 10 = 1,024)");
        c.yLabel = QStringLiteral("Epochs to the target");
        c.yFloor = 0;
        ChartSeries predicted;
        predicted.name = QStringLiteral("predicted: E0 (B_noise + M) / (B_noise + M0), band");
        predicted.color = palette().first();
        predicted.style = Qt::DotLine;
        // From a quarter of the reference to well past B_noise (16×) or the study's largest
        // batch, whichever is further: beyond, the epochs only grow with the batch.
        int largest = basis.referenceGlobalBatch;
        for (const RunResult &r : snapshot.runs)
            largest = std::max(largest, r.config.globalBatch());
        const double last
            = std::max({ 16.0 * basis.noiseScale.value, 4.0 * largest, 4.0 * basis.referenceGlobalBatch });
        for (int m = std::max(1, basis.referenceGlobalBatch / 4); m < 2 * last; m *= 2) {
            const double e = basis.epochs.value
                / statisticalEfficiency(basis.noiseScale.value, basis.referenceGlobalBatch, m);
            const double low = basis.epochs.low
                / statisticalEfficiency(basis.noiseScale.high, basis.referenceGlobalBatch, m);
            const double high = basis.epochs.high
                / statisticalEfficiency(basis.noiseScale.low, basis.referenceGlobalBatch, m);
            predicted.points << QPointF(std::log2(double(m)), e);
            predicted.errorBars << QPointF(std::min(low, high), std::max(low, high));
        }
        ChartSeries measured;
        measured.name = QStringLiteral("measured runs");
        measured.color = palette().at(1);
        measured.line = false;
        measured.markers = true;
        for (const RunResult &r : snapshot.runs)
            if (r.state == QLatin1String("SUCCEEDED") && r.config.model == s.model)
                if (const std::optional<double> e = epochsToTarget(r, snapshot.targetAccuracy))
                    measured.points << QPointF(std::log2(double(r.config.globalBatch())), *e);
        c.series << predicted << measured;
        c.verticalLines << ChartVerticalLine { std::log2(basis.noiseScale.value),
            QStringLiteral("B_noise %1").arg(basis.noiseScale.value, 0, 'f', 0), kTargetColor };
        charts << c;
    }
    return charts;
}

namespace {

// Test accuracy per epoch end, against the epoch number or against the wall-clock.
ChartSpec accuracyChart(const CurveSet &curves, const QList<ChartReferenceLine> &targetLine,
    const QString &title, const QString &xLabel, bool byEpoch)
{
    ChartSpec c;
    c.title = title;
    c.xLabel = xLabel;
    c.yLabel = QStringLiteral("Test accuracy");
    c.yPercent = true;
    c.xIntegerTicks = byEpoch;
    c.referenceLines = targetLine;
    c.series = curves.curves(
        [byEpoch](const RunResult &run) {
            QList<QPointF> pts;
            for (const EpochPoint &e : run.epochs)
                pts.append({ byEpoch ? double(e.epoch) : e.elapsedSeconds, e.testAccuracy });
            return pts;
        },
        true);
    return c;
}

// The three charts versus workers, filled in turn: measured, ideal, predicted.
struct ScalingCharts {
    ChartSpec throughput, speedup, efficiency;
    int baseWorkers = 1;
    int maxWorkers = 1; // the most workers measured
};

ScalingCharts emptyScalingCharts(const StudyResults &results)
{
    ScalingCharts s;
    s.throughput.title = QStringLiteral("Throughput");
    s.throughput.yLabel = QStringLiteral("Images / second");
    s.speedup.title = QStringLiteral("Speedup over the baseline");
    s.speedup.yLabel = QStringLiteral("Speedup (×)");
    s.efficiency.title = QStringLiteral("Scaling efficiency");
    s.efficiency.yLabel = QStringLiteral("Efficiency");
    s.efficiency.yPercent = true;
    for (ChartSpec *c : { &s.throughput, &s.speedup, &s.efficiency }) {
        c->xLabel = QStringLiteral("Workers");
        c->xIntegerTicks = true;
        c->yFloor = 0;
    }
    const QString noBaseline
        = results.baselineNote.isEmpty() ? QStringLiteral("No speedup measured yet") : results.baselineNote;
    s.speedup.emptyText = noBaseline;
    s.efficiency.emptyText = noBaseline;
    const ConfigResult *base = results.baseline();
    s.baseWorkers = base ? std::max(1, base->config.workers) : 1;
    s.maxWorkers = s.baseWorkers;
    return s;
}

// The measured points: one series per variant (the configuration without its worker count).
void addMeasured(ScalingCharts &s, const StudyResults &results)
{
    QStringList variants;
    for (const ConfigResult &c : results.configs) {
        if (!variants.contains(variantKey(c.config)))
            variants.append(variantKey(c.config));
    }
    const auto seriesName = [&](const ConfigResult &first, const QString &what) {
        const QStringList parts = variantParts(first.config, results.configs);
        return parts.isEmpty() ? what : parts.join(QStringLiteral(" · ")) + QStringLiteral(" — ") + what;
    };
    const double target = results.targetAccuracy;
    const QString ttaName = std::isfinite(target) ? QStringLiteral("by time to %1").arg(percentText(target))
                                                  : QStringLiteral("by time to accuracy");
    for (int v = 0; v < variants.size(); ++v) {
        const QColor color = palette()[v % palette().size()];
        ChartSeries rate, wall, tta;
        rate.color = wall.color = tta.color = color;
        rate.markers = wall.markers = tta.markers = true;
        tta.style = Qt::DashLine;
        const ConfigResult *first = nullptr;
        for (const ConfigResult &c : results.configs) {
            if (variantKey(c.config) != variants[v])
                continue;
            first = first ? first : &c;
            const double w = c.config.workers;
            s.maxWorkers = std::max(s.maxWorkers, c.config.workers);
            rate.points.append({ w, c.imagesPerSecond.mean });
            rate.errorBars.append({ c.imagesPerSecond.min, c.imagesPerSecond.max });
            wall.points.append({ w, c.byWallClock.speedup });
            tta.points.append({ w, c.byTimeToAccuracy.speedup });
        }
        rate.name = seriesName(*first, QStringLiteral("mean, bars min–max"));
        wall.name = seriesName(*first, QStringLiteral("by wall-clock"));
        tta.name = seriesName(*first, ttaName);
        ChartSeries wallEff = wall, ttaEff = tta;
        for (int i = 0; i < wall.points.size(); ++i) {
            const double w = wall.points[i].x() / s.baseWorkers;
            wallEff.points[i].setY(wall.points[i].y() / w);
            ttaEff.points[i].setY(tta.points[i].y() / w);
        }
        s.throughput.series.append(rate);
        s.speedup.series << wall << tta;
        s.efficiency.series << wallEff << ttaEff;
    }
}

// Ideal lines, from the baseline (only where there is one). Models differ in images/s: the
// ideal throughput of one baseline is no model's ideal when the study compares several.
void addIdeal(ScalingCharts &s, const StudyResults &results)
{
    const ConfigResult *base = results.baseline();
    if (!base || s.speedup.series.isEmpty())
        return;
    const bool oneModel = std::all_of(results.configs.cbegin(), results.configs.cend(),
        [&](const ConfigResult &c) { return c.config.model == results.configs.first().config.model; });
    ChartSeries ideal;
    ideal.name = QStringLiteral("ideal (linear)");
    ideal.color = kIdealColor;
    ideal.style = Qt::DashDotLine;
    ideal.width = 1.2;
    ChartSeries idealRate = ideal, idealSpeedup = ideal, idealEff = ideal;
    for (const double w : { double(s.baseWorkers), double(s.maxWorkers) }) {
        idealRate.points.append({ w, base->imagesPerSecond.mean * w / s.baseWorkers });
        idealSpeedup.points.append({ w, w / s.baseWorkers });
        idealEff.points.append({ w, 1.0 });
    }
    // The ideal line is only drawn next to measured points, so a chart of nothing stays empty.
    const auto hasData = [](const ChartSpec &c) {
        return std::any_of(c.series.cbegin(), c.series.cend(), [](const ChartSeries &series) {
            return std::any_of(series.points.cbegin(), series.points.cend(), isDrawnPoint);
        });
    };
    if (hasData(s.throughput) && oneModel)
        s.throughput.series.prepend(idealRate);
    if (hasData(s.speedup))
        s.speedup.series.prepend(idealSpeedup);
    if (hasData(s.efficiency))
        s.efficiency.series.prepend(idealEff);
}

// The scaling model's prediction beside the measured points, out to 16 workers or twice the
// most measured, its 95 % band as bars (docs/scaling.md): of the steps' images/s, which a
// run's wall-clock exceeds by start-up, evaluation and checkpoints.
void addPredicted(ScalingCharts &s, const StudySnapshot &snapshot)
{
    if (snapshot.tune || s.speedup.series.isEmpty())
        return;
    int colorIndex = 0;
    const QList<StudyScaling> scalings = studyScaling(snapshot);
    for (const StudyScaling &scaling : scalings) {
        if (!scaling.fit.valid)
            continue;
        int measured = 1;
        for (const ScalingRun &r : scaling.runs)
            measured = std::max(measured, r.workers);
        const int most = std::max(16, 2 * measured);
        QList<int> workers;
        for (int p = 1; p < most; p *= 2)
            workers << p;
        workers << most;
        ChartSeries predictedSpeedup;
        predictedSpeedup.name = QStringLiteral("predicted (steps' images/s, b%1%2), 95 % band")
                                    .arg(scaling.batchPerWorker)
                                    .arg(scalings.size() == 1 ? QString()
                                                              : QStringLiteral(", ")
                                                + scalingLabel(scaling, snapshot.modelNames));
        predictedSpeedup.color = palette().at((6 + colorIndex++) % palette().size());
        predictedSpeedup.style = Qt::DotLine;
        ChartSeries predictedEfficiency = predictedSpeedup;
        for (const ScalingPoint &p : predictWithBand(scaling.runs, workers, scaling.batchPerWorker)) {
            predictedSpeedup.points.append({ double(p.workers), p.speedup });
            predictedSpeedup.errorBars.append({ p.efficiencyLow * p.workers, p.efficiencyHigh * p.workers });
            predictedEfficiency.points.append({ double(p.workers), p.efficiency });
            predictedEfficiency.errorBars.append({ p.efficiencyLow, p.efficiencyHigh });
        }
        s.speedup.series << predictedSpeedup;
        s.efficiency.series << predictedEfficiency;
        // The ideal line runs as far as the prediction, so the gap between them shows.
        for (ChartSpec *chart : { &s.speedup, &s.efficiency })
            if (!chart->series.isEmpty() && chart->series.first().color == kIdealColor)
                chart->series.first().points.append(
                    { double(most), chart == &s.speedup ? double(most) / s.baseWorkers : 1.0 });
    }
}

} // namespace

QList<ChartSpec> studyCharts(const StudySnapshot &snapshot, const StudyResults &results)
{
    const CurveSet curves { snapshot, results };
    const double target = results.targetAccuracy;
    QList<ChartReferenceLine> targetLine;
    if (std::isfinite(target))
        targetLine.append({ target, QStringLiteral("target %1").arg(percentText(target)), kTargetColor });

    QList<ChartSpec> charts;
    {
        ChartSpec c;
        c.title = QStringLiteral("Training loss");
        c.xLabel = QStringLiteral("Wall-clock since training start (s)");
        c.yLabel = QStringLiteral("Loss");
        c.series = curves.curves(lossPoints, false);
        c.yFloor = 0;
        charts.append(c);
    }
    charts << accuracyChart(
        curves, targetLine, QStringLiteral("Test accuracy by epoch"), QStringLiteral("Epoch"), true)
           << accuracyChart(curves, targetLine, QStringLiteral("Test accuracy over time (time to accuracy)"),
                  QStringLiteral("Wall-clock since training start (s)"), false);

    ScalingCharts scaling = emptyScalingCharts(results);
    addMeasured(scaling, results);
    addIdeal(scaling, results);
    addPredicted(scaling, snapshot);
    charts << scaling.throughput << scaling.speedup << scaling.efficiency;
    charts << criticalBatchCharts(snapshot);
    if (snapshot.learningRateCurve.size() > 1) {
        ChartSpec c;
        c.title = QStringLiteral("Learning-rate range test");
        c.xLabel = QStringLiteral("log10 of the learning rate");
        c.yLabel = QStringLiteral("Smoothed training loss");
        ChartSeries curve;
        curve.name = QStringLiteral("smoothed loss");
        curve.color = palette().first();
        for (const auto &[lr, loss] : snapshot.learningRateCurve)
            if (lr > 0)
                curve.points << QPointF(std::log10(lr), loss);
        c.series << curve;
        charts.append(c);
    }
    return charts;
}

// ---- A tune's charts ----------------------------------------------------------------------

namespace {

// Viridis from its dark end to before its yellow (which is lost on white): the best trial
// dark, the worst light.
const QList<QColor> &metricScale()
{
    static const QList<QColor> colors { QColor(0xA0, 0xDA, 0x39), QColor(0x4A, 0xC1, 0x6D),
        QColor(0x1F, 0xA1, 0x87), QColor(0x27, 0x7F, 0x8E), QColor(0x36, 0x5C, 0x8D),
        QColor(0x46, 0x33, 0x7E), QColor(0x44, 0x01, 0x54) };
    return colors;
}

QColor scaleColor(double goodness)
{
    const QList<QColor> &c = metricScale();
    const double f = std::clamp(goodness, 0.0, 1.0) * (c.size() - 1);
    const int k = std::min(int(f), int(c.size()) - 2);
    const double w = f - k;
    return QColor::fromRgbF(float(c[k].redF() + (c[k + 1].redF() - c[k].redF()) * w),
        float(c[k].greenF() + (c[k + 1].greenF() - c[k].greenF()) * w),
        float(c[k].blueF() + (c[k + 1].blueF() - c[k].blueF()) * w));
}

// A stopped trial's colour: most of the way to white.
QColor faded(const QColor &c)
{
    constexpr double keep = 0.4;
    return QColor::fromRgbF(float(1 - (1 - c.redF()) * keep), float(1 - (1 - c.greenF()) * keep),
        float(1 - (1 - c.blueF()) * keep));
}

const QColor kUnmeasured(0x99, 0x99, 0x99);

bool stoppedEarly(const RunResult &run)
{
    return run.state == QLatin1String("STOPPED");
}

// How each trial is drawn in both charts: its colour by its final metric (the same trial the
// same colour in both), stopped ones faded, the best one thick and drawn last.
struct TrialLook {
    int run;
    QColor color;
    qreal width;
};

QList<TrialLook> trialLooks(const StudySnapshot &s, const TuneReport &t, double *worst, double *best)
{
    *worst = kNotMeasured;
    *best = kNotMeasured;
    for (int i = 0; i < s.runs.size(); ++i) {
        const double v = t.finalMetric.value(i, kNotMeasured);
        if (!s.runs[i].trial || !std::isfinite(v))
            continue;
        const bool better = t.maximize ? v > *best : v < *best;
        const bool worse = t.maximize ? v < *worst : v > *worst;
        if (!std::isfinite(*best) || better)
            *best = v;
        if (!std::isfinite(*worst) || worse)
            *worst = v;
    }
    QList<TrialLook> looks;
    for (const int pass : { 0, 1, 2 }) { // stopped, the others, the best
        for (int i = 0; i < s.runs.size(); ++i) {
            const RunResult &run = s.runs[i];
            const int want = i == t.best ? 2 : stoppedEarly(run) ? 0 : 1;
            if (!run.trial || want != pass)
                continue;
            const double v = t.finalMetric.value(i, kNotMeasured);
            QColor color = kUnmeasured;
            if (std::isfinite(v))
                color = scaleColor(*best == *worst ? 1.0 : (v - *worst) / (*best - *worst));
            looks.append({ i, pass == 0 ? faded(color) : color, pass == 2 ? 2.8 : pass == 0 ? 1.1 : 1.6 });
        }
    }
    return looks;
}

// The legend's entry for stopped trials, which are drawn without a name of their own.
ChartSeries stoppedLegendSeries()
{
    ChartSeries stopped;
    stopped.name = QStringLiteral("stopped early (faded)");
    stopped.color = faded(metricScale()[metricScale().size() / 2]);
    stopped.width = 1.1;
    return stopped;
}

QString capitalized(QString text)
{
    if (!text.isEmpty())
        text[0] = text[0].toUpper();
    return text;
}

} // namespace

namespace {

// A hyperparameter's axis: its choices, the words its trials drew, or the range of its
// numbers (log when drawn in log space), widened to what the trials drew.
ChartParallelAxis paramAxis(const StudySnapshot &s, const TuneReport &t, const QString &name)
{
    ChartParallelAxis axis;
    axis.name = paramLabel(name);
    const TuneDimension *dim = nullptr;
    for (const TuneDimension &d : t.space)
        if (d.name == name)
            dim = &d;
    double lo = INFINITY, hi = -INFINITY;
    bool words = false;
    for (const RunResult &run : s.runs) {
        const QJsonValue v = run.params.value(name);
        words = words || v.isString();
        if (v.isDouble()) {
            lo = std::min(lo, v.toDouble());
            hi = std::max(hi, v.toDouble());
        }
    }
    if (dim && dim->choice()) {
        for (const QJsonValue &v : dim->values)
            axis.categories << paramValueText(v);
    } else if (words) {
        for (const RunResult &run : s.runs) {
            const QString v = paramValueText(run.params.value(name));
            if (!v.isEmpty() && !axis.categories.contains(v))
                axis.categories << v;
        }
        std::sort(axis.categories.begin(), axis.categories.end());
    } else {
        axis.log = dim && dim->logScale;
        if (dim && std::isfinite(dim->low) && std::isfinite(dim->high)) {
            lo = std::min(lo, dim->low);
            hi = std::max(hi, dim->high);
        }
        axis.lo = std::isfinite(lo) ? lo : 0;
        axis.hi = std::isfinite(hi) ? hi : 1;
        if (axis.log && !(axis.lo > 0))
            axis.log = false;
    }
    if (axis.log)
        axis.name += QStringLiteral(" (log)");
    return axis;
}

// Where a trial's value sits on its parameter's axis (NaN: not drawn, or not a choice).
double paramPosition(const ChartParallelAxis &axis, const QJsonValue &v)
{
    if (!axis.categories.isEmpty()) {
        const qsizetype k = axis.categories.indexOf(paramValueText(v));
        return k >= 0 ? double(k) : kNotMeasured;
    }
    return v.isDouble() ? v.toDouble() : kNotMeasured;
}

} // namespace

QList<ChartSpec> tuneCharts(const StudySnapshot &s, const TuneReport &t)
{
    const bool fraction = tuneMetricIsFraction(t.metric);
    const QString metricName = tuneMetricName(t.metric);
    double worst = kNotMeasured, best = kNotMeasured;
    const QList<TrialLook> looks = trialLooks(s, t, &worst, &best);
    bool anyStopped = false;
    for (const RunResult &run : s.runs)
        anyStopped = anyStopped || (run.trial && stoppedEarly(run));

    std::optional<ChartColorScale> scale;
    if (std::isfinite(best)) {
        ChartColorScale c;
        c.label = QStringLiteral("final %1:").arg(metricName);
        c.fromText = metricText(t.metric, worst);
        c.toText = metricText(t.metric, best) + QStringLiteral(" (best)");
        c.colors = metricScale();
        scale = c;
    }
    const QString bestName
        = t.best >= 0 ? QStringLiteral("best trial (%1)").arg(s.runs[t.best].runId) : QString();

    ChartSpec curves;
    curves.title = QStringLiteral("%1 of every trial").arg(capitalized(metricName));
    curves.xLabel = QStringLiteral("Epochs completed");
    curves.yLabel = capitalized(metricName);
    curves.yPercent = fraction;
    curves.xIntegerTicks = true;
    curves.emptyText = QStringLiteral("No trial has completed an epoch yet");
    curves.colorScale = scale;
    for (int r = 0; r < t.rungEpochs.size(); ++r)
        curves.verticalLines.append(
            { double(t.rungEpochs[r]), QStringLiteral("rung %1").arg(r + 1), kIdealColor });
    if (anyStopped)
        curves.series << stoppedLegendSeries();
    for (const TrialLook &look : looks) {
        const RunResult &run = s.runs[look.run];
        ChartSeries series;
        series.name = look.run == t.best ? bestName : QString();
        series.color = look.color;
        series.width = look.width;
        series.markers = true;
        for (const EpochPoint &e : run.epochs)
            series.points.append({ double(e.epoch), trialMetric(s, e) });
        curves.series << series;
    }

    ChartSpec parallel;
    parallel.title = QStringLiteral("Hyperparameters of every trial, coloured by final %1").arg(metricName);
    parallel.emptyText = QStringLiteral("No trial has been drawn yet");
    parallel.colorScale = scale;
    const QStringList names = tuneParamNames(s, t);
    for (const QString &name : names)
        parallel.parallelAxes << paramAxis(s, t, name);
    {
        ChartParallelAxis axis;
        axis.name = QStringLiteral("final %1").arg(metricName);
        axis.percent = fraction;
        axis.lo = std::isfinite(best) ? std::min(best, worst) : 0;
        axis.hi = std::isfinite(best) ? std::max(best, worst) : 1;
        parallel.parallelAxes << axis;
    }
    if (anyStopped)
        parallel.series << stoppedLegendSeries();
    for (const TrialLook &look : looks) {
        const RunResult &run = s.runs[look.run];
        ChartSeries series;
        series.name = look.run == t.best ? bestName : QString();
        series.color = look.color;
        series.width = look.width;
        for (int i = 0; i < names.size(); ++i)
            series.points.append(
                { double(i), paramPosition(parallel.parallelAxes[i], run.params.value(names[i])) });
        series.points.append({ double(names.size()), t.finalMetric.value(look.run, kNotMeasured) });
        parallel.series << series;
    }
    return { curves, parallel };
}

} // namespace scalelab::core
