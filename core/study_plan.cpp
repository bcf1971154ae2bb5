#include "study_plan.h"

#include <google/protobuf/util/json_util.h>

#include <QDateTime>
#include <QFile>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSet>

#include <cmath>

namespace scalelab::core {
namespace {

bool safeName(const QString &name)
{
    static const QRegularExpression pattern(QStringLiteral("^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"));
    return pattern.match(name).hasMatch();
}

QString str(const std::string &s)
{
    return QString::fromStdString(s);
}

template <typename List, typename Check>
void checkList(const List &list, const QString &field, QStringList *problems, Check check)
{
    QSet<QString> seen;
    for (int i = 0; i < list.size(); ++i) {
        const auto value = list.Get(i);
        const QString text = QVariant::fromValue(value).toString();
        const QString where = QStringLiteral("%1[%2]").arg(field).arg(i);
        if (const QString problem = check(value); !problem.isEmpty())
            *problems << QStringLiteral("%1: %2").arg(where, problem);
        if (seen.contains(text))
            *problems << QStringLiteral("%1: %2 is listed twice").arg(where, text);
        seen.insert(text);
    }
}

QString checkGpus(double gpus)
{
    if (gpus < 0 || !std::isfinite(gpus))
        return QStringLiteral("must be 0 (CPU) or more (got %1)").arg(gpus);
    if (gpus > 0 && gpus < 1 && std::abs(1 / gpus - std::round(1 / gpus)) > 1e-9)
        return QStringLiteral("a fraction of a GPU must divide one GPU evenly (0.5, 0.25, …; got %1)")
            .arg(gpus);
    if (gpus > 1 && gpus != std::floor(gpus))
        return QStringLiteral("more than one GPU per worker must be a whole number (got %1)").arg(gpus);
    return {};
}

QString checkPrecision(const QString &precision)
{
    if (precision != QLatin1String("fp32") && precision != QLatin1String("bf16"))
        return QStringLiteral("must be \"fp32\" or \"bf16\" (got \"%1\")").arg(precision);
    return {};
}

template <typename T, typename List> QList<T> valuesOr(const List &list, T fallback)
{
    QList<T> values;
    for (const auto &v : list)
        values << T(v);
    if (values.isEmpty())
        values << fallback;
    return values;
}

} // namespace

std::optional<v1::StudyPlan> parsePlanJson(const QByteArray &json, QStringList *problems)
{
    v1::StudyPlan plan;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto status = google::protobuf::util::JsonStringToMessage(json.toStdString(), &plan, options);
    if (!status.ok()) {
        *problems << QStringLiteral(
            "not a valid study plan: %1 (see proto/scalelab/v1/study.proto for the fields)")
                         .arg(str(std::string(status.message())));
        return std::nullopt;
    }
    return plan;
}

std::optional<v1::StudyPlan> loadPlan(const QString &path, QStringList *problems)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *problems << QStringLiteral("cannot read the plan %1: %2").arg(path, file.errorString());
        return std::nullopt;
    }
    auto plan = parsePlanJson(file.readAll(), problems);
    if (!plan)
        return std::nullopt;
    *problems << validatePlan(*plan);
    if (!problems->isEmpty())
        return std::nullopt;
    return plan;
}

QByteArray planToJson(const v1::StudyPlan &plan)
{
    std::string out;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = false;
    (void)google::protobuf::util::MessageToJsonString(plan, &out, options);
    return QByteArray::fromStdString(out);
}

bool savePlan(const v1::StudyPlan &plan, const QString &path, QString *error)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(planToJson(plan)) < 0 || !file.commit()) {
        *error = QStringLiteral("cannot write the plan %1: %2").arg(path, file.errorString());
        return false;
    }
    return true;
}

