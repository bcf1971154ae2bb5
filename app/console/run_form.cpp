#include "run_form.h"

#include "worker_contract.h"

#include <QAbstractItemView>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

#include <utility>

namespace scalelab::app {

RunForm::RunForm(const ConsoleOptions &options, QWidget *parent)
    : QGroupBox(tr("Run"), parent)
    , m_dataset(options.dataset)
    , m_givenWorkers(options.workers)
    , m_givenBatchSize(options.batchSize)
    , m_givenEpochs(options.epochs)
{
    m_datasetCombo = new QComboBox;
    m_datasetCombo->setObjectName(QStringLiteral("datasetCombo"));
    m_syntheticButton = new QPushButton(tr("New synthetic set"));
    m_syntheticButton->setObjectName(QStringLiteral("syntheticButton"));
    m_syntheticButton->setToolTip(
        tr("Generate a SYNTHETIC CIFAR-format data set on the agent: choose its size"));
    auto *sizes = new QMenu(m_syntheticButton);
    for (const auto &[train, test] :
        { std::pair { 2000, 500 }, std::pair { 10000, 2000 }, std::pair { 50000, 10000 } })
        sizes->addAction(tr("%L1 train / %L2 test images%3")
                             .arg(train)
                             .arg(test)
                             .arg(train == 50000 ? tr(" (CIFAR-10's size)") : QString()),
            this, [this, train, test] { Q_EMIT syntheticRequested(train, test); });
    m_syntheticButton->setMenu(sizes);
    m_datasetCombo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_datasetCombo->setMinimumContentsLength(24);
    // A choice made answers the form's complaint about it.
    connect(m_datasetCombo, &QComboBox::currentIndexChanged, this, [this] { m_formError->hide(); });
    m_modelCombo = new QComboBox;
    m_modelCombo->setObjectName(QStringLiteral("modelCombo"));
    for (const auto name : worker::kModelNames) {
        const QString model = QString::fromLatin1(name.data(), qsizetype(name.size()));
        m_modelCombo->addItem(model, model);
    }
    m_modelCombo->addItem(tr("TorchScript file…"));
    m_modelCombo->setToolTip(
        tr("seed-cnn: the seed CNN (3.25 M parameters); resnet18: ResNet-18, CIFAR form "
           "(11.2 M); mobilenet_v2: MobileNetV2, CIFAR form (2.2 M); mini-cnn: 26 k parameters, "
           "for trying a cluster in seconds; or a module saved by "
           "torch.jit.script(model).save(path), sent to the agent by its content"));
    // "TorchScript file…" asks for one; the file chosen becomes an item of its own.
    connect(m_modelCombo, &QComboBox::activated, this, [this](int index) {
        if (!m_modelCombo->itemData(index).isNull())
            return;
        const QString path = QFileDialog::getOpenFileName(this, tr("TorchScript module"), QString(),
            tr("TorchScript modules (*.pt *.pth *.zip);;All files (*)"));
        if (path.isEmpty()) {
            m_modelCombo->setCurrentIndex(0);
            return;
        }
        chooseModelFile(path);
    });
    m_workersSpin = new QSpinBox;
    m_workersSpin->setObjectName(QStringLiteral("workersSpin"));
    m_workersSpin->setRange(0, 256); // 0 is refused with a message
    m_workersSpin->setValue(options.workers > 0 ? options.workers : 1);
    m_workersSpin->setToolTip(tr("Data-parallel workers (one process per rank, c10d Gloo); 1 = baseline"));
    m_batchSpin = new QSpinBox;
    m_batchSpin->setObjectName(QStringLiteral("batchSpin"));
    m_batchSpin->setRange(0, 65536); // 0 is refused with a message, not silently clamped
    m_batchSpin->setValue(options.batchSize > 0 ? options.batchSize : 64);
    m_epochsSpin = new QSpinBox;
    m_epochsSpin->setObjectName(QStringLiteral("epochsSpin"));
    m_epochsSpin->setRange(0, 10000);
    m_epochsSpin->setValue(options.epochs > 0 ? options.epochs : 2);
    m_lrSpin = new QDoubleSpinBox;
    m_lrSpin->setObjectName(QStringLiteral("lrSpin"));
    m_lrSpin->setDecimals(4);
    m_lrSpin->setRange(0, 10);
    m_lrSpin->setSingleStep(0.01);
    m_lrSpin->setSpecialValueText(tr("default (0.05)"));
    m_threadsSpin = new QSpinBox;
    m_threadsSpin->setObjectName(QStringLiteral("threadsSpin"));
    m_threadsSpin->setRange(0, 1024);
    m_threadsSpin->setSpecialValueText(tr("automatic"));
    auto *form = new QFormLayout;
    form->addRow(tr("Data set"), m_datasetCombo);
    form->addRow(QString(), m_syntheticButton);
    form->addRow(tr("Model"), m_modelCombo);
    form->addRow(tr("Workers"), m_workersSpin);
    form->addRow(tr("Batch size / worker"), m_batchSpin);
    form->addRow(tr("Epochs"), m_epochsSpin);
    form->addRow(tr("Learning rate"), m_lrSpin);
    form->addRow(tr("Threads / worker"), m_threadsSpin);
    m_formError = new QLabel;
    m_formError->setObjectName(QStringLiteral("formError"));
    m_formError->setWordWrap(true);
    m_formError->setStyleSheet(QStringLiteral("color: #c62828;"));
    m_formError->hide();
    m_launchButton = new QPushButton(tr("Launch"));
    m_launchButton->setObjectName(QStringLiteral("launchButton"));
    m_launchButton->setDefault(true);
    m_launchButton->setEnabled(false);
    connect(m_launchButton, &QPushButton::clicked, this, &RunForm::launchRequested);
    m_stopButton = new QPushButton(tr("Stop"));
    m_stopButton->setEnabled(false);
    connect(m_stopButton, &QPushButton::clicked, this, &RunForm::stopRequested);
    auto *buttons = new QHBoxLayout;
    buttons->addWidget(m_launchButton);
    buttons->addWidget(m_stopButton);
    auto *runLayout = new QVBoxLayout(this);
    runLayout->addLayout(form);
    runLayout->addWidget(m_formError);
    runLayout->addLayout(buttons);
}

core::RunRequest RunForm::request() const
{
    core::RunRequest request;
    request.dataset = m_datasetCombo->currentData().toString();
    request.workers = m_workersSpin->value();
    request.batchSize = m_batchSpin->value();
    request.epochs = m_epochsSpin->value();
    request.learningRate = m_lrSpin->value();
    request.threadsPerWorker = m_threadsSpin->value();
    if (m_modelCombo->currentIndex() > 0) // the first is the default: left out of the spec
        request.model = m_modelCombo->currentData().toString(); // a name, or file:PATH
    return request;
}

void RunForm::chooseModelFile(const QString &path)
{
    const QString data = QStringLiteral("file:") + path;
    int index = m_modelCombo->findData(data);
    if (index < 0) {
        index = m_modelCombo->count() - 1; // before "TorchScript file…"
        m_modelCombo->insertItem(index, QFileInfo(path).fileName(), data);
        m_modelCombo->setItemData(index, path, Qt::ToolTipRole);
    }
    m_modelCombo->setCurrentIndex(index);
}

void RunForm::listDatasets(const v1::DescribeResponse &inventory, const QString &select)
{
    QString previous = m_datasetCombo->count() ? m_datasetCombo->currentData().toString() : m_dataset;
    if (!select.isEmpty())
        previous = select;
    m_datasetCombo->clear();
    for (const auto &d : inventory.datasets()) {
        const QString name = QString::fromStdString(d.name());
        // [SYNTHETIC] right after the name: a narrow box cuts the end, never the warning.
        m_datasetCombo->addItem(tr("%1%4 — %2 train / %3 test")
                                    .arg(name)
                                    .arg(d.train_images())
                                    .arg(d.test_images())
                                    .arg(d.synthetic() ? tr(" [SYNTHETIC]") : QString()),
            name);
    }
    m_datasetCombo->view()->setMinimumWidth(m_datasetCombo->view()->sizeHintForColumn(0) + 24);
    if (inventory.datasets().empty())
        m_datasetCombo->setPlaceholderText(tr("no data set: create a synthetic one or add CIFAR-10"));
    const int index = m_datasetCombo->findData(previous);
    if (index >= 0)
        m_datasetCombo->setCurrentIndex(index);
}

void RunForm::showError(const QString &text)
{
    m_formError->setText(text);
    m_formError->show();
}

void RunForm::hideError()
{
    m_formError->hide();
}

void RunForm::setLaunchEnabled(bool enabled)
{
    m_launchButton->setEnabled(enabled);
}

void RunForm::setStopEnabled(bool enabled)
{
    m_stopButton->setEnabled(enabled);
}

void RunForm::setSyntheticEnabled(bool enabled)
{
    m_syntheticButton->setEnabled(enabled);
}

void RunForm::save(QSettings &settings) const
{
    if (m_datasetCombo->currentIndex() >= 0)
        settings.setValue(QStringLiteral("run/dataset"), m_datasetCombo->currentData().toString());
    settings.setValue(QStringLiteral("run/workers"), m_workersSpin->value());
    settings.setValue(QStringLiteral("run/batchSize"), m_batchSpin->value());
    settings.setValue(QStringLiteral("run/epochs"), m_epochsSpin->value());
    settings.setValue(QStringLiteral("run/learningRate"), m_lrSpin->value());
    settings.setValue(QStringLiteral("run/threads"), m_threadsSpin->value());
    settings.setValue(QStringLiteral("run/model"), m_modelCombo->currentData().toString());
}

void RunForm::restore(const QSettings &settings)
{
    // The command line's values win; what it leaves out is as the form was left.
    const auto restoreSpin = [&settings](const char *key, QSpinBox *spin, int given) {
        if (given <= 0 && settings.contains(QLatin1String(key)))
            spin->setValue(settings.value(QLatin1String(key)).toInt());
    };
    restoreSpin("run/workers", m_workersSpin, m_givenWorkers);
    restoreSpin("run/batchSize", m_batchSpin, m_givenBatchSize);
    restoreSpin("run/epochs", m_epochsSpin, m_givenEpochs);
    restoreSpin("run/threads", m_threadsSpin, 0);
    m_lrSpin->setValue(settings.value(QStringLiteral("run/learningRate"), m_lrSpin->value()).toDouble());
    if (const int model = m_modelCombo->findText(settings.value(QStringLiteral("run/model")).toString());
        model >= 0)
        m_modelCombo->setCurrentIndex(model);
    if (m_dataset.isEmpty())
        m_dataset = settings.value(QStringLiteral("run/dataset")).toString();
}

} // namespace scalelab::app
