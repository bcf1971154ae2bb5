// How `scalelab-cli study` shows a study: as one JSON object (--json) or as text (the runs
// table with speedup and efficiency against the baseline, a tune's trials, where each run's
// step time goes, the network between the hosts, the scaling model's predictions).
#pragma once

#include "study_model.h"

#include <QJsonObject>
#include <QStringList>

namespace scalelab::app {

// The study, its runs and results as `study show --json` and `study watch --json` print it.
QJsonObject studyJson(const core::StudySnapshot &s);

// A tune's trials, a line each (rung by rung), for the live view and `study show`.
QStringList tuneTable(const core::StudySnapshot &s);

// The study in words and tables on stdout.
void printStudy(const core::StudySnapshot &s);

} // namespace scalelab::app
