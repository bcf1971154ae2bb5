// The console's study panel: design a plan (or load one), see how many runs it makes,
// where each would go and which cannot be placed, launch it, follow every run in a
// table, cancel, reopen a study after a crash, and export its report.
// The StudyRunner works on a thread of its own (its gRPC calls block); this widget
// reads the journal through its own connection and redraws on a coalescing timer.
#pragma once

#include "journal.h"
#include "progress_meter.h"
#include "study_runner.h"

#include <QPointer>
#include <QSet>
#include <QThread>
#include <QTimer>
#include <QWidget>

#include <map>

class QCheckBox;
class QDialog;
class QComboBox;
class QDoubleSpinBox;
class QSettings;
class QSplitter;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace scalelab::app {
class StudyCharts;
class TuneCharts;
}

namespace scalelab::app {

class FrozenColumns;
class RunDetails;

class StudyView : public QWidget {
    Q_OBJECT
public:
    // The runs table's columns. The identifying ones (run, configuration) stay in place
    // when the table scrolls sideways; attempt, agents and wall time are hidden until
    // chosen (right-click the header), and the choice is remembered.
    enum RunColumn {
        RunCol,
        ConfigCol,
        StateCol,
        ProgressCol,
        AccuracyCol,
        ImagesCol,
        SpeedupCol,
        EfficiencyCol,
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
    core::Status loadPlanFile(const QString &path); // into the form
    core::Status open(const QString &studyId); // reattach and drive to the end
    QString currentStudy() const { return m_studyId; }
    core::StudySnapshot snapshot() const;
    QTableWidget *runsTable() const { return m_runs; }
    FrozenColumns *frozenColumns() const { return m_frozen; }
    QString runIdAt(int row) const; // the table shows the short name ("r01")
    void setRunColumnVisible(int column, bool visible);
    QLabel *problemsLabel() const { return m_problems; }
    app::StudyCharts *charts() const { return m_charts; }
    app::TuneCharts *tuneCharts() const { return m_tune; }
    QLineEdit *runFilter() const { return m_filter; }

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

public Q_SLOTS:
    void exportReport();
    void loadPlan();
    void savePlan();

Q_SIGNALS:
    void studyFinished(const QString &state);
    // A loaded or launched plan names agents (HOST:PORT, file:PATH or dns:NAME:PORT; relative
    // files are in `baseDir`): the main window adds them to the Agents tab.
    void agentsNamed(const QStringList &specs, const QString &baseDir);

private:
    void buildUi();
    void preview();
    void updateDatasetChoices();
    void updateDatasetNote();
    // Runs the learning-rate range test for the designer's data set and batch (a dialog).
    void findLearningRate();
    void refresh();
    void refreshStudyList();
    void stopRunner();
    void applyFilter();
    void showRunMenu(const QPoint &position);

    core::Journal m_journal; // the GUI thread's connection
    QList<core::AgentEndpoint> m_agents;
    QMap<QString, v1::DescribeResponse> m_inventories; // by agent name
    QString m_studyId;
    v1::StudyPlan m_loaded; // the last plan set on the form: what the form does not show is kept
    QThread m_thread;
    QPointer<core::StudyRunner> m_runner;
    QTimer m_redraw;
    bool m_dirty = false;

    QLineEdit *m_name = nullptr;
    QLineEdit *m_dataset = nullptr;
    QComboBox *m_datasetPick = nullptr; // the data sets the agents have
    QLabel *m_datasetNote = nullptr; // SYNTHETIC, or on no agent
    QCheckBox *m_baseline = nullptr;
    QLineEdit *m_workers = nullptr;
    QLineEdit *m_batch = nullptr;
    QLineEdit *m_epochs = nullptr;
    QLineEdit *m_gpus = nullptr;
    QLineEdit *m_threads = nullptr;
    QComboBox *m_precision = nullptr; // "fp32", "bf16" or both
    QComboBox *m_lrRule = nullptr; // "none", "linear" or both
    QLineEdit *m_lr = nullptr; // empty, a number, or "auto"
    QPointer<QDialog> m_lrDialog; // the range test, while open
    QStringList m_agentsWithDataset; // of the designer's data set, as the note found them
    QSpinBox *m_repeats = nullptr;
    QComboBox *m_repeatSeeds = nullptr; // "same" | "vary"
    QSpinBox *m_maxFailures = nullptr;
    QDoubleSpinBox *m_target = nullptr;
    QSpinBox *m_maxTrain = nullptr;
    QComboBox *m_placement = nullptr;
    QLineEdit *m_planAgents = nullptr;
    QString m_planDir; // folder of the loaded plan: its relative file: agents are read from there
    QLabel *m_problems = nullptr;
    // The designer's fields by the plan path validatePlan names them with ("grid.batchSize"),
    // with their labels: a problem is shown in the label's words and its field is marked.
    struct FormField {
        QString path;
        QString label;
        QWidget *widget = nullptr;
    };
    QList<FormField> m_fields;
    QString describeProblem(const QString &problem, QWidget **field) const;
    void markProblems(const QStringList &problems);
    QLabel *m_status = nullptr;
    QLabel *m_resultsNote = nullptr; // a baseline warning, or why speedups are missing
    QComboBox *m_studies = nullptr;
    QTableWidget *m_runs = nullptr;
    FrozenColumns *m_frozen = nullptr;
    // Live progress per run, from the runner's events: the attempt it measures, and how far.
    std::map<QString, std::pair<int, core::ProgressMeter>> m_progress;
    QLineEdit *m_filter = nullptr;
    QComboBox *m_stateFilter = nullptr;
    QSplitter *m_split = nullptr;
    app::StudyCharts *m_charts = nullptr;
    app::TuneCharts *m_tune = nullptr; // shown instead of m_charts for a tune
    QSet<int> m_hiddenForTune; // runs-table columns hidden because a tune is shown
    QPushButton *m_launch = nullptr;
    QPushButton *m_cancel = nullptr; // enabled while the open study runs
    QPushButton *m_export = nullptr; // enabled while a study is open
};

} // namespace scalelab::app
