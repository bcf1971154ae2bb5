// The Run tab's form for one run: data set (with "New synthetic set" to generate one on
// the agent), model, workers, batch size per worker, epochs, learning rate and threads per
// worker, an inline complaint, and Launch / Stop.
//
//   const core::RunRequest request = form->request(); // as the fields say, not validated
//   if (const auto valid = request.check(); !valid) form->showError(valid.error().join('\n'));
//
// The form sends nothing: its buttons and the synthetic-set menu are requests that RunTab
// carries out (launchRequested, stopRequested, syntheticRequested), and RunTab enables
// them as the agent and the run allow. The data sets are those of the agent's inventory
// (listDatasets); the one chosen is kept across inventories. The fields are kept in
// console.ini (save / restore); values given on the command line win over the saved ones.
// GUI thread only.
#pragma once

#include "console_options.h"
#include "run_request.h"

#include <QGroupBox>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSettings;
class QSpinBox;

namespace scalelab::app {

class RunForm : public QGroupBox {
    Q_OBJECT
public:
    // The command line's presets (workers, batch size, epochs, data set) fill the form.
    explicit RunForm(const ConsoleOptions &options, QWidget *parent = nullptr);

    core::RunRequest request() const;
    // Lists the inventory's data sets; selects `select` when given, else keeps the one
    // chosen (before the first inventory: the preset, or the one saved).
    void listDatasets(const v1::DescribeResponse &inventory, const QString &select);

    // The complaint under the fields (a refused value, a run the agent did not start).
    void showError(const QString &text);
    void hideError();

    void setLaunchEnabled(bool enabled);
    void setStopEnabled(bool enabled);
    void setSyntheticEnabled(bool enabled);

    // Adds a TorchScript module's file to the model choices and selects it.
    void chooseModelFile(const QString &path);

    void save(QSettings &settings) const;
    void restore(const QSettings &settings);

Q_SIGNALS:
    void launchRequested();
    void stopRequested();
    // A SYNTHETIC set of this size, chosen from the "New synthetic set" menu.
    void syntheticRequested(int trainImages, int testImages);

private:
    // The command line's values (0 / empty = not given); the data set to select is the
    // saved one when none was given.
    QString m_dataset;
    int m_givenWorkers = 0;
    int m_givenBatchSize = 0;
    int m_givenEpochs = 0;

    QComboBox *m_datasetCombo = nullptr;
    QPushButton *m_syntheticButton = nullptr;
    QComboBox *m_modelCombo = nullptr; // the worker contract's models
    QSpinBox *m_workersSpin = nullptr;
    QSpinBox *m_batchSpin = nullptr;
    QSpinBox *m_epochsSpin = nullptr;
    QDoubleSpinBox *m_lrSpin = nullptr;
    QSpinBox *m_threadsSpin = nullptr;
    QPushButton *m_launchButton = nullptr;
    QPushButton *m_stopButton = nullptr;
    QLabel *m_formError = nullptr;
};

} // namespace scalelab::app
