// The charts of the study reports, as descriptions for the chart engine (chart_painter.h):
// a study's loss and accuracy curves and its scaling charts versus workers, a tune's metric
// curves and its hyperparameters; and the configuration labels their legends use. Pure
// functions from a snapshot (and its results) to ChartSpec values the caller owns; nothing
// is painted here.
//
// Thread: any (values only); painting the specs is chart_painter.h's and has its rules.
#pragma once

#include "chart_painter.h"
#include "study_model.h"
#include "study_results.h"

#include <QList>
#include <QString>

namespace scalelab::core {

// The charts of a study report: loss and test accuracy curves, throughput, speedup and
// efficiency versus workers (with the ideal lines). Everything comes from the snapshot.
QList<ChartSpec> studyCharts(const StudySnapshot &snapshot, const StudyResults &results);

// Per model, when the study has a target it reached: the predicted epochs to it against the
// global batch (goodput_model.h, with its band), the runs' measured epochs, and B_noise
// marked: where more workers stop buying time to accuracy.
QList<ChartSpec> criticalBatchCharts(const StudySnapshot &snapshot);

struct TuneReport;
// The charts of a tune (issue 18): its metric against epochs for every trial (stopped trials
// faded, rungs marked), and a parallel-coordinates chart of the hyperparameters coloured by
// each trial's final metric (log axes for parameters drawn in log space).
QList<ChartSpec> tuneCharts(const StudySnapshot &snapshot, const TuneReport &tune);

// A short readable name of a configuration for legends and tables, e.g. "4 workers · batch 64";
// it names only the axes that vary across `configs`.
QString configLabel(const RunConfig &config, const QList<ConfigResult> &configs);

} // namespace scalelab::core
