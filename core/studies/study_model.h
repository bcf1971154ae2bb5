// What a study is and what it produced, as plain values: the journal folds its events
// into a StudySnapshot; results, reports, the CLI and the console read snapshots.
// No Qt object, no I/O, no proto: this header is the contract between those parts.
#pragma once

#include <QByteArray>
#include <QJsonArray>
#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>
#include <QStringList>

#include <cmath>
#include <limits>
#include <optional>

namespace scalelab::core {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// The model a run trains when its plan names none (proto/worker/worker_contract.h's first).
inline constexpr const char *kDefaultModelName = "seed-cnn";

// One point of a study's grid: how a run trains and how wide it is.
struct RunConfig {
    bool baseline = false; // the one-worker reference every speedup divides by
    int workers = 1; // ranks, as planned (an elastic run's most)
    int batchSize = 64; // per micro-batch; the global batch is batchSize * workers * accumulationSteps
    // Gradient accumulation: micro-batches each rank adds up before a step's one all-reduce.
    int accumulationSteps = 1;
    // An elastic run (issue 55): the fewest ranks it may go on with when ranks, agents or hosts
    // are lost (or are not free), keeping its global batch by accumulating more; 0: a fixed
    // size, which waits for all `workers`.
    int minWorkers = 0;
    int epochs = 1;
    double gpusPerWorker = 0; // 0 = CPU; 0.5 = two workers share a GPU
    int threadsPerWorker = 0; // 0 = the node's cores / ranks on it
    QString precision = QStringLiteral("fp32"); // "fp32" | "bf16"
    QString lrRule
        = QStringLiteral("none"); // "none" (fixed) | "linear" | "sqrt" | "adascale" (worker::kLrRules)
    QString model = QString::fromLatin1(kDefaultModelName); // RunSpec.model: "seed-cnn", "resnet18", ...

