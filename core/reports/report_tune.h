// What every report format shows of a tune (issue 18): its search space read back from the
// plan, the epochs its scheduler judged at, the best trial, each trial's final metric and
// every decision in the order the scheduler made them. Built once from a snapshot by
// tuneReport(); the JSON, CSV, HTML and PDF renderers and the tune charts read it, so they
// agree on every number.
#pragma once

#include "study_model.h"

#include <QJsonArray>
#include <QJsonValue>
#include <QList>
#include <QString>

namespace scalelab::core {

// One dimension of the search space, as the plan gives it.
struct TuneDimension {
    QString name; // as in the plan: "learningRate"
    QString label; // short, for columns and axes: "lr"
    QString kind; // choice | uniform | quniform | loguniform | qloguniform | randint | qrandint
    double low = kNotMeasured; // NaN where the kind has none (choice)
    double high = kNotMeasured;
    double q = kNotMeasured; // quantized kinds only
    QJsonArray values; // choice: numbers, or words (precision)
    bool logScale = false; // drawn in log space (drawnInLogSpace)

    bool choice() const { return kind == QLatin1String("choice"); }
};

// A decision, by where it lies: snapshot.runs[run].decisions[index].
struct TuneDecisionRef {
    int run = 0;
    int index = 0;
};

struct TuneReport {
    QString metric; // test_accuracy | test_loss | train_loss
    bool maximize = true;
    QString scheduler; // in words, from the snapshot
    bool planRead = false; // the plan's tune could be read (space, searcher, seed, rungs)
    QString searcher; // random | grid
    int samples = 0;
    quint64 seed = 0;
    int trialEpochs = 0; // the most a trial trains
    QList<TuneDimension> space; // in drawing order (tunableNames())
    // The epochs the scheduler judges a trial at before its last (the rungs), ascending;
    // from the plan's brackets, else from the decisions.
    QList<int> rungEpochs;
    // Every epoch a trial was judged at (rungs and the end), ascending: the "metric at
    // epoch N" columns.
    QList<int> judgedEpochs;
    int best = -1; // index into snapshot.runs (bestTrialIndex), -1 = none measured yet
    double bestValue = kNotMeasured;
    int bestEpoch = 0;
    QList<double> finalMetric; // per run (snapshot.runs order): its last epoch's metric, NaN = none
    // Every decision, oldest first: by when the attempt it judged ended (a promotion by when
    // the attempt it started began); without times, by epoch and trial.
    QList<TuneDecisionRef> decisions;
    int epochsSpent = 0;
    int epochsWithoutStopping = 0;
    int trials = 0;
};

[[nodiscard]] TuneReport tuneReport(const StudySnapshot &snapshot);

// "test accuracy", "test loss", "training loss".
[[nodiscard]] QString tuneMetricName(const QString &metric);
// Whether the metric is a fraction (accuracy: shown in percent).
[[nodiscard]] bool tuneMetricIsFraction(const QString &metric);
// A metric value for tables: "41.2%" or "1.234"; NaN is the report's dash.
[[nodiscard]] QString tuneMetricCell(const QString &metric, double value);
// A hyperparameter's value for tables: 3 significant digits, a word as it is; "" absent.
[[nodiscard]] QString paramValueText(const QJsonValue &value);
// The dimension's range or values in words: "0.003 – 0.3", "32, 64".
[[nodiscard]] QString dimensionRangeText(const TuneDimension &d);
// The value a trial's decision at `epoch` judged (rungs and end; not promotions); NaN when
// it was not judged then or the value was not measured. `judged` says which.
[[nodiscard]] double judgedValue(const RunResult &run, int epoch, bool *judged = nullptr);
// The hyperparameters shown: the space's, then any other a trial carries.
[[nodiscard]] QStringList tuneParamNames(const StudySnapshot &snapshot, const TuneReport &tune);

} // namespace scalelab::core
