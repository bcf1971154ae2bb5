#include "study_model.h"

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
    return baseline ? QStringLiteral("baseline-") + key : key;
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
