// The numbers a scale-up study is run for, computed from a StudySnapshot: per configuration
// the mean and spread of accuracy, wall-clock, throughput and time to the target accuracy
// over its repeats, and the speedup and efficiency of every configuration against the
// baseline, by wall-clock and by time to accuracy.
//
// Pure functions over values: no I/O, no Qt objects, safe from any thread.
//
// Rules (the reports print them, so they are stated once, here):
// - Only SUCCEEDED runs enter means; FAILED, CANCELLED and unfinished runs are counted.
// - NaN means "not measured" and never enters a mean; a Stat with count 0 is all NaN.
// - Time to target: RunResult::timeToTargetSeconds when set, else the elapsed seconds of the
//   first epoch whose test accuracy is at or above the study's target. Runs that never reach
//   the target are counted (ConfigResult::reachedTarget) and left out of the mean.
// - speedup = baseline mean / configuration mean (of wall-clock, or of time to target);
//   efficiency = speedup / (workers / baseline workers). When either side is missing the
//   Speedup carries NaN and a sentence saying why.
// - Wall-clock compares like with like only: a configuration that trains other epochs than
//   the baseline did other work, and its speedup by wall-clock is not available (a 1-epoch
//   run against a 6-epoch baseline would show 9.5x and an "efficiency" of 476 %). Its
//   speedup by throughput is: its images/s over the baseline's, with efficiency = that /
//   (workers / baseline workers). shown() is the one to print: by wall-clock for the same
//   work, else by throughput, saying so (byThroughputShown).
#pragma once

#include "study_model.h"

#include <QList>
#include <QString>
#include <QStringList>

#include <optional>

namespace scalelab::core {

// Mean and spread of the measured values of a sample.
struct Stat {
    int count = 0; // measured (non-NaN) values
    double mean = kNotMeasured;
    double stddev = kNotMeasured; // sample standard deviation (n - 1); NaN when count < 2
    double min = kNotMeasured;
    double max = kNotMeasured;
};

// NaN values are skipped.
Stat statOf(const QList<double> &values);

struct Speedup {
    double speedup = kNotMeasured;
    double efficiency = kNotMeasured;
    QString unavailableReason; // empty when both numbers are available
    bool available() const { return unavailableReason.isEmpty(); }
};

// All repeats of one RunConfig (grouped by RunConfig::key()).
struct ConfigResult {
    QString key;
    RunConfig config;
    QStringList runIds; // in snapshot order
    int repeats = 0; // runs of this configuration, whatever their state
    int succeeded = 0;
    int failed = 0; // FAILED or CANCELLED
    int unfinished = 0; // PENDING, STARTING or RUNNING
    int reachedTarget = 0; // succeeded runs that reached the target accuracy
    Stat finalTestAccuracy; // fractions in [0, 1]
    Stat bestTestAccuracy;
    Stat wallSeconds;
    Stat imagesPerSecond;
    Stat timeToTargetSeconds; // over the succeeded runs that reached the target
    Speedup byWallClock;
    Speedup byTimeToAccuracy;
    Speedup byThroughput; // images/s against the baseline's
    bool sameWork = true; // trains the baseline's epochs (false: wall-clock does not compare)
    const Speedup &shown() const { return sameWork ? byWallClock : byThroughput; }
    bool byThroughputShown() const { return !sameWork; }
};

// One run with the values the reports print for it.
struct RunOutcome {
    QString runId;
    QString configKey;
    bool succeeded = false;
    std::optional<double> timeToTargetSeconds; // as effectiveTimeToTarget() gives it
    Speedup byWallClock; // baseline mean / this run's value
    Speedup byTimeToAccuracy;
    Speedup byThroughput; // this run's images/s / the baseline's mean
    bool sameWork = true; // as ConfigResult::sameWork
    const Speedup &shown() const { return sameWork ? byWallClock : byThroughput; }
    bool byThroughputShown() const { return !sameWork; }
};

// The seed study's comparison, one row per distributed (non-baseline) configuration:
// means of the baseline against means of the configuration, by wall-clock.
struct SeedComparison {
    QString configKey;
    int workers = 1;
    double baselineSeconds = kNotMeasured;
    double distributedSeconds = kNotMeasured;
    double speedup = kNotMeasured;
    double efficiency = kNotMeasured;
    double baselineAccuracy = kNotMeasured; // mean final test accuracy, fraction
    double distributedAccuracy = kNotMeasured;
    QString note; // why a number is missing; empty when all are there
};

struct StudyResults {
    double targetAccuracy = kNotMeasured;
    // Baselines first, then by model, workers, batch, epochs, GPUs, threads, precision, LR rule.
    QList<ConfigResult> configs;
    int baselineIndex = -1; // into configs; -1 when the study has no baseline
    QString baselineNote; // why speedups are not available; empty when they are
    // Why the speedups that are available may mislead: the baseline missed the target, or
    // learnt far less than a configuration it is compared with. Empty when nothing is off.
    QString baselineWarning;
    QList<RunOutcome> runs; // in snapshot order
    QList<SeedComparison> comparisons;

    // The study's first baseline; the reference of the runs of its model.
    const ConfigResult *baseline() const { return baselineIndex >= 0 ? &configs[baselineIndex] : nullptr; }
    // The baseline a configuration's speedups are against: the one of its model (a study
    // that compares models has one per model); nullptr when there is none.
    const ConfigResult *baselineFor(const RunConfig &config) const;
    const ConfigResult *config(const QString &key) const;
};

// Time to `target` for one run (see the rules above); nullopt when it was never reached
// or cannot be known (no target, or no elapsed time on the epoch that reached it).
std::optional<double> effectiveTimeToTarget(const RunResult &run, double target);

bool isSucceeded(const RunResult &run);
bool isFailedOrCancelled(const RunResult &run);

StudyResults computeStudyResults(const StudySnapshot &snapshot);

} // namespace scalelab::core
