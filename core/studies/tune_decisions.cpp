#include "tune_decisions.h"

#include <QJsonArray>

#include <cmath>
#include <limits>

namespace scalelab::core {
namespace {

// JSON has no NaN: null stands for "not measured".
QJsonValue number(double v)
{
    return std::isfinite(v) ? QJsonValue(v) : QJsonValue();
}

double numberOf(const QJsonValue &v)
{
    return v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN();
}

} // namespace

QJsonObject TrialDecision::toJson() const
{
    QJsonArray seenArray;
    for (double v : seen)
        seenArray.append(number(v));
    QJsonObject o { { QStringLiteral("runId"), runId }, { QStringLiteral("action"), action },
        { QStringLiteral("epoch"), epoch }, { QStringLiteral("value"), number(value) },
        { QStringLiteral("rung"), rung }, { QStringLiteral("seen"), seenArray },
        { QStringLiteral("nextTarget"), nextTarget }, { QStringLiteral("reason"), reason } };
    if (continued)
        o.insert(QStringLiteral("continued"), true);
    if (cutoff)
        o.insert(QStringLiteral("cutoff"), number(*cutoff));
    return o;
}

TrialDecision TrialDecision::fromJson(const QJsonObject &json)
{
    TrialDecision d;
    d.runId = json.value(QLatin1String("runId")).toString();
    d.action = json.value(QLatin1String("action")).toString();
    d.epoch = json.value(QLatin1String("epoch")).toInt();
    d.value = numberOf(json.value(QLatin1String("value")));
    d.rung = json.value(QLatin1String("rung")).toInt(-1);
    if (json.contains(QLatin1String("cutoff")))
        d.cutoff = numberOf(json.value(QLatin1String("cutoff")));
    for (const auto &v : json.value(QLatin1String("seen")).toArray())
        d.seen << numberOf(v);
    d.nextTarget = json.value(QLatin1String("nextTarget")).toInt();
    d.reason = json.value(QLatin1String("reason")).toString();
    d.continued = json.value(QLatin1String("continued")).toBool();
    return d;
}

TrialScheduler::TrialScheduler(const TuneSettings &settings, const QList<PlannedRun> &trials)
    : m_settings(settings)
{
    for (const auto &t : trials)
        m_bracketOf.insert(t.runId, t.bracket);
    if (settings.promotion()) {
        m_rungs.emplace(int(trialTargets(settings, 0).size()), settings.reductionFactor);
    } else if (settings.asha()) {
        for (int b = 0; b < settings.brackets; ++b)
            m_brackets.emplace_back(settings.gracePeriod, settings.trialEpochs, settings.reductionFactor, b);
    }
}

QList<int> TrialScheduler::targets(const QString &runId) const
{
    return trialTargets(m_settings, m_bracketOf.value(runId));
}

QString TrialScheduler::valueText(double v) const
{
    // Four digits: a value and the cutoff it missed must not print the same.
    if (std::isnan(v))
        return QStringLiteral("no value");
    return m_settings.metric == QLatin1String("test_accuracy")
        ? QString::number(v * 100, 'g', 4) + QLatin1Char('%')
        : QString::number(v, 'g', 4);
}

int TrialScheduler::rungIndex(const QString &runId, int epoch) const
{
    return int(targets(runId).indexOf(epoch));
}

TrialDecision TrialScheduler::decide(const QString &runId, int epoch, double value, int runEpochs) const
{
    TrialDecision d;
    d.runId = runId;
    d.epoch = epoch;
    d.value = value;
    d.rung = rungIndex(runId, epoch);
    const QList<int> t = targets(runId);
    const bool last = epoch >= (runEpochs > 0 ? runEpochs : m_settings.trialEpochs);
    const int next = [&] {
        for (int target : t)
            if (target > epoch)
                return target;
        return m_settings.trialEpochs;
    }();

    if (runEpochs > 0 && last) {
        d.action = QStringLiteral("finish");
        d.continued = true;
        d.reason
            = QStringLiteral("trained to epoch %1, as the user asked: %2").arg(epoch).arg(valueText(value));
        return d;
    }
    if (m_settings.promotion()) {
        if (last) {
            d.action = QStringLiteral("finish");
            d.reason = QStringLiteral("trained all %1 epochs: %2").arg(epoch).arg(valueText(value));
            return d;
        }
        for (double v : m_rungs->values(d.rung))
            d.seen << sign() * v;
        d.action = QStringLiteral("pause");
        d.reason
            = QStringLiteral("paused at rung %1 (epoch %2) with %3; resumes when in the top 1/%4 of the rung")
                  .arg(d.rung + 1)
                  .arg(epoch)
                  .arg(valueText(value))
                  .arg(m_settings.reductionFactor);
        return d;
    }
    if (!m_settings.asha()) {
        d.action = last ? QStringLiteral("finish") : QStringLiteral("continue");
        d.nextTarget = last ? 0 : next;
        d.reason = last ? QStringLiteral("trained all %1 epochs: %2").arg(epoch).arg(valueText(value))
                        : QStringLiteral("continues to epoch %1").arg(next);
        return d;
    }
    // Stopping: judged on a copy, so that deciding changes nothing.
    const int bracket = std::clamp(m_bracketOf.value(runId), 0, int(m_brackets.size()) - 1);
    asha::StoppingBracket judge = m_brackets[std::size_t(bracket)];
    const asha::StopDecision s = judge.onResult(runId.toStdString(), epoch, sign() * value);
    for (double v : s.seen)
        d.seen << sign() * v;
    if (s.cutoff)
        d.cutoff = sign() * *s.cutoff;
    const QString cutoffText = d.cutoff ? valueText(*d.cutoff) : QString();
    if (last) {
        d.action = QStringLiteral("finish");
        d.reason = QStringLiteral("trained all %1 epochs: %2").arg(epoch).arg(valueText(value));
    } else if (s.stop) {
        d.action = QStringLiteral("stop");
        d.reason
            = QStringLiteral(
                "stopped at rung %1 (epoch %2): %3 is %4 the cutoff %5, the %6 quantile of the %7 "
                "result(s) there")
                  .arg(d.rung + 1)
                  .arg(epoch)
                  .arg(valueText(value),
                      m_settings.maximize ? QStringLiteral("below") : QStringLiteral("above"), cutoffText)
                  .arg(1 - 1 / m_settings.reductionFactor, 0, 'g', 3)
                  .arg(d.seen.size());
    } else {
        d.action = QStringLiteral("continue");
        d.nextTarget = next;
        if (!s.rung)
            d.reason = QStringLiteral("continues to epoch %1").arg(next);
        else if (!s.cutoff)
            d.reason
                = QStringLiteral("continues to epoch %1: first result at rung %2").arg(next).arg(d.rung + 1);
        else
            d.reason = QStringLiteral("continues to epoch %1: %2 reached the cutoff %3 at rung %4")
                           .arg(next)
                           .arg(valueText(value), cutoffText)
                           .arg(d.rung + 1);
    }
    return d;
}

std::optional<TrialDecision> TrialScheduler::nextPromotion() const
{
    if (!m_rungs)
        return std::nullopt;
    asha::PromotionRungs look = *m_rungs;
    const auto p = look.nextPromotion();
    if (!p)
        return std::nullopt;
    TrialDecision d;
    d.runId = QString::fromStdString(p->trial);
    d.action = QStringLiteral("promote");
    d.rung = p->fromRung;
    const QList<int> t = targets(d.runId);
    d.epoch = t.value(p->fromRung);
    d.value = sign() * p->value;
    d.nextTarget = t.value(p->fromRung + 1, m_settings.trialEpochs);
    for (double v : m_rungs->values(p->fromRung))
        d.seen << sign() * v;
    d.reason
        = QStringLiteral("promoted from rung %1 (epoch %2) to epoch %3: %4 is in the top %5 of the rung's %6")
              .arg(p->fromRung + 1)
              .arg(d.epoch)
              .arg(d.nextTarget)
              .arg(valueText(d.value))
              .arg(int(std::floor(double(d.seen.size()) / m_settings.reductionFactor)))
              .arg(d.seen.size());
    return d;
}

TrialDecision TrialScheduler::closeOut(const QString &runId, int epoch, double value) const
{
    TrialDecision d;
    d.runId = runId;
    d.action = QStringLiteral("stop");
    d.epoch = epoch;
    d.value = value;
    d.rung = rungIndex(runId, epoch);
    if (m_rungs)
        for (double v : m_rungs->values(d.rung))
            d.seen << sign() * v;
    d.reason
        = QStringLiteral("stopped at rung %1 (epoch %2): %3 was not in the top %4 of the rung's %5 when the "
                         "tune ran out of trials")
              .arg(d.rung + 1)
              .arg(epoch)
              .arg(valueText(value))
              .arg(int(std::floor(double(d.seen.size()) / m_settings.reductionFactor)))
              .arg(d.seen.size());
    return d;
}

void TrialScheduler::withdraw(const QString &runId)
{
    if (m_rungs)
        m_rungs->withdraw(runId.toStdString());
}

void TrialScheduler::apply(const TrialDecision &d)
{
    if (d.continued)
        return; // the user's, not ASHA's: the rungs stay as ASHA left them
    const std::string trial = d.runId.toStdString();
    if (m_rungs) {
        if (d.action == QLatin1String("pause") || d.action == QLatin1String("finish"))
            m_rungs->record(trial, d.rung, sign() * d.value);
        else if (d.action == QLatin1String("promote"))
            m_rungs->markPromoted(trial, d.rung);
        return;
    }
    if (m_brackets.empty() || d.action == QLatin1String("promote") || d.action == QLatin1String("pause"))
        return;
    const int bracket = std::clamp(m_bracketOf.value(d.runId), 0, int(m_brackets.size()) - 1);
    asha::StoppingBracket &b = m_brackets[std::size_t(bracket)];
    (void)b.onResult(trial, d.epoch, sign() * d.value);
    // Ray passes a trial its scheduler stopped through on_trial_complete with the same last
    // result, which records it at a milestone the trial skipped (one judged without a value,
    // say). A finished trial went through it alone: Ray does not judge a result at max_t.
    if (d.action == QLatin1String("stop"))
        b.onComplete(trial, d.epoch, sign() * d.value);
}

} // namespace scalelab::core
