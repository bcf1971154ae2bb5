#include "study_model.h"

#include <algorithm>

namespace scalelab::core {

QString RunConfig::key() const
{
    const QString device
        = gpusPerWorker > 0 ? QStringLiteral("g%1").arg(gpusPerWorker) : QStringLiteral("cpu");
    QString key = QStringLiteral("w%1-b%2-e%3-%4-t%5-%6-lr_%7")
                      .arg(workers)
                      .arg(batchSize)
                      .arg(epochs)
                      .arg(device)
                      .arg(threadsPerWorker)
                      .arg(precision, lrRule);
    if (accumulationSteps > 1)
        key += QStringLiteral("-acc%1").arg(accumulationSteps);
    if (elastic())
        key += QStringLiteral("-min%1").arg(minWorkers);
    if (!defaultModel())
        key += QLatin1Char('-') + modelShortName(model);
    return baseline ? QStringLiteral("baseline-") + key : key;
}

QStringList distinguishingLabels(const QList<RunConfig> &configs, const QMap<QString, QString> &modelNames)
{
    const auto differs = [&](auto field) {
        for (const RunConfig &c : configs)
            if (field(c) != field(configs.first()))
                return true;
        return false;
    };
    const bool batch = differs([](const RunConfig &c) { return c.batchSize; }) || configs.size() == 1;
    const bool epochs = differs([](const RunConfig &c) { return c.epochs; });
    const bool device = differs([](const RunConfig &c) { return c.gpusPerWorker; });
    const bool threads = differs([](const RunConfig &c) { return c.threadsPerWorker; });
    const bool precision = differs([](const RunConfig &c) { return c.precision; });
    const bool lrRule = differs([](const RunConfig &c) { return c.lrRule; });
    const bool accumulation = differs([](const RunConfig &c) { return c.accumulationSteps; });
    const bool model = differs([](const RunConfig &c) {
        return c.model;
    }) || std::any_of(configs.cbegin(), configs.cend(), [](const RunConfig &c) { return !c.defaultModel(); });
    QStringList labels;
    for (const RunConfig &c : configs) {
        QStringList parts;
        if (c.baseline)
            parts << QStringLiteral("baseline");
        if (c.elastic())
            parts << QStringLiteral("%1–%2 workers").arg(c.minWorkers).arg(c.workers);
        else
            parts << (c.workers == 1 ? QStringLiteral("1 worker")
                                     : QStringLiteral("%1 workers").arg(c.workers));
        if (batch)
            parts << QStringLiteral("b%1").arg(c.batchSize);
        if (epochs)
            parts << QStringLiteral("%1 epoch%2").arg(c.epochs).arg(c.epochs == 1 ? "" : "s");
        if (device)
            parts << (c.gpusPerWorker > 0 ? QStringLiteral("%1 GPU").arg(c.gpusPerWorker)
                                          : QStringLiteral("CPU"));
        if (threads)
            parts << (c.threadsPerWorker > 0 ? QStringLiteral("%1 thread%2")
                                                   .arg(c.threadsPerWorker)
                                                   .arg(c.threadsPerWorker == 1 ? "" : "s")
                                             : QStringLiteral("auto threads"));
        if (precision)
            parts << c.precision;
        if (lrRule)
            parts << QStringLiteral("lr %1").arg(c.lrRule);
        if (accumulation)
            parts << QStringLiteral("×%1 accumulation").arg(c.accumulationSteps);
        if (model)
            parts << modelNames.value(c.model, modelShortName(c.model));
        labels << parts.join(QStringLiteral(" · "));
    }
    return labels;
}

QString elasticSizesText(const RunResult &run)
{
    QStringList sizes;
    bool changed = false;
    for (const AttemptRecord &a : run.attempts) {
        if (a.worldSize <= 0)
            continue;
        changed = changed || a.worldSize != run.config.workers;
        if (sizes.isEmpty() || sizes.last() != QString::number(a.worldSize))
            sizes << QString::number(a.worldSize);
    }
    return changed ? sizes.join(QStringLiteral(" → ")) + QStringLiteral(" workers") : QString();
}

QString modelShortName(const QString &model)
{
    // A stored module's 64-digit sum, cut to what tells a study's modules apart.
    return model.startsWith(QLatin1String("sha256:")) ? QStringLiteral("ts_") + model.mid(7, 12) : model;
}

QString resumeNote(const AttemptRecord &a)
{
    const int epoch = a.resumedFromEpoch > 0 ? a.resumedFromEpoch : a.transferredEpoch;
    if (epoch <= 0)
        return {};
    // Until the worker reports where it resumed, the transfer is all that is known.
    const QString verb = a.resumedFromEpoch > 0 ? QStringLiteral("resumed") : QStringLiteral("resuming");
    if (a.transferredEpoch > 0 && epoch != a.transferredEpoch)
        return QStringLiteral(
            "%1 from epoch %2 (the checkpoint of epoch %3 copied from agent %4 was not used)")
            .arg(verb)
            .arg(epoch)
            .arg(a.transferredEpoch)
            .arg(a.transferredFrom);
    if (a.transferredEpoch > 0)
        return QStringLiteral("%1 from epoch %2, checkpoint copied from agent %3")
            .arg(verb)
            .arg(epoch)
            .arg(a.transferredFrom);
    return QStringLiteral("%1 from epoch %2").arg(verb).arg(epoch);
}

} // namespace scalelab::core

namespace scalelab::core {

double runImagesPerSecond(const QList<EpochPoint> &epochs)
{
    double inverse = 0;
    int counted = 0;
    for (const EpochPoint &e : epochs)
        if (std::isfinite(e.imagesPerSecond) && e.imagesPerSecond > 0) {
            inverse += 1.0 / e.imagesPerSecond;
            ++counted;
        }
    return counted > 0 ? double(counted) / inverse : kNotMeasured;
}

} // namespace scalelab::core
