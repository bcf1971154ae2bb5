// The console's Run tab: one training run at a time. On the left the agent it talks to
// (Connect), the run form (RunForm), the shown run's summary and progress, and the
// history of single runs (RunHistoryView); on the right the SYNTHETIC DATA banner and the
// charts (RunTabCharts) with the log. It launches a run from the form, follows its event
// stream (RunWatch), stores every event in the journal (through JournalWriter, on a thread
// of its own), and draws earlier runs of the
// history beside the current one; a run left unfinished (the console was closed or
// killed) is followed again, from where the journal stopped, once its agent is connected.
//
// Ownership: MainWindow owns the tab, a page of its tabs, and destroys it before the
// Agents tab. The tab owns its widgets, the agent client, the run it shows (RunRecord),
// the watch that follows it, its journal writer and its own connection to the journal for
// reading (single runs only; both closed when there is no state folder). `agents` is the shell's Agents tab,
// which must outlive the tab: Connect picks its first enabled agent, or starts the console's local agent
// there, and lists an address typed here as a session agent.
//
// Signals to the shell: connectedChanged when the agent answers (true) or a call to it
// fails (false); statusMessage for the window's status bar (timeoutMs 0 = until the next
// one). The shell writes the errors, as its own, into this tab's log with appendLog.
//
// Threading: GUI thread only. gRPC calls run on the global thread pool and report back
// with queued calls; stream events are drained on the GUI thread and the summary redraws
// on a 40 ms coalescing timer, so the tab never waits on the network. Journal writes
// (every batch of events, each change of state) are queued to JournalWriter's thread, so
// it never waits on the disk's commits either; the journal is read on the GUI thread only
// at start-up and when a run of the history is opened or drawn. The destructor stops
// following the run, waits for the calls in flight and commits the queued writes.
#pragma once

#include "agent_client.h"
#include "console_options.h"
#include "journal.h"
#include "journal_writer.h"
#include "progress_meter.h"
#include "run_plot.h"
#include "run_record.h"
#include "run_watch.h"

#include <QList>
#include <QMap>
#include <QPointF>
#include <QTimer>
#include <QWidget>

#include <functional>
#include <memory>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSettings;

namespace scalelab::app {

class AgentsView;
class RunForm;
class RunHistoryView;
class RunTabCharts;

class RunTab : public QWidget {
    Q_OBJECT
public:
    RunTab(ConsoleOptions options, AgentsView *agents, QWidget *parent = nullptr);
    ~RunTab() override;

    bool isConnected() const { return m_client != nullptr && m_connected; }
    const core::RunRecord *currentRun() const { return m_record.get(); }
    // What the charts draw for the current run (for tests and exports).
    QList<QPointF> lossPoints() const;
    QList<QPointF> testAccuracyPoints() const;
    RunTabCharts *charts() const { return m_charts; }
    RunHistoryView *history() const { return m_history; }

    // The history's connection to STATE_DIR/journal.sqlite; an error is said in the log.
    void openJournal(const QString &stateDir);
    // Lists the journal's runs and shows the newest as it was left; once, at start-up.
    void loadHistory();
    void appendLog(const QString &line);
    // The form and the per-step chart shown, kept in console.ini.
    void saveRunForm(QSettings &settings) const;
    void restoreRunForm(const QSettings &settings);

public Q_SLOTS:
    void connectToAgent();
    void launchRun();
    void stopRun();
    // Shows a run of the history as the current one (its charts, log and summary, from the
    // journal), and follows it live when it has not ended and its agent is connected.
    void openRun(const QString &runId);
    // Generates a SYNTHETIC set on the agent and selects it: `trainImages` / `testImages`
    // of the "shapes" kind (closer to real data than "patterns"), named by its size.
    void createSyntheticDataset(int trainImages = 2000, int testImages = 500);

Q_SIGNALS:
    void connectedChanged(bool connected);
    void statusMessage(const QString &text, bool error, int timeoutMs);

private:
    void buildUi();
    void setStatus(const QString &text, bool error = false);
    void unmarkCurrentRun(); // its epoch boundaries off the charts, before another run is shown
    void plotEvent(const v1::RunEvent &event);
    void clearOldRuns();
    void refreshInventory();
    void applyInventory(const v1::DescribeResponse &inventory);
    void drainEvents();
    // Folds one event of the current run into its record, charts, progress and log.
    void applyEvent(const v1::RunEvent &event);
    void refreshRunSummary();
    // The history: a row per run, kept up to date.
    void updateHistoryRow(const QString &runId);
    void setRunDrawn(const QString &runId, bool drawn);
    void forgetRun(const QString &runId);
    void followCurrentRun(qint64 fromSeq);
    QString agentKey() const; // how the journal names the connected agent
    void setRunning(bool running);
    // Reads through the tab's connection, once what was asked of the writer is committed.
    void readJournal(const std::function<void(const core::Journal &)> &read);
    template <typename Work, typename Done> void inBackground(Work work, Done done);

    ConsoleOptions m_options;
    AgentsView *m_agentsView = nullptr; // the shell's
    core::LocalAgent *m_localAgent = nullptr; // owned by the Agents tab
    std::shared_ptr<core::AgentClient> m_client;
    bool m_connected = false;
    std::unique_ptr<core::RunWatch> m_watch;
    std::unique_ptr<core::RunRecord> m_record;
    QTimer m_refreshTimer;
    bool m_dirty = false;
    RunPlotState m_plotState; // of the current run
    core::ProgressMeter m_meter;
    JournalWriter m_writer; // every write, on its thread; not open when there is no state folder
    core::Journal m_journal; // reads alone; closed when there is no state folder
    QMap<QString, core::SingleRunEntry> m_runs; // the history, by run id
    bool m_launching = false; // StartWorkers in flight: the current run may not change
    QString m_pendingDataset; // a set just created, to select once the inventory lists it

    QLineEdit *m_agentEdit = nullptr;
    QPushButton *m_connectButton = nullptr;
    QLabel *m_agentLabel = nullptr;
    RunForm *m_form = nullptr;
    QLabel *m_runLabel = nullptr;
    QProgressBar *m_runProgress = nullptr; // epoch and step x/y and the ETA of the run
    QLabel *m_syntheticBanner = nullptr;
    RunTabCharts *m_charts = nullptr;
    QPlainTextEdit *m_log = nullptr;
    RunHistoryView *m_history = nullptr;
};

} // namespace scalelab::app
