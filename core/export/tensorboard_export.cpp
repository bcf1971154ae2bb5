#include "tensorboard_export.h"

#include "run_record.h"
#include "study_state.h"
#include "tensorboard_content.h"

#include <QDir>

#include <algorithm>

namespace scalelab::core {

using namespace tboard;

namespace {

// ---- A run's events -------------------------------------------------------------------

int epochOf(const v1::RunEvent &e)
{
    return e.has_step() ? e.step().epoch() : e.epoch().epoch();
}

// A run's attempts folded as buildSnapshot() folds them: an attempt resumed after epoch k
// replaces what earlier attempts recorded after epoch k; an epoch recorded again replaces
// the older record.
struct FoldedRun {
    std::optional<v1::RunStarted> started; // the last attempt's
    std::vector<v1::RunEvent> series; // step and epoch events, in order
    std::optional<v1::RunSummary> summary; // the last attempt's
};

FoldedRun fold(const Journal &journal, const QString &runId, const QList<AttemptRecord> &attempts)
{
    FoldedRun f;
    for (const AttemptRecord &a : attempts) {
        if (a.agents.isEmpty())
            continue;
        for (v1::RunEvent &e : journal.runEvents(runId, a.attempt, a.agents.first())) {
            if (e.has_started()) {
                const int keep = e.started().resumed_from_epoch();
                std::erase_if(f.series, [keep](const v1::RunEvent &s) { return epochOf(s) > keep; });
                f.started = e.started();
                f.summary.reset();
            } else if (e.has_step()) {
                f.series.push_back(std::move(e));
            } else if (e.has_epoch()) {
                const int epoch = e.epoch().epoch();
                std::erase_if(f.series,
                    [epoch](const v1::RunEvent &s) { return s.has_epoch() && epochOf(s) == epoch; });
                f.series.push_back(std::move(e));
            } else if (e.has_summary()) {
                f.summary = e.summary();
            }
        }
    }
    return f;
}

Result<QJsonObject> writeFoldedRun(const RunFolder &f, const FoldedRun &folded, const RunResult &run,
    const RunOutcome *outcome, TensorBoardWriter &w, qint64 *count)
{
    if (const Status cleared = clearEventFiles(f.folder); !cleared)
        return cleared;
    if (const Status opened = w.open(f.folder, f.startSecs); !opened)
        return opened;
    const v1::RunStarted *started = folded.started ? &*folded.started : nullptr;
    const QJsonObject hparams = hparamsOf(f.config, started, f.dataset, f.synthetic);
    const bool synthetic = isSyntheticLabel(hparams);
    if (const Status s = w.addText(QStringLiteral("run/description"), 0,
            f.description
                + QStringLiteral("\n\nState: %1 after %2 attempt%3.%4")
                      .arg(run.state)
                      .arg(run.attempts.size())
                      .arg(run.attempts.size() == 1 ? QString() : QStringLiteral("s"))
                      .arg(run.stateReason.isEmpty() ? QString() : QStringLiteral(" ") + run.stateReason)
                + (synthetic && !f.synthetic ? syntheticText(true) : QString()),
            f.startSecs);
        !s)
        return s;
    if (const Status s = w.addHParamsSessionStart({ hparams, groupName(hparams), f.startSecs }, f.startSecs);
        !s)
        return s;
    const bool hostTimes = hostTimesOf(started);
    qint64 lastStep = 0;
    double lastWall = f.startSecs;
    for (const v1::RunEvent &e : folded.series) {
        const Status s = e.has_step() ? writeStep(w, e, hostTimes, count) : writeEpoch(w, e, count);
        if (!s)
            return s;
        if (e.has_step())
            lastStep = std::max<qint64>(lastStep, e.step().step());
        lastWall = std::max(lastWall, seconds(e.unix_ms()));
    }
    const double endWall
        = run.attempts.last().endedUnixMs > 0 ? seconds(run.attempts.last().endedUnixMs) : lastWall;
    if (const Status s = writeRunOutcome(w, run, outcome, lastStep, endWall, count); !s)
        return s;
    if (const Status s = writeSessionEnd(w, run, endWall); !s)
        return s;
    if (const Status s = w.close(); !s)
        return s;
    return hparams;
}

Result<TensorBoardExport> exportStudy(
    const Journal &journal, const QString &studyId, const QString &onlyRun, const QString &dir)
{
    const StudyState state = StudyState::replay(journal.events(studyId));
    const StudySnapshot snapshot = buildSnapshot(state, journal);
    const StudyResults results = snapshot.tune ? StudyResults {} : computeStudyResults(snapshot);
    if (!onlyRun.isEmpty()) {
        const auto it = std::find_if(snapshot.runs.cbegin(), snapshot.runs.cend(),
            [&](const RunResult &r) { return r.runId == onlyRun; });
        if (it == snapshot.runs.cend() || it->attempts.isEmpty())
            return Status::failure(Status::Code::FailedPrecondition,
                QStringLiteral("run %1 has not started yet: it has nothing to export").arg(onlyRun));
    }
    if (const Status claimed = claimFolder(dir, studyId); !claimed)
        return claimed;
    TensorBoardExport out;
    out.dir = dir;
    out.owner = studyId;
    const double created = snapshot.createdUnixMs > 0 ? seconds(snapshot.createdUnixMs) : nowSeconds();
    QList<QJsonObject> sessions;
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const RunResult &run = snapshot.runs[i];
        if ((!onlyRun.isEmpty() && run.runId != onlyRun) || run.attempts.isEmpty())
            continue; // never started: nothing to show
        RunFolder f = studyRunFolder(dir, snapshot, run);
        f.startSecs
            = run.attempts.first().startedUnixMs > 0 ? seconds(run.attempts.first().startedUnixMs) : created;
        const RunOutcome *outcome = i < results.runs.size() ? &results.runs[i] : nullptr;
        TensorBoardWriter w;
        const Result<QJsonObject> hparams
            = writeFoldedRun(f, fold(journal, run.runId, run.attempts), run, outcome, w, &out.scalars);
        if (!hparams)
            return Status::failure(hparams.code(), hparams.error());
        sessions << *hparams;
        out.synthetic = out.synthetic || isSyntheticLabel(*hparams);
        out.files << relativeTo(dir, w.path());
        ++out.runs;
    }
    if (!onlyRun.isEmpty())
        return out;
    // The experiment, in the root run, declares what the sessions hold.
    if (const Status cleared = clearEventFiles(dir); !cleared)
        return cleared;
    TensorBoardWriter root;
    if (const Status opened = root.open(dir, created); !opened)
        return opened;
    const Status experiment = root.addHParamsExperiment(
        experimentOf(snapshot.name.isEmpty() ? snapshot.studyId : snapshot.name,
            experimentText(snapshot, out.synthetic), created, sessions, !snapshot.tune),
        created);
    if (!experiment)
        return experiment;
    if (const Status closed = root.close(); !closed)
        return closed;
    out.files.prepend(relativeTo(dir, root.path()));
    TensorBoardWriter study;
    StudySnapshot labelled = snapshot;
    labelled.synthetic = out.synthetic;
    if (const Status written = writeStudyFolder(dir, labelled, results, study, &out.scalars); !written)
        return written;
    out.files << relativeTo(dir, study.path());
    return out;
}

Result<TensorBoardExport> exportSingleRun(
    const Journal &journal, const SingleRunEntry &entry, const QString &dir)
{
    if (const Status claimed = claimFolder(dir, entry.runId); !claimed)
        return claimed;
    // What the snapshot would say of a study's run, from the Run tab's record.
    RunResult run;
    run.runId = entry.runId;
    run.config = singleRunConfig(entry.request);
    run.state = RunRecord::stateName(entry.state);
    AttemptRecord attempt;
    attempt.agents = { entry.agent };
    attempt.startedUnixMs = entry.launchedUnixMs;
    attempt.endedUnixMs = entry.endedUnixMs;
    run.attempts << attempt;
    const FoldedRun folded = fold(journal, entry.runId, run.attempts);
    if (folded.summary && folded.summary->state() == v1::SUCCEEDED)
        run.wallSeconds = folded.summary->wall_seconds();
    RunFolder f = singleRunFolder(dir, entry.runId, entry.request);
    f.startSecs = entry.launchedUnixMs > 0 ? seconds(entry.launchedUnixMs) : nowSeconds();
    TensorBoardExport out;
    out.dir = dir;
    out.owner = entry.runId;
    TensorBoardWriter w;
    const Result<QJsonObject> hparams = writeFoldedRun(f, folded, run, nullptr, w, &out.scalars);
    if (!hparams)
        return Status::failure(hparams.code(), hparams.error());
    out.synthetic = isSyntheticLabel(*hparams);
    out.files << relativeTo(dir, w.path());
    out.runs = 1;
    return out;
}

} // namespace

