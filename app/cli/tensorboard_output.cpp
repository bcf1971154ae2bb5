#include "tensorboard_output.h"

#include "cli_common.h"

namespace scalelab::app {

void addTensorBoardOption(QCommandLineParser &parser)
{
    parser.addOption({ QStringLiteral("tensorboard"),
        QStringLiteral(
            "Also write TensorBoard event files into this folder as the runs train: a folder per run "
            "with its scalars and hyperparameters, and a study's scaling (open with `tensorboard --logdir "
            "DIR`)."),
        QStringLiteral("dir") });
}

TensorBoardOutput::TensorBoardOutput(const QCommandLineParser &parser)
{
    if (parser.isSet(QStringLiteral("tensorboard")))
        m_live = std::make_unique<core::TensorBoardLive>(parser.value(QStringLiteral("tensorboard")));
}

core::Status TensorBoardOutput::startStudy(const core::Journal &journal, const QString &studyId)
{
    return m_live ? m_live->startStudy(journal, studyId) : core::Status::success();
}

core::Status TensorBoardOutput::startRun(const v1::StartWorkersRequest &request)
{
    return m_live ? m_live->startRun(request) : core::Status::success();
}

void TensorBoardOutput::apply(const QString &runId, int attempt, const std::vector<v1::RunEvent> &events)
{
    if (!m_live)
        return;
    if (const core::Status written = m_live->apply(runId, attempt, events); !written)
        fail(written);
}

void TensorBoardOutput::finish(const core::StudySnapshot &snapshot)
{
    if (!m_live)
        return;
    if (const core::Status written = m_live->finish(snapshot); !written) {
        fail(written);
        return;
    }
    close();
}

void TensorBoardOutput::close()
{
    if (!m_live)
        return;
    if (const core::Status closed = m_live->close(); !closed) {
        fail(closed);
        return;
    }
    err() << "TensorBoard: " << m_live->files().size() << " event file(s) in " << m_live->dir()
          << " (open with: tensorboard --logdir " << m_live->dir() << ")\n";
    err().flush();
    m_live.reset();
}

void TensorBoardOutput::fail(const core::Status &status)
{
    err() << "scalelab-cli: TensorBoard: " << status.error() << "; no more TensorBoard events are written\n";
    err().flush();
    (void)m_live->close(); // what was written stays readable; the failure is said above
    m_live.reset();
}

} // namespace scalelab::app
