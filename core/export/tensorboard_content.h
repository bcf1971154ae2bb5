// What a run and a study look like in TensorBoard, shared by the export after the fact
// (tensorboard_export.h) and the live writer (tensorboard_live.h): the scalars of a step
// and an epoch event, a run's hyperparameters and the experiment declaring them, the
// descriptions, the study's scaling folder, and the claimed log folder. core/export's
// own; other folders use the two headers above. Pure functions and writes through a
// TensorBoardWriter, one thread at a time.
#pragma once

#include "core_status.h"
#include "study_model.h"
#include "study_results.h"
#include "tensorboard_writer.h"

#include "scalelab/v1/agent.pb.h"

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

#include <optional>

namespace scalelab::core::tboard {

inline constexpr const char *kStudyFolder = "study";

double seconds(qint64 unixMs);
double nowSeconds();

// Every scalar tag written, and the sentence TensorBoard shows beside its chart.
QStringList scalarTags();
QString describe(const QString &tag);

// The scalars of a step event (train/*, step/*; the step split only with `hostTimes`, a
// CPU run) and of an epoch event (epoch/*, step = epoch), counted into `count`.
Status writeStep(TensorBoardWriter &w, const v1::RunEvent &e, bool hostTimes, qint64 *count);
Status writeEpoch(TensorBoardWriter &w, const v1::RunEvent &e, qint64 *count);
// Host-side times split a step on a CPU run only (worker.proto).
bool hostTimesOf(const v1::RunStarted *started);

// A run's hyperparameters: its configuration, and with `started` what rank 0 trains with.
// The dataset value ends in " (SYNTHETIC)" for generated data.
QJsonObject hparamsOf(
    const RunConfig &c, const v1::RunStarted *started, const QString &dataset, bool synthetic);
bool isSyntheticLabel(const QJsonObject &hparams);
// The session group: equal hparams, one group (TensorBoard's own rule).
QString groupName(const QJsonObject &hparams);
// The experiment in the log folder's root: every hparam (domains from `sessions`) and the
// metrics its HParams tab compares (run/speedup and run/efficiency with `study`).
HParamsExperiment experimentOf(const QString &name, const QString &description, double created,
    const QList<QJsonObject> &sessions, bool study);
QString experimentText(const StudySnapshot &s, bool synthetic);
// The hparams status of a run state; none while it may still change.
std::optional<HParamsStatus> endStatus(const QString &state);

// Markdown for text summaries; the SYNTHETIC paragraph is empty for real data.
QString syntheticText(bool synthetic);
QString runDescription(const QString &runId, const QString &studyLine, const RunConfig &c,
    const QString &params, const QString &dataset, bool synthetic);
QString studyLineOf(const StudySnapshot &s);

// run/* (wall-clock, time to target, speedup, efficiency) at `step`, and the hparams end.
Status writeRunOutcome(TensorBoardWriter &w, const RunResult &run, const RunOutcome *outcome, qint64 step,
    double wall, qint64 *count);
Status writeSessionEnd(TensorBoardWriter &w, const RunResult &run, double wall);
// DIR/study: its description and scaling/* (step = workers); `w` is opened and closed.
Status writeStudyFolder(
    const QString &dir, const StudySnapshot &s, const StudyResults &r, TensorBoardWriter &w, qint64 *count);

// Claims `dir` for `owner` (a study or single run id): created and marked, or refused when
// it holds another owner's export or event files ScaleLab did not write.
Status claimFolder(const QString &dir, const QString &owner);
// Removes the owner's earlier event files from `folder` (claimed), which are written again.
Status clearEventFiles(const QString &folder);
QString relativeTo(const QString &dir, const QString &path);

// One run's folder: where, what it trains, and its description.
struct RunFolder {
    QString runId;
    QString folder; // path
    RunConfig config;
    QString description; // markdown, without the run's state
    QString dataset;
    bool synthetic = false;
    double startSecs = 0;
};
RunFolder studyRunFolder(const QString &dir, const StudySnapshot &s, const RunResult &run);
RunFolder singleRunFolder(const QString &dir, const QString &runId, const v1::StartWorkersRequest &request);

} // namespace scalelab::core::tboard
