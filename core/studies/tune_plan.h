// Tune plans (issue 18): a StudyPlan with `tune` set searches hyperparameters instead of
// scaling a grid. This file reads the tune's settings with their defaults, checks them
// field by field, and draws its trials. Pure functions: the same plan draws the same
// trials, bit for bit, on any machine (no std:: distributions, whose results the
// standard leaves to the library). A tune's results read from a snapshot (metrics, the best
// trial, statuses) are defined in tune_results.cpp.
#pragma once

#include "core_status.h"
#include "study_model.h"

#include "scalelab/v1/study.pb.h"

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

namespace scalelab::core {

// A tune's settings with every default filled in.
struct TuneSettings {
    QString metric = QStringLiteral("test_accuracy"); // test_accuracy | test_loss | train_loss
    bool maximize = true;
    QString scheduler = QStringLiteral("none"); // none | asha
    QString variant = QStringLiteral("stopping"); // stopping | promotion
    int gracePeriod = 1;
    double reductionFactor = 3;
    int brackets = 1;
    int trialEpochs = 1; // the most a trial trains: its schedule's length
    int workers = 1; // ranks per trial
    int maxConcurrent = 0; // 0 = as many as fit
    QString searcher = QStringLiteral("random");
    int samples = 1;
    quint64 seed = 1;

    bool asha() const { return scheduler == QLatin1String("asha"); }
    bool promotion() const { return asha() && variant == QLatin1String("promotion"); }
};

[[nodiscard]] inline bool isTune(const v1::StudyPlan &plan)
{
    return plan.has_tune();
}
[[nodiscard]] TuneSettings tuneSettings(const v1::StudyPlan &plan);

// Success when the plan's tune is valid, else every problem of it, one sentence each naming
// its field ("tune.space.momentum.high: must be below 1 (got 1.5)"). checkPlan() calls it.
CheckStatus checkTune(const v1::StudyPlan &plan);

// The hyperparameters a search space may name, in the order they are drawn.
[[nodiscard]] QStringList tunableNames();
// Whether `name` is drawn in log space (a log axis shows it best).
[[nodiscard]] bool drawnInLogSpace(const v1::StudyPlan &plan, const QString &name);

struct TrialDraw {
    QJsonObject params; // name → number (or word, for precision)
    int bracket = 0; // ASHA stopping's bracket s
};
// How many trials the plan draws: samples, or the grid's points times samples.
[[nodiscard]] qint64 drawTrialsCount(const v1::StudyPlan &plan);
// The trials of a valid tune, in order: `samples` random draws, or the grid's points
// `samples` times. Trial i's draw depends only on the seed and i.
[[nodiscard]] QList<TrialDraw> drawTrials(const v1::StudyPlan &plan);

// The completed-epoch counts at which a trial of `bracket` stops for a decision,
// ascending; the last is settings.trialEpochs. Without ASHA: just that.
[[nodiscard]] QList<int> trialTargets(const TuneSettings &settings, int bracket);

// A trial's run: the tune's workers, its batch size and precision (drawn or the
// training's), trialEpochs.
[[nodiscard]] RunConfig trialConfig(const v1::StudyPlan &plan, const QJsonObject &params);
// Sets the drawn values that are RunSpec fields (learning rate, momentum, …) on `spec`.
void applyTrialParams(const QJsonObject &params, v1::RunSpec *spec);

// "lr 0.0312 · momentum 0.9 · batch 64", in tunableNames() order, for tables and legends.
[[nodiscard]] QString paramsText(const QJsonObject &params);
// The short name of a hyperparameter for a column or an axis: "lr", "batch", …
[[nodiscard]] QString paramLabel(const QString &name);

// The metric of an epoch (NaN when not measured).
[[nodiscard]] double epochMetric(
    const QString &metric, double testAccuracy, double testLoss, double trainLoss);

// A tune's best trial so far, as Ray's get_best_result (scope "last"): the trial whose
// last reported epoch has the best metric. Its index in s.runs, or -1 (none measured).
[[nodiscard]] int bestTrialIndex(const StudySnapshot &s);
// The metric of a trial's epoch, as the tune compares it.
[[nodiscard]] double trialMetric(const StudySnapshot &s, const EpochPoint &epoch);

// A trial's state in words: "running to epoch 3", "paused at rung 1 (epoch 1)",
// "stopped at rung 2 (epoch 3)", "finished (9 epochs)", …
[[nodiscard]] QString trialStatus(const RunResult &r);
// Its metric at each rung it was judged at: "e1 41.2% · e3 55.0%" (percent for accuracy).
[[nodiscard]] QString rungValuesText(const StudySnapshot &s, const RunResult &r);
// A metric value as the tune shows it: accuracy in percent, a loss as a number.
[[nodiscard]] QString metricText(const QString &metric, double value);
// Epochs trained by all trials together (an epoch trained again after a resume from an
// older checkpoint counted again), and what the same trials would train without early
// stopping (each the tune's most, trials continued by hand counted as not continued).
[[nodiscard]] int epochsSpent(const StudySnapshot &s);
[[nodiscard]] int epochsWithoutStopping(const StudySnapshot &s);

// A tune that runs on a laptop: 9 trials, ASHA (stopping), 9 epochs at most.
[[nodiscard]] v1::StudyPlan exampleTunePlan(const QString &dataset);

} // namespace scalelab::core
