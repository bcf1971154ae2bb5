#include "tensorboard_content.h"

#include "study_state.h"

#include "tensorboard_export.h"
#include "tune_plan.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QMap>
#include <QSaveFile>
#include <QSet>

#include <algorithm>
#include <cmath>
#include <set>

namespace scalelab::core::tboard {

constexpr const char *kMarker = ".scalelab-export";
constexpr const char *kEventFilePattern = "events.out.tfevents.*";
// Up to this many distinct numbers an hparam lists them (TensorBoard's filter shows
// checkboxes); beyond, it gives their range.
constexpr int kMaxDiscreteNumbers = 12;

double seconds(qint64 unixMs)
{
    return double(unixMs) / 1000.0;
}

double nowSeconds()
{
    return seconds(QDateTime::currentMSecsSinceEpoch());
}

// What TensorBoard shows beside each chart, one sentence per tag.
const QMap<QString, QString> &tagDescriptions()
{
    static const QMap<QString, QString> d {
        { QStringLiteral("train/loss"),
            QStringLiteral("Training loss of rank 0's batch at this optimizer step.") },
        { QStringLiteral("train/lr"),
            QStringLiteral("Learning rate of the step (schedule and warm-up applied).") },
        { QStringLiteral("train/grad_norm"),
            QStringLiteral("L2 norm of all gradients, averaged over the ranks, before the optimizer step.") },
        { QStringLiteral("train/gradient_noise_scale"),
            QStringLiteral(
                "Gradient noise scale B_simple = tr(Σ)/|G|², in examples: about the critical batch, "
                "past which a larger global batch buys few fewer steps (moving averages over the "
                "last ~100 steps; one worker: the differenced estimator, biased while the gradient "
                "moves).") },
        { QStringLiteral("train/images_per_second"),
            QStringLiteral("Training images per second of the step, all workers together.") },
        { QStringLiteral("step/seconds"), QStringLiteral("Wall-clock seconds of the step on rank 0.") },
        { QStringLiteral("step/compute_seconds"),
            QStringLiteral(
                "The part of the step not spent waiting for gradient all-reduces (CPU runs: on a GPU "
                "host-side times do not split a step).") },
        { QStringLiteral("step/exposed_allreduce_seconds"),
            QStringLiteral("Waiting for gradient all-reduces that backward's compute did not hide (0 on one "
                           "worker; CPU runs).") },
        { QStringLiteral("epoch/train_loss"),
            QStringLiteral("Mean training loss of the epoch. Step = epoch.") },
        { QStringLiteral("epoch/train_accuracy"),
            QStringLiteral("Training accuracy of the epoch, a fraction. Step = epoch.") },
        { QStringLiteral("epoch/test_loss"),
            QStringLiteral("Loss on the test split after the epoch. Step = epoch.") },
        { QStringLiteral("epoch/test_accuracy"),
            QStringLiteral("Accuracy on the test split after the epoch, a fraction. Step = epoch.") },
        { QStringLiteral("epoch/images_per_second"),
            QStringLiteral(
                "Training images per second of the epoch's training time (evaluation and checkpoints "
                "excluded). Step = epoch.") },
        { QStringLiteral("epoch/seconds"), QStringLiteral("Wall-clock seconds of the epoch. Step = epoch.") },
        { QStringLiteral("run/wall_seconds"),
            QStringLiteral(
                "From the first attempt's start of training to the end of the last: retries, their "
                "detection and restarts included.") },
        { QStringLiteral("run/speedup"),
            QStringLiteral("The baseline's mean wall-clock divided by this run's.") },
        { QStringLiteral("run/efficiency"),
            QStringLiteral("Speedup divided by (workers / baseline workers).") },
        { QStringLiteral("run/time_to_target_seconds"),
            QStringLiteral("Seconds until the test accuracy first reached the study's target.") },
        { QStringLiteral("scaling/speedup"),
            QStringLiteral(
                "Baseline mean wall-clock / the configuration's mean, over succeeded repeats. Step = "
                "workers.") },
        { QStringLiteral("scaling/efficiency"),
            QStringLiteral("Speedup / (workers / baseline workers). Step = workers.") },
        { QStringLiteral("scaling/images_per_second"),
            QStringLiteral("Mean training images per second of the configuration's succeeded runs. Step = "
                           "workers.") },
        { QStringLiteral("scaling/speedup_to_target"),
            QStringLiteral("Speedup by time to the study's target accuracy. Step = workers.") },
        { QStringLiteral("scaling/efficiency_to_target"),
            QStringLiteral("Efficiency by time to the study's target accuracy. Step = workers.") },
    };
    return d;
}

QStringList scalarTags()
{
    return tagDescriptions().keys();
}

QString describe(const QString &tag)
{
    // "scaling/speedup/b32" is described as "scaling/speedup".
    const int third = tag.indexOf(QLatin1Char('/'), tag.indexOf(QLatin1Char('/')) + 1);
    return tagDescriptions().value(third < 0 ? tag : tag.left(third));
}

// Scalars into one writer, counted; the first failure sticks and is returned at the end.
struct ScalarSink {
    ScalarSink(TensorBoardWriter &w, qint64 *counter)
        : writer(w)
        , count(counter)
    { }