    int globalBatch() const { return batchSize * workers * accumulationSteps; }
    // K, the micro-batches one step averages: the same on every world size an elastic run takes.
    int batchesPerStep() const { return workers * accumulationSteps; }
    bool elastic() const { return minWorkers > 0 && minWorkers < workers; }
    bool defaultModel() const { return model == QLatin1String(kDefaultModelName); }
    // Stable, human-readable identity of the configuration, e.g. "w2-b64-e3-cpu-t1-fp32-lr_none",
    // with "-resnet18" after it for a model other than the default.
    QString key() const;
    bool operator==(const RunConfig &) const = default;
};

// Short labels that tell `configs` apart, in a reader's words: the workers always (what a
// scale-up study varies), then only the fields that differ between them, e.g.
// "baseline · 1 worker · b64", "2 workers · b32", and the model whenever it is not the
// default ("2 workers · b64 · resnet18"). For tables and legends; key() stays the identity.
// `modelNames` ("sha256:HEX" -> file name, StudySnapshot::modelNames) names TorchScript
// modules by their files.
QStringList distinguishingLabels(
    const QList<RunConfig> &configs, const QMap<QString, QString> &modelNames = {});

// A model as keys and labels name it: a built-in's name, or "ts_" and the first 12 digits
// of a TorchScript module's sum ("sha256:HEX"); plan_models.h's modelDisplayName gives
// the module's file name where the plan is at hand.
QString modelShortName(const QString &model);

// The gradient noise scale a run measured (agent.proto's GradientNoise; the trainer's
// noise_scale.h): B_simple = tr(Σ)/|G|² in examples, about the critical batch.
struct GradientNoise {
    double bSimple = kNotMeasured; // NaN while not known: the averaged |G|² is not positive
    double gradSquared = kNotMeasured; // |G|², averaged
    double traceSigma = kNotMeasured; // tr(Σ), averaged
    qint64 samples = 0; // steps averaged
    int batchesPerStep = 0; // K = ranks × accumulation
    bool differenced = false; // one rank: this step's gradient against the previous one
    bool measured() const { return samples > 0; }
    bool known() const { return measured() && std::isfinite(bSimple) && bSimple > 0; }
};

struct EpochPoint {
    int epoch = 0; // 1-based
    double trainLoss = kNotMeasured;
    double trainAccuracy = kNotMeasured; // fraction in [0, 1]
    double testLoss = kNotMeasured;
    double testAccuracy = kNotMeasured; // fraction in [0, 1]
    double elapsedSeconds = kNotMeasured; // since the run's training started (attempts summed)
    double imagesPerSecond = kNotMeasured;
    GradientNoise noise; // as of the epoch's last step
};

// Where a step's time goes (agent.proto's StepAnatomy), in seconds: waiting for the batch,
// forward, backward to its last gradient, the all-reduce backward did not hide, optimizer.
struct StepTimes {
    double data = kNotMeasured;
    double forward = kNotMeasured;
    double backward = kNotMeasured;
    double exposedAllReduce = kNotMeasured;
    double optimizer = kNotMeasured;
    double compute() const { return forward + backward + optimizer; }
    double total() const { return data + compute() + exposedAllReduce; }
    bool measured() const { return !std::isnan(total()); }
    static StepTimes zero() { return { 0, 0, 0, 0, 0 }; }
    StepTimes &operator+=(const StepTimes &o)
    {
        data += o.data;
        forward += o.forward;
        backward += o.backward;
        exposedAllReduce += o.exposedAllReduce;
        optimizer += o.optimizer;
        return *this;
    }
    StepTimes dividedBy(double n) const
    {
        return { data / n, forward / n, backward / n, exposedAllReduce / n, optimizer / n };
    }
};

struct StepPoint {
    qint64 step = 0; // global optimizer step, 1-based
    int epoch = 0;
    double loss = kNotMeasured;
    double elapsedSeconds = kNotMeasured;
    StepTimes times; // rank 0's; not measured for runs recorded before the anatomy existed
};

// One rank's mean step over the run's completed epochs.
struct RankTimes {
    int rank = 0;
    qint64 steps = 0;
    StepTimes perStep;
};

// A run's time, taken apart (rank 0 unless said): its steps' mean anatomy, every rank's,
// and the time outside the steps. The straggler is the rank whose steps took longest
// without counting the all-reduce wait (which a slow rank makes the others pay); its lag is
// how much longer than the median rank's, per step.
struct RunAnatomy {
    qint64 steps = 0;
    StepTimes perStep;
    QList<RankTimes> ranks;
    double trainSeconds = 0; // steps, data waits included
    double evaluationSeconds = 0; // the test split after each epoch
    double checkpointSeconds = 0; // writing and committing checkpoints
    int slowestRank = -1; // -1: one rank, or not measured
    double slowestLagSeconds = kNotMeasured;
    bool measured() const { return steps > 0 && perStep.measured(); }
};

// All-reduce times by message size between a run's ranks (agent.proto's NetworkProbe).
struct NetworkSample {
    qint64 bytes = 0;
    QList<double> seconds;
};
struct RunNetwork {
    int worldSize = 0; // 0: not measured
    QString backend;
    int hosts = 0;
    QList<NetworkSample> samples;
};

// One attempt of a run: the first start, then one per retry.
struct AttemptRecord {
    int attempt = 1;
    QStringList agents; // addresses of the agents that hosted its ranks
    QString outcome; // run state name at the attempt's end ("RUNNING" while live)
    QString reason; // why it ended (failure message), empty when it succeeded
    int resumedFromEpoch = 0; // 0 = fresh start
    qint64 startedUnixMs = 0;
    qint64 endedUnixMs = 0; // 0 while live
    // The console sent its copy of this checkpoint to rank 0's agent before the start,
    // because that agent did not hold it (the agent that wrote it was gone, or busy).
    int transferredEpoch = 0; // 0 = nothing transferred
    QString transferredFrom; // the agent that wrote the checkpoint
    int worldSize = 0; // its ranks: an elastic run's may be fewer than the planned workers
    QString resize; // why its size differs from the attempt before (or the plan), in words; "" = it does not
};

// Where an attempt resumed from, in words: "resumed from epoch 2, checkpoint copied
// from agent 127.0.0.1:7450", "resumed from epoch 2", or "" for a fresh start.
QString resumeNote(const AttemptRecord &attempt);

// What a tune's scheduler decided about a trial (tune_decisions.h), as journalled.
struct TrialDecision {
    QString runId;
    // continue: trains on to nextTarget; stop: early-stopped (ASHA stopping, or not
    // promoted when the promotion variant ends); pause: waits at a rung for a promotion;
    // promote: resumes to nextTarget; finish: trained all its epochs.
    QString action;
    int epoch = 0; // completed epochs the value is of
    double value = 0; // the metric then (NaN when not measured)
    int rung = -1; // index into the trial's targets: the rung judged, paused at or left; -1 none
    std::optional<double> cutoff; // the value it had to reach (stopping), when the rung had results
    QList<double> seen; // the values recorded at that rung before this decision
    int nextTarget = 0; // continue, promote: the epoch the next attempt stops after
    QString reason; // in words, for tables and logs
    // The user continued the trial to this epoch (trial_continued): the scheduler's rungs
    // do not see it, as Ray's would not hear from a stopped trial again.
    bool continued = false;
    // Where the journal holds it (set when replayed; not part of the payload): the
    // decisions of all trials, in the order they were made, sort by eventId.
    qint64 eventId = 0;
    qint64 unixMs = 0;

