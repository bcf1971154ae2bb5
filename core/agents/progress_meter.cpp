#include "progress_meter.h"

#include <QStringList>

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalelab::core {

void ProgressMeter::apply(const v1::RunEvent &event)
{
    switch (event.kind_case()) {
    case v1::RunEvent::kStarted: {
        const auto &s = event.started();
        if (s.effective().epochs() > 0)
            m_epochs = s.effective().epochs();
        if (s.steps_per_epoch() > 0)
            m_stepsPerEpoch = s.steps_per_epoch();
        m_epochsDone = std::max(m_epochsDone, s.resumed_from_epoch());
        m_epoch = m_epochsDone + 1;
        m_step = std::max<qint64>(m_step, qint64(m_epochsDone) * m_stepsPerEpoch);
        m_first.reset(); // a new attempt: a new measurement
        break;
    }
    case v1::RunEvent::kStep: {
        const auto &s = event.step();
        m_epoch = s.epoch();
        m_step = s.step();
        m_loss = s.loss();
        m_imagesPerSecond = s.images_per_second();
        m_haveStep = true;
        m_lastStepElapsed = s.elapsed_seconds();
        if (!m_first)
            m_first = std::pair { s.elapsed_seconds(), s.step() };
        m_last = { s.elapsed_seconds(), s.step() };
        break;
    }
    case v1::RunEvent::kEpoch: {
        const auto &e = event.epoch();
        m_epochsDone = std::max(m_epochsDone, e.epoch());
        m_epoch = e.epoch();
        // After its last step an epoch evaluates the test split: that time recurs.
        if (const double evaluation = e.elapsed_seconds() - m_lastStepElapsed; m_haveStep && evaluation >= 0)
            m_evaluationSeconds = evaluation;
        break;
    }
    default:
        break;
    }
}

ProgressView ProgressMeter::view() const
{
    ProgressView v;
    v.epochs = m_epochs;
    v.epoch = std::max(m_epoch, 0);
    v.stepsPerEpoch = m_stepsPerEpoch;
    v.stepsTotal = qint64(m_epochs) * m_stepsPerEpoch;
    v.stepsDone = std::max<qint64>(m_step, qint64(m_epochsDone) * m_stepsPerEpoch);
    if (v.stepsTotal > 0)
        v.stepsDone = std::min(v.stepsDone, v.stepsTotal);
    if (m_stepsPerEpoch > 0 && v.epoch > 0)
        v.stepInEpoch
            = std::clamp<qint64>(v.stepsDone - qint64(v.epoch - 1) * m_stepsPerEpoch, 0, m_stepsPerEpoch);
    v.fraction = v.stepsTotal > 0 ? double(v.stepsDone) / double(v.stepsTotal) : 0;
    v.loss = m_haveStep ? m_loss : std::numeric_limits<double>::quiet_NaN();
    v.imagesPerSecond = m_imagesPerSecond;
    v.done = m_epochs > 0 && m_epochsDone >= m_epochs;
    if (m_first && !v.done && v.stepsTotal > 0) {
        const double seconds = m_last.first - m_first->first;
        const qint64 steps = m_last.second - m_first->second;
        if (steps >= kStableSteps && seconds >= kStableSeconds) {
            const double rate = double(steps) / seconds;
            const int evaluationsLeft = std::max(0, m_epochs - m_epochsDone);
            v.etaSeconds = double(v.stepsTotal - v.stepsDone) / rate
                + evaluationsLeft * m_evaluationSeconds.value_or(0);
        }
    }
    return v;
}

QString formatDuration(double seconds)
{
    if (!(seconds >= 0) || !std::isfinite(seconds))
        return QStringLiteral("?");
    const qint64 s = qint64(std::llround(seconds));
    const auto two = [](qint64 n) { return QStringLiteral("%1").arg(n, 2, 10, QLatin1Char('0')); };
    if (s < 60)
        return QStringLiteral("%1s").arg(s);
    if (s < 3600)
        return QStringLiteral("%1m%2s").arg(s / 60).arg(two(s % 60));
    if (s < 86400)
        return QStringLiteral("%1h%2m").arg(s / 3600).arg(two(s % 3600 / 60));
    return QStringLiteral("%1d%2h").arg(s / 86400).arg(two(s % 86400 / 3600));
}

QString formatProgress(const QString &label, const ProgressView &v, int columns)
{
    QStringList parts;
    parts << QStringLiteral("%1%").arg(int(std::floor(v.fraction * 100)), 3);
    if (v.epochs > 0)
        parts << QStringLiteral("epoch %1/%2").arg(v.epoch).arg(v.epochs);
    if (v.stepsPerEpoch > 0)
        parts << QStringLiteral("step %1/%2").arg(v.stepInEpoch).arg(v.stepsPerEpoch);
    if (!std::isnan(v.loss))
        parts << QStringLiteral("loss %1").arg(v.loss, 0, 'f', 4);
    if (v.imagesPerSecond > 0)
        parts << QStringLiteral("%1 img/s").arg(v.imagesPerSecond, 0, 'f', v.imagesPerSecond < 100 ? 1 : 0);
    if (v.done)
        parts << QStringLiteral("evaluated");
    else
        parts << (v.etaSeconds ? QStringLiteral("ETA %1").arg(formatDuration(*v.etaSeconds))
                               : QStringLiteral("ETA …"));
    const QString text = parts.join(QLatin1String("  "));
    if (columns <= 0) // a log line: no bar, no limit
        return label + QLatin1Char(' ') + text;
    // The bar takes what is left, 10 to 30 columns; without room, none.
    const int room = columns - int(label.size()) - int(text.size()) - 5;
    const int width = std::min(30, room);
    if (width < 10)
        return (label + QLatin1Char(' ') + text).left(std::max(columns - 1, 20));
    const int filled = int(std::floor(v.fraction * width));
    const QString bar = QString(filled, QLatin1Char('#')) + QString(width - filled, QLatin1Char('.'));
    return QStringLiteral("%1 [%2] %3").arg(label, bar, text);
}

} // namespace scalelab::core
