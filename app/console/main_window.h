// The console's main window: connects to an agent (or starts a local one), launches a
// run from a small form and plots its live loss, accuracy and throughput; earlier runs
// of the session stay overlaid for comparison until cleared.
// Threading: gRPC calls run on the thread pool and report back with queued calls;
// stream events are drained on the GUI thread and charts redraw on a 40 ms
// coalescing timer, so the window never waits on the network.
#pragma once

#include "agent_client.h"
#include "journal.h"
#include "local_agent.h"
#include "progress_meter.h"
#include "run_plot.h"
#include "run_record.h"
#include "run_watch.h"

#include <QList>
#include <QMap>
#include <QMainWindow>
#include <QPointF>
#include <QTimer>

#include <memory>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QSettings;
class QPushButton;
class QSpinBox;
class QTabWidget;

namespace scalelab::app {
class AgentsView;
class RunHistoryView;
class StudyView;
} // namespace scalelab::app

namespace scalelab::app {

class ChartControls;
class MetricChart;

struct ConsoleOptions {
    QString agentEndpoint; // empty = start a local agent
    // Agents to add to the Agents tab (and its saved list) when not there yet, named by
    // their address, with `token` and the SCALELAB_TLS_* settings (--agents-file, ...).
    QStringList moreAgents;
    QString token;
    core::LocalAgentOptions localAgent;
    QString stateDir; // the study journal (journal.sqlite) and agents.json; empty = neither
    // Form presets; with launchWhenConnected the run starts as soon as the agent answers.
    // 0 (or empty) = as the form was left last time, else 1 worker, batch 64, 2 epochs.
    QString dataset;
    int workers = 0;
    int batchSize = 0;
    int epochs = 0;
    bool launchWhenConnected = false;
    // Studies: reattach at start-up to the study left unfinished (a console that was
    // killed mid-study picks it up again), or open this one.
    bool reopenStudies = true;
    QString openStudy;
    QString planFile; // loaded into the study designer
    bool launchStudyWhenConnected = false; // launch the designer's plan once an agent answers
    QString theme; // "system" | "light" | "dark"; empty = as last time
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(ConsoleOptions options, QWidget *parent = nullptr);
    ~MainWindow() override;

    bool isConnected() const { return m_client != nullptr && m_connected; }
    const core::RunRecord *currentRun() const { return m_record.get(); }
    // What the charts draw for the current run (for tests and exports).
    QList<QPointF> lossPoints() const;
    QList<QPointF> testAccuracyPoints() const;
    MetricChart *lossChart() const { return m_lossChart; }
    MetricChart *accuracyChart() const { return m_accuracyChart; }
    MetricChart *throughputChart() const { return m_throughputChart; }
    MetricChart *stepTimeChart() const { return m_stepTimeChart; }
    MetricChart *learningRateChart() const { return m_lrChart; }
    MetricChart *gradNormChart() const { return m_gradNormChart; }
    app::StudyView *studyView() const { return m_studyView; }
    ChartControls *chartControls() const { return m_chartControls; }
    QTabWidget *tabs() const { return m_tabs; }
    // Window layout, chart controls and the study form, kept in STATE_DIR/console.ini.
    QString settingsPath() const;
    app::AgentsView *agentsView() const { return m_agentsView; }
    // Single runs of this console, kept in the journal: listed, reopened, drawn side by side.
    app::RunHistoryView *runHistory() const { return m_history; }

public Q_SLOTS:
    void connectToAgent();
    void addAgentsFromCommandLine();
    // A plan's agents (HOST:PORT, file:PATH, dns:NAME:PORT) join the Agents tab.
    void addAgentsFromPlan(const QStringList &specs, const QString &baseDir);
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

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    // Adds agents to the Agents tab with the console's token; says so in the log, with where
    // they came from.
    void addAgentAddresses(const QStringList &addresses, const QString &source);
    void buildMenus();
    void saveSettings() const;
    void restoreSettings();
    void reopenStudy();
    void setTheme(const QString &name);
    void buildUi();
    QWidget *buildCharts();
    void addRunToCharts(const QString &runId, const QString &label);
    RunCharts runCharts() const;
    void unmarkCurrentRun(); // its epoch boundaries off the charts, before another run is shown
    void plotEvent(const v1::RunEvent &event);
    void clearOldRuns();
    void refreshInventory();
    void applyInventory(const v1::DescribeResponse &inventory);
    void drainEvents();
    // Folds one event of the current run into its record, charts, progress and log.
    void applyEvent(const v1::RunEvent &event);
    void refreshRunSummary();
    // The history: loaded from the journal at start-up; a row per run, kept up to date.
    void loadHistory();
    void updateHistoryRow(const QString &runId);
    void setRunDrawn(const QString &runId, bool drawn);
    void forgetRun(const QString &runId);
    void followCurrentRun(qint64 fromSeq);
    QString agentKey() const; // how the journal names the connected agent
    void saveRunForm(QSettings &settings) const;
    void restoreRunForm(const QSettings &settings);
    void setStatus(const QString &text, bool error = false);
    void setRunning(bool running);
    template <typename Work, typename Done> void inBackground(Work work, Done done);

