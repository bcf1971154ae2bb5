// The reports' tables of why a study scales (docs/scaling.md): where each run's step time
// went, and per model the scaling model fitted on the study's runs with its predictions.
#pragma once

#include "report_content.h"

namespace scalelab::core {

// One row per run with a measured anatomy.
ReportTable anatomyTable(const StudySnapshot &snapshot);
// The network between the study's hosts, probed at its start: a row per probe (none when
// it was not probed: a caption says why).
ReportTable networkTable(const StudySnapshot &snapshot);
// One table per model: the fit, its held-out checks, and predictions out to 512 workers.
QList<ReportTable> scalingTables(const StudySnapshot &snapshot);
// One table per model when the study has a target accuracy: epochs and time to it at the
// same worker counts, from the measured gradient noise scale (goodput_model.h), beside the
// throughput's speedup and efficiency.
QList<ReportTable> timeToTargetTables(const StudySnapshot &snapshot);

} // namespace scalelab::core
