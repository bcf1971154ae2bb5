#include "tensorboard_live.h"

#include "run_record.h"
#include "study_results.h"
#include "study_state.h"
#include "tensorboard_content.h"

#include <QDir>

#include <algorithm>

namespace scalelab::core {

using namespace tboard;

struct TensorBoardLive::Track {
    RunFolder folder;
    bool single = false; // a `scalelab-cli run`: its summary ends it
    bool hostTimes = true;
    bool sessionStarted = false;
    int attempt = 0;
    qint64 lastStep = 0;
    double lastWall = 0;
    qint64 scalars = 0;
    TensorBoardWriter writer;

    Status ensureOpen(double wall)
    {
        return writer.isOpen() ? Status::success() : writer.open(folder.folder, wall);
    }
};

TensorBoardLive::TensorBoardLive(QString dir)
    : m_dir(std::move(dir))
{ }

TensorBoardLive::~TensorBoardLive()
{
    (void)close(); // best effort; callers that care call close() and check it
}

Status TensorBoardLive::startStudy(const Journal &journal, const QString &studyId)
{
    if (const Status claimed = claimFolder(m_dir, studyId); !claimed)
        return claimed;
    m_studyId = studyId;
    const StudySnapshot snapshot = buildSnapshot(StudyState::replay(journal.events(studyId)), journal);
    QList<QJsonObject> sessions;
    for (const RunResult &run : snapshot.runs) {
        auto track = std::make_unique<Track>();
        track->folder = studyRunFolder(m_dir, snapshot, run);
        if (const Status cleared = clearEventFiles(track->folder.folder); !cleared)
            return cleared;
        sessions << hparamsOf(run.config, nullptr, snapshot.dataset, snapshot.synthetic);
        m_tracks[run.runId] = std::move(track);
    }
    if (const Status cleared = clearEventFiles(m_dir); !cleared)
        return cleared;
    if (const Status cleared = clearEventFiles(QDir(m_dir).filePath(QLatin1String(kStudyFolder))); !cleared)
        return cleared;
    const double created = snapshot.createdUnixMs > 0 ? seconds(snapshot.createdUnixMs) : nowSeconds();
    auto root = std::make_unique<TensorBoardWriter>();
    if (const Status opened = root->open(m_dir, created); !opened)
        return opened;
    const Status experiment = root->addHParamsExperiment(
        experimentOf(snapshot.name.isEmpty() ? studyId : snapshot.name,
            experimentText(snapshot, snapshot.synthetic), created, sessions, !snapshot.tune),
        created);
    if (!experiment)
        return experiment;
    if (const Status flushed = root->flush(); !flushed)
        return flushed;
    m_others.push_back(std::move(root));
    // What the journal holds already (a study watched again after an interruption).
    for (const RunResult &run : snapshot.runs)
        for (const AttemptRecord &a : run.attempts)
            if (!a.agents.isEmpty())
                if (const Status applied
                    = apply(run.runId, a.attempt, journal.runEvents(run.runId, a.attempt, a.agents.first()));
                    !applied)
                    return applied;
    return Status::success();
}

Status TensorBoardLive::startRun(const v1::StartWorkersRequest &request)
{
    const QString runId = QString::fromStdString(request.run_id());
    if (const Status claimed = claimFolder(m_dir, runId); !claimed)
        return claimed;
    auto track = std::make_unique<Track>();
    track->single = true;
    track->folder = singleRunFolder(m_dir, runId, request);
    if (const Status cleared = clearEventFiles(track->folder.folder); !cleared)
        return cleared;
    m_tracks[runId] = std::move(track);
    return Status::success();
}

Status TensorBoardLive::apply(const QString &runId, int attempt, const std::vector<v1::RunEvent> &events)
{
    const auto it = m_tracks.find(runId);
    if (it == m_tracks.end())
        return Status::success();
    Track &t = *it->second;
    for (const v1::RunEvent &e : events) {
        const double wall = e.unix_ms() > 0 ? seconds(e.unix_ms()) : nowSeconds();
        if (e.has_started()) {
            const v1::RunStarted &s = e.started();
            t.hostTimes = hostTimesOf(&s);
            if (const Status opened = t.ensureOpen(wall); !opened)
                return opened;
            if (!t.sessionStarted) {
                t.sessionStarted = true;
                const QJsonObject hparams
                    = hparamsOf(t.folder.config, &s, t.folder.dataset, t.folder.synthetic);
                const bool synthetic = isSyntheticLabel(hparams);
                if (const Status written = t.writer.addText(QStringLiteral("run/description"), 0,
                        t.folder.description
                            + (synthetic && !t.folder.synthetic ? syntheticText(true) : QString()),
                        wall);
                    !written)
                    return written;
                if (const Status written
                    = t.writer.addHParamsSessionStart({ hparams, groupName(hparams), wall }, wall);
                    !written)
                    return written;
            } else if (attempt != t.attempt) {
                // Steps from this one on are trained again: TensorBoard drops the older ones.
                const qint64 from = qint64(s.resumed_from_epoch()) * s.steps_per_epoch() + 1;
                if (const Status written = t.writer.addRestart(from, wall); !written)
                    return written;
            }
            t.attempt = attempt;
        } else if (e.has_step() || e.has_epoch()) {
            if (const Status opened = t.ensureOpen(wall); !opened)
                return opened;
            const Status written = e.has_step() ? writeStep(t.writer, e, t.hostTimes, &t.scalars)
                                                : writeEpoch(t.writer, e, &t.scalars);
            if (!written)
                return written;
            if (e.has_step())
                t.lastStep = std::max<qint64>(t.lastStep, e.step().step());
            t.lastWall = std::max(t.lastWall, wall);
        } else if (e.has_summary() && t.single && t.writer.isOpen()) {
            const v1::RunSummary &s = e.summary();
            RunResult run;
            run.state = RunRecord::stateName(s.state());
            if (s.state() == v1::SUCCEEDED)
                run.wallSeconds = s.wall_seconds();
            if (const Status written = writeRunOutcome(t.writer, run, nullptr, t.lastStep, wall, &t.scalars);
                !written)
                return written;
            if (const std::optional<HParamsStatus> status = endStatus(run.state))
                if (const Status written = t.writer.addHParamsSessionEnd(*status, wall, wall); !written)
                    return written;
        }
    }
    return t.writer.isOpen() ? t.writer.flush() : Status::success();
}

Status TensorBoardLive::finish(const StudySnapshot &snapshot)
{
    const StudyResults results = snapshot.tune ? StudyResults {} : computeStudyResults(snapshot);
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const RunResult &run = snapshot.runs[i];
        const auto it = m_tracks.find(run.runId);
        if (it == m_tracks.end() || !it->second->writer.isOpen())
            continue;
        Track &t = *it->second;
        const double wall = run.attempts.isEmpty() || run.attempts.last().endedUnixMs <= 0
            ? std::max(t.lastWall, nowSeconds())
            : seconds(run.attempts.last().endedUnixMs);
        const RunOutcome *outcome = i < results.runs.size() ? &results.runs[i] : nullptr;
        if (const Status written = writeRunOutcome(t.writer, run, outcome, t.lastStep, wall, &t.scalars);
            !written)
            return written;
        if (const Status written = writeSessionEnd(t.writer, run, wall); !written)
            return written;
    }
    if (!m_studyId.isEmpty()) {
        auto study = std::make_unique<TensorBoardWriter>();
        qint64 scalars = 0;
        const Status written = writeStudyFolder(m_dir, snapshot, results, *study, &scalars);
        m_others.push_back(std::move(study));
        if (!written)
            return written;
    }
    return close();
}

Status TensorBoardLive::close()
{
    Status first = Status::success();
    for (auto &[id, track] : m_tracks)
        if (const Status closed = track->writer.close(); !closed && first)
            first = closed;
    for (auto &w : m_others)
        if (const Status closed = w->close(); !closed && first)
            first = closed;
    return first;
}

QStringList TensorBoardLive::files() const
{
    QStringList out;
    for (const auto &w : m_others)
        if (!w->path().isEmpty())
            out << relativeTo(m_dir, w->path());
    for (const auto &[id, track] : m_tracks)
        if (!track->writer.path().isEmpty())
            out << relativeTo(m_dir, track->writer.path());
    return out;
}

} // namespace scalelab::core
