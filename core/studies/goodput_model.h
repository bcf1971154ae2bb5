// Time to accuracy at other scales: how many more epochs a larger global batch needs, from
// the gradient noise scale the runs measured, joined to the throughput model
// (scaling_model.h), as goodput.
//
// McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of Large-Batch Training",
// eq. 2.11 and §2.3: to reach a given loss, steps S and examples E trade off as
// (S/S_min − 1)(E/E_min − 1) = 1, with E = S·M and B_crit ≈ B_noise, so the examples a
// batch M needs are E_min·(1 + M/B_noise). Against the baseline's global batch M0, whose
// epochs to the target were measured, the statistical efficiency of M is
//
//   E(M) = (B_noise + M0) / (B_noise + M)        (Pollux, Qiao et al. OSDI 2021, eq. 4)
//   epochs to target at M = baseline's epochs / E(M)
//   time to target at M   = epochs × images per epoch / predicted images/s at M
//   goodput               = predicted images/s × E(M)   (images/s that count, in M0's units)
//
// Assumptions a reader must know (notes() says them with the figures): the learning rate is
// right for each batch (the model is of the best a batch can do; with a fixed rate a large
// batch does worse); B_noise is the runs' measured B_simple, averaged over each run's epochs
// up to its target (B_simple grows as training goes: McCandlish §3.2), not B_crit, which
// would need runs trained to the target at several batches; epochs are interpolated linearly
// between the evaluations that bracket the target.
//
// Pure functions over values: no I/O, safe from any thread.
#pragma once

#include "scaling_model.h"
#include "study_model.h"

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

#include <optional>

namespace scalelab::core {

// A value and its band (the lowest and highest the inputs allow; equal to it when there is
// one measurement and nothing else varies).
struct Banded {
    double value = kNotMeasured;
    double low = kNotMeasured;
    double high = kNotMeasured;
    bool known() const { return std::isfinite(value); }
};

// Epochs a run took to reach `target` test accuracy: the first evaluation at or above it,
// interpolated linearly from the one before (1 when the first epoch already reached it);
// nullopt when it never did.
std::optional<double> epochsToTarget(const RunResult &run, double target);

// A run's noise scale over its training up to the target (or all of it): the mean of its
// epochs' known B_simple; NaN when none is known.
double runNoiseScale(const RunResult &run, double target);

// What the predictions start from: the reference batch M0, its measured epochs to the
// target, the noise scale, and the images in an epoch.
struct GoodputBasis {
    bool valid = false;
    QString problem; // why there is no prediction, in words, when !valid
    double target = kNotMeasured; // test accuracy, a fraction
    int referenceWorkers = 1;
    int referenceBatch = 0; // per worker
    int referenceGlobalBatch = 0; // M0
    Banded epochs; // to the target at M0: median, min and max over its repeats
    int epochRuns = 0;
    Banded noiseScale; // B_noise: median, min and max over the runs
    int noiseRuns = 0;
    QString noiseEstimator; // "two-batch" (several ranks) or "differenced" (one rank only)
    double imagesPerEpoch = kNotMeasured;
    QStringList notes;
};

// The basis of `scaling`'s model (and precision) in `snapshot` at `target`: the reference is
// the baseline when it reached the target, else the smallest global batch that did.
GoodputBasis goodputBasis(const StudySnapshot &snapshot, const StudyScaling &scaling, double target);

// E(M) and the epochs at M, from the basis.
double statisticalEfficiency(double noiseScale, double referenceGlobalBatch, double globalBatch);

struct GoodputPoint {
    int workers = 1;
    int batchPerWorker = 0;
    int globalBatch = 0;
    Banded efficiency; // statistical, against M0
    Banded epochs; // to the target
    Banded imagesPerSecond; // the throughput model's, with its bootstrap band
    Banded goodput; // images/s × E(M)
    Banded seconds; // time to target
    Banded speedup; // time to target at the reference's shape / this one's
    Banded scalingEfficiency; // speedup / (workers / the reference's workers)
    double overNoiseScale = kNotMeasured; // M / B_noise
    bool pastCritical() const { return overNoiseScale >= 4; }
};

// Each throughput point joined to the basis; `reference` is the throughput model's point at
// the reference's shape (workers and batch), the speedup's denominator.
QList<GoodputPoint> predictGoodput(
    const GoodputBasis &basis, const QList<ScalingPoint> &points, const ScalingPoint &reference);

// A study's time to its target per worker count at its most common batch per worker, as the
// reports and the console show it: the basis, the throughput model's points (with their
// band) and the goodput points joined to them. Invalid basis: basis.problem says why.
struct StudyGoodput {
    GoodputBasis basis;
    QList<ScalingPoint> throughput;
    QList<GoodputPoint> points;
};
StudyGoodput studyGoodput(const StudySnapshot &snapshot, const StudyScaling &scaling, double target,
    const QList<int> &workers, int rounds = 200);

// The configuration that reaches the target soonest (the fewest workers within 10 % of the
// soonest), or with the fewest workers within a deadline, among `workers` × `batches` per
// worker.
struct Recommendation {
    bool found = false;
    QString problem; // when !found: why, in words
    GoodputPoint best;
    QString lrRule; // the learning-rate rule to train it with
    QString lrRuleReason;
    QString reason; // why this one, in words
    QList<GoodputPoint> considered; // every candidate, fastest first
};
Recommendation recommend(const GoodputBasis &basis, const StudyScaling &scaling,
    const StudySnapshot &snapshot, const QList<int> &workers, const QList<int> &batches,
    double deadlineSeconds = 0);

// The batches per worker `recommend` considers by default: the study's own, and half and
// twice each, from 8 to 1,024.
QList<int> candidateBatches(const StudyScaling &scaling);

// "past the critical batch: more workers buy images per second, not time to accuracy" with
// the figures, for a global batch `times` B_noise; empty below 4×.
QString pastCriticalText(double globalBatch, double noiseScale);

// The basis and the points as JSON (`study predict --target --json`, the reports).
QJsonObject goodputJson(const GoodputBasis &basis, const QList<GoodputPoint> &points);
QJsonObject goodputPointJson(const GoodputPoint &p);

// "3.2 min", "48 s", "1.4 h".
QString durationText(double seconds);

} // namespace scalelab::core
