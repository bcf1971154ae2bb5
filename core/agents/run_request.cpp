#include "run_request.h"

#include "spec_rules.h"

#include <cmath>

#include <QDateTime>
#include <QRandomGenerator>
#include <QRegularExpression>

namespace scalelab::core {

CheckStatus RunRequest::check() const
{
    QStringList p;
    static const QRegularExpression safeName(QStringLiteral("^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"));
    if (dataset.isEmpty())
        p << QStringLiteral("data set: choose one (create a synthetic set if the agent has none)");
    else if (!safeName.match(dataset).hasMatch())
        p << QStringLiteral("data set '%1' is not a data set name (a folder name on the agent, no slashes)")
                 .arg(dataset);
    if (workers < 1)
        p << QStringLiteral("workers must be at least 1 (got %1)").arg(workers);
    if (batchSize < 1)
        p << QStringLiteral("batch size must be at least 1 (got %1)").arg(batchSize);
    if (minWorkers != 0 && (minWorkers < 1 || minWorkers >= workers))
        p << QStringLiteral("workers MIN:MAX must have 1 <= MIN < MAX (got %1:%2)")
                 .arg(minWorkers)
                 .arg(workers);
    if (accumulationSteps < 1 || accumulationSteps > rules::kMaxAccumulationSteps)
        p << QStringLiteral("accumulation steps must be between 1 (none) and %1 (got %2)")
                 .arg(rules::kMaxAccumulationSteps)
                 .arg(accumulationSteps);
    if (epochs < 1)
        p << QStringLiteral("epochs must be at least 1 (got %1)").arg(epochs);
    if (!(learningRate >= 0) || !std::isfinite(learningRate) || learningRate > rules::kMaxLearningRate)
        p << QStringLiteral("learning rate must be a number in (0, %1], or 0 for the default (got %2)")
                 .arg(rules::kMaxLearningRate)
                 .arg(learningRate);
    if (threadsPerWorker < 0)
        p << QStringLiteral("threads per worker must be 0 (automatic) or more");
    if (maxTrainImages < 0 || maxTestImages < 0)
        p << QStringLiteral("image limits must not be negative (0 = the whole split)");
    // Then the agent's own rules (the ranges it enforces), so the form refuses exactly what
    // StartWorkers would: "batch size: must be between 1 and 4096 (got 5000)".
    if (p.isEmpty())
        if (const rules::SpecStatus spec
            = rules::checkRunSpec(toStartWorkers(QStringLiteral("check")).spec(), { "", false, false });
            !spec)
            for (const auto &problem : spec.error()) {
                // The field's name in words ("batch size: ..."); the rest as said (a value
                // such as "mobilenet_v2" keeps its underscore).
                QString text = QString::fromStdString(problem.text());
                const qsizetype colon = text.indexOf(QLatin1Char(':'));
                p << (colon < 0 ? text : text.left(colon).replace(u'_', u' ') + text.mid(colon));
            }
    return p.isEmpty() ? CheckStatus::success() : CheckStatus::failure(p);
}

v1::StartWorkersRequest RunRequest::toStartWorkers(const QString &runId) const
{
    v1::StartWorkersRequest r;
    r.set_run_id(runId.toStdString());
    r.set_attempt(1);
    const int world = startWorkers > 0 ? startWorkers : workers;
    r.set_world_size(world);
    for (int rank = 0; rank < world; ++rank)
        r.add_ranks(rank);
    auto *spec = r.mutable_spec();
    if (world < workers) // the planned run's micro-batches, spread over fewer workers
        spec->set_batches_per_step(workers * std::max(1, accumulationSteps));
    spec->set_dataset(dataset.toStdString());
    spec->set_batch_size(batchSize);
    if (accumulationSteps > 1)
        spec->set_accumulation_steps(accumulationSteps);
    spec->set_epochs(epochs);
    if (learningRate > 0) // 0: the trainer's default
        spec->set_learning_rate(learningRate);
    spec->set_threads_per_worker(threadsPerWorker);
    spec->set_seed(seed);
    spec->set_max_train_images(maxTrainImages);
    spec->set_max_test_images(maxTestImages);
    spec->set_precision(v1::FP32);
    spec->set_model(model.toStdString());
    return r;
}

QString newRunId()
{
    return QStringLiteral("run-%1-%2")
        .arg(QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss")))
        .arg(QRandomGenerator::global()->bounded(0x10000), 4, 16, QLatin1Char('0'));
}

} // namespace scalelab::core