    TensorBoardWriter &writer;
    qint64 *count;
    Status status = Status::success();

    void add(const QString &tag, qint64 step, double value, double wall)
    {
        if (!status)
            return;
        status = writer.addScalar(tag, step, value, wall, describe(tag));
        if (status)
            ++*count;
    }
    void addIfFinite(const QString &tag, qint64 step, double value, double wall)
    {
        if (std::isfinite(value))
            add(tag, step, value, wall);
    }
};

// A step event's scalars. Zero means "not reported" for the rate, lr, norm and times
// (older workers leave them out); the loss is written even when not finite: a diverged
// run's NaN is what it measured.
Status writeStep(TensorBoardWriter &w, const v1::RunEvent &e, bool hostTimes, qint64 *count)
{
    const v1::StepMetrics &s = e.step();
    const double wall = e.unix_ms() > 0 ? seconds(e.unix_ms()) : nowSeconds();
    ScalarSink sink { w, count };
    const qint64 step = s.step();
    sink.add(QStringLiteral("train/loss"), step, s.loss(), wall);
    if (s.learning_rate() > 0)
        sink.add(QStringLiteral("train/lr"), step, s.learning_rate(), wall);
    if (s.grad_norm() > 0)
        sink.add(QStringLiteral("train/grad_norm"), step, s.grad_norm(), wall);
    if (s.gradient_noise().samples() > 0 && s.gradient_noise().b_simple() > 0)
        sink.add(QStringLiteral("train/gradient_noise_scale"), step, s.gradient_noise().b_simple(), wall);
    if (s.images_per_second() > 0)
        sink.add(QStringLiteral("train/images_per_second"), step, s.images_per_second(), wall);
    if (s.step_seconds() > 0) {
        sink.add(QStringLiteral("step/seconds"), step, s.step_seconds(), wall);
        if (hostTimes) {
            const double wait = std::clamp(s.exposed_allreduce_seconds(), 0.0, s.step_seconds());
            sink.add(QStringLiteral("step/compute_seconds"), step, s.step_seconds() - wait, wall);
            sink.add(QStringLiteral("step/exposed_allreduce_seconds"), step, wait, wall);
        }
    }
    return sink.status;
}

// An epoch event's scalars at step = epoch. The test metrics are left out when the epoch
// evaluated nothing (no test images and every test number zero).
Status writeEpoch(TensorBoardWriter &w, const v1::RunEvent &e, qint64 *count)
{
    const v1::EpochMetrics &m = e.epoch();
    const double wall = e.unix_ms() > 0 ? seconds(e.unix_ms()) : nowSeconds();
    ScalarSink sink { w, count };
    const qint64 step = m.epoch();
    sink.add(QStringLiteral("epoch/train_loss"), step, m.train_loss(), wall);
    sink.add(QStringLiteral("epoch/train_accuracy"), step, m.train_accuracy(), wall);
    if (m.test_images() > 0 || m.test_accuracy() != 0 || m.test_loss() != 0) {
        sink.add(QStringLiteral("epoch/test_loss"), step, m.test_loss(), wall);
        sink.add(QStringLiteral("epoch/test_accuracy"), step, m.test_accuracy(), wall);
    }
    if (m.images_per_second() > 0)
        sink.add(QStringLiteral("epoch/images_per_second"), step, m.images_per_second(), wall);
    if (m.epoch_seconds() > 0)
        sink.add(QStringLiteral("epoch/seconds"), step, m.epoch_seconds(), wall);
    return sink.status;
}

// ---- Hyperparameters -------------------------------------------------------------------

struct HParamDef {
    const char *name;
    QJsonValue::Type type;
    const char *description;
};

// Every hparam a session may carry, in the order TensorBoard's table shows them: the
// configuration, then what rank 0 reported training with once it started.
const QList<HParamDef> &hparamDefs()
{
    static const QList<HParamDef> defs {
        { "workers", QJsonValue::Double, "Data-parallel workers (ranks)." },
        { "batch_size", QJsonValue::Double, "Images per step per worker." },
        { "global_batch", QJsonValue::Double, "Images per step, all workers: batch_size × workers." },
        { "epochs", QJsonValue::Double, "Passes over the training split." },
        { "gpus_per_worker", QJsonValue::Double, "0 = CPU." },
        { "threads_per_worker", QJsonValue::Double, "0 = automatic (the node's cores / ranks on it)." },
        { "precision", QJsonValue::String, "fp32 or bf16." },
        { "lr_rule", QJsonValue::String, "none (fixed) or linear (scaled with the global batch)." },
        { "baseline", QJsonValue::Bool, "The one-worker run every speedup divides by." },
        { "dataset", QJsonValue::String,
            "The data set; \"(SYNTHETIC)\": generated images, not a real data set." },
        { "learning_rate", QJsonValue::Double, "The learning rate asked for, as rank 0 reported it." },
        { "peak_learning_rate", QJsonValue::Double, "After the scaling rule: the schedule's peak." },
        { "momentum", QJsonValue::Double, "SGD momentum." },
        { "weight_decay", QJsonValue::Double, "Weight decay." },
        { "schedule", QJsonValue::String, "Learning-rate schedule." },
        { "warmup_epochs", QJsonValue::Double, "Linear warm-up, in epochs." },
        { "label_smoothing", QJsonValue::Double, "Label smoothing." },
        { "block_dropout", QJsonValue::Double, "Dropout after each convolution block." },
        { "dense_dropout", QJsonValue::Double, "Dropout before the classifier." },
        { "augment", QJsonValue::Bool, "Random crop and flip." },
        { "seed", QJsonValue::String, "Seed of weights and shuffling (64 bits, as text)." },
    };
    return defs;
}

QString datasetValue(const QString &name, bool synthetic)
{
    const QString shown = name.isEmpty() ? QStringLiteral("unknown") : name;
    return synthetic ? shown + QStringLiteral(" (SYNTHETIC)") : shown;
}

QJsonObject hparamsOf(
    const RunConfig &c, const v1::RunStarted *started, const QString &dataset, bool synthetic)
{
    QJsonObject h { { QStringLiteral("workers"), c.workers }, { QStringLiteral("batch_size"), c.batchSize },
        { QStringLiteral("global_batch"), c.globalBatch() }, { QStringLiteral("epochs"), c.epochs },
        { QStringLiteral("gpus_per_worker"), c.gpusPerWorker },
        { QStringLiteral("threads_per_worker"), c.threadsPerWorker },
        { QStringLiteral("precision"), c.precision }, { QStringLiteral("lr_rule"), c.lrRule },
        { QStringLiteral("model"), c.model }, { QStringLiteral("baseline"), c.baseline } };
    QString name = dataset;
    if (started) {
        if (!started->dataset().name().empty())
            name = QString::fromStdString(started->dataset().name());
        synthetic = synthetic || started->dataset().synthetic();
        if (started->peak_learning_rate() > 0)
            h.insert(QStringLiteral("peak_learning_rate"), started->peak_learning_rate());
        if (started->has_effective()) {
            const v1::RunSpec &e = started->effective();
            h.insert(QStringLiteral("learning_rate"), e.learning_rate());
            h.insert(QStringLiteral("momentum"), e.momentum());
            h.insert(QStringLiteral("weight_decay"), e.weight_decay());
            h.insert(QStringLiteral("schedule"), QString::fromStdString(e.schedule()));
            h.insert(QStringLiteral("warmup_epochs"), e.warmup_epochs());
            h.insert(QStringLiteral("label_smoothing"), e.label_smoothing());
            h.insert(QStringLiteral("block_dropout"), e.block_dropout());
            h.insert(QStringLiteral("dense_dropout"), e.dense_dropout());
            h.insert(QStringLiteral("augment"), !e.no_augment());
            h.insert(QStringLiteral("seed"), QString::number(e.seed()));
        }
    }
    h.insert(QStringLiteral("dataset"), datasetValue(name, synthetic));
    return h;
}

bool isSyntheticLabel(const QJsonObject &hparams)
{
    return hparams.value(QStringLiteral("dataset")).toString().endsWith(QLatin1String("(SYNTHETIC)"));
}

// TensorBoard's own rule (hparams summary_v2): sessions whose hparams are equal form one
// group, named by a digest of them; repeats of one setting with one seed are one group.
QString groupName(const QJsonObject &hparams)
{
    return QString::fromLatin1(QCryptographicHash::hash(
        QJsonDocument(hparams).toJson(QJsonDocument::Compact), QCryptographicHash::Sha256)
                                   .toHex());
}

// The experiment's hparams, their domains from the values the sessions hold.
QList<HParamDeclaration> declareHParams(const QList<QJsonObject> &sessions)
{
    QList<HParamDeclaration> out;
    for (const HParamDef &def : hparamDefs()) {
        HParamDeclaration d;
        d.name = QLatin1String(def.name);
        d.description = QString::fromUtf8(def.description);
        d.type = def.type;
        std::set<double> numbers;
        std::set<QString> words;
        std::set<bool> flags;
        for (const QJsonObject &s : sessions) {
            const QJsonValue v = s.value(d.name);
            if (v.isDouble())
                numbers.insert(v.toDouble());
            else if (v.isString())
                words.insert(v.toString());
            else if (v.isBool())
                flags.insert(v.toBool());
        }
        if (def.type == QJsonValue::Double && int(numbers.size()) > kMaxDiscreteNumbers)
            d.interval = std::make_pair(*numbers.begin(), *numbers.rbegin());
        else if (def.type == QJsonValue::Double)
            for (const double n : numbers)
                d.discrete.append(n);
        else if (def.type == QJsonValue::String)
            for (const QString &w : words)
                d.discrete.append(w);
        else
            for (const bool f : flags)
                d.discrete.append(f);
        out << d;
    }
    return out;
}

HParamsExperiment experimentOf(const QString &name, const QString &description, double created,
    const QList<QJsonObject> &sessions, bool study)
{
    HParamsExperiment x;
    x.name = name;
    x.description = description;
    x.timeCreatedSecs = created;
    x.hparams = declareHParams(sessions);
    using D = HParamsMetric::Dataset;
    x.metrics
        = { { QStringLiteral("epoch/test_accuracy"), QStringLiteral("test accuracy"), {}, D::Validation },
              { QStringLiteral("epoch/test_loss"), QStringLiteral("test loss"), {}, D::Validation },
              { QStringLiteral("epoch/train_accuracy"), QStringLiteral("train accuracy"), {}, D::Training },
              { QStringLiteral("epoch/train_loss"), QStringLiteral("train loss"), {}, D::Training },
              { QStringLiteral("epoch/images_per_second"), QStringLiteral("images/s"), {}, D::Training },
              { QStringLiteral("run/wall_seconds"), QStringLiteral("wall-clock (s)"), {}, D::Unknown } };
    if (study)
        x.metrics << HParamsMetric {
            QStringLiteral("run/speedup"), QStringLiteral("speedup"), {}, D::Unknown
        } << HParamsMetric { QStringLiteral("run/efficiency"), QStringLiteral("efficiency"), {}, D::Unknown };
    for (HParamsMetric &m : x.metrics)
        m.description = describe(m.tag);
    return x;
}

std::optional<HParamsStatus> endStatus(const QString &state)
{
    if (state == QLatin1String("SUCCEEDED")
        || state == QLatin1String("STOPPED")) // STOPPED: early, by the tune
        return HParamsStatus::Success;
    if (state == QLatin1String("FAILED") || state == QLatin1String("CANCELLED"))
        return HParamsStatus::Failure;
    return std::nullopt;
}

// ---- Folders ----------------------------------------------------------------------------

bool holdsEventFiles(const QString &folder)
{
    return !QDir(folder).entryList({ QStringLiteral("*tfevents*") }, QDir::Files).isEmpty();
}

// `dir` for `owner`: created, and marked, unless it holds another owner's export or event
// files of its own or in a sub-folder that no export of ScaleLab's wrote.
Status claimFolder(const QString &dir, const QString &owner)
{
    const QFileInfo info(dir);
    if (info.exists() && !info.isDir())
        return Status::failure(
            Status::Code::InvalidArgument, QStringLiteral("%1 is a file, not a folder").arg(dir));
    if (!QDir().mkpath(dir))
        return Status::failure(Status::Code::PermissionDenied,
            QStringLiteral("cannot create the folder %1 (is its parent writable?)").arg(dir));
    const QString markerPath = QDir(dir).filePath(QLatin1String(kMarker));
    QFile marker(markerPath);
    if (marker.exists()) {
        if (!marker.open(QIODevice::ReadOnly))
            return Status::failure(Status::Code::PermissionDenied,
                QStringLiteral("cannot read %1: %2").arg(markerPath, marker.errorString()));
        const QString holder = QString::fromUtf8(marker.readAll()).trimmed();
        if (holder == owner)
            return Status::success();
        return Status::failure(Status::Code::AlreadyExists,
            QStringLiteral("%1 holds the TensorBoard export of %2: give each study a folder of its own (for "
                           "example %1/%3; `tensorboard --logdir %1` shows them side by side)")
                .arg(dir, holder, owner));
    }
    QStringList foreign;
    if (holdsEventFiles(dir))
        foreign << dir;
    for (const QString &sub : QDir(dir).entryList(QDir::Dirs | QDir::NoDotAndDotDot))
        if (holdsEventFiles(QDir(dir).filePath(sub)))
            foreign << QDir(dir).filePath(sub);
    if (!foreign.isEmpty())
        return Status::failure(Status::Code::AlreadyExists,
            QStringLiteral(
                "%1 already holds TensorBoard event files that ScaleLab did not write (in %2): choose "
                "an empty folder, for example %1/%3")
                .arg(dir, foreign.join(QStringLiteral(", ")), owner));
    QSaveFile save(markerPath);
    if (!save.open(QIODevice::WriteOnly) || save.write(owner.toUtf8() + '\n') < 0 || !save.commit())
        return Status::failure(Status::Code::PermissionDenied,
            QStringLiteral("cannot write in %1: %2").arg(dir, save.errorString()));
    return Status::success();
}

// The owner's earlier event files in `folder` (it is claimed): an export replaces them.
Status clearEventFiles(const QString &folder)
{
    QDir d(folder);
    for (const QString &name : d.entryList({ QString::fromLatin1(kEventFilePattern) }, QDir::Files))
        if (!d.remove(name))
            return Status::failure(Status::Code::PermissionDenied,
                QStringLiteral("cannot replace %1 (remove it, or export into another folder)")
                    .arg(d.filePath(name)));
    return Status::success();
}

QString relativeTo(const QString &dir, const QString &path)
{
    return QDir(dir).relativeFilePath(path);
}

bool hostTimesOf(const v1::RunStarted *started)
{
    return !started || !started->has_effective() || started->effective().gpus_per_worker() <= 0;
}

QString configText(const RunConfig &c)
{
    return QStringLiteral(
               "%1 worker%2 × batch %3 (global %4), %5 epoch%6, %7, %8, learning-rate rule %9, model ")
               .arg(c.workers)
               .arg(c.workers == 1 ? QString() : QStringLiteral("s"))
               .arg(c.batchSize)
               .arg(c.globalBatch())
               .arg(c.epochs)
               .arg(c.epochs == 1 ? QString() : QStringLiteral("s"))
               .arg(c.gpusPerWorker > 0 ? QStringLiteral("%1 GPU per worker").arg(c.gpusPerWorker)
                                        : QStringLiteral("CPU"),
                   c.precision, c.lrRule)
        + c.model;
}

QString syntheticText(bool synthetic)
{
    return synthetic ? QStringLiteral(
               "\n\n**SYNTHETIC data**: generated images, not a real data set. Throughput and speedup are "
               "meaningful; accuracy says nothing about real-data results.")
                     : QString();
}

// Markdown for run/description.
QString runDescription(const QString &runId, const QString &studyLine, const RunConfig &c,
    const QString &params, const QString &dataset, bool synthetic)
{
    QString text = QStringLiteral("**%1**%2: %3.").arg(runId, studyLine, configText(c));
    if (c.baseline)
        text += QStringLiteral(" The study's baseline.");
    if (!params.isEmpty())
        text += QStringLiteral("\n\nTrial hyperparameters: %1.").arg(params);
    text += QStringLiteral("\n\nData set: %1.").arg(datasetValue(dataset, synthetic))
        + syntheticText(synthetic);
    return text;
}

QString studyLineOf(const StudySnapshot &s)
{
    return QStringLiteral(" of %1 %2%3")
        .arg(s.tune ? QStringLiteral("tune") : QStringLiteral("study"), s.studyId,
            s.name.isEmpty() || s.name == s.studyId ? QString() : QStringLiteral(" (%1)").arg(s.name));
}

// The experiment's description: "ScaleLab study s1 (name), data set synthetic (SYNTHETIC)."
QString experimentText(const StudySnapshot &s, bool synthetic)
{
    return QStringLiteral("ScaleLab %1 %2%3, data set %4.%5")
        .arg(s.tune ? QStringLiteral("tune") : QStringLiteral("study"), s.studyId,
            s.name.isEmpty() || s.name == s.studyId ? QString() : QStringLiteral(" (%1)").arg(s.name),
            datasetValue(s.dataset, synthetic), syntheticText(synthetic));
}

// run/* once, at the run's last step: what the reports print for it.
Status writeRunOutcome(TensorBoardWriter &w, const RunResult &run, const RunOutcome *outcome, qint64 step,
    double wall, qint64 *count)
{
    ScalarSink sink { w, count };
    if (run.state == QLatin1String("SUCCEEDED"))
        sink.addIfFinite(QStringLiteral("run/wall_seconds"), step, run.wallSeconds, wall);
    if (run.timeToTargetSeconds)
        sink.addIfFinite(QStringLiteral("run/time_to_target_seconds"), step, *run.timeToTargetSeconds, wall);
    if (outcome) {
        sink.addIfFinite(QStringLiteral("run/speedup"), step, outcome->byWallClock.speedup, wall);
        sink.addIfFinite(QStringLiteral("run/efficiency"), step, outcome->byWallClock.efficiency, wall);
    }
    return sink.status;
}

Status writeSessionEnd(TensorBoardWriter &w, const RunResult &run, double wall)
{
    const std::optional<HParamsStatus> status = endStatus(run.state);
    if (!status)
        return Status::success();
    const qint64 endedMs = run.attempts.isEmpty() ? 0 : run.attempts.last().endedUnixMs;
    return w.addHParamsSessionEnd(*status, endedMs > 0 ? seconds(endedMs) : wall, wall);
}

// What distinguishes a configuration beyond its workers ("b32-bf16"), over the fields that
// differ between `configs`; empty when they differ in workers alone.
QString seriesSuffix(const RunConfig &c, const QList<RunConfig> &configs)
{
    const auto differs = [&](auto field) {
        return std::any_of(
            configs.cbegin(), configs.cend(), [&](const RunConfig &o) { return field(o) != field(c); });
    };
    QStringList parts;
    if (differs([](const RunConfig &x) { return x.batchSize; }))
        parts << QStringLiteral("b%1").arg(c.batchSize);
    if (differs([](const RunConfig &x) { return x.epochs; }))
        parts << QStringLiteral("e%1").arg(c.epochs);
    if (differs([](const RunConfig &x) { return x.gpusPerWorker; }))
        parts << (c.gpusPerWorker > 0 ? QStringLiteral("gpu%1").arg(c.gpusPerWorker) : QStringLiteral("cpu"));
    if (differs([](const RunConfig &x) { return x.threadsPerWorker; }))
        parts << QStringLiteral("t%1").arg(c.threadsPerWorker);
    if (differs([](const RunConfig &x) { return x.precision; }))
        parts << c.precision;
    if (differs([](const RunConfig &x) { return x.lrRule; }))
        parts << QStringLiteral("lr_") + c.lrRule;
    if (differs([](const RunConfig &x) { return x.model; }))
        parts << modelShortName(c.model);
    return parts.join(QLatin1Char('-'));
}

// DIR/study: the description and the scaling, step = workers. The baseline is each
// series' first point (speedup and efficiency 1 by definition, when it was measured).
Status writeStudyFolder(
    const QString &dir, const StudySnapshot &s, const StudyResults &r, TensorBoardWriter &w, qint64 *count)
{
    const QString folder = QDir(dir).filePath(QLatin1String(kStudyFolder));
    if (const Status cleared = clearEventFiles(folder); !cleared)
        return cleared;
    const double wall = s.finishedUnixMs > 0 ? seconds(s.finishedUnixMs) : nowSeconds();
    if (const Status opened = w.open(folder, s.createdUnixMs > 0 ? seconds(s.createdUnixMs) : wall); !opened)
        return opened;
    QString text = QStringLiteral("**%1** %2%3: %4, data set %5, %6 run%7.")
                       .arg(s.studyId, s.name.isEmpty() ? QString() : QStringLiteral("(%1)").arg(s.name),
                           s.tune ? QStringLiteral(", a hyperparameter tune") : QString(), s.state,
                           datasetValue(s.dataset, s.synthetic))
                       .arg(s.runs.size())
                       .arg(s.runs.size() == 1 ? QString() : QStringLiteral("s"));
    if (!s.tune)
        text
            += QStringLiteral("\n\nscaling/* (step = workers): speedup = the baseline's mean wall-clock / "
                              "the configuration's mean, "
                              "over succeeded repeats; efficiency = speedup / (workers / baseline workers).");
    if (!r.baselineNote.isEmpty())
        text += QStringLiteral("\n\n") + r.baselineNote;
    if (!r.baselineWarning.isEmpty())
        text += QStringLiteral("\n\nWARNING: ") + r.baselineWarning;
    text += syntheticText(s.synthetic);
    if (const Status written = w.addText(QStringLiteral("study/description"), 0, text, wall); !written)
        return written;

    QList<RunConfig> distributed;
    for (const SeedComparison &c : r.comparisons)
        if (const ConfigResult *config = r.config(c.configKey))
            distributed << config->config;
    ScalarSink sink { w, count };
    const auto tag = [](const char *name, const QString &suffix) {
        return suffix.isEmpty() ? QLatin1String(name)
                                : QStringLiteral("%1/%2").arg(QLatin1String(name), suffix);
    };
    QSet<QString> seriesWithBaseline;
    for (const SeedComparison &c : r.comparisons) {
        const ConfigResult *config = r.config(c.configKey);
        if (!config)
            continue;
        const QString suffix = seriesSuffix(config->config, distributed);
        const ConfigResult *base = r.baselineFor(config->config);
        if (base && !seriesWithBaseline.contains(suffix)) {
            seriesWithBaseline.insert(suffix);
            const qint64 w1 = base->config.workers;
            if (std::isfinite(base->wallSeconds.mean)) {
                sink.add(tag("scaling/speedup", suffix), w1, 1.0, wall);
                sink.add(tag("scaling/efficiency", suffix), w1, 1.0, wall);
            }
            sink.addIfFinite(tag("scaling/images_per_second", suffix), w1, base->imagesPerSecond.mean, wall);
            if (config->byTimeToAccuracy.available() && std::isfinite(base->timeToTargetSeconds.mean)) {
                sink.add(tag("scaling/speedup_to_target", suffix), w1, 1.0, wall);
                sink.add(tag("scaling/efficiency_to_target", suffix), w1, 1.0, wall);
            }
        }
        const qint64 workers = c.workers;
        sink.addIfFinite(tag("scaling/speedup", suffix), workers, c.speedup, wall);
        sink.addIfFinite(tag("scaling/efficiency", suffix), workers, c.efficiency, wall);
        sink.addIfFinite(
            tag("scaling/images_per_second", suffix), workers, config->imagesPerSecond.mean, wall);
        if (config->byTimeToAccuracy.available()) {
            sink.addIfFinite(
                tag("scaling/speedup_to_target", suffix), workers, config->byTimeToAccuracy.speedup, wall);
            sink.addIfFinite(tag("scaling/efficiency_to_target", suffix), workers,
                config->byTimeToAccuracy.efficiency, wall);
        }
    }
    if (!sink.status)
        return sink.status;
    return w.close();
}

RunFolder studyRunFolder(const QString &dir, const StudySnapshot &s, const RunResult &run)
{
    RunFolder f;
    f.runId = run.runId;
    f.folder = QDir(dir).filePath(
        tensorBoardRunFolder(s.studyId, run.runId, run.config.workers, run.config.batchSize));
    f.config = run.config;
    f.dataset = s.dataset;
    f.synthetic = s.synthetic;
    f.description = runDescription(run.runId, studyLineOf(s), run.config,
        run.trial ? paramsText(run.params) : QString(), s.dataset, s.synthetic);
    return f;
}

RunFolder singleRunFolder(const QString &dir, const QString &runId, const v1::StartWorkersRequest &request)
{
    RunFolder f;
    f.runId = runId;
    f.config = singleRunConfig(request);
    f.folder = QDir(dir).filePath(tensorBoardRunFolder({}, runId, f.config.workers, f.config.batchSize));
    f.dataset = QString::fromStdString(request.spec().dataset());
    f.description = runDescription(runId, QStringLiteral(" (a single run)"), f.config, {}, f.dataset, false);
    return f;
}

} // namespace scalelab::core::tboard
