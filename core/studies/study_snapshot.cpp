// The study snapshot: a study's journal state joined to its runs' events (steps, epochs,
// recipe, anatomy, noise scale, accuracies, wall-clocks), what the reports, the CLI's
// `study show` and the console's views read; and the same for a run started outside a
// study. Declared in study_state.h.
#include "study_state.h"

#include "agent_client.h" // grpcVersion()
#include "build_info.h"
#include "run_anatomy.h"
#include "run_record.h"
#include "study_plan.h"

#include <google/protobuf/stubs/common.h>

#include <algorithm>

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>

namespace scalelab::core {

namespace {

QJsonArray doubles(const google::protobuf::RepeatedField<double> &values)
{
    QJsonArray out;
    for (double v : values)
        out.append(v);
    return out;
}

// The recipe a RunStarted event reports (see RunResult::recipe).
QJsonObject recipeOf(const v1::RunStarted &started)
{
    const v1::RunSpec &e = started.effective();
    const v1::Dataset &d = started.dataset();
    QJsonObject o { { QStringLiteral("dataset"), QString::fromStdString(d.name()) },
        { QStringLiteral("dataset_synthetic"), d.synthetic() },
        { QStringLiteral("dataset_train_images"), double(d.train_images()) },
        { QStringLiteral("dataset_test_images"), double(d.test_images()) },
        { QStringLiteral("dataset_sha256"), QString::fromStdString(d.content_sha256()) },
        { QStringLiteral("workers"), started.world_size() },
        { QStringLiteral("global_batch"), double(started.global_batch()) },
        { QStringLiteral("peak_learning_rate"), started.peak_learning_rate() },
        { QStringLiteral("steps_per_epoch"), double(started.steps_per_epoch()) },
        { QStringLiteral("warmup_steps"), double(started.warmup_steps()) },
        { QStringLiteral("threads"), started.threads() },
        { QStringLiteral("device"), QString::fromStdString(started.device()) },
        { QStringLiteral("parameters"), double(started.parameters()) },
        { QStringLiteral("gradient_bytes"), double(started.gradient_bytes()) },
        { QStringLiteral("forward_flops_per_image"), double(started.forward_flops_per_image()) },
        { QStringLiteral("normalize_mean"), doubles(started.normalize_mean()) },
        { QStringLiteral("normalize_std"), doubles(started.normalize_std()) } };
    if (!d.synthetic_kind().empty())
        o.insert(QStringLiteral("dataset_synthetic_kind"), QString::fromStdString(d.synthetic_kind()));
    if (started.has_core_share())
        o.insert(QStringLiteral("core_share"),
            QJsonObject { { QStringLiteral("machines"), started.core_share().machines() },
                { QStringLiteral("threads"), started.core_share().threads() },
                { QStringLiteral("cores"), started.core_share().cores() } });
    if (started.has_effective()) {
        o.insert(QStringLiteral("batch_size"), e.batch_size());
        o.insert(QStringLiteral("epochs"), e.epochs());
        o.insert(QStringLiteral("learning_rate"), e.learning_rate());
        o.insert(QStringLiteral("lr_scaling"), QString::fromStdString(e.lr_scaling()));
        o.insert(QStringLiteral("momentum"), e.momentum());
        o.insert(QStringLiteral("weight_decay"), e.weight_decay());
        o.insert(QStringLiteral("schedule"), QString::fromStdString(e.schedule()));
        o.insert(QStringLiteral("warmup_epochs"), e.warmup_epochs());
        o.insert(QStringLiteral("label_smoothing"), e.label_smoothing());
        o.insert(QStringLiteral("augment"), !e.no_augment());
        o.insert(QStringLiteral("precision"),
            e.precision() == v1::BF16 ? QStringLiteral("bf16") : QStringLiteral("fp32"));
        o.insert(QStringLiteral("model"),
            e.model().empty() ? QString::fromLatin1(kDefaultModelName) : QString::fromStdString(e.model()));
        o.insert(QStringLiteral("seed"), QString::number(e.seed())); // 64 bits: a string keeps it exact
        o.insert(QStringLiteral("max_train_images"), double(e.max_train_images()));
        o.insert(QStringLiteral("max_test_images"), double(e.max_test_images()));
        o.insert(QStringLiteral("divergence_factor"), e.divergence_factor());
        o.insert(QStringLiteral("divergence_steps"), e.divergence_steps());
        if (e.finetune().head_epochs() > 0) {
            o.insert(QStringLiteral("finetune_head_epochs"), e.finetune().head_epochs());
            o.insert(QStringLiteral("finetune_head_learning_rate"), e.finetune().head_learning_rate());
            o.insert(QStringLiteral("finetune_head"), QString::fromStdString(e.finetune().head()));
        }
    }
    for (const auto &[component, version] : started.software())
        o.insert(QStringLiteral("worker_%1").arg(QString::fromStdString(component)),
            QString::fromStdString(version));
    return o;
}

} // namespace

namespace {

// An epoch's metrics, its time counted from the run's first start (`offset` before this attempt).
EpochPoint epochPoint(const v1::EpochMetrics &m, double offset)
{
    EpochPoint p;
    p.epoch = m.epoch();
    p.trainLoss = m.train_loss();
    p.trainAccuracy = m.train_accuracy();
    p.testLoss = m.test_loss();
    p.testAccuracy = m.test_accuracy();
    p.elapsedSeconds = offset + m.elapsed_seconds();
    p.imagesPerSecond = m.images_per_second();
    if (const auto &n = m.gradient_noise(); n.samples() > 0)
        p.noise = { n.b_simple() > 0 ? n.b_simple() : kNotMeasured, n.grad_squared(), n.trace_sigma(),
            n.samples(), n.batches_per_step(), n.differenced() };
    return p;
}

// A run's measurements from its attempts' events in the journal: its steps, epochs, recipe,
// anatomy, noise scale, accuracies and (`succeeded`) wall-clock; the software and SYNTHETIC
// data its workers reported go to `s`. A retried run's clock runs from its first start of
// training through every gap between attempts.
void foldRunEvents(RunResult &r, const Journal &journal, bool succeeded, StudySnapshot &s)
{
    // Time runs from the first attempt's start of training; a retried run's clock
    // keeps running through the failure, its detection and the restart.
    double offset = 0; // seconds from the first start of training to this attempt's
    double lastElapsed = 0;
    QMap<int, EpochTimes> epochTimes;
    double checkpointSeconds = 0;
    qint64 firstStartMs = 0;
    for (auto &attempt : r.attempts) {
        if (attempt.agents.isEmpty())
            continue;
        const double previousEnd = offset; // the previous attempt's last moment
        lastElapsed = 0;
        const auto events = journal.runEvents(r.runId, attempt.attempt, attempt.agents.first());
        for (const auto &e : events)
            if (e.has_started()) {
                if (firstStartMs == 0)
                    firstStartMs = e.unix_ms();
                else // the agents' clocks: the gap between attempts is counted too
                    offset = std::max(previousEnd, double(e.unix_ms() - firstStartMs) / 1000.0);
                break;
            }
        for (const auto &e : events) {
            if (e.has_started()) {
                r.recipe = recipeOf(e.started());
                r.workerCommand.clear();
                for (const auto &arg : e.started().worker_command())
                    r.workerCommand << QString::fromStdString(arg);
                for (const auto &[component, version] : e.started().software())
                    s.software.insert(QStringLiteral("worker: %1").arg(QString::fromStdString(component)),
                        QString::fromStdString(version));
                attempt.resumedFromEpoch = e.started().resumed_from_epoch();
                s.synthetic = s.synthetic || e.started().dataset().synthetic();
                const int keep = e.started().resumed_from_epoch();
                r.epochs.removeIf([keep](const EpochPoint &p) { return p.epoch > keep; });
                epochTimes.removeIf([keep](const auto &entry) { return entry.key() > keep; });
                if (e.started().has_network())
                    r.network = networkOf(e.started().network());
                if (e.started().gradient_bytes() > 0)
                    r.gradientBytes = double(e.started().gradient_bytes());
                r.threads = e.started().threads();
                r.coreShare = coreShareOf(e.started());
                r.steps.removeIf([keep](const StepPoint &p) { return p.epoch > keep; });
            } else if (e.has_step()) {
                StepPoint p;
                p.step = e.step().step();
                p.epoch = e.step().epoch();
                p.loss = e.step().loss();
                p.elapsedSeconds = offset + e.step().elapsed_seconds();
                if (e.step().step_seconds() > 0)
                    p.times
                        = { e.step().data_seconds(), e.step().forward_seconds(), e.step().backward_seconds(),
                              e.step().exposed_allreduce_seconds(), e.step().optimizer_seconds() };
                lastElapsed = std::max(lastElapsed, e.step().elapsed_seconds());
                r.steps << p;
            } else if (e.has_epoch()) {
                const auto &m = e.epoch();
                const EpochPoint p = epochPoint(m, offset);
                lastElapsed = std::max(lastElapsed, m.elapsed_seconds());
                r.epochs.removeIf([&](const EpochPoint &old) { return old.epoch == p.epoch; });
                r.epochs << p;
                ++r.epochsTrained; // an epoch trained again after a resume counts again
                if (m.ranks_size() > 0)
                    epochTimes.insert(m.epoch(), epochTimesOf(m));
            } else if (e.has_checkpoint()) {
                checkpointSeconds += e.checkpoint().seconds();
            } else if (e.has_summary() && e.summary().state() == v1::SUCCEEDED) {
                lastElapsed = std::max(lastElapsed, e.summary().wall_seconds());
            }
        }
        offset += lastElapsed;
    }
    r.imagesPerSecond = runImagesPerSecond(r.epochs);
    r.anatomy = anatomyOf(epochTimes, checkpointSeconds);
    for (const EpochPoint &p : r.epochs)
        if (p.noise.measured())
            r.noise = p.noise;
    if (!r.epochs.isEmpty()) {
        r.finalTestAccuracy = r.epochs.last().testAccuracy;
        r.bestTestAccuracy = 0;
        for (const auto &p : r.epochs) {
            r.bestTestAccuracy = std::max(r.bestTestAccuracy, p.testAccuracy);
            if (!r.timeToTargetSeconds && std::isfinite(s.targetAccuracy)
                && p.testAccuracy >= s.targetAccuracy)
                r.timeToTargetSeconds = p.elapsedSeconds;
        }
    }
    if (succeeded)
        r.wallSeconds = offset;
}

// This console's software; the agents' and workers' are added from what they reported.
void addConsoleSoftware(StudySnapshot &s)
{
    s.software.insert(QStringLiteral("console: ScaleLab"),
        QStringLiteral("%1 (git %2)")
            .arg(QStringLiteral(SCALELAB_VERSION), QString::fromLatin1(common::gitCommit())));
    s.software.insert(QStringLiteral("console: Qt"), QString::fromLatin1(qVersion()));
    s.software.insert(QStringLiteral("console: gRPC"), grpcVersion());
    s.software.insert(QStringLiteral("console: protobuf"),
        QString::fromStdString(google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION)));
}

} // namespace

