// The TorchScript modules a plan names by file. A plan may say "file:net.pt" (relative to
// the plan's folder) wherever it names a model: training.model, training.initialWeights,
// grid.model and a tune's space of models. When the study is created each file is copied
// into the console's store (<state>/models/HEX.pt, by content) and its value becomes
// "sha256:HEX", with the file's name in the plan's modelNames: the journal, the reports
// and `study rerun` then name exactly that module, and the runner sends it from the store
// to every agent that hosts a rank (model_upload.h), whatever the plan's folder holds later.
//
//   if (const Status resolved = resolvePlanModels(&plan, planDir, storeDir); !resolved) ...
#pragma once

#include "core_status.h"
#include "scalelab/v1/study.pb.h"

#include <QString>
#include <QStringList>

namespace scalelab::core {

// Every "file:PATH" value of the plan, as written.
QStringList planModelFiles(const v1::StudyPlan &plan);

// Every "sha256:HEX" value of the plan (after resolvePlanModels), each once.
QStringList planModelSums(const v1::StudyPlan &plan);

// Copies each file the plan names into `store` and names it by its sum there; a file that
// cannot be read or is over the size limit fails, naming the field and the file.
Status resolvePlanModels(v1::StudyPlan *plan, const QString &planDir, const QString &store);

// The store's file of "sha256:HEX" (or "HEX"), or why there is none.
Result<QString> storedModelFile(const QString &store, const QString &model);

// How a run's model reads in tables: a built-in's name, a module's file name from the plan
// ("net.pt"), or "TorchScript 4dbdc10f" when the plan does not name it.
QString modelDisplayName(const v1::StudyPlan &plan, const QString &model);

} // namespace scalelab::core
