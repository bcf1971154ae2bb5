// A run's anatomy and network probe (study_model.h's RunAnatomy and RunNetwork), built from
// the events its rank 0 reported: each epoch's per-rank step sums (EpochMetrics.ranks) and
// the probe before training (RunStarted.network). buildSnapshot (study_state.cpp) keeps one
// EpochTimes per epoch a run kept, so an epoch trained again after a resume replaces the
// first one.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "study_model.h"

#include <QMap>

namespace scalelab::core {

// One epoch's steps on every rank, summed, and the time around them.
struct EpochTimes {
    double trainSeconds = 0;
    double evaluationSeconds = 0;
    QList<RankTimes> ranks; // perStep holds the epoch's sums here
};

EpochTimes epochTimesOf(const v1::EpochMetrics &metrics);
// The run's anatomy from its kept epochs' sums: means per step, and its straggler.
RunAnatomy anatomyOf(const QMap<int, EpochTimes> &epochs, double checkpointSeconds);
RunNetwork networkOf(const v1::NetworkProbe &probe);
// How much slower a run's ranks computed for sharing cores (RunStarted.core_share): on the
// busiest machine, the compute threads over its cores, or over one rank's threads when it
// has fewer cores than that (a rank alone is the reference), at least 1. 1 when not
// reported, and on a GPU (the compute is not on the cores).
double coreShareOf(const v1::RunStarted &started);

} // namespace scalelab::core
