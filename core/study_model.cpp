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

} // namespace scalelab::core
