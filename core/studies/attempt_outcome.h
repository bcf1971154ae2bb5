// How a run attempt ends, decided from what each of its portions (one agent's ranks) has
// come to: pure rules, no I/O, so the runner's decisions can be tested without agents.
//
//   markLostPortions(portions, now, ...);      // agents that cannot have live ranks any more
//   if (anyPortionFailed(portions)) stop the others (the runner's I/O);
//   if (allPortionsEnded(portions)) const AttemptOutcome o = attemptOutcome(portions, cancelling);
//
// Thread: any (values only).
#pragma once

#include <QString>
#include <QStringList>

#include <functional>
#include <vector>

namespace scalelab::core {

// One agent's share of an attempt, as the runner watches it.
struct PortionState {
    QString agent;
    QString outcome; // "" while running; SUCCEEDED | FAILED | CANCELLED | LOST (agent unreachable)
    QString message; // why it ended, in words
    qint64 unreachableSinceMs = 0; // the agent stopped answering then (0 = it answers)
    QString unreachableError;
    bool diverged = false; // its summary said the loss diverged
    qint64 spaceNeeded = 0; // a rank's checkpoint did not fit on the agent's disk
};

// A portion whose agent cannot be reached is LOST when its ranks cannot be alive any more:
// the agent refuses connections for `refusedForMs` (its process is gone, its ranks with it),
// another portion ended other than SUCCEEDED (its ranks have no peers left), the attempt is
// being cancelled, or it has been silent longer than a collective may wait (+60 s). A lost
// portion's message says which agent (through `label`), since when and why.
void markLostPortions(const std::vector<PortionState *> &portions, qint64 nowMs, int collectiveSeconds,
    bool cancelling, qint64 refusedForMs, const std::function<QString(const QString &agent)> &label,
    const std::function<QString(qint64 unixMs)> &clock);

[[nodiscard]] bool anyPortionFailed(const std::vector<PortionState *> &portions); // FAILED or LOST
[[nodiscard]] bool allPortionsEnded(const std::vector<PortionState *> &portions);

struct AttemptOutcome {
    QString outcome; // SUCCEEDED | CANCELLED | FAILED
    // In words: lost agents first ("…; then on the other agents: …"), else the first failure;
    // "cancelled by the user"; empty on success.
    QString reason;
    // For a FAILED attempt: what the run is said to have failed of (a divergence or a full
    // disk is the cause, the others' failures follow from it), whether it is retried (not after
    // a divergence: it would diverge again from its checkpoint), and what it lost.
    QString failure;
    bool retry = true;
    QStringList lostAgents;
    qint64 lostSinceMs = 0;
    bool diverged = false;
    QString spaceShortOn; // the agent whose disk was too full (not set after a divergence)
    qint64 spaceNeeded = 0;
};

// Once every portion has ended.
[[nodiscard]] AttemptOutcome attemptOutcome(const std::vector<PortionState *> &portions, bool cancelling);

} // namespace scalelab::core
