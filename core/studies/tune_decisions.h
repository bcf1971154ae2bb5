// A tune's scheduler as event sourcing needs it: decide() and nextPromotion() only look,
// apply() changes. The runner decides, journals the decision (trial_decision) and
// applies it; StudyState::replay applies the journalled ones — so a tune continued after
// a crash holds the rungs it held, and deciding again on the same inputs gives the same
// answer (tests/tst_tune.cpp replays journals to check it). A value type inside
// StudyState: same thread rules.
//
// Values are in the metric's units: mode min is negated inside, as Ray does, and cutoffs
// and the values seen are given back in the metric's units.
#pragma once

#include "asha.h"
#include "study_plan.h"
#include "tune_plan.h"

#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>

#include <optional>
#include <vector>

namespace scalelab::core {

class TrialScheduler {
public:
    TrialScheduler() = default;
    // `trials`: the tune's planned runs (their bracket is used).
    TrialScheduler(const TuneSettings &settings, const QList<PlannedRun> &trials);

    [[nodiscard]] const TuneSettings &settings() const { return m_settings; }
    // The epochs at which `runId` stops for a decision (trialTargets of its bracket).
    [[nodiscard]] QList<int> targets(const QString &runId) const;

    // What to do with a trial whose attempt ended after `epoch` completed epochs with
    // `value` (continue, stop, pause or finish). `runEpochs`: the epoch the user continued
    // the trial to (trial_continued; it finishes there), 0 when not continued. Changes nothing.
    [[nodiscard]] TrialDecision decide(
        const QString &runId, int epoch, double value, int runEpochs = 0) const;
    // Promotion variant: the paused trial to resume next (Algorithm 2), if any.
    [[nodiscard]] std::optional<TrialDecision> nextPromotion() const;
    // Promotion variant, at the end: a trial paused at a rung that will not be promoted.
    [[nodiscard]] TrialDecision closeOut(const QString &runId, int epoch, double value) const;

    // Applies a decision (made now, or read back from the journal).
    void apply(const TrialDecision &decision);
    // The trial leaves its rungs (continued by the user, cancelled): never promoted.
    void withdraw(const QString &runId);

private:
    double sign() const { return m_settings.maximize ? 1.0 : -1.0; }
    int rungIndex(const QString &runId, int epoch) const;
    QString valueText(double v) const; // "41.2%" for accuracy, "0.532" for a loss

    TuneSettings m_settings;
    QMap<QString, int> m_bracketOf;
    std::vector<asha::StoppingBracket> m_brackets;
    std::optional<asha::PromotionRungs> m_rungs;
};

} // namespace scalelab::core