    ConsoleOptions m_options;
    core::LocalAgent *m_localAgent = nullptr; // owned by the Agents tab
    std::shared_ptr<core::AgentClient> m_client;
    bool m_connected = false;
    std::unique_ptr<core::RunWatch> m_watch;
    std::unique_ptr<core::RunRecord> m_record;
    QTimer m_refreshTimer;
    bool m_dirty = false;
    int m_runsPlotted = 0; // colours runs in the order they were launched
    RunPlotState m_plotState; // of the current run

    QLineEdit *m_agentEdit = nullptr;
    QPushButton *m_connectButton = nullptr;
    QLabel *m_agentLabel = nullptr;
    QComboBox *m_datasetCombo = nullptr;
    QString m_pendingDataset; // a set just created, to select once the inventory lists it
    QPushButton *m_syntheticButton = nullptr;
    QSpinBox *m_workersSpin = nullptr;
    QSpinBox *m_batchSpin = nullptr;
    QSpinBox *m_epochsSpin = nullptr;
    QDoubleSpinBox *m_lrSpin = nullptr;
    QSpinBox *m_threadsSpin = nullptr;
    QPushButton *m_launchButton = nullptr;
    QPushButton *m_stopButton = nullptr;
    QLabel *m_formError = nullptr;
    QLabel *m_runLabel = nullptr;
    QProgressBar *m_runProgress = nullptr; // epoch and step x/y and the ETA of the run
    core::ProgressMeter m_meter;
    QLabel *m_syntheticBanner = nullptr;
    MetricChart *m_lossChart = nullptr;
    MetricChart *m_accuracyChart = nullptr;
    MetricChart *m_throughputChart = nullptr;
    MetricChart *m_stepTimeChart = nullptr;
    MetricChart *m_lrChart = nullptr;
    MetricChart *m_gradNormChart = nullptr;
    QTabWidget *m_stepCharts = nullptr; // throughput, step time, learning rate, gradient norm
    ChartControls *m_chartControls = nullptr;
    QPushButton *m_clearRunsButton = nullptr;
    QPlainTextEdit *m_log = nullptr;
    app::StudyView *m_studyView = nullptr;
    QTabWidget *m_tabs = nullptr;
    bool m_studyReopened = false; // the start-up reattach is done once
    QTimer m_launchDeadline; // --launch-study: launch with the agents that answer by then
    QString m_theme = QStringLiteral("system");
    app::AgentsView *m_agentsView = nullptr;
    core::Journal m_journal; // single runs; closed when there is no state folder
    QMap<QString, core::SingleRunEntry> m_runs; // the history, by run id
    QMap<QString, QColor> m_runColors; // of the runs drawn
    bool m_launching = false; // StartWorkers in flight: the current run may not change
    app::RunHistoryView *m_history = nullptr;
};

} // namespace scalelab::app
