// The study panel's plan form ("Study designer"): one field per part of a v1::StudyPlan
// the console lets a person edit, turned into a plan (planFromForm) and back (setForm),
// with every problem of the plan shown in the form's words and its field marked red.
// It offers the agents' data sets, says which agents hold the chosen one, and runs the
// learning-rate range test for it. What the form does not show (overrides, a tune's
// search space, training options) is kept from the last plan set on it.
//
// StudyView owns it (a child widget), tells it the agents and what they hold, and does
// what its buttons ask (launch, load, save): the designer never touches the journal, the
// runner or the runs table. An edit of a field emits changed(), except of the target
// accuracy and the placement, which have never asked for a new preview.
//
// GUI thread only.
#pragma once

#include "agent_endpoint.h"
#include "scalelab/v1/agent.pb.h"
#include "scalelab/v1/study.pb.h"

#include <QGroupBox>
#include <QMap>
#include <QPointer>
#include <QStringList>

class QCheckBox;
class QComboBox;
class QDialog;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace scalelab::app {

class StudyDesigner : public QGroupBox {
    Q_OBJECT
public:
    explicit StudyDesigner(QWidget *parent = nullptr);

    // The plan the form describes, and every problem with it (by field).
    v1::StudyPlan planFromForm(QStringList *problems) const;
    // Shows `plan`; a tune disables the grid's fields and the launch button says so.
    void setForm(const v1::StudyPlan &plan);

    // The agents the range test may run on (it prefers one that has the data set).
    void setAgents(const QList<core::AgentEndpoint> &agents);
    // What each agent has, by agent name: the data sets offered and the note under them.
    void setInventories(const QMap<QString, v1::DescribeResponse> &inventories);
    void setDefaultDataset(const QString &dataset);

    // The validation display, under the form. showProblems() lists `problems` in the
    // form's words and marks their fields (nothing is listed, and every mark cleared,
    // when there are none); showSummary() says what a valid plan makes, unmarked;
    // showMessage() says a launch or file error as it is.
    void showProblems(const QStringList &problems);
    void showSummary(const QString &text);
    // What launching would need (not a problem of the form): a note, not in the error colour.
    void showHint(const QString &text);
    void showMessage(const QString &text);
    QLabel *problemsLabel() const { return m_problems; }
    void setLaunchEnabled(bool enabled);

Q_SIGNALS:
    void changed(); // a field was edited (not the target accuracy or the placement)
    void launchRequested();
    void loadRequested();
    void saveRequested();

private:
    // The constructor's sections of the form, in order.
    void addStudySection(QFormLayout *form);
    void addGridSection(QFormLayout *form);
    void addRunSection(QFormLayout *form);
    void addButtons(QFormLayout *form);
    // A row of the form whose edits say changed().
    QLineEdit *addLine(QFormLayout *form, const QString &label, const QString &value, const QString &tip);
    QComboBox *addChoice(
        QFormLayout *form, const QString &label, const QStringList &items, const QString &tip);
    void updateDatasetChoices();
    void updateDatasetNote();
    // Runs the learning-rate range test for the designer's data set and batch (a dialog).
    void findLearningRate();
    QString describeProblem(const QString &problem, QWidget **field) const;

    QList<core::AgentEndpoint> m_agents;
    QMap<QString, v1::DescribeResponse> m_inventories; // by agent name
    v1::StudyPlan m_loaded; // the last plan set on the form: what the form does not show is kept

    QLineEdit *m_name = nullptr;
    QLineEdit *m_dataset = nullptr;
    QComboBox *m_datasetPick = nullptr; // the data sets the agents have
    QLabel *m_datasetNote = nullptr; // SYNTHETIC, or on no agent
    QCheckBox *m_baseline = nullptr;
    QLineEdit *m_workers = nullptr; // fixed sizes and elastic MIN:MAX ranges (grid.workerRanges)
    QLineEdit *m_batch = nullptr;
    QLineEdit *m_accumulation = nullptr; // grid.accumulationSteps; empty: the training's, else 1
    QLineEdit *m_epochs = nullptr;
    QLineEdit *m_gpus = nullptr;
    QLineEdit *m_threads = nullptr;
    QComboBox *m_precision = nullptr; // "fp32", "bf16" or both
    QComboBox *m_lrRule = nullptr; // one of worker::kLrRules, or a list of them
    QComboBox *m_model = nullptr; // one model, or a comma-separated list to compare (grid.model)
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
    QLabel *m_problems = nullptr;
    QPushButton *m_launch = nullptr;
    // The designer's fields by the plan path checkPlan names them with ("grid.batchSize"),
    // with their labels: a problem is shown in the label's words and its field is marked.
    struct FormField {
        QString path;
        QString label;
        QWidget *widget = nullptr;
    };
    QList<FormField> m_fields;
};

} // namespace scalelab::app
