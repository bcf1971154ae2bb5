#include "study_results.h"

#include <QHash>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace scalelab::core {

namespace {

QString percent(double fraction)
{
    return QStringLiteral("%1%").arg(fraction * 100.0, 0, 'f', 1);
}

// Final accuracies further apart than this (a fraction: 10 points) mean two runs did not
// learn alike, and a speedup between them says little.
constexpr double kAccuracyGap = 0.10;

// Sort key: the baseline first, then the grid's axes in the order people read them.
auto orderKey(const RunConfig &c)
{
    return std::make_tuple(!c.baseline, c.model, c.workers, c.batchSize, c.epochs, c.gpusPerWorker,
        c.threadsPerWorker, c.precision, c.lrRule, c.accumulationSteps, c.minWorkers);
}

// Speedup of `value` against `baselineMean`, with the efficiency for `workers`.
Speedup speedupOf(double baselineMean, double value, int baselineWorkers, int workers)
{
    Speedup s;
    s.speedup = baselineMean / value;
    s.efficiency = s.speedup / (double(workers) / double(baselineWorkers));
    return s;
}

Speedup unavailable(const QString &reason)
{
    Speedup s;
    s.unavailableReason = reason;
    return s;
}

// Why the baseline's `stat` (wall-clock, or time to target when `byTime`) cannot be the
// numerator of a speedup; empty when it can.
QString baselineProblem(
    const ConfigResult *baseline, const QString &noBaselineNote, const Stat &stat, bool byTime, double target)
{
    if (!baseline)
        return noBaselineNote;
    if (baseline->succeeded == 0)
        return QStringLiteral("the baseline has no succeeded run");
    if (byTime && std::isnan(target))
        return QStringLiteral("the study sets no target accuracy");
    if (byTime && stat.count == 0)
        return QStringLiteral("the baseline never reached the target (%1)").arg(percent(target));
    if (stat.count == 0)
        return QStringLiteral("the baseline's wall-clock was not measured");
    return {};
}

} // namespace

Stat statOf(const QList<double> &values)
{
    Stat s;
    double sum = 0;
    for (double v : values) {
        if (std::isnan(v))
            continue;
        if (s.count == 0) {
            s.min = v;
            s.max = v;
        }
        s.min = std::min(s.min, v);
        s.max = std::max(s.max, v);
        sum += v;
        ++s.count;
    }
    if (s.count == 0)
        return s;
    s.mean = sum / s.count;
    if (s.count >= 2) {
        double squares = 0;
        for (double v : values) {
            if (!std::isnan(v))
                squares += (v - s.mean) * (v - s.mean);
        }
        s.stddev = std::sqrt(squares / (s.count - 1));
    }
    return s;
}

bool isSucceeded(const RunResult &run)
{
    return run.state == QLatin1String("SUCCEEDED");
}

bool isFailedOrCancelled(const RunResult &run)
{
    return run.state == QLatin1String("FAILED") || run.state == QLatin1String("CANCELLED");
}

std::optional<double> effectiveTimeToTarget(const RunResult &run, double target)
{
    if (run.timeToTargetSeconds)
        return run.timeToTargetSeconds;
    if (std::isnan(target))
        return std::nullopt;
    for (const EpochPoint &e : run.epochs) {
        if (!std::isnan(e.testAccuracy) && e.testAccuracy >= target) {
            if (std::isnan(e.elapsedSeconds))
                return std::nullopt;
            return e.elapsedSeconds;
        }
    }
    return std::nullopt;
}

const ConfigResult *StudyResults::baselineFor(const RunConfig &config) const
{
    for (const ConfigResult &c : configs)
        if (c.config.baseline && c.config.model == config.model)
            return &c;
    return nullptr;
}

const ConfigResult *StudyResults::config(const QString &key) const
{
    for (const ConfigResult &c : configs) {
        if (c.key == key)
            return &c;
    }
    return nullptr;
}