QStringList tensorBoardTags()
{
    return scalarTags();
}

QString tensorBoardRunFolder(const QString &studyId, const QString &runId, int workers, int batchSize)
{
    const QString prefix = studyId + QLatin1Char('-');
    const QString name = !studyId.isEmpty() && runId.startsWith(prefix) ? runId.mid(prefix.size()) : runId;
    return QStringLiteral("%1-%2worker%3-b%4")
        .arg(name)
        .arg(workers)
        .arg(workers == 1 ? QString() : QStringLiteral("s"))
        .arg(batchSize);
}

Result<TensorBoardExport> exportToTensorBoard(const Journal &journal, const QString &id, const QString &dir)
{
    if (id.isEmpty() || dir.isEmpty())
        return Status::failure(
            Status::Code::InvalidArgument, QStringLiteral("say which study or run, and where to"));
    if (journal.hasStudy(id))
        return exportStudy(journal, id, {}, dir);
    // A study's run: "s1-r02" belongs to the study whose id prefixes it.
    for (const QString &studyId : journal.studyIds())
        if (id.startsWith(studyId + QLatin1Char('-')) && StudyState::replay(journal.events(studyId)).run(id))
            return exportStudy(journal, studyId, id, dir);
    for (const SingleRunEntry &entry : journal.singleRuns())
        if (entry.runId == id)
            return exportSingleRun(journal, entry, dir);
    return Status::failure(Status::Code::NotFound,
        QStringLiteral("no study or run %1 in %2 (see `scalelab-cli study list`, and `study show ID` for a "
                       "study's runs)")
            .arg(id, journal.path()));
}

} // namespace scalelab::core