RunConfig singleRunConfig(const v1::StartWorkersRequest &request)
{
    RunConfig c;
    const v1::RunSpec &spec = request.spec();
    c.workers = std::max(1, request.world_size());
    c.baseline = c.workers == 1;
    c.batchSize = spec.batch_size();
    c.epochs = spec.epochs();
    c.gpusPerWorker = spec.gpus_per_worker();
    c.threadsPerWorker = spec.threads_per_worker();
    c.precision = spec.precision() == v1::BF16 ? QStringLiteral("bf16") : QStringLiteral("fp32");
    c.lrRule = spec.lr_scaling().empty() ? QStringLiteral("none") : QString::fromStdString(spec.lr_scaling());
    if (!spec.model().empty())
        c.model = QString::fromStdString(spec.model());
    c.accumulationSteps = std::max(1, spec.accumulation_steps());
    if (spec.batches_per_step() > 0) // started on fewer workers than asked for
        c.workers = std::max(c.workers, spec.batches_per_step() / c.accumulationSteps);
    return c;
}

StudySnapshot singleRunSnapshot(const Journal &journal, const SingleRunEntry &entry)
{
    StudySnapshot s;
    const v1::RunSpec &spec = entry.request.spec();
    s.studyId = entry.runId;
    s.name = entry.label.isEmpty() ? entry.runId : entry.label;
    s.state = RunRecord::stateName(entry.state);
    s.dataset = QString::fromStdString(spec.dataset());
    s.createdUnixMs = entry.launchedUnixMs;
    s.finishedUnixMs = entry.endedUnixMs;
    addConsoleSoftware(s);
    RunResult r;
    r.runId = entry.runId;
    r.config = singleRunConfig(entry.request);
    r.state = s.state;
    r.attempts << AttemptRecord { 1, { entry.agent }, s.state, {}, 0, entry.launchedUnixMs, entry.endedUnixMs,
        0, {}, std::max(1, entry.request.world_size()), {} };
    foldRunEvents(r, journal, entry.state == v1::SUCCEEDED, s);
    s.runs << r;
    return s;
}