QStringList validatePlan(const v1::StudyPlan &plan)
{
    QStringList p;
    if (plan.name().empty())
        p << QStringLiteral("name: give the study a name (letters, digits, '_', '-', '.')");
    else if (!safeName(str(plan.name())))
        p << QStringLiteral("name: \"%1\" may only use letters, digits, '_', '-' and '.' (64 at most)")
                 .arg(str(plan.name()));
    if (plan.dataset().empty())
        p << QStringLiteral(
            "dataset: name a data set of the agents (e.g. cifar-10-batches-bin or a synthetic set)");
    else if (!safeName(str(plan.dataset())))
        p << QStringLiteral("dataset: \"%1\" is not a data set name (a folder name on the agent, no slashes)")
                 .arg(str(plan.dataset()));

    const auto &t = plan.training();
    if (t.learning_rate() < 0)
        p << QStringLiteral("training.learningRate: must not be negative (0 = the trainer's default)");
    if (t.momentum() < 0 || t.momentum() >= 1)
        p << QStringLiteral("training.momentum: must be in [0, 1) (got %1)").arg(t.momentum());
    if (t.weight_decay() < 0)
        p << QStringLiteral("training.weightDecay: must not be negative");
    if (t.max_train_images() < 0 || t.max_test_images() < 0)
        p << QStringLiteral(
            "training.maxTrainImages/maxTestImages: must not be negative (0 = the whole split)");
    if (t.checkpoint_every_epochs() < 0)
        p << QStringLiteral("training.checkpointEveryEpochs: must not be negative");
    if (t.label_smoothing() < 0 || t.label_smoothing() >= 1)
        p << QStringLiteral("training.labelSmoothing: must be in [0, 1)");
    if (t.warmup_epochs() < 0)
        p << QStringLiteral("training.warmupEpochs: must not be negative");
    if (t.collective_timeout_seconds() < 0 || t.collective_timeout_seconds() > 86400)
        p << QStringLiteral("training.collectiveTimeoutSeconds: must be 0 (120 s) or 1..86400 (got %1)")
                 .arg(t.collective_timeout_seconds());
    if (t.stall_seconds() < 0 || t.stall_seconds() > 86400)
        p << QStringLiteral("training.stallSeconds: must be 0 (15 s) or 1..86400 (got %1)").arg(t.stall_seconds());
    if (!t.schedule().empty() && t.schedule() != "cosine" && t.schedule() != "constant")
        p << QStringLiteral("training.schedule: must be \"cosine\" or \"constant\" (got \"%1\")")
                 .arg(str(t.schedule()));

    const auto &g = plan.grid();
    checkList(g.workers(), QStringLiteral("grid.workers"), &p, [](int v) {
        return v >= 1 && v <= 1024 ? QString() : QStringLiteral("must be between 1 and 1024 (got %1)").arg(v);
    });
    checkList(g.batch_size(), QStringLiteral("grid.batchSize"), &p,
        [](int v) { return v >= 1 ? QString() : QStringLiteral("must be 1 or more (got %1)").arg(v); });
    checkList(g.epochs(), QStringLiteral("grid.epochs"), &p,
        [](int v) { return v >= 1 ? QString() : QStringLiteral("must be 1 or more (got %1)").arg(v); });
    checkList(g.gpus_per_worker(), QStringLiteral("grid.gpusPerWorker"), &p, checkGpus);
    checkList(g.threads_per_worker(), QStringLiteral("grid.threadsPerWorker"), &p, [](int v) {
        return v >= 0 ? QString() : QStringLiteral("must be 0 (automatic) or more (got %1)").arg(v);
    });
    for (int i = 0; i < g.precision_size(); ++i)
        if (const QString problem = checkPrecision(str(g.precision(i))); !problem.isEmpty())
            p << QStringLiteral("grid.precision[%1]: %2").arg(i).arg(problem);
    for (int i = 0; i < g.lr_rule_size(); ++i)
        if (g.lr_rule(i) != "none" && g.lr_rule(i) != "linear")
            p << QStringLiteral("grid.lrRule[%1]: must be \"none\" or \"linear\" (got \"%2\")")
                     .arg(i)
                     .arg(str(g.lr_rule(i)));

    const auto &b = plan.baseline();
    if (b.batch_size() < 0)
        p << QStringLiteral("baseline.batchSize: must be 1 or more, or unset (got %1)").arg(b.batch_size());
    if (b.epochs() < 0)
        p << QStringLiteral("baseline.epochs: must be 1 or more, or unset (got %1)").arg(b.epochs());
    if (const QString problem = checkGpus(b.gpus_per_worker()); !problem.isEmpty())
        p << QStringLiteral("baseline.gpusPerWorker: %1").arg(problem);
    if (b.threads_per_worker() < 0)
        p << QStringLiteral("baseline.threadsPerWorker: must be 0 (automatic) or more");
    if (!b.precision().empty())
        if (const QString problem = checkPrecision(str(b.precision())); !problem.isEmpty())
            p << QStringLiteral("baseline.precision: %1").arg(problem);

    if (plan.repeats() < 0 || plan.repeats() > 100)
        p << QStringLiteral("repeats: must be between 1 and 100, or unset for 1 (got %1)")
                 .arg(plan.repeats());
    if (plan.max_failures() < 0)
        p << QStringLiteral("maxFailures: must be 0 or more (got %1)").arg(plan.max_failures());
    if (plan.target_accuracy() < 0 || plan.target_accuracy() > 1)
        p << QStringLiteral("targetAccuracy: a fraction in [0, 1] (got %1; 0.7 means 70%)")
                 .arg(plan.target_accuracy());
    if (!plan.placement().empty() && plan.placement() != "pack" && plan.placement() != "spread")
        p << QStringLiteral("placement: must be \"pack\" or \"spread\" (got \"%1\")")
                 .arg(str(plan.placement()));
    for (int i = 0; i < plan.overrides_size(); ++i) {
        const auto &o = plan.overrides(i);
        if (o.match().empty())
            p << QStringLiteral("overrides[%1].match: name a configuration key or a run id").arg(i);
        if (o.max_failures() < 0)
            p << QStringLiteral("overrides[%1].maxFailures: must be 0 or more").arg(i);
    }
    return p;
}

