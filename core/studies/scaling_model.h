// Why a study scales as it does, and what more workers would give: a model of one
// data-parallel training step, fitted from the study's own runs and network probes.
//
//   T_step(p, b) = s·T_data(b) + ( (s·T_c(b, p))^γ + T_ar(p)^γ )^(1/γ)
//   T_c(b, p) = α_c + β_c·b + η·2(p−1)/p·G   compute per step: forward, backward, optimizer
//   T_data(b) = δ·b                   waiting for the batch
//   T_ar(p)   = k·2(p−1)·α + 2(p−1)/p · G/β   (0 for p = 1)
//
// T_ar is a ring all-reduce of the G gradient bytes each step (NCCL's doc/PERFORMANCE.md:
// every byte crosses 2(p−1)/p links; each of the 2(p−1) phases pays the latency α), sent in
// k buckets as c10d's reducer does (1 MB, then 4 MB each). γ ≥ 1 says how much of it backward
// hides: 1, none (the times add); large, all but the longer one. The form is AdaptDL/Pollux's
// (Qiao et al., OSDI 2021, "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized
// Deep Learning", section 3.2), with one term added: η, the compute time per byte each rank
// reduces (2(p−1)/p·G of them), for collectives that run on the cores the model computes on
// (Gloo on a CPU: its reductions and copies slow forward and backward down), and one factor:
// s ≥ 1, compute threads per core on the busiest machine of the ranks (RunStarted.core_share):
// ranks that share a machine's cores take turns on them, and all wait for the slowest. A run
// measured with s > 1 has its compute divided by s before the fit; a prediction multiplies it
// back for the placement asked (CorePlacement; by default each rank on cores of its own).
//
// Every input is measured: G from the model's parameters (RunStarted.gradient_bytes), α and
// β from the runs' all-reduce probes (least squares on time against bytes, relative errors),
// α_c, β_c and δ from the single-worker runs' measured step anatomy (all runs' when there is
// none), η from the multi-worker runs' compute beyond that, γ from their step times. The uncertainty is a
// bootstrap over runs, their steps and the probes' repeats.
//
// Pure functions over values: no I/O, safe from any thread.
#pragma once

#include "study_model.h"

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

