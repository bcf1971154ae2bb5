// Study plans: read, validate and expand a v1::StudyPlan (proto/scalelab/v1/study.proto)
// into the runs it asks for. Pure functions; the only I/O is loading and saving a file.
#pragma once

#include "core_status.h"
#include "study_model.h"

#include "scalelab/v1/study.pb.h"

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

#include <optional>

namespace scalelab::core {

struct PlannedRun {
    QString runId;
    RunConfig config;
    int repeat = 0;
    int maxFailures = 2;
    // A tune's trial (tune_plan.h): the hyperparameters drawn for it, and its ASHA bracket.
    bool trial = false;
    QJsonObject params;
    int bracket = 0;
};

// Parses a plan in protobuf's JSON mapping, or says why it is not one (unknown field,
// wrong type, not JSON at all). Not validated: see checkPlan().
Checked<v1::StudyPlan> parsePlanJson(const QByteArray &json);
// Loads and validates: the plan, or every problem found, each naming its field.
Checked<v1::StudyPlan> loadPlan(const QString &path);
[[nodiscard]] QByteArray planToJson(const v1::StudyPlan &plan);
Status savePlan(const v1::StudyPlan &plan, const QString &path);

// Success when the plan is valid, else every problem of it, one sentence each, naming the
// field ("grid.workers[1]: must be 1 or more (got 0)").
CheckStatus checkPlan(const v1::StudyPlan &plan);

// The runs of a valid plan: the baseline (unless skipped), then the grid's cross
// product, each repeated. Run ids are "<studyId>-r<NN>", stable for the same plan.
// A tune's runs are its trials, "<studyId>-t<NN>" (drawTrials).
QList<PlannedRun> expandPlan(const v1::StudyPlan &plan, const QString &studyId);

// The learning rate a range test chose for a plan with learningRateAuto.
struct FoundLearningRate {
    double learningRate = 0;
    int batch = 0; // the global batch the test ran at
};

// What the agent is asked to train for one run of the plan. With learningRateAuto, `found`
// is the range test's choice (the run cannot start before there is one). `repeat` (0-based)
// shifts the seed when the plan's repeatSeeds is "vary".
v1::RunSpec runSpecFor(const v1::StudyPlan &plan, const RunConfig &config,
    const std::optional<FoundLearningRate> &found = std::nullopt, int repeat = 0);

// The same, for a planned run: a trial's drawn hyperparameters applied.
v1::RunSpec runSpecFor(const v1::StudyPlan &plan, const PlannedRun &run,
    const std::optional<FoundLearningRate> &found = std::nullopt);

// The plan's "agents" entries (HOST:PORT, file:PATH, dns:NAME:PORT), as written.
QStringList planAgentSpecs(const v1::StudyPlan &plan);

// A plan that runs quickly on a laptop: baseline + 2 workers on a synthetic set.
v1::StudyPlan examplePlan(const QString &dataset);

// "st-20261122-101500-3fa2": sortable, unique enough, safe as a folder name.
QString newStudyId();

} // namespace scalelab::core
