// How far a run is and how long it has left, folded from its events: epoch x/y, step x/y,
// the latest loss and images/s, and an ETA from the measured step rate once that rate is
// stable. Times come from the worker's own clock (elapsed_seconds in its events), so the
// same events always give the same estimate. Plain value type; any thread, one at a time.
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <QString>

#include <optional>
#include <vector>

namespace scalelab::core {

struct ProgressView {
    int epoch = 0; // the epoch in progress (1-based), or the last one done
    int epochs = 0; // the run's, 0 until known
    qint64 stepInEpoch = 0;
    qint64 stepsPerEpoch = 0;
    qint64 stepsDone = 0; // of the whole run (epochs resumed from count as done)
    qint64 stepsTotal = 0;
    double fraction = 0; // stepsDone / stepsTotal, 0..1
    double loss = 0; // the latest step's; NaN before the first
    double imagesPerSecond = 0; // the latest step's
    // Seconds left: steps left at the measured rate, plus the evaluations left at the
    // measured evaluation time. Unset until the rate is stable (kStableSteps steps and
    // kStableSeconds seconds measured in this attempt) and the run is not over.
    std::optional<double> etaSeconds;
    bool done = false; // every epoch trained
};

class ProgressMeter {
public:
    static constexpr int kStableSteps = 5;
    static constexpr double kStableSeconds = 2.0;

    // Events of the run, in order (any attempt: a new start begins a new measurement).
    void apply(const v1::RunEvent &event);
    [[nodiscard]] ProgressView view() const;

private:
    int m_epochs = 0;
    qint64 m_stepsPerEpoch = 0;
    int m_epoch = 0;
    qint64 m_step = 0; // global step of the latest StepMetrics
    int m_epochsDone = 0;
    double m_loss = 0;
    double m_imagesPerSecond = 0;
    bool m_haveStep = false;
    // The first step of this attempt (time, step) and the latest.
    std::optional<std::pair<double, qint64>> m_first;
    std::pair<double, qint64> m_last { 0, 0 };
    double m_lastStepElapsed = 0;
    std::optional<double> m_evaluationSeconds; // the latest epoch's time after its last step
};

// "3m12s", "1h04m", "42s", "2d03h": short, for progress lines.
[[nodiscard]] QString formatDuration(double seconds);

// One line for a terminal of `columns` columns: "r01 [######....]  37%  epoch 2/5  step
// 48/125  loss 0.5512  88 img/s  ETA 3m12s". Shortened from the right (the bar first)
// when it does not fit. columns <= 0: no bar and no limit (for logs).
[[nodiscard]] QString formatProgress(const QString &label, const ProgressView &view, int columns = 100);

} // namespace scalelab::core
