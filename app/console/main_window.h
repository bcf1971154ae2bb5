// The console's main window, the shell around its three tabs: Run (one run at a time,
// RunTab), Study (StudyView) and Agents (AgentsView). It owns the tabs, the menus, the
// status bar, the theme and the window's settings (STATE_DIR/console.ini: layout, tab,
// theme, chart controls, the study and run forms), opens the study journal, adds the
// agents named on the command line or by a plan, and reopens (or launches) a study once
// its agents answer. Runs are the Run tab's work (connect, launch, follow, history): the
// window forwards its public calls about them there, shows the tab's status messages,
// and writes its own messages and every error into the tab's log.
// Ownership: the window owns every tab; at close it destroys the Study tab, then the Run
// tab (which stops following its run and waits for its calls in flight), before the
// Agents tab, which owns the local agent they may be using.
// Threading: GUI thread only; the tabs run their network calls off it (see each tab).
#pragma once

#include "console_options.h"
#include "run_tab.h"
#include "run_tab_charts.h"

#include <QList>
#include <QMainWindow>
#include <QPointF>
#include <QTimer>

class QTabWidget;

namespace scalelab::app {
class AgentsView;
class RunHistoryView;
class StudyView;
} // namespace scalelab::app

namespace scalelab::app {

class ChartControls;
class MetricChart;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(ConsoleOptions options, QWidget *parent = nullptr);
    ~MainWindow() override;

    bool isConnected() const { return m_runTab->isConnected(); }
    const core::RunRecord *currentRun() const { return m_runTab->currentRun(); }
    // What the charts draw for the current run (for tests and exports).
    QList<QPointF> lossPoints() const { return m_runTab->lossPoints(); }
    QList<QPointF> testAccuracyPoints() const { return m_runTab->testAccuracyPoints(); }
    MetricChart *lossChart() const { return m_runTab->charts()->lossChart(); }
    MetricChart *accuracyChart() const { return m_runTab->charts()->accuracyChart(); }
    MetricChart *throughputChart() const { return m_runTab->charts()->throughputChart(); }
    MetricChart *stepTimeChart() const { return m_runTab->charts()->stepTimeChart(); }
    MetricChart *learningRateChart() const { return m_runTab->charts()->learningRateChart(); }
    MetricChart *gradNormChart() const { return m_runTab->charts()->gradNormChart(); }
    app::StudyView *studyView() const { return m_studyView; }
    ChartControls *chartControls() const { return m_runTab->charts()->controls(); }
    QTabWidget *tabs() const { return m_tabs; }
    // Window layout, chart controls and the study form, kept in STATE_DIR/console.ini.
    QString settingsPath() const;
    app::AgentsView *agentsView() const { return m_agentsView; }
    // Single runs of this console, kept in the journal: listed, reopened, drawn side by side.
    app::RunHistoryView *runHistory() const { return m_runTab->history(); }

public Q_SLOTS:
    // connectToAgent, launchRun, stopRun, openRun and createSyntheticDataset are the Run
    // tab's, forwarded (see RunTab).
    void connectToAgent();
    void addAgentsFromCommandLine();
    // A plan's agents (HOST:PORT, file:PATH, dns:NAME:PORT) join the Agents tab.
    void addAgentsFromPlan(const QStringList &specs, const QString &baseDir);
    void launchRun();
    void stopRun();
    void openRun(const QString &runId);
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
    // The status bar (timeoutMs 0 = until the next message); an error goes to the log too.
    void setStatus(const QString &text, bool error = false, int timeoutMs = 0);

    ConsoleOptions m_options;
    RunTab *m_runTab = nullptr;
    app::StudyView *m_studyView = nullptr;
    QTabWidget *m_tabs = nullptr;
    bool m_studyReopened = false; // the start-up reattach is done once
    QTimer m_launchDeadline; // --launch-study: launch with the agents that answer by then
    QString m_theme = QStringLiteral("system");
    app::AgentsView *m_agentsView = nullptr;
};

} // namespace scalelab::app
