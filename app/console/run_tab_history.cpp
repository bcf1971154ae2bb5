// RunTab, its past runs: the history list (read from the journal off the GUI thread's
// timers), a run reopened or drawn beside the others, and a run forgotten. The tab itself (the
// form, the run it follows, its log) is run_tab.cpp; the contract is run_tab.h.
#include "run_tab.h"

#include "agents_view.h"
#include "run_history.h"
#include "run_tab_charts.h"

#include <QDateTime>
#include <QLabel>
#include <QPlainTextEdit>
#include <QTreeWidget>

namespace scalelab::app {

void RunTab::clearOldRuns()
{
    const QString current = m_record ? m_record->runId() : QString();
    for (const QString &id : m_charts->drawnRuns())
        if (id != current) {
            setRunDrawn(id, false);
            m_history->setDrawn(id, false);
        }
    m_charts->restartColorCycle(current.isEmpty() ? 0 : 1);
}

void RunTab::setRunDrawn(const QString &runId, bool drawn)
{
    if (!drawn) {
        if (m_record && m_record->runId() == runId)
            return; // the current run is always drawn
        m_charts->removeRun(runId);
        return;
    }
    if (m_charts->isDrawn(runId) || !m_runs.contains(runId))
        return;
    const core::SingleRunEntry &entry = m_runs[runId];
    m_charts->addRun(runId, entry.label);
    RunPlotState state;
    RunCharts charts = m_charts->charts();
    charts.epochMarkers = false;
    readJournal([&](const core::Journal &journal) {
        for (const auto &event : journal.runEvents(runId, 1, entry.agent))
            plotRunEvent(charts, { runId }, state, event);
    });
}

void RunTab::forgetRun(const QString &runId)
{
    if ((m_record && m_record->runId() == runId) || m_launching)
        return; // the current run stays
    m_writer.forgetSingleRun(runId); // a failure is said in the status bar (failed)
    setRunDrawn(runId, false);
    m_runs.remove(runId);
    m_history->removeRun(runId);
    setStatus(tr("Removed run %1 from the history (its agent still has it)").arg(runId));
}

namespace {

RunHistoryResult resultOf(const core::RunRecord &r)
{
    RunHistoryResult result;
    if (!r.epochs().empty()) {
        result.testAccuracy = r.epochs().back().test_accuracy();
        result.epochsDone = r.epochs().back().epoch();
    }
    result.imagesPerSecond = r.summary() ? r.summary()->images_per_second() : r.lastImagesPerSecond();
    result.epochs = r.started() ? r.started()->effective().epochs() : 0;
    result.synthetic = r.synthetic();
    return result;
}

} // namespace

void RunTab::loadHistory()
{
    if (!m_journal.isOpen()) {
        // Nothing to keep runs in: say so rather than list runs that cannot be redrawn.
        m_history->tree()->hide();
        auto *note = new QLabel(tr("Runs are kept, listed and reopened when the console has a state folder "
                                   "(--state-dir or SCALELAB_STATE_DIR)."));
        note->setWordWrap(true);
        m_history->layout()->addWidget(note);
        return;
    }
    for (core::SingleRunEntry entry : m_journal.singleRuns()) {
        core::RunRecord record(entry.runId);
        for (const auto &event : m_journal.runEvents(entry.runId, 1, entry.agent))
            record.apply(event);
        // The events are the truth: a console that died between storing them and the state
        // left the state behind.
        if (record.state() != entry.state && record.lastSeq() > 0) {
            entry.state = record.state();
            entry.endedUnixMs = record.terminal() ? entry.endedUnixMs : 0; // when is not known
            m_writer.setSingleRunState(entry.runId, entry.state, entry.endedUnixMs);
        }
        m_runs.insert(entry.runId, entry);
        m_history->setRun(entry, resultOf(record));
    }
    // The newest run comes back as it was left: drawn, its log and summary shown.
    if (const QStringList ids = m_history->runIds(); !ids.isEmpty())
        openRun(ids.first());
}

void RunTab::updateHistoryRow(const QString &runId)
{
    if (m_runs.contains(runId) && m_record && m_record->runId() == runId)
        m_history->setRun(m_runs[runId], resultOf(*m_record));
}

void RunTab::openRun(const QString &runId)
{
    if (!m_runs.contains(runId) || (m_record && m_record->runId() == runId))
        return;
    if (m_watch || m_launching) {
        setStatus(
            tr("Run %1 is being followed: open another run once it has ended").arg(m_record->runId()), true);
        return;
    }
    const core::SingleRunEntry entry = m_runs[runId];
    setRunDrawn(runId, false); // drawn again below, from its first event
    unmarkCurrentRun();
    m_record = std::make_unique<core::RunRecord>(runId);
    m_meter = core::ProgressMeter();
    m_plotState = {};
    m_log->clear();
    m_syntheticBanner->hide();
    m_charts->addRun(runId, entry.label);
    m_history->setCurrent(runId);
    readJournal([&](const core::Journal &journal) {
        for (const auto &event : journal.runEvents(runId, 1, entry.agent))
            applyEvent(event);
    });
    m_dirty = true;
    refreshRunSummary();
    updateHistoryRow(runId);
    if (m_record->terminal())
        return;
    if (m_connected && entry.agent == agentKey())
        followCurrentRun(m_record->lastSeq() + 1);
    else
        setStatus(tr("Run %1 had not ended when last seen; it runs on %2: connect to that agent to follow it")
                      .arg(runId, entry.agent));
}

} // namespace scalelab::app
