// The tables a study's report and a tune's share: attempts, nodes, recipes, models and
// software, each built from the snapshot alone (report_content.h puts them in a report).
//
// Thread: any (values only).
#pragma once

#include "report_content.h"
#include "study_model.h"

namespace scalelab::core {

// Retries and failures: the attempts that did not simply succeed, with why.
ReportTable attemptTable(const StudySnapshot &snapshot);
// The machines the agents run on.
ReportTable nodeTable(const StudySnapshot &snapshot);
// What each run trained with, after defaults and scaling rules, as its worker reported it.
ReportTable recipeTable(const StudySnapshot &snapshot);
// The models trained: parameters, gradient bytes and forward FLOPs.
ReportTable modelTable(const StudySnapshot &snapshot);
// The software versions the agents and workers reported.
ReportTable softwareTable(const StudySnapshot &snapshot);

} // namespace scalelab::core