StudySnapshot buildSnapshot(const StudyState &state, const Journal &journal)
{
    StudySnapshot s;
    s.studyId = state.studyId();
    s.name = state.name();
    s.state = state.state();
    s.dataset = QString::fromStdString(state.plan().dataset());
    for (const auto &[sum, name] : state.plan().model_names())
        s.modelNames.insert(
            QStringLiteral("sha256:") + QString::fromStdString(sum), QString::fromStdString(name));
    s.targetAccuracy = state.plan().target_accuracy() > 0 ? state.plan().target_accuracy() : kNotMeasured;
    s.createdUnixMs = state.createdUnixMs();
    s.finishedUnixMs = state.endedUnixMs();
    s.nodes = state.nodes();
    s.planJson = planToJson(state.plan());
    if (state.plan().learning_rate_auto()) {
        const LearningRateSearch &search = state.learningRateSearch();
        if (search.found)
            s.learningRateNote
                = QStringLiteral("auto: %1 at global batch %2, from the range test on %3 (%4 steps; "
                                 "lowest smoothed loss at lr %5; %6)")
                      .arg(QString::number(search.found->learningRate, 'g', 4))
                      .arg(search.found->batch)
                      .arg(search.agent)
                      .arg(search.steps)
                      .arg(QString::number(search.minLossLearningRate, 'g', 4), search.rule);
        else if (search.gaveUp)
            s.learningRateNote = QStringLiteral("auto: the range test failed %1 times (%2)")
                                     .arg(search.failures)
                                     .arg(search.lastFailure);
        else
            s.learningRateNote = QStringLiteral("auto: the range test has not chosen yet");
        s.learningRateCurve = search.points;
    }
    s.networkProbes = state.networkProbes();
    s.networkNote = state.networkNote();
    s.unreadableEvents = state.unreadableEvents();
    addConsoleSoftware(s);
    for (const NodeInfo &node : s.nodes)
        for (auto it = node.software.cbegin(); it != node.software.cend(); ++it)
            if (!s.software.contains(QStringLiteral("agent: %1").arg(it.key())))
                s.software.insert(QStringLiteral("agent: %1").arg(it.key()), it.value());
    if (state.isTune()) {
        const TuneSettings &t = state.scheduler().settings();
        s.tune = true;
        s.tuneMetric = t.metric;
        s.tuneMaximize = t.maximize;
        s.tuneTrialEpochs = t.trialEpochs;
        s.tuneScheduler = t.asha()
            ? QStringLiteral("ASHA %1, η %2, grace %3 epoch(s), at most %4 epochs%5")
                  .arg(t.variant)
                  .arg(t.reductionFactor)
                  .arg(t.gracePeriod)
                  .arg(t.trialEpochs)
                  .arg(t.brackets > 1 ? QStringLiteral(", %1 brackets").arg(t.brackets) : QString())
            : QStringLiteral("none: every trial trains %1 epoch(s)").arg(t.trialEpochs);
    }
    for (const auto &progress : state.runs()) {
        RunResult r;
        r.runId = progress.planned.runId;
        r.trial = progress.planned.trial;
        r.params = progress.planned.params;
        r.decisions = progress.decisions;
        r.trialTarget = progress.target;
        r.config = progress.planned.config;
        r.repeat = progress.planned.repeat;
        r.state = phaseName(progress.phase);
        r.stateReason = progress.reason;
        r.attempts = progress.attempts;
        foldRunEvents(r, journal, progress.phase == RunPhase::Succeeded, s);
        if (!r.attempts.isEmpty() && r.attempts.last().transferredEpoch > 0
            && (progress.attemptOpen() || progress.phase == RunPhase::Succeeded))
            r.stateReason = resumeNote(r.attempts.last());
        if (progress.attemptOpen() && progress.stalledSinceMs > 0)
            r.stateReason = stallText(progress, QDateTime::currentMSecsSinceEpoch());
        s.runs << r;
    }
    return s;
}

} // namespace scalelab::core
