#include "attempt_outcome.h"

#include <algorithm>

namespace scalelab::core {

void markLostPortions(const std::vector<PortionState *> &portions, qint64 nowMs, int collectiveSeconds,
    bool cancelling, qint64 refusedForMs, const std::function<QString(const QString &agent)> &label,
    const std::function<QString(qint64 unixMs)> &clock)
{
    // A portion that failed leaves the others' ranks without peers; one that succeeded does
    // not (the silent one may well have finished too): keep waiting for it.
    const bool anyEnded = std::any_of(portions.begin(), portions.end(), [](const PortionState *p) {
        return !p->outcome.isEmpty() && p->outcome != QLatin1String("SUCCEEDED");
    });
    for (PortionState *p : portions) {
        if (!p->outcome.isEmpty() || p->unreachableSinceMs == 0)
            continue;
        const qint64 down = nowMs - p->unreachableSinceMs;
        const bool refused = p->unreachableError.contains(QLatin1String("refused"), Qt::CaseInsensitive);
        if ((refused && down >= refusedForMs) || anyEnded || cancelling
            || down > qint64(collectiveSeconds + 60) * 1000) {
            p->outcome = QStringLiteral("LOST");
            p->message = QStringLiteral("%1 unreachable since %2 (%3)")
                             .arg(label(p->agent), clock(p->unreachableSinceMs), p->unreachableError);
        }
    }
}

bool anyPortionFailed(const std::vector<PortionState *> &portions)
{
    return std::any_of(portions.begin(), portions.end(), [](const PortionState *p) {
        return p->outcome == QLatin1String("LOST") || p->outcome == QLatin1String("FAILED");
    });
}

bool allPortionsEnded(const std::vector<PortionState *> &portions)
{
    return std::all_of(
        portions.begin(), portions.end(), [](const PortionState *p) { return !p->outcome.isEmpty(); });
}

AttemptOutcome attemptOutcome(const std::vector<PortionState *> &portions, bool cancelling)
{
    AttemptOutcome o;
    QString firstFailure;
    QStringList lostWhy;
    for (const PortionState *p : portions) {
        if (p->outcome == QLatin1String("LOST")) {
            o.lostAgents << p->agent;
            lostWhy << p->message;
            o.lostSinceMs
                = o.lostSinceMs == 0 ? p->unreachableSinceMs : std::min(o.lostSinceMs, p->unreachableSinceMs);
        } else if (p->outcome == QLatin1String("FAILED") && firstFailure.isEmpty()) {
            firstFailure = p->message;
        }
    }
    // A diverged portion is the cause; its peers only lost their partner. So is a full disk.
    for (const PortionState *p : portions) {
        if (p->diverged && !o.diverged) {
            o.diverged = true;
            firstFailure = p->message;
        }
        if (p->spaceNeeded > 0 && o.spaceShortOn.isEmpty()) {
            o.spaceShortOn = p->agent;
            o.spaceNeeded = p->spaceNeeded;
            if (!o.diverged)
                firstFailure = p->message;
        }
    }
    const bool allSucceeded = std::all_of(portions.begin(), portions.end(),
        [](const PortionState *p) { return p->outcome == QLatin1String("SUCCEEDED"); });
    o.outcome = allSucceeded ? QStringLiteral("SUCCEEDED")
        : cancelling         ? QStringLiteral("CANCELLED")
                             : QStringLiteral("FAILED");
    o.reason = allSucceeded ? QString() : cancelling ? QStringLiteral("cancelled by the user") : firstFailure;
    if (!allSucceeded && !cancelling && !o.lostAgents.isEmpty())
        o.reason = lostWhy.join(QLatin1String("; "))
            + (firstFailure.isEmpty() ? QString()
                                      : QStringLiteral("; then on the other agents: ") + firstFailure);
    o.failure = o.diverged || !o.spaceShortOn.isEmpty() ? firstFailure : o.reason;
    o.retry = !o.diverged;
    if (o.diverged)
        o.spaceShortOn.clear();
    return o;
}

} // namespace scalelab::core
