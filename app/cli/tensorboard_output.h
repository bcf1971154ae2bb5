// --tensorboard DIR of `scalelab-cli run` and `study run|rerun|watch`: the run's (or
// study's) TensorBoard event files written as the events arrive (core/export,
// tensorboard_live.h). Writing them is secondary to training: a write that fails is said
// once on standard error and the command goes on without them.
// One thread (the command's); inactive when the option is not given.
#pragma once

#include "journal.h"
#include "study_model.h"
#include "tensorboard_live.h"

#include <QCommandLineParser>

#include <memory>
#include <vector>

namespace scalelab::app {

void addTensorBoardOption(QCommandLineParser &parser);

class TensorBoardOutput {
public:
    explicit TensorBoardOutput(const QCommandLineParser &parser);

    bool active() const { return m_live != nullptr; }
    // Claims the folder and writes what is known so far; a failure here stops the command
    // before it starts anything (the caller says so and exits).
    core::Status startStudy(const core::Journal &journal, const QString &studyId);
    core::Status startRun(const v1::StartWorkersRequest &request);
    void apply(const QString &runId, int attempt, const std::vector<v1::RunEvent> &events);
    // A study's end (outcomes, scaling); then the files are closed and where they are said.
    void finish(const core::StudySnapshot &snapshot);
    // Closes the files and says where they are.
    void close();

private:
    void fail(const core::Status &status);

    std::unique_ptr<core::TensorBoardLive> m_live;
};

} // namespace scalelab::app
