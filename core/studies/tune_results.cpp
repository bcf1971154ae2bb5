// A tune's results read from its snapshot: each trial's metric, the best trial, its status and
// the epochs the search spent (declared in tune_plan.h, beside the plan they come from).
#include "tune_plan.h"

#include <cmath>

namespace scalelab::core {

double epochMetric(const QString &metric, double testAccuracy, double testLoss, double trainLoss)
{
    if (metric == QLatin1String("test_loss"))
        return testLoss;
    if (metric == QLatin1String("train_loss"))
        return trainLoss;
    return testAccuracy;
}

double trialMetric(const StudySnapshot &s, const EpochPoint &epoch)
{
    return epochMetric(s.tuneMetric, epoch.testAccuracy, epoch.testLoss, epoch.trainLoss);
}

int bestTrialIndex(const StudySnapshot &s)
{
    int best = -1;
    double bestValue = 0;
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        if (!r.trial || r.epochs.isEmpty())
            continue;
        const double v = trialMetric(s, r.epochs.last());
        if (std::isnan(v))
            continue;
        if (best < 0 || (s.tuneMaximize ? v > bestValue : v < bestValue)) {
            best = i;
            bestValue = v;
        }
    }
    return best;
}

QString metricText(const QString &metric, double value)
{
    if (std::isnan(value))
        return QStringLiteral("-");
    if (metric == QLatin1String("test_accuracy"))
        return QString::number(value * 100, 'f', 1) + QLatin1Char('%');
    return QString::number(value, 'f', 3);
}

QString trialStatus(const RunResult &r)
{
    const TrialDecision *last = r.decisions.isEmpty() ? nullptr : &r.decisions.last();
    if (r.state == QLatin1String("RUNNING") || r.state == QLatin1String("STARTING"))
        return QStringLiteral("running to epoch %1").arg(r.trialTarget);
    if (r.state == QLatin1String("PENDING"))
        return last ? QStringLiteral("queued to epoch %1").arg(r.trialTarget) : QStringLiteral("pending");
    if (r.state == QLatin1String("PAUSED"))
        return last && last->action == QLatin1String("pause")
            ? QStringLiteral("paused at rung %1 (epoch %2)").arg(last->rung + 1).arg(last->epoch)
            : QStringLiteral("deciding at epoch %1").arg(r.trialTarget);
    if (r.state == QLatin1String("STOPPED") && last)
        return QStringLiteral("stopped at rung %1 (epoch %2)").arg(last->rung + 1).arg(last->epoch);
    if (r.state == QLatin1String("SUCCEEDED") && last)
        return QStringLiteral("finished (%1 epochs)").arg(last->epoch);
    return r.state.toLower();
}

QString rungValuesText(const StudySnapshot &s, const RunResult &r)
{
    QStringList parts;
    int lastEpoch = 0;
    for (const TrialDecision &d : r.decisions)
        if (d.action != QLatin1String("promote") && d.epoch != lastEpoch) { // once per rung
            parts << QStringLiteral("e%1 %2").arg(d.epoch).arg(metricText(s.tuneMetric, d.value));
            lastEpoch = d.epoch;
        }
    return parts.join(QStringLiteral(" · "));
}

int epochsSpent(const StudySnapshot &s)
{
    int total = 0;
    for (const RunResult &r : s.runs)
        total += r.trial ? std::max(r.epochsTrained, int(r.epochs.size()))
                         : 0; // a snapshot made by hand counts its epochs
    return total;
}

int epochsWithoutStopping(const StudySnapshot &s)
{
    int total = 0;
    for (const RunResult &r : s.runs)
        total += r.trial ? (s.tuneTrialEpochs > 0 ? s.tuneTrialEpochs : r.config.epochs) : 0;
    return total;
}

} // namespace scalelab::core