namespace {

// Group: the runs by configuration, the configurations in a stable order, each one's
// counts and statistics over its succeeded runs.
void groupRuns(const StudySnapshot &snapshot, StudyResults *results)
{
    QHash<QString, QList<const RunResult *>> runsByKey;
    for (const RunResult &run : snapshot.runs) {
        const QString key = run.config.key();
        if (!runsByKey.contains(key)) {
            ConfigResult c;
            c.key = key;
            c.config = run.config;
            results->configs.append(c);
        }
        runsByKey[key].append(&run);
    }
    std::stable_sort(results->configs.begin(), results->configs.end(),
        [](const ConfigResult &a, const ConfigResult &b) { return orderKey(a.config) < orderKey(b.config); });

    for (ConfigResult &c : results->configs) {
        QList<double> finals, bests, walls, rates, times;
        for (const RunResult *run : runsByKey.value(c.key)) {
            c.runIds.append(run->runId);
            ++c.repeats;
            if (isFailedOrCancelled(*run))
                ++c.failed;
            if (!isSucceeded(*run)) {
                if (!isFailedOrCancelled(*run))
                    ++c.unfinished;
                continue;
            }
            ++c.succeeded;
            finals.append(run->finalTestAccuracy);
            bests.append(run->bestTestAccuracy);
            walls.append(run->wallSeconds);
            rates.append(run->imagesPerSecond);
            if (const auto t = effectiveTimeToTarget(*run, snapshot.targetAccuracy)) {
                ++c.reachedTarget;
                times.append(*t);
            }
        }
        c.finalTestAccuracy = statOf(finals);
        c.bestTestAccuracy = statOf(bests);
        c.wallSeconds = statOf(walls);
        c.imagesPerSecond = statOf(rates);
        c.timeToTargetSeconds = statOf(times);
    }
}

// Baselines: the configuration flagged as such (the first, should a study have two). A
// study that compares models has one per model: each run is compared with its own.
// Returns why there is none, empty when there is one.
QString findBaseline(StudyResults *results)
{
    for (int i = 0; i < results->configs.size(); ++i) {
        if (results->configs[i].config.baseline) {
            results->baselineIndex = i;
            return {};
        }
    }
    const QString noBaselineNote = QStringLiteral("the study has no baseline configuration");
    results->baselineNote
        = QStringLiteral("Speedup and efficiency are not available: %1.").arg(noBaselineNote);
    return noBaselineNote;
}

// A baseline that did not learn makes every speedup against it meaningless: say so.
void warnAboutBaselines(StudyResults *results, double target)
{
    for (const ConfigResult &base : results->configs) {
        if (!base.config.baseline || base.succeeded == 0 || std::isnan(base.finalTestAccuracy.mean)
            || !results->baselineWarning.isEmpty())
            continue;
        const double baseAccuracy = base.finalTestAccuracy.mean;
        if (!std::isnan(target) && baseAccuracy < target)
            results->baselineWarning
                = QStringLiteral("The baseline ended at %1 test accuracy, below the target %2: speedups by "
                                 "wall-clock compare it "
                                 "with runs that learnt more, and are not a fair measure.")
                      .arg(percent(baseAccuracy), percent(target));
        else
            for (const ConfigResult &c : results->configs)
                if (!c.config.baseline && c.config.model == base.config.model && c.succeeded > 0
                    && c.finalTestAccuracy.mean - baseAccuracy > kAccuracyGap) {
                    results->baselineWarning = QStringLiteral(
                        "The baseline ended at %1 test accuracy, %2 points below %3 (%4): it did not learn "
                        "alike, so speedups against it are not a fair measure. Check its recipe (learning "
                        "rate, warm-up) or set a target accuracy.")
                                                   .arg(percent(baseAccuracy))
                                                   .arg(std::round(
                                                            (c.finalTestAccuracy.mean - baseAccuracy) * 1000)
                                                       / 10)
                                                   .arg(c.key, percent(c.finalTestAccuracy.mean));
                    break;
                }
    }
}

// References: what a baseline can be the reference of, with the problems that make a
// speedup against it unavailable.
struct Reference {
    const ConfigResult *base = nullptr;
    int workers = 1;
    QString wallProblem, timeProblem, rateProblem;
};

Reference referenceOf(const ConfigResult *base, const QString &missing, double target)
{
    Reference r;
    r.base = base;
    r.workers = base ? std::max(1, base->config.workers) : 1;
    r.wallProblem = baselineProblem(base, missing, base ? base->wallSeconds : Stat {}, false, target);
    r.timeProblem = baselineProblem(base, missing, base ? base->timeToTargetSeconds : Stat {}, true, target);
    r.rateProblem = !r.wallProblem.isEmpty() || !base ? r.wallProblem
        : base->imagesPerSecond.count == 0 || !(base->imagesPerSecond.mean > 0)
        ? QStringLiteral("the baseline's images/s was not measured")
        : QString();
    return r;
}

double meanOf(const ConfigResult *base, const Stat ConfigResult::*stat)
{
    return base ? (base->*stat).mean : kNotMeasured;
}

// Speedups: a configuration's or a run's three speedups against its model's baseline, or
// why each is unavailable.
class SpeedupRules {
public:
    SpeedupRules(const StudySnapshot &snapshot, const StudyResults &results, const QString &noBaselineNote)
        : m_results(results)
        , m_target(snapshot.targetAccuracy)
        , m_noBaselineNote(noBaselineNote)
    {
        // An elastic run that changed size ran part of its time on fewer workers: its
        // wall-clock is not the planned configuration's (compared by images/s and time to
        // target instead).
        for (const RunResult &run : snapshot.runs)
            if (const QString sizes = elasticSizesText(run); !sizes.isEmpty())
                m_resizedByKey.insert(run.config.key(), sizes);
        if (!std::isnan(m_target))
            m_neverReached = QStringLiteral("never reached the target (%1)").arg(percent(m_target));
    }

