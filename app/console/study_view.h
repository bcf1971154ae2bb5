// The console's study panel: design a plan (or load one), see how many runs it makes,
// where each would go and which cannot be placed, launch it, follow every run in a
// table, cancel, reopen a study after a crash, and export its report.
// The StudyRunner works on a thread of its own (its gRPC calls block); this widget
// reads the journal through its own connection and redraws on a coalescing timer.
#pragma once

#include "journal.h"
#include "study_runner.h"

#include <QPointer>
#include <QThread>
#include <QTimer>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace scalelab::console {

class StudyView : public QWidget {
    Q_OBJECT
public:
    explicit StudyView(QWidget *parent = nullptr);
    ~StudyView() override;

    // Where the journal lives (STATE_DIR/journal.sqlite). False with a message on failure.
    bool openJournal(const QString &stateDir, QString *error);
    void setAgents(const QList<core::AgentEndpoint> &agents);
    void setDefaultDataset(const QString &dataset);

    // The plan the form describes, and every problem with it (by field).
    v1::StudyPlan planFromForm(QStringList *problems) const;
    void setForm(const v1::StudyPlan &plan);

    bool launch(QString *error); // the form's plan, as a new study
    bool open(const QString &studyId, QString *error); // reattach and drive to the end
    QString currentStudy() const { return m_studyId; }
    core::StudySnapshot snapshot() const;
    QTableWidget *runsTable() const { return m_runs; }
    QLabel *problemsLabel() const { return m_problems; }

Q_SIGNALS:
    void studyFinished(const QString &state);

private:
    void buildUi();
    void preview();
    void refresh();
    void refreshStudyList();
    void stopRunner();
    void exportReport();
    void loadPlan();
    void savePlan();

    core::Journal m_journal; // the GUI thread's connection
    QList<core::AgentEndpoint> m_agents;
    QString m_studyId;
    QThread m_thread;
    QPointer<core::StudyRunner> m_runner;
    QTimer m_redraw;
    bool m_dirty = false;

    QLineEdit *m_name = nullptr;
    QLineEdit *m_dataset = nullptr;
    QLineEdit *m_workers = nullptr;
    QLineEdit *m_batch = nullptr;
    QLineEdit *m_epochs = nullptr;
    QLineEdit *m_gpus = nullptr;
    QLineEdit *m_threads = nullptr;
    QLineEdit *m_precision = nullptr;
    QLineEdit *m_lrRule = nullptr;
    QSpinBox *m_repeats = nullptr;
    QSpinBox *m_maxFailures = nullptr;
    QDoubleSpinBox *m_target = nullptr;
    QSpinBox *m_maxTrain = nullptr;
    QComboBox *m_placement = nullptr;
    QLabel *m_problems = nullptr;
    QLabel *m_status = nullptr;
    QComboBox *m_studies = nullptr;
    QTableWidget *m_runs = nullptr;
    QPushButton *m_launch = nullptr;
    QPushButton *m_cancel = nullptr;
};

} // namespace scalelab::console