QList<PlannedRun> expandPlan(const v1::StudyPlan &plan, const QString &studyId)
{
    const auto &g = plan.grid();
    const auto workers = valuesOr<int>(g.workers(), 2);
    const auto batches = valuesOr<int>(g.batch_size(), 64);
    const auto epochs = valuesOr<int>(g.epochs(), 1);
    const auto gpus = valuesOr<double>(g.gpus_per_worker(), 0);
    const auto threads = valuesOr<int>(g.threads_per_worker(), 0);
    QList<QString> precisions, rules;
    for (const auto &v : g.precision())
        precisions << str(v);
    for (const auto &v : g.lr_rule())
        rules << str(v);
    if (precisions.isEmpty())
        precisions << QStringLiteral("fp32");
    if (rules.isEmpty())
        rules << QStringLiteral("none");

    QList<RunConfig> configs;
    if (!plan.baseline().skip()) {
        const auto &b = plan.baseline();
        RunConfig c;
        c.baseline = true;
        c.workers = 1;
        c.batchSize = b.batch_size() > 0 ? b.batch_size() : batches.first();
        c.epochs = b.epochs() > 0 ? b.epochs() : epochs.first();
        c.gpusPerWorker = b.gpus_per_worker() > 0 ? b.gpus_per_worker() : gpus.first();
        c.threadsPerWorker = b.threads_per_worker() > 0 ? b.threads_per_worker() : threads.first();
        c.precision = b.precision().empty() ? precisions.first() : str(b.precision());
        c.lrRule = QStringLiteral("none"); // one worker: the global batch is the batch
        configs << c;
    }
    for (int w : workers)
        for (int batch : batches)
            for (int e : epochs)
                for (double gpu : gpus)
                    for (int t : threads)
                        for (const QString &precision : precisions)
                            for (const QString &rule : rules) {
                                RunConfig c;
                                c.workers = w;
                                c.batchSize = batch;
                                c.epochs = e;
                                c.gpusPerWorker = gpu;
                                c.threadsPerWorker = t;
                                c.precision = precision;
                                c.lrRule = rule;
                                configs << c;
                            }

    const int repeats = std::max(1, plan.repeats());
    const int maxFailures = plan.has_max_failures() ? plan.max_failures() : 2;
    QList<PlannedRun> runs;
    for (const RunConfig &c : configs)
        for (int r = 0; r < repeats; ++r) {
            PlannedRun run;
            run.runId = QStringLiteral("%1-r%2").arg(studyId).arg(runs.size() + 1, 2, 10, QLatin1Char('0'));
            run.config = c;
            run.repeat = r;
            run.maxFailures = maxFailures;
            for (const auto &o : plan.overrides())
                if (str(o.match()) == c.key() || str(o.match()) == run.runId)
                    run.maxFailures = o.max_failures();
            runs << run;
        }
    return runs;
}

v1::RunSpec runSpecFor(const v1::StudyPlan &plan, const RunConfig &config)
{
    v1::RunSpec spec = plan.training();
    spec.set_dataset(plan.dataset());
    spec.set_batch_size(config.batchSize);
    spec.set_epochs(config.epochs);
    spec.set_threads_per_worker(config.threadsPerWorker);
    spec.set_gpus_per_worker(config.gpusPerWorker);
    spec.set_precision(config.precision == QLatin1String("bf16") ? v1::BF16 : v1::FP32);
    spec.set_lr_scaling(config.lrRule.toStdString());
    if (spec.seed() == 0)
        spec.set_seed(1);
    if (spec.checkpoint_every_epochs() == 0)
        spec.set_checkpoint_every_epochs(1); // retries resume from the last epoch
    return spec;
}

v1::StudyPlan examplePlan(const QString &dataset)
{
    v1::StudyPlan plan;
    plan.set_name("example-scaleup");
    plan.set_dataset(dataset.toStdString());
    plan.mutable_training()->set_max_train_images(2000);
    plan.mutable_training()->set_max_test_images(500);
    plan.mutable_baseline()->set_batch_size(64);
    plan.mutable_grid()->add_workers(2);
    plan.mutable_grid()->add_batch_size(64);
    plan.mutable_grid()->add_epochs(2);
    plan.set_repeats(1);
    plan.set_max_failures(2);
    plan.set_target_accuracy(0.5);
    return plan;
}

QString newStudyId()
{
    return QStringLiteral("st-%1-%2")
        .arg(QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss")))
        .arg(QRandomGenerator::global()->bounded(0x10000), 4, 16, QLatin1Char('0'));
}

} // namespace scalelab::core