    void fillConfig(ConfigResult &c) const
    {
        const Reference ref = referenceFor(c.config);
        const int workers = c.config.workers;
        const QString noRun = QStringLiteral("no succeeded run");
        QString other = otherWork(ref, c.config);
        if (other.isEmpty())
            other = resizedWork(m_resizedByKey.value(c.key));
        c.sameWork = other.isEmpty();
        c.byWallClock = c.sameWork
            ? speedupFor(ref, ref.wallProblem, meanOf(ref.base, &ConfigResult::wallSeconds), c.wallSeconds,
                workers, c.succeeded ? QStringLiteral("wall-clock not measured") : noRun)
            : unavailable(other);
        c.byTimeToAccuracy
            = speedupFor(ref, ref.timeProblem, meanOf(ref.base, &ConfigResult::timeToTargetSeconds),
                c.timeToTargetSeconds, workers, c.succeeded ? m_neverReached : noRun);
        c.byThroughput = throughputFor(
            ref, c.imagesPerSecond, workers, c.succeeded ? QStringLiteral("images/s not measured") : noRun);
    }

    RunOutcome outcomeOf(const RunResult &run) const
    {
        const Reference ref = referenceFor(run.config);
        RunOutcome o;
        o.runId = run.runId;
        o.configKey = run.config.key();
        o.succeeded = isSucceeded(run);
        o.timeToTargetSeconds = effectiveTimeToTarget(run, m_target);
        const QString notSucceeded = QStringLiteral("run state is %1").arg(run.state);
        QString other = otherWork(ref, run.config);
        if (other.isEmpty())
            other = resizedWork(elasticSizesText(run));
        o.sameWork = other.isEmpty();
        o.byWallClock = !o.sameWork
            ? unavailable(other)
            : speedupFor(ref, ref.wallProblem, meanOf(ref.base, &ConfigResult::wallSeconds),
                o.succeeded ? statOf({ run.wallSeconds }) : Stat {}, run.config.workers,
                o.succeeded ? QStringLiteral("wall-clock not measured") : notSucceeded);
        o.byThroughput = throughputFor(ref, o.succeeded ? statOf({ run.imagesPerSecond }) : Stat {},
            run.config.workers, o.succeeded ? QStringLiteral("images/s not measured") : notSucceeded);
        o.byTimeToAccuracy
            = speedupFor(ref, ref.timeProblem, meanOf(ref.base, &ConfigResult::timeToTargetSeconds),
                o.succeeded && o.timeToTargetSeconds ? statOf({ *o.timeToTargetSeconds }) : Stat {},
                run.config.workers, o.succeeded ? m_neverReached : notSucceeded);
        return o;
    }

private:
    Reference referenceFor(const RunConfig &c) const
    {
        if (const ConfigResult *base = m_results.baselineFor(c))
            return referenceOf(base, {}, m_target);
        if (m_results.baselineIndex < 0)
            return referenceOf(nullptr, m_noBaselineNote, m_target);
        return referenceOf(
            nullptr, QStringLiteral("the study has no baseline of model %1").arg(c.model), m_target);
    }

