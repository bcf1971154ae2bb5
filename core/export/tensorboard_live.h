// The live form of tensorboard_export.h, for `scalelab-cli run|study run --tensorboard DIR`:
// the same folders, tags and hparams, written as a run's events arrive (files flushed after
// each batch), so TensorBoard shows a run while it trains. Differences from an export
// after the end: the experiment declares the hyperparameters without their domains (the
// values rank 0 reports are not known yet), and a retried run's attempt that resumes from
// a checkpoint starts with a SessionLog START at its first step, which TensorBoard's loader
// takes as "drop what came from this step on" (its epoch series, whose step is the epoch,
// may then show a retrained epoch twice; `export tensorboard` after the end writes each
// once).
// One thread (the one that receives the events); no Qt object.
#pragma once

#include "core_status.h"
#include "journal.h"
#include "study_model.h"
#include "tensorboard_writer.h"

#include "scalelab/v1/agent.pb.h"

#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <vector>

namespace scalelab::core {

class TensorBoardLive {
public:
    explicit TensorBoardLive(QString dir);
    ~TensorBoardLive();
    TensorBoardLive(const TensorBoardLive &) = delete;
    TensorBoardLive &operator=(const TensorBoardLive &) = delete;

    // A study: claims the folder, writes the hparams experiment and what the journal holds
    // of its runs already (a `study watch` after an interruption), then waits for apply().
    Status startStudy(const Journal &journal, const QString &studyId);
    // One run started by `scalelab-cli run` (not in a journal); its end comes with its events.
    Status startRun(const v1::StartWorkersRequest &request);
    // New events of one attempt of a run, in order; runs it does not know are ignored.
    Status apply(const QString &runId, int attempt, const std::vector<v1::RunEvent> &events);
    // A study's end: each run's outcome (its hparams status, run/* scalars) and the study's
    // scaling, from the runner's last snapshot. Closes the files.
    Status finish(const StudySnapshot &snapshot);
    // Flushes and closes every file (also done by the destructor).
    Status close();

    QString dir() const { return m_dir; }
    QStringList files() const;

    struct Track; // one run's folder and writer (tensorboard_live.cpp)

private:
    QString m_dir;
    QString m_studyId;
    std::map<QString, std::unique_ptr<Track>> m_tracks; // by run id
    std::vector<std::unique_ptr<TensorBoardWriter>> m_others; // experiment, study folder
};

} // namespace scalelab::core
