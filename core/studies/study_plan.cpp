#include "study_plan.h"

#include "agent_addresses.h"
#include "qt_text.h"
#include "spec_rules.h"
#include "tune_plan.h"
#include "worker_contract.h"

#include <QDateTime>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSet>

#include <algorithm>
#include <cmath>

namespace scalelab::core {
namespace {

bool safeName(const QString &name)
{
    static const QRegularExpression pattern(QStringLiteral("^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"));
    return pattern.match(name).hasMatch();
}

template <typename List, typename Check>
void checkList(const List &list, const QString &field, QStringList *problems, Check check)
{
    QSet<QString> seen;
    for (int i = 0; i < list.size(); ++i) {
        const auto value = list.Get(i);
        const QString text = QVariant::fromValue(value).toString();
        const QString where = QStringLiteral("%1[%2]").arg(field).arg(i);
        if (const Status valid = check(value); !valid)
            *problems << QStringLiteral("%1: %2").arg(where, valid.error());
        if (seen.contains(text))
            *problems << QStringLiteral("%1: %2 is listed twice").arg(where, text);
        seen.insert(text);
    }
}

// Success when `gpus` per worker is a usable share: none, a whole number, or 1/n of one.
Status checkGpus(double gpus)
{
    if (gpus < 0 || !std::isfinite(gpus) || gpus > rules::kMaxGpusPerWorker)
        return Status::failure(
            QStringLiteral("must be 0 (CPU) up to %1 (got %2)").arg(rules::kMaxGpusPerWorker).arg(gpus));
    if (gpus > 0 && gpus < 1
        && (1 / gpus > rules::kMaxWorkersPerGpu + 1e-9 || std::abs(1 / gpus - std::round(1 / gpus)) > 1e-9))
        return Status::failure(
            QStringLiteral("a fraction of a GPU must divide one GPU evenly, down to 1/%1 (0.5, 0.25, …; "
                           "got %2)")
                .arg(rules::kMaxWorkersPerGpu)
                .arg(gpus));
    if (gpus > 1 && gpus != std::floor(gpus))
        return Status::failure(
            QStringLiteral("more than one GPU per worker must be a whole number (got %1)").arg(gpus));
    return Status::success();
}

bool isModelFileValue(const std::string &model)
{
    return worker::isModelFile(model);
}

// Success when `model` is a built-in's name, a stored module's sum or a module's file.
Status checkModel(const std::string &model)
{
    if (worker::isModelName(model) || worker::isModelSha256(model) || worker::isModelFile(model))
        return Status::success();
    return Status::failure(
        QStringLiteral("must be one of %1, or file:PATH of a TorchScript module (got \"%2\")")
            .arg(QString::fromStdString(worker::modelNamesText()), QString::fromStdString(model)));
}

// The models a scale-up plan's runs train: the grid's list, else training.model, else the default.
QStringList gridModels(const v1::StudyPlan &plan)
{
    QStringList models;
    for (const auto &m : plan.grid().model())
        if (!models.contains(str(m)))
            models << str(m);
    if (models.isEmpty())
        models << (plan.training().model().empty() ? QString::fromLatin1(kDefaultModelName)
                                                   : str(plan.training().model()));
    return models;
}

// Success when `precision` is one the trainer has: "fp32" or "bf16".
Status checkPrecision(const QString &precision)
{
    if (precision != QLatin1String("fp32") && precision != QLatin1String("bf16"))
        return Status::failure(QStringLiteral("must be \"fp32\" or \"bf16\" (got \"%1\")").arg(precision));
    return Status::success();
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

namespace {
CheckStatus checkGrid(const v1::StudyPlan &plan);
}

CheckStatus checkPlan(const v1::StudyPlan &plan)
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
    // A module's file ("file:PATH") is the plan's to name; the study runs it by its sum.
    v1::RunSpec training = t;
    if (isModelFileValue(t.model()))
        training.clear_model();
    if (isModelFileValue(t.initial_weights()))
        training.clear_initial_weights();
    if (const rules::SpecStatus spec = rules::checkRunSpec(training, { "training.", true, true }); !spec)
        for (const auto &problem : spec.error())
            p << str(problem.text());
    for (const auto &[sha, name] : plan.model_names())
        if (!worker::isModelSha256(std::string(worker::kModelSha256Prefix) + sha))
            p << QStringLiteral("modelNames: \"%1\" is not a module's SHA-256 (64 lower-case hex digits)")
                     .arg(str(sha).left(80));
    if (plan.learning_rate_auto() && t.has_learning_rate())
        p << QStringLiteral(
            "training.learningRate: give a number or \"auto\", not both (learningRateAuto is set)");

    if (const CheckStatus rest = isTune(plan) ? checkTune(plan) : checkGrid(plan); !rest)
        p << rest.error();
    if (plan.max_failures() < 0)
        p << QStringLiteral("maxFailures: must be 0 or more (got %1)").arg(plan.max_failures());
    if (!(plan.target_accuracy() >= 0 && plan.target_accuracy() <= 1))
        p << QStringLiteral("targetAccuracy: a fraction in [0, 1] (got %1; 0.7 means 70%)")
                 .arg(plan.target_accuracy());
    for (int i = 0; i < plan.agents_size(); ++i)
        if (const QString problem = checkAgentSpec(str(plan.agents(i))).error(); !problem.isEmpty())
            p << QStringLiteral("agents[%1]: %2").arg(i).arg(problem);
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
    return p.isEmpty() ? CheckStatus::success() : CheckStatus::failure(p);
}

namespace {

// Success when a scale-up plan's grid, baseline and repeats are valid, else every problem.
// The baseline's fields and the repeats, each problem in the plan's words.
void checkBaselineAndRepeats(const v1::StudyPlan &plan, QStringList &p)
{
    const auto &b = plan.baseline();
    if (b.batch_size() < 0 || b.batch_size() > rules::kMaxBatchSize)
        p << QStringLiteral("baseline.batchSize: must be between 1 and %1, or unset (got %2)")
                 .arg(rules::kMaxBatchSize)
                 .arg(b.batch_size());
    if (b.epochs() < 0 || b.epochs() > rules::kMaxEpochs)
        p << QStringLiteral("baseline.epochs: must be between 1 and %1, or unset (got %2)")
                 .arg(rules::kMaxEpochs)
                 .arg(b.epochs());

    if (const Status valid = checkGpus(b.gpus_per_worker()); !valid)
        p << QStringLiteral("baseline.gpusPerWorker: %1").arg(valid.error());
    if (b.threads_per_worker() < 0 || b.threads_per_worker() > rules::kMaxThreads)
        p << QStringLiteral("baseline.threadsPerWorker: must be 0 (automatic) up to %1")
                 .arg(rules::kMaxThreads);
    if (!b.precision().empty())
        if (const Status valid = checkPrecision(str(b.precision())); !valid)
            p << QStringLiteral("baseline.precision: %1").arg(valid.error());

    if (!plan.repeat_seeds().empty() && plan.repeat_seeds() != "same" && plan.repeat_seeds() != "vary")
        p << QStringLiteral(
            "repeatSeeds: \"same\" (every repeat with the plan's seed) or \"vary\" (repeat r with "
            "seed + r) (got \"%1\")")
                 .arg(str(plan.repeat_seeds()));
    if (plan.repeats() < 0 || plan.repeats() > 100)
        p << QStringLiteral("repeats: must be between 1 and 100, or unset for 1 (got %1)")
                 .arg(plan.repeats());
}

CheckStatus checkGrid(const v1::StudyPlan &plan)
{
    QStringList p;
    const auto &t = plan.training();
    const auto &g = plan.grid();
    checkList(g.workers(), QStringLiteral("grid.workers"), &p, [](int v) {
        return v >= 1 && v <= rules::kMaxWorkers
            ? Status::success()
            : Status::failure(
                QStringLiteral("must be between 1 and %1 (got %2)").arg(rules::kMaxWorkers).arg(v));
    });
    for (int i = 0; i < g.worker_ranges_size(); ++i) {
        const auto &r = g.worker_ranges(i);
        if (r.min() < 1 || r.max() <= r.min() || r.max() > rules::kMaxWorkers)
            p << QStringLiteral(
                "grid.workers: the elastic range {\"min\": %1, \"max\": %2} must have 1 <= min < "
                "max <= %3")
                     .arg(r.min())
                     .arg(r.max())
                     .arg(rules::kMaxWorkers);
    }
    checkList(g.accumulation_steps(), QStringLiteral("grid.accumulationSteps"), &p, [](int v) {
        return v >= 1 && v <= rules::kMaxAccumulationSteps
            ? Status::success()
            : Status::failure(QStringLiteral("must be between 1 (no accumulation) and %1 (got %2)")
                                  .arg(rules::kMaxAccumulationSteps)
                                  .arg(v));
    });
    checkList(g.batch_size(), QStringLiteral("grid.batchSize"), &p, [](int v) {
        return v >= 1 && v <= rules::kMaxBatchSize
            ? Status::success()
            : Status::failure(
                QStringLiteral("must be between 1 and %1 (got %2)").arg(rules::kMaxBatchSize).arg(v));
    });
    checkList(g.epochs(), QStringLiteral("grid.epochs"), &p, [](int v) {
        return v >= 1 && v <= rules::kMaxEpochs
            ? Status::success()
            : Status::failure(
                QStringLiteral("must be between 1 and %1 (got %2)").arg(rules::kMaxEpochs).arg(v));
    });
    // The warm-up must fit in every run (the agent refuses it otherwise), the default
    // length of a run (1 epoch) included.
    if (t.has_warmup_epochs() && std::isfinite(t.warmup_epochs())) {
        QList<int> lengths = valuesOr<int>(g.epochs(), 1);
        if (plan.baseline().epochs() > 0)
            lengths << plan.baseline().epochs();
        const int shortest = *std::min_element(lengths.begin(), lengths.end());
        if (shortest >= 1 && t.warmup_epochs() > shortest)
            p << QStringLiteral(
                "training.warmupEpochs: %1 is longer than the shortest run (%2 epoch(s)): the "
                "warm-up must fit in every run")
                     .arg(t.warmup_epochs())
                     .arg(shortest);
    }
    checkList(g.gpus_per_worker(), QStringLiteral("grid.gpusPerWorker"), &p, checkGpus);
    checkList(g.threads_per_worker(), QStringLiteral("grid.threadsPerWorker"), &p, [](int v) {
        return v >= 0 && v <= rules::kMaxThreads
            ? Status::success()
            : Status::failure(
                QStringLiteral("must be 0 (automatic) up to %1 (got %2)").arg(rules::kMaxThreads).arg(v));
    });
    for (int i = 0; i < g.precision_size(); ++i)
        if (const Status valid = checkPrecision(str(g.precision(i))); !valid)
            p << QStringLiteral("grid.precision[%1]: %2").arg(i).arg(valid.error());
    for (int i = 0; i < g.lr_rule_size(); ++i)
        if (!worker::isLrRule(g.lr_rule(i)))
            p << QStringLiteral(
                "grid.lrRule[%1]: must be %2 (got \"%3\"; the rules: docs/training-engine.md)")
                     .arg(i)
                     .arg(str(worker::lrRulesText()))
                     .arg(str(g.lr_rule(i)));
    for (int i = 0; i < g.model_size(); ++i)
        if (const Status valid = checkModel(g.model(i)); !valid)
            p << QStringLiteral("grid.model[%1]: %2").arg(i).arg(valid.error());
    if (const QStringList models = gridModels(plan);
        !plan.baseline().model().empty() && !models.contains(str(plan.baseline().model())))
        p << QStringLiteral("baseline.model: \"%1\" is not a model the grid trains (%2): a speedup compares "
                            "runs of one model")
                 .arg(str(plan.baseline().model()), models.join(QStringLiteral(", ")));

    checkBaselineAndRepeats(plan, p);
    return p.isEmpty() ? CheckStatus::success() : CheckStatus::failure(p);
}

} // namespace

namespace {

// A tune's trials, drawn from its space.
QList<PlannedRun> expandTune(const v1::StudyPlan &plan, const QString &studyId)
{
    const int maxFailures = plan.has_max_failures() ? plan.max_failures() : 2;
    QList<PlannedRun> trials;
    for (const TrialDraw &draw : drawTrials(plan)) {
        PlannedRun run;
        run.runId = QStringLiteral("%1-t%2").arg(studyId).arg(trials.size() + 1, 2, 10, QLatin1Char('0'));
        run.config = trialConfig(plan, draw.params);
        run.maxFailures = maxFailures;
        run.trial = true;
        run.params = draw.params;
        run.bracket = draw.bracket;
        for (const auto &o : plan.overrides())
            if (str(o.match()) == run.runId)
                run.maxFailures = o.max_failures();
        trials << run;
    }
    return trials;
}

// A grid's configurations: the baselines (one per model), then the cross product of its axes.
QList<RunConfig> gridConfigs(const v1::StudyPlan &plan)
{
    const auto &g = plan.grid();
    // Each worker count as (fewest, planned): a fixed size is (0, N).
    QList<std::pair<int, int>> workers;
    for (int w : g.workers())
        workers << std::pair { 0, w };
    for (const auto &r : g.worker_ranges())
        workers << std::pair { r.min(), r.max() };
    if (workers.isEmpty())
        workers << std::pair { 0, 2 };
    const auto accumulations
        = valuesOr<int>(g.accumulation_steps(), std::max(1, plan.training().accumulation_steps()));
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
    const QStringList models = gridModels(plan);

    QList<RunConfig> configs;
    if (!plan.baseline().skip()) {
        const auto &b = plan.baseline();
        // One baseline per model: a speedup compares a model with itself on one worker.
        for (const QString &model : models) {
            if (!b.model().empty() && str(b.model()) != model)
                continue;
            RunConfig c;
            c.baseline = true;
            c.workers = 1;
            c.batchSize = b.batch_size() > 0 ? b.batch_size() : batches.first();
            c.epochs = b.epochs() > 0 ? b.epochs() : epochs.first();
            c.gpusPerWorker = b.gpus_per_worker() > 0 ? b.gpus_per_worker() : gpus.first();
            c.threadsPerWorker = b.threads_per_worker() > 0 ? b.threads_per_worker() : threads.first();
            c.precision = b.precision().empty() ? precisions.first() : str(b.precision());
            c.lrRule = QStringLiteral("none"); // one worker: the global batch is the batch
            c.model = model;
            configs << c;
        }
    }
    RunConfig c;
    for (const QString &model : models)
        for (const auto &[fewest, w] : workers)
            for (int batch : batches)
                for (int e : epochs)
                    for (double gpu : gpus)
                        for (int t : threads)
                            for (const QString &precision : precisions)
                                for (const QString &rule : rules)
                                    for (int accumulation : accumulations) {
                                        c.workers = w;
                                        c.minWorkers = fewest;
                                        c.batchSize = batch;
                                        c.epochs = e;
                                        c.gpusPerWorker = gpu;
                                        c.threadsPerWorker = t;
                                        c.precision = precision;
                                        c.lrRule = rule;
                                        c.model = model;
                                        c.accumulationSteps = accumulation;
                                        configs << c;
                                    }
    return configs;
}

} // namespace

QList<PlannedRun> expandPlan(const v1::StudyPlan &plan, const QString &studyId)
{
    if (isTune(plan))
        return expandTune(plan, studyId);
    const QList<RunConfig> configs = gridConfigs(plan);
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

v1::RunSpec runSpecFor(const v1::StudyPlan &plan, const RunConfig &config,
    const std::optional<FoundLearningRate> &found, int repeat)
{
    v1::RunSpec spec = plan.training();
    if (plan.learning_rate_auto() && found) {
        // The test's batch was the baseline's global batch; the rules scale from the worker's
        // reference batch, so the value they are given is rescaled to match. AdaScale's gain
        // is the linear rule's where the gradient noise dominates, as at the small batch of
        // a test, so its value is rescaled as the linear rule's.
        const int testBatch = std::max(1, found->batch);
        const double measured = found->learningRate;
        if (config.lrRule == QLatin1String("linear") || config.lrRule == QLatin1String("adascale"))
            spec.set_learning_rate(
                worker::linearRuleLearningRate(measured, testBatch, worker::kLinearRuleBaseBatch));
        else if (config.lrRule == QLatin1String("sqrt"))
            spec.set_learning_rate(
                worker::sqrtRuleLearningRate(measured, testBatch, worker::kLinearRuleBaseBatch));
        else
            spec.set_learning_rate(measured);
    }
    spec.set_dataset(plan.dataset());
    spec.set_batch_size(config.batchSize);
    spec.set_epochs(config.epochs);
    spec.set_threads_per_worker(config.threadsPerWorker);
    spec.set_gpus_per_worker(config.gpusPerWorker);
    spec.set_precision(config.precision == QLatin1String("bf16") ? v1::BF16 : v1::FP32);
    spec.set_lr_scaling(config.lrRule.toStdString());
    spec.set_accumulation_steps(config.accumulationSteps > 1 ? config.accumulationSteps : 0);
    spec.set_model(
        config.defaultModel() && spec.model().empty() ? std::string() : config.model.toStdString());
    if (spec.seed() == 0)
        spec.set_seed(1);
    if (plan.repeat_seeds() == "vary")
        spec.set_seed(spec.seed() + std::uint64_t(std::max(0, repeat)));
    if (spec.checkpoint_every_epochs() == 0)
        spec.set_checkpoint_every_epochs(1); // retries resume from the last epoch
    return spec;
}

v1::RunSpec runSpecFor(
    const v1::StudyPlan &plan, const PlannedRun &run, const std::optional<FoundLearningRate> &found)
{
    v1::RunSpec spec = runSpecFor(plan, run.config, found, run.repeat);
    if (run.trial)
        applyTrialParams(run.params, &spec);
    return spec;
}

QStringList planAgentSpecs(const v1::StudyPlan &plan)
{
    QStringList specs;
    for (const auto &spec : plan.agents())
        specs << str(spec);
    return specs;
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
