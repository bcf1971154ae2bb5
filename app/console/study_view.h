// The console's study panel: design a plan (or load one), see how many runs it makes,
// where each would go and which cannot be placed, launch it, follow every run in a
// table, cancel, reopen a study after a crash, and export its report.
// Its parts: the plan form (StudyDesigner), the runs table (RunsTable) and the thread
// the StudyRunner works on (StudyRunnerHost, as its gRPC calls block); this widget ties
// them together, previews the designer's plan and redraws on a coalescing timer. What a
// redraw shows (the study replayed, its results, its runs' new events) is read by a
// JournalReader on its thread; the widget's own connection serves only user actions
// (launch, open, cancel, retry, continue) and the list of studies. GUI thread only.
#pragma once

#include "journal.h"
#include "journal_reader.h"
#include "progress_meter.h"
#include "report.h"
#include "runs_table.h"
#include "study_charts.h"
#include "study_designer.h"
#include "study_results.h"
#include "study_runner.h"
#include "study_runner_host.h"

#include <QTimer>
#include <QWidget>

class QComboBox;
class QSettings;
class QSplitter;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;

namespace scalelab::app {
class TuneCharts;
} // namespace scalelab::app

namespace scalelab::app {

class FrozenColumns;
class RunDetails;

class StudyView : public QWidget {
    Q_OBJECT
public:
    // The runs table's columns. The identifying ones (run, configuration) stay in place
    // when the table scrolls sideways; attempt, agents and wall time are hidden until
    // chosen (right-click the header), and the choice is remembered; workers shows while
    // the study has an elastic run.
    enum RunColumn {
        RunCol,
        ConfigCol,
        StateCol,
        ProgressCol,
        WorkersCol, // the planned size ("2"), an elastic run's range ("1–2"), the sizes it trained at
        AccuracyCol,
        ImagesCol,
        SpeedupCol,
        EfficiencyCol,
        TargetCol, // speedup and efficiency by time to the target accuracy
        NoiseCol, // the gradient noise scale B_simple, and how far past it the global batch is
        AttemptCol,
        AgentsCol,
        WallCol,
        WhyCol,
        RunColumnCount
    };

    explicit StudyView(QWidget *parent = nullptr);
    ~StudyView() override;

    // Where the journal lives (STATE_DIR/journal.sqlite). False with a message on failure.
    core::Status openJournal(const QString &stateDir);
    void setAgents(const QList<core::AgentEndpoint> &agents);
    // What an agent has (data sets, slots): the designer offers its data sets and the
    // preview places runs on it without asking the agent again.
    void setInventory(const QString &agent, const v1::DescribeResponse &inventory);
    void setDefaultDataset(const QString &dataset);

    // The plan the form describes, and every problem with it (by field).
    v1::StudyPlan planFromForm(QStringList *problems) const;
    void setForm(const v1::StudyPlan &plan);

    core::Status launch(); // the form's plan, as a new study
    // What launching `plan` needs that the connected agents lack, one line each.
    QStringList launchNeeds(const v1::StudyPlan &plan) const;
    core::Status loadPlanFile(const QString &path); // into the form
    // Reattach and drive to the end; a study other than the open one also puts its plan in
    // the designer, unless `takePlan` is false (it was just launched from there).
    core::Status open(const QString &studyId, bool takePlan = true);
    QString currentStudy() const { return m_studyId; }
    // The study as last drawn (read off the GUI thread on the redraw); empty before.
    core::StudySnapshot snapshot() const;
    // Reads the redraws and the details dialogs ask for (tests check their thread).
    const JournalReader &journalReader() const { return m_reader; }
    QTableWidget *runsTable() const { return m_runs->table(); }
    FrozenColumns *frozenColumns() const { return m_runs->frozenColumns(); }
    QString runIdAt(int row) const; // the table shows the short name ("r01")
    void setRunColumnVisible(int column, bool visible);
    QLabel *problemsLabel() const { return m_designer->problemsLabel(); }
    app::StudyCharts *charts() const { return m_charts; }
    app::TuneCharts *tuneCharts() const { return m_tune; }
    QLineEdit *runFilter() const { return m_runs->filter(); }

    // One more attempt of a FAILED or CANCELLED run of the open study; the study is
    // driven again if it had ended.
    core::Status retryRun(const QString &runId);
    core::Status cancelRun(const QString &runId);
    // A tune's trial trains `moreEpochs` more epochs (StudyRunner::requestContinue).
    core::Status continueTrial(const QString &runId, int moreEpochs);
    RunDetails *showRunDetails(const QString &runId);
    // The unfinished study to reattach to at start-up: `preferred` when it is unfinished,
    // else the newest unfinished one; empty when every study has ended.
    QString unfinishedStudy(const QString &preferred) const;

    QString selectedRun() const; // the run selected in the table; empty when none

    void saveSettings(QSettings &settings) const;
    void restoreSettings(const QSettings &settings);

    // Writes the shown study's report on the thread pool; reportExported says when done.
    void exportReportTo(core::ReportFormat format, const QString &path);

public Q_SLOTS:
    void exportReport(); // asks where, writes, then opens what was written
    void loadPlan();
    void savePlan();

Q_SIGNALS:
    void studyFinished(const QString &state);
    // An export ended: the first file written, or empty when it failed.
    void reportExported(const QString &path);
    // A loaded or launched plan names agents (HOST:PORT, file:PATH or dns:NAME:PORT; relative
    // files are in `baseDir`): the main window adds them to the Agents tab.
    void agentsNamed(const QStringList &specs, const QString &baseDir);

private:
    void buildUi();
    void preview();
    // What a redraw draws, read on the reader's thread.
    struct StudyRead {
        core::StudySnapshot snapshot;
        core::StudyResults results;
        StudyCharts::AttemptEvents events;
    };
    void refresh(); // asks the reader; show() draws its answer
    void show(const StudyRead &read);
    void refreshStudyList();
    void showRunMenu(const QPoint &position);

    core::Journal m_journal; // the GUI thread's connection, for user actions
    JournalReader m_reader; // the redraw's and the details dialogs' reads
    StudyRunnerHost m_host; // the runner of the open study, on its thread; opens m_journal's file
    QList<core::AgentEndpoint> m_agents;
    QMap<QString, v1::DescribeResponse> m_inventories; // by agent name
    QString m_studyId;
    QString m_planDir; // folder of the loaded plan: its relative file: agents are read from there
    QTimer m_redraw;
    bool m_dirty = false;
    bool m_reading = false; // a redraw's read is on its way: the timer asks for no other
    core::StudySnapshot m_shown; // the last read drawn
    int m_shownStudy = 0; // counts changes of study: a read asked before one is not drawn
    bool m_openExported = false; // exportReport() opens what it wrote

    StudyDesigner *m_designer = nullptr;
    RunsTable *m_runs = nullptr;
    QLabel *m_status = nullptr;
    QLabel *m_resultsNote = nullptr; // a baseline warning, or why speedups are missing
    QComboBox *m_studies = nullptr;
    QSplitter *m_split = nullptr;
    app::StudyCharts *m_charts = nullptr;
    app::TuneCharts *m_tune = nullptr; // shown instead of m_charts for a tune
    QPushButton *m_cancel = nullptr; // enabled while the open study runs
    QPushButton *m_export = nullptr; // enabled while a study is open
};

} // namespace scalelab::app