namespace scalelab::core {

// What one run contributes: its shape and its measured times per step.
struct ScalingRun {
    QString runId;
    int workers = 1;
    int batchPerWorker = 0;
    double gradientBytes = kNotMeasured;
    StepTimes perStep; // rank 0's mean
    QList<StepTimes> steps; // rank 0's steps, for the bootstrap (may be empty)
    RunNetwork network;
    double coreShare = 1; // s: compute threads per core on its busiest machine, ≥ 1
    int threads = 0; // compute threads per rank; 0: not reported
    double stepSeconds() const { return perStep.total(); }
    double imagesPerSecond() const { return workers * batchPerWorker / stepSeconds(); }
};

struct ScalingModel {
    bool valid = false;
    QString problem; // why there is no model, in words, when !valid
    double computeIntercept = 0; // α_c, seconds
    double computePerImage = 0; // β_c, seconds per image on one worker
    double dataPerImage = 0; // δ
    double contention = 0; // η, compute seconds per byte a rank reduces
    double latency = kNotMeasured; // α, seconds per ring phase
    double bandwidth = kNotMeasured; // β, bytes per second
    double gamma = 1; // overlap
    bool gammaFitted = false; // false: no multi-worker run, γ = 1 assumed (no overlap)
    double gradientBytes = kNotMeasured; // G of the study's model
    int probeHosts = 0; // hosts of the probes the network was fitted from (1: one node)
    int threadsPerRank = 1; // the runs' compute threads per rank (their median), for placements
    double largestCoreShare = 1; // the most any fitted run's ranks shared cores
    QStringList notes; // what was assumed, and where the fit is thin
};

// Latency α and bandwidth β of a ring all-reduce fitted to probes' times (each size's median
// against 2(p−1)·α + 2(p−1)/p·bytes/β, least squares on relative errors; α ≥ 0).
struct LinkFit {
    double latency = kNotMeasured; // α, seconds per ring phase
    double bandwidth = kNotMeasured; // β, bytes per second
    double worstRelativeError = 0; // of the fitted line against the measured sizes
    QString problem; // why nothing could be fitted
    bool ok() const { return problem.isEmpty(); }
};
LinkFit fitLink(const QList<RunNetwork> &probes);

// The median of the finite values; kNotMeasured when there are none.
double finiteMedian(QList<double> values);

// The all-reduce time of `bytes` over `workers` ranks, as c10d's reducer sends it.
double allReduceSeconds(const ScalingModel &model, int workers, double bytes);

// Fits the model. Runs of one model only (their gradient bytes agree); runs without a
// measured anatomy are left out.
ScalingModel fitScalingModel(const QList<ScalingRun> &runs);

struct ScalingPoint {
    int workers = 1;
    int batchPerWorker = 0;
    double bandwidth = kNotMeasured; // the link assumed (the model's unless asked)
    double stepSeconds = kNotMeasured;
    double computeSeconds = kNotMeasured; // T_c
    double allReduceSeconds = kNotMeasured; // T_ar, before overlap
    double exposedSeconds = kNotMeasured; // what overlap leaves of it
    double imagesPerSecond = kNotMeasured;
    double speedup = kNotMeasured; // against one worker at the same batch per worker
    double efficiency = kNotMeasured; // speedup / workers
    double coreShare = 1; // s of the placement asked: compute threads per core, ≥ 1
    // 95 % bootstrap interval (2.5th and 97.5th percentiles); NaN without a bootstrap.
    double imagesPerSecondLow = kNotMeasured, imagesPerSecondHigh = kNotMeasured;
    double efficiencyLow = kNotMeasured, efficiencyHigh = kNotMeasured;
};

// Where the predicted ranks run. By default (machines 0) each rank computes on cores of its
// own, as a rank alone does: the model's compute as fitted. Otherwise the ranks are dealt
// round-robin over `machines` machines of `coresPerMachine` cores each, every rank with
// `threadsPerRank` compute threads (0: the runs' own): where a machine gets more threads than
// cores, its ranks compute that much slower (s), and all the others wait for them.
struct CorePlacement {
    int machines = 0;
    int coresPerMachine = 0;
    int threadsPerRank = 0;
    bool dedicated() const { return machines <= 0 || coresPerMachine <= 0; }
    // s for `workers` ranks of `threads` threads each (threadsPerRank when set): at least 1.
    double share(int workers, int threads) const;
    // "4 ranks on 1 machine of 2 cores" style words for the assumption; "" when dedicated.
    QString text() const;
};

// The model's prediction at `workers` x `batchPerWorker`; bandwidth (bytes/s) > 0 replaces
// the measured one.
ScalingPoint predictScaling(const ScalingModel &model, int workers, int batchPerWorker, double bandwidth = 0,
    const CorePlacement &placement = {});

// predictScaling with a bootstrap band: the model refitted `rounds` times on resampled runs,
// steps and probe repeats (a fixed seed: the same inputs give the same band).
QList<ScalingPoint> predictWithBand(const QList<ScalingRun> &runs, const QList<int> &workers,
    int batchPerWorker, double bandwidth = 0, int rounds = 200, const CorePlacement &placement = {});

// Leave-one-out: each multi-worker run predicted by the model fitted without it.
struct HeldOutError {
    QString runId;
    int workers = 0;
    int batchPerWorker = 0;
    double measured = kNotMeasured; // images/s, from its anatomy
    double predicted = kNotMeasured;
    QString problem; // why there is no prediction (the rest cannot be fitted)
    double relativeError() const { return predicted / measured - 1; }
};
QList<HeldOutError> leaveOneOut(const QList<ScalingRun> &runs);

// Where efficiency goes between two measured runs of one batch per worker (fewer workers
// first): "2 → 4 workers lose 29 % efficiency; 71 % of the loss is exposed all-reduce of
// 13 MB per step at ~110 MB/s". Empty when they cannot be compared.
QString efficiencyLossText(const ScalingRun &fewer, const ScalingRun &more, const ScalingModel &model);

// A study's scaling, per model and precision it trains: its measured runs (SUCCEEDED, with an anatomy),
// the model fitted on them, each multi-worker run predicted without itself, and where
// efficiency goes between consecutive worker counts of one batch per worker.
struct StudyScaling {
    QString model; // RunConfig::model
    QString precision = QStringLiteral("fp32"); // RunConfig::precision: bf16 computes at its own speed
    QList<ScalingRun> runs;
    ScalingModel fit;
    QList<HeldOutError> heldOut;
    QStringList losses; // efficiencyLossText of each measured pair
    int batchPerWorker = 0; // the most common among the runs: what predictions default to
};
// Defined in scaling_study.cpp, as are scalingLabel and scalingRunOf.
QList<StudyScaling> studyScaling(const StudySnapshot &snapshot);
// What a fit is of, for labels: the model's name (a TorchScript module's file name from
// `modelNames`), and " · bf16" for runs in bf16.
QString scalingLabel(const StudyScaling &scaling, const QMap<QString, QString> &modelNames);

// The fit, its held-out errors, the losses and `predictions` as JSON (the report's
// "scaling" entries and `study predict --json`), with the definitions of what they mean.
QJsonObject scalingJson(const StudyScaling &scaling, const QList<ScalingPoint> &predictions);
// A run's anatomy as JSON (seconds; per step, and outside the steps), for `study show
// --json` and the JSON report. Empty when not measured.
QJsonObject anatomyJson(const RunAnatomy &anatomy);
// A run's network probe as JSON: world size, backend, hosts, and per size its bytes and each
// timed all-reduce's seconds.
QJsonObject networkJson(const RunNetwork &network);

// The worker counts predictions are drawn at by default: 1, 2, 4 ... 512.
QList<int> defaultPredictionWorkers();
ScalingRun scalingRunOf(const RunResult &run);

// "10Gbit", "1 Gbit/s", "100Mbit", "125MB/s", "1.5e9" (bytes/s) in bytes per second; 0 when
// it cannot be read.
double parseBandwidth(const QString &text);
QString bandwidthText(double bytesPerSecond); // "110 MB/s (0.88 Gbit/s)"

} // namespace scalelab::core