    static Speedup speedupFor(const Reference &ref, const QString &baseProblem, double baseMean,
        const Stat &stat, int workers, const QString &missing)
    {
        if (!baseProblem.isEmpty())
            return unavailable(baseProblem);
        if (stat.count == 0 || stat.mean <= 0)
            return unavailable(missing);
        return speedupOf(baseMean, stat.mean, ref.workers, workers);
    }

    // Throughput: the configuration's images/s over the baseline's (a higher rate is faster).
    static Speedup throughputFor(const Reference &ref, const Stat &rate, int workers, const QString &missing)
    {
        if (!ref.rateProblem.isEmpty())
            return unavailable(ref.rateProblem);
        if (rate.count == 0 || !(rate.mean > 0))
            return unavailable(missing);
        return speedupOf(rate.mean, ref.base->imagesPerSecond.mean, ref.workers, workers);
    }

    // Wall-clock only between runs that train the same epochs as the baseline.
    static QString otherWork(const Reference &ref, const RunConfig &c)
    {
        if (!ref.base || c.epochs == ref.base->config.epochs)
            return QString();
        return QStringLiteral(
            "trains %1 epoch%2, the baseline %3: wall-clock compares only runs that do the same "
            "work (see the speedup by images/s)")
            .arg(c.epochs)
            .arg(c.epochs == 1 ? QString() : QStringLiteral("s"))
            .arg(ref.base->config.epochs);
    }

    static QString resizedWork(const QString &sizes)
    {
        return sizes.isEmpty()
            ? QString()
            : QStringLiteral("changed size while it ran (%1): its wall-clock is not like with like "
                             "(see the speedup by images/s)")
                  .arg(sizes);
    }

    const StudyResults &m_results;
    double m_target;
    QString m_noBaselineNote;
    QString m_neverReached;
    QMap<QString, QString> m_resizedByKey;
};

// A distributed configuration against its baseline, side by side.
SeedComparison comparisonOf(const StudyResults &results, const ConfigResult &c)
{
    SeedComparison row;
    row.configKey = c.key;
    row.workers = c.config.workers;
    row.distributedSeconds = c.wallSeconds.mean;
    row.distributedAccuracy = c.finalTestAccuracy.mean;
    if (const ConfigResult *base = results.baselineFor(c.config)) {
        row.baselineSeconds = base->wallSeconds.mean;
        row.baselineAccuracy = base->finalTestAccuracy.mean;
    }
    row.speedup = c.byWallClock.speedup;
    row.efficiency = c.byWallClock.efficiency;
    row.note = c.byWallClock.unavailableReason;
    if (row.note.isEmpty() && !std::isnan(row.baselineAccuracy) && !std::isnan(row.distributedAccuracy)
        && std::abs(row.distributedAccuracy - row.baselineAccuracy) > kAccuracyGap)
        row.note = QStringLiteral("test accuracy differs from the baseline's by %1 points")
                       .arg(std::round(std::abs(row.distributedAccuracy - row.baselineAccuracy) * 1000) / 10);
    return row;
}

} // namespace

// Group, then baselines, then references, then speedups.
StudyResults computeStudyResults(const StudySnapshot &snapshot)
{
    StudyResults results;
    results.targetAccuracy = snapshot.targetAccuracy;
    groupRuns(snapshot, &results);
    const QString noBaselineNote = findBaseline(&results);
    const Reference first = referenceOf(results.baseline(), noBaselineNote, snapshot.targetAccuracy);
    if (first.base && !first.wallProblem.isEmpty())
        results.baselineNote
            = QStringLiteral("Speedup by wall-clock is not available: %1.").arg(first.wallProblem);
    warnAboutBaselines(&results, snapshot.targetAccuracy);

    const SpeedupRules rules(snapshot, results, noBaselineNote);
    for (ConfigResult &c : results.configs)
        rules.fillConfig(c);
    for (const RunResult &run : snapshot.runs)
        results.runs.append(rules.outcomeOf(run));
    for (const ConfigResult &c : results.configs)
        if (!c.config.baseline)
            results.comparisons.append(comparisonOf(results, c));
    return results;
}

} // namespace scalelab::core
