// How a run's events become lines on the loss, accuracy and throughput charts, shared by
// the single-run tab and the study view so both draw a run the same way:
// - loss and throughput per optimizer step, placed by step, fractional epoch and seconds;
// - train and test accuracy per epoch (percent), with markers;
// - when the charts are given: learning rate and gradient norm per step, and the step's
//   time split into compute and the all-reduce wait it did not hide (milliseconds);
// - a resumed attempt starts where its checkpoint left off, so its line begins at the
//   resume point; seconds continue from the earlier attempts (secondsOffset);
// - a fine-tuning run's phases: where the head-only epochs end, on the loss and accuracy
//   charts;
// - an elastic run's changes of size: where an attempt on another number of workers than
//   the one before it starts, a dashed marker on every chart ("→ 1 worker"), its reason
//   in the marker's tooltip.
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <QColor>
#include <QList>
#include <QString>

namespace scalelab::app {

class ChartFeed;
class MetricChart;

struct RunCharts {
    MetricChart *loss = nullptr;
    MetricChart *accuracy = nullptr;
    MetricChart *throughput = nullptr;
    MetricChart *learningRate = nullptr; // optional, as the two below
    MetricChart *gradNorm = nullptr;
    MetricChart *stepTime = nullptr;
    bool epochMarkers = false; // mark where each epoch ends on the loss and throughput charts
    // Given: samples go through it (drawn at its next frame), else straight to each chart.
    ChartFeed *feed = nullptr;
};

// The series of one run (or one attempt of a run) on RunCharts, by id prefix.
struct RunLines {
    QString prefix; // e.g. the run id, or "runId#2" for attempt 2
    QString loss() const { return prefix + QStringLiteral("/loss"); }
    QString trainAccuracy() const { return prefix + QStringLiteral("/train"); }
    QString testAccuracy() const { return prefix + QStringLiteral("/test"); }
    QString throughput() const { return prefix + QStringLiteral("/throughput"); }
    QString learningRate() const { return prefix + QStringLiteral("/lr"); }
    QString gradNorm() const { return prefix + QStringLiteral("/gradnorm"); }
    QString compute() const { return prefix + QStringLiteral("/compute"); }
    QString allReduceWait() const { return prefix + QStringLiteral("/wait"); }
    QString epochMarkers() const { return prefix + QStringLiteral("/epochs"); }
    QString phaseMarkers() const { return prefix + QStringLiteral("/phases"); }
    QString resizeMarkers() const { return prefix + QStringLiteral("/resize"); }
};

// What the plotter remembers between events of one run attempt.
struct RunPlotState {
    qint64 stepsPerEpoch = 0; // from the "started" event; 0 = unknown
    qint64 lastStep = 0;
    double secondsOffset = 0; // wall-clock of earlier attempts, added to this one's seconds
    double lastSeconds = 0; // the largest elapsed seconds seen (without the offset)
    int resumedFromEpoch = 0;
    int headEpochs = 0; // fine-tuning: the head trains alone for these epochs (Finetune)
    int epochs = 0;
    bool hostTimes = true; // step times split into compute and wait mean something (not on a GPU)
    // An elastic run's attempt on another number of workers than the attempt before it: its
    // size (0: the same) and why, in words (AttemptRecord::resize); marked at its start.
    int resizedTo = 0;
    QString resizeReason;
};

void addRunLines(const RunCharts &charts, const RunLines &lines, const QString &label, const QColor &color);
// Every chart of `charts` that is given, the optional ones included.
QList<MetricChart *> chartsOf(const RunCharts &charts);
void removeRunLines(const RunCharts &charts, const RunLines &lines);
// Appends what `event` measures; events without metrics only update `state`.
void plotRunEvent(
    const RunCharts &charts, const RunLines &lines, RunPlotState &state, const v1::RunEvent &event);

} // namespace scalelab::app