    [[nodiscard]] QJsonObject toJson() const;
    [[nodiscard]] static TrialDecision fromJson(const QJsonObject &json);
};

struct RunResult {
    QString runId;
    RunConfig config;
    int repeat = 0; // 0-based index among the repeats of this configuration
    QString state
        = QStringLiteral("PENDING"); // PENDING | STARTING | RUNNING | SUCCEEDED | FAILED | CANCELLED
    QString stateReason; // e.g. why it is PENDING or why it FAILED, in words
    QList<AttemptRecord> attempts;
    double finalTestAccuracy = kNotMeasured;
    double bestTestAccuracy = kNotMeasured;
    // From the first attempt's start of training to the end of the last one: a retried
    // run's failure, its detection and the restart are inside it.
    double wallSeconds = kNotMeasured;
    double imagesPerSecond = kNotMeasured;
    std::optional<double> timeToTargetSeconds; // first epoch end at or above the study's target
    QList<EpochPoint> epochs;
    QList<StepPoint> steps; // may be downsampled for long runs
    // How the run trained, as rank 0's worker reported it when its last attempt started:
    // every hyperparameter after defaults and scaling rules, the seed, the data set (record
    // counts, content SHA-256, normalisation) and the worker's software. Keys as in the JSON
    // report ("learning_rate", "normalize_mean", ...). Empty until the run has started.
    QJsonObject recipe;
    QStringList workerCommand; // rank 0's command line, as its agent ran it
    // A tune's trial: the hyperparameters drawn for it and its scheduler's decisions.
    bool trial = false;
    QJsonObject params;
    QList<TrialDecision> decisions;
    int trialTarget = 0; // the epoch its open or next attempt stops after
    int epochsTrained = 0; // every epoch any attempt trained, one trained again counted again
    RunAnatomy anatomy; // over the epochs it kept (a resumed attempt's replace the ones it retrains)
    GradientNoise noise; // as of its last epoch that measured one
    RunNetwork network; // its last attempt's probe
    double gradientBytes = kNotMeasured; // all-reduced per step (the recipe's gradient_bytes)
    // How its ranks shared cores (RunStarted.core_share, its last attempt): on the busiest
    // machine, compute threads per core, at least 1 (1 also when not measured, or on a GPU).
    double coreShare = 1;
    int threads = 0; // compute threads per rank (RunStarted.threads); 0: not reported
};

// The sizes an elastic run trained at, in order ("2 → 1 → 2 workers"), when any of its
// attempts ran on another number of workers than planned; "" when none did.
QString elasticSizesText(const RunResult &run);

// The one definition of a run's throughput, used by the console, the CLI and every report:
// training images per second of training time (evaluation and checkpoints excluded), over
// every epoch the run completed, across attempts. Each epoch trains the same number of
// images, so it is the harmonic mean of the epochs' rates. NaN without a completed epoch.
double runImagesPerSecond(const QList<EpochPoint> &epochs);

// A node as the study saw it (from the agent's Describe).
struct NodeInfo {
    QString agent; // address, e.g. "127.0.0.1:50051"
    QString hostname;
    QString agentVersion;
    int cpuCores = 0;
    qint64 memoryBytes = 0;
    QStringList gpus; // "0: NVIDIA H100 (80 GiB)"
    QString cpuModel;
    QString os;
    QString gpuStatus; // the driver, or why there are no GPUs
    QMap<QString, QString> software; // the agent's: scalelab, git_commit, grpc, protobuf, compiler
};

struct StudySnapshot {
    QString studyId;
    QString name;
    QString state = QStringLiteral("PENDING"); // PENDING | RUNNING | SUCCEEDED | FAILED | CANCELLED
    QString dataset;
    bool synthetic = false; // generated images, not CIFAR-10: every report says so
    double targetAccuracy = kNotMeasured; // fraction; time-to-accuracy is measured against it
    qint64 createdUnixMs = 0;
    qint64 finishedUnixMs = 0; // 0 while not finished
    QList<RunResult> runs;
    QList<NodeInfo> nodes;
    QMap<QString, QString> software; // component -> version ("ScaleLab", "Qt", "gRPC", "libtorch", ...)
    QByteArray planJson; // the study's plan (protobuf JSON): `study rerun REPORT.json` starts it again
    // With "learningRate": "auto": what the range test chose and why, and its curve
    // (learning rate, smoothed loss). Empty for a plan with a fixed learning rate.
    QString learningRateNote;
    // The TorchScript modules the study trains, by sum ("sha256:HEX" -> the file's name in
    // the plan, plan_models.h): for labels.
    QMap<QString, QString> modelNames;
    QList<QPair<double, double>> learningRateCurve;
    // A tune (tune_plan.h): the metric its scheduler compares and in which direction,
    // and its scheduler in words ("ASHA stopping, η 3, grace 1, at most 9 epochs").
    bool tune = false;
    QString tuneMetric;
    bool tuneMaximize = true;
    int tuneTrialEpochs = 0; // the most a trial trains, unless the user continues it
    QString tuneScheduler;
    // The network between the study's hosts, probed once at its start (network_probe.h's
    // probeJson, one per probe; empty when not probed) and what became of the survey in words.
    QJsonArray networkProbes;
    QString networkNote;
    // Journal events that could not be read (damaged) and were skipped: "event ID (type): why".
    QStringList unreadableEvents;
};

} // namespace scalelab::core
