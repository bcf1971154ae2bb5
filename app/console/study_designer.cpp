#include "study_designer.h"

#include "lr_find_dialog.h"
#include "spec_rules.h"
#include "study_plan.h"
#include "theme.h"
#include "worker_contract.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include <cmath>

namespace scalelab::app {
namespace {

using namespace scalelab::core;

// "2, 4" → {2, 4}; every entry that is not a number is a problem named by field.
template <typename T> QList<T> parseList(const QString &list, const QString &field, QStringList *problems)
{
    QList<T> values;
    for (const QString &part : list.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const QString text = part.trimmed();
        const double v = text.toDouble(&ok);
        if (!ok || (std::is_integral_v<T> && v != std::floor(v))) {
            *problems << QStringLiteral("%1: '%2' is not a %3")
                             .arg(field, text,
                                 std::is_integral_v<T> ? QStringLiteral("whole number")
                                                       : QStringLiteral("number"));
            continue;
        }
        values << T(v);
    }
    return values;
}

template <typename T> QList<T> parseList(const QLineEdit *edit, const QString &field, QStringList *problems)
{
    return parseList<T>(edit->text(), field, problems);
}

// "1, 2:4" → fixed sizes {1} and elastic ranges {(2, 4)} (MIN:MAX, as torchrun's --nnodes); a
// range that is not 1 <= MIN < MAX <= the most workers is a problem in the form's words.
void parseWorkers(const QLineEdit *edit, const QString &field, v1::StudyGrid *grid, QStringList *problems)
{
    for (const QString &part : edit->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        const QString text = part.trimmed();
        if (!text.contains(QLatin1Char(':'))) {
            for (int v : parseList<int>(text, field, problems))
                grid->add_workers(v);
            continue;
        }
        const QStringList ends = text.split(QLatin1Char(':'));
        bool minOk = false, maxOk = false;
        const int min = ends.size() == 2 ? ends[0].trimmed().toInt(&minOk) : 0;
        const int max = ends.size() == 2 ? ends[1].trimmed().toInt(&maxOk) : 0;
        if (!minOk || !maxOk)
            *problems << QStringLiteral("%1: '%2' is neither a whole number nor an elastic range MIN:MAX")
                             .arg(field, text);
        else if (min < 1 || min >= max || max > rules::kMaxWorkers)
            *problems << QStringLiteral("%1: the elastic range '%2' must have 1 <= MIN < MAX <= %3 (MIN: the "
                                        "fewest workers it goes on with, MAX: its planned size)")
                             .arg(field, text)
                             .arg(rules::kMaxWorkers);
        else {
            auto *range = grid->add_worker_ranges();
            range->set_min(min);
            range->set_max(max);
        }
    }
}

// The grid's workers as the form writes them: fixed sizes, then elastic ranges ("1, 2:4").
QString workersText(const v1::StudyGrid &grid)
{
    QStringList parts;
    for (int w : grid.workers())
        parts << QString::number(w);
    for (const auto &r : grid.worker_ranges())
        parts << QStringLiteral("%1:%2").arg(r.min()).arg(r.max());
    return parts.join(QLatin1String(", "));
}

QStringList parseWords(const QLineEdit *edit)
{
    QStringList words;
    for (const QString &part : edit->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        words << part.trimmed();
    return words;
}

template <typename List> QString joinList(const List &list)
{
    QStringList parts;
    for (const auto &v : list)
        parts << QVariant::fromValue(v).toString();
    return parts.join(QLatin1String(", "));
}

} // namespace

// The form in sections, top to bottom: what is studied, the grid of runs, how they are
// run, then the problems and the buttons.
StudyDesigner::StudyDesigner(QWidget *parent)
    : QGroupBox(tr("Study designer"), parent)
{
    auto *form = new QFormLayout(this);
    addStudySection(form);
    addGridSection(form);
    addRunSection(form);
    m_fields = { { QStringLiteral("name"), tr("Name"), m_name },
        { QStringLiteral("dataset"), tr("Data set"), m_dataset },
        { QStringLiteral("grid.workers"), tr("Workers"), m_workers },
        { QStringLiteral("grid.batchSize"), tr("Batch per worker"), m_batch },
        { QStringLiteral("grid.accumulationSteps"), tr("Accumulation steps"), m_accumulation },
        { QStringLiteral("grid.epochs"), tr("Epochs"), m_epochs },
        { QStringLiteral("grid.gpusPerWorker"), tr("GPUs per worker"), m_gpus },
        { QStringLiteral("grid.threadsPerWorker"), tr("Threads per worker"), m_threads },
        { QStringLiteral("grid.precision"), tr("Precision"), m_precision },
        { QStringLiteral("grid.lrRule"), tr("LR rule"), m_lrRule },
        { QStringLiteral("grid.model"), tr("Model"), m_model },
        { QStringLiteral("training.learningRate"), tr("Learning rate"), m_lr },
        { QStringLiteral("training.maxTrainImages"), tr("Train images"), m_maxTrain },
        { QStringLiteral("repeats"), tr("Repeats"), m_repeats },
        { QStringLiteral("repeatSeeds"), tr("Repeat seeds"), m_repeatSeeds },
        { QStringLiteral("maxFailures"), tr("Max failures"), m_maxFailures },
        { QStringLiteral("targetAccuracy"), tr("Target accuracy"), m_target },
        { QStringLiteral("placement"), tr("Placement"), m_placement },
        { QStringLiteral("agents"), tr("Agents"), m_planAgents } };
    addButtons(form);
}

QLineEdit *StudyDesigner::addLine(
    QFormLayout *form, const QString &label, const QString &value, const QString &tip)
{
    auto *e = new QLineEdit(value);
    e->setToolTip(tip);
    form->addRow(label, e);
    connect(e, &QLineEdit::textChanged, this, &StudyDesigner::changed);
    return e;
}

QComboBox *StudyDesigner::addChoice(
    QFormLayout *form, const QString &label, const QStringList &items, const QString &tip)
{
    auto *c = new QComboBox;
    c->addItems(items);
    c->setToolTip(tip);
    form->addRow(label, c);
    connect(c, &QComboBox::currentIndexChanged, this, &StudyDesigner::changed);
    return c;
}

// Name, data set and baseline.
void StudyDesigner::addStudySection(QFormLayout *form)
{
    m_name = addLine(form, tr("Name"), QStringLiteral("scaleup"), tr("Letters, digits, '_', '-', '.'"));
    m_dataset
        = addLine(form, tr("Data set"), QStringLiteral("synthetic"), tr("A data set name on the agents"));
    m_dataset->setObjectName(QStringLiteral("dataset"));
    m_datasetPick = new QComboBox;
    m_datasetPick->setObjectName(QStringLiteral("datasetPick"));
    m_datasetPick->setToolTip(tr("The data sets the connected agents have"));
    m_datasetNote = new QLabel;
    m_datasetNote->setObjectName(QStringLiteral("datasetNote"));
    m_datasetNote->setWordWrap(true);
    form->addRow(QString(), m_datasetPick);
    form->addRow(QString(), m_datasetNote);
    connect(m_datasetPick, &QComboBox::activated, this, [this](int index) {
        if (const QString name = m_datasetPick->itemData(index).toString(); !name.isEmpty())
            m_dataset->setText(name);
    });
    connect(m_dataset, &QLineEdit::textChanged, this, &StudyDesigner::updateDatasetNote);
    m_baseline = new QCheckBox(tr("A 1-worker baseline run, that speedups divide by"));
    m_baseline->setObjectName(QStringLiteral("baselineCheck"));
    m_baseline->setChecked(true);
    form->addRow(tr("Baseline"), m_baseline);
    connect(m_baseline, &QCheckBox::toggled, this, &StudyDesigner::changed);
}

// The grid: each field comma-separated, a run for each combination.
void StudyDesigner::addGridSection(QFormLayout *form)
{
    m_workers = addLine(form, tr("Workers"), QStringLiteral("2"),
        tr("Distributed runs: comma-separated worker counts. MIN:MAX (as torchrun's --nnodes) is an elastic "
           "run: it goes on with as few as MIN workers when workers or hosts are lost, at the same global "
           "batch, and grows back to MAX at a checkpoint when they return."));
    m_workers->setObjectName(QStringLiteral("workers"));
    m_batch = addLine(form, tr("Batch per worker"), QStringLiteral("64"), tr("Comma-separated"));
    m_accumulation = addLine(form, tr("Accumulation steps"), QString(),
        tr("Gradient accumulation: micro-batches each worker adds up before a step's one all-reduce (global "
           "batch = workers × batch × steps); comma-separated, a run of each"));
    m_accumulation->setObjectName(QStringLiteral("accumulationSteps"));
    m_epochs = addLine(form, tr("Epochs"), QStringLiteral("2"), tr("Comma-separated"));
    m_gpus = addLine(
        form, tr("GPUs per worker"), QStringLiteral("0"), tr("0 = CPU; 0.5 = two workers share a GPU"));
    m_threads = addLine(
        form, tr("Threads per worker"), QStringLiteral("1"), tr("0 = cores of the node / ranks on it"));
    m_precision = addChoice(form, tr("Precision"),
        { QStringLiteral("fp32"), QStringLiteral("bf16"), QStringLiteral("fp32, bf16") },
        tr("fp32, or bf16 autocast (AVX-512 BF16/AMX CPUs, GPUs of compute capability 8.0+); both: a run of "
           "each"));
    m_precision->setObjectName(QStringLiteral("precision"));
    m_lrRule = addChoice(form, tr("LR rule"),
        { QStringLiteral("none"), QStringLiteral("linear"), QStringLiteral("sqrt"),
            QStringLiteral("adascale"), QStringLiteral("none, linear"),
            QStringLiteral("linear, sqrt, adascale"), QStringLiteral("none, linear, sqrt, adascale") },
        tr("none: the learning rate as given; linear: scaled with the global batch (x global batch / %1); "
           "sqrt: x the square root of that; adascale: x a gain measured at every step from the gradient "
           "noise, between 1 and global batch / %1; several: a run of each")
            .arg(worker::kLinearRuleBaseBatch));
    m_lrRule->setObjectName(QStringLiteral("lrRule"));
    QStringList models;
    for (const auto name : worker::kModelNames)
        models << QString::fromLatin1(name.data(), qsizetype(name.size()));
    m_model = addChoice(form, tr("Model"), models + QStringList { models.join(QLatin1String(", ")) },
        tr("The model every run trains: the seed CNN (%1), ResNet-18 or MobileNetV2 (their CIFAR forms), or "
           "file:PATH of a TorchScript module. Several, comma-separated: the study compares them, each with "
           "its "
           "own one-worker baseline.")
            .arg(QString::fromLatin1(worker::kDefaultModel.data(), qsizetype(worker::kDefaultModel.size()))));
    m_model->addItem(tr("TorchScript file…"));
    m_model->setEditable(true);
    m_model->setObjectName(QStringLiteral("model"));
    // "TorchScript file…" asks for a module and adds it to the models the study compares.
    connect(m_model, &QComboBox::activated, this, [this, previous = QString()](int index) mutable {
        if (m_model->itemText(index) != tr("TorchScript file…")) {
            previous = m_model->itemText(index);
            return;
        }
        const QString path = QFileDialog::getOpenFileName(this, tr("TorchScript module"), QString(),
            tr("TorchScript modules (*.pt *.pth *.zip);;All files (*)"));
        const QString before = previous.isEmpty()
            ? QString::fromLatin1(worker::kDefaultModel.data(), qsizetype(worker::kDefaultModel.size()))
            : previous;
        m_model->setEditText(path.isEmpty() ? before : before + QStringLiteral(", file:") + path);
    });
    connect(m_model, &QComboBox::editTextChanged, this, &StudyDesigner::changed);
    // What an empty list means, as the plan's defaults say.
    m_gpus->setPlaceholderText(tr("0 (CPU)"));
    m_accumulation->setPlaceholderText(tr("1 (none)"));
    m_threads->setPlaceholderText(tr("0 (cores / ranks)"));
}

// How the runs go: learning rate, repeats, failures, target, images, placement, agents.
void StudyDesigner::addRunSection(QFormLayout *form)
{
    // The learning rate: empty = the default recipe, a number, or "auto" (the range test
    // runs first). "Find…" runs the test now and shows its curve.
    m_lr = new QLineEdit;
    m_lr->setObjectName(QStringLiteral("learningRate"));
    m_lr->setPlaceholderText(tr("default (%1)").arg(rules::kDefaultLearningRate));
    m_lr->setToolTip(
        tr("Empty: the default recipe's %1 with a 1-epoch warm-up. A number, or \"auto\": the study "
           "runs the learning-rate range test at the baseline's batch before any run.")
            .arg(rules::kDefaultLearningRate));
    connect(m_lr, &QLineEdit::textChanged, this, &StudyDesigner::changed);
    auto *findLr = new QPushButton(tr("Find…"));
    findLr->setObjectName(QStringLiteral("findLearningRate"));
    findLr->setToolTip(
        tr("Run the learning-rate range test on an agent with this data set and batch, and pick a "
           "value from its curve"));
    connect(findLr, &QPushButton::clicked, this, &StudyDesigner::findLearningRate);
    auto *lrRow = new QHBoxLayout;
    lrRow->addWidget(m_lr, 1);
    lrRow->addWidget(findLr);
    form->addRow(tr("Learning rate"), lrRow);
    m_repeats = new QSpinBox;
    m_repeats->setRange(1, 100);
    m_repeatSeeds = new QComboBox;
    m_repeatSeeds->setObjectName(QStringLiteral("repeatSeeds"));
    m_repeatSeeds->addItem(tr("same seed"), QStringLiteral("same"));
    m_repeatSeeds->addItem(tr("a seed each"), QStringLiteral("vary"));
    m_repeatSeeds->setToolTip(
        tr("Same seed: repeats differ only in time (the spread of a speedup). A seed each "
           "(seed + repeat): repeats also show how much training varies (the band of a curve)."));
    connect(m_repeatSeeds, &QComboBox::currentIndexChanged, this, &StudyDesigner::changed);
    auto *repeatsRow = new QHBoxLayout;
    repeatsRow->addWidget(m_repeats, 1);
    repeatsRow->addWidget(m_repeatSeeds, 1);
    form->addRow(tr("Repeats"), repeatsRow);
    m_maxFailures = new QSpinBox;
    m_maxFailures->setRange(0, 20);
    m_maxFailures->setValue(2);
    form->addRow(tr("Max failures"), m_maxFailures);
    m_target = new QDoubleSpinBox;
    m_target->setRange(0, 100);
    m_target->setSuffix(QStringLiteral(" %"));
    m_target->setValue(50);
    form->addRow(tr("Target accuracy"), m_target);
    m_maxTrain = new QSpinBox;
    m_maxTrain->setRange(0, 50'000);
    m_maxTrain->setSpecialValueText(tr("whole split"));
    form->addRow(tr("Train images"), m_maxTrain);
    m_placement = new QComboBox;
    m_placement->addItems({ QStringLiteral("pack"), QStringLiteral("spread") });
    form->addRow(tr("Placement"), m_placement);
    m_planAgents = addLine(form, tr("Agents"), QString(),
        tr("Where the study's agents are, saved with the plan, comma-separated: HOST:PORT, file:PATH (one "
           "HOST:PORT per line, as the Slurm launcher writes) or dns:NAME:PORT (every address of NAME). "
           "Loading or launching the plan adds them to the Agents tab; the study runs on that tab's "
           "agents."));
    m_planAgents->setObjectName(QStringLiteral("planAgents"));
    m_planAgents->setPlaceholderText(tr("optional: HOST:PORT, file:PATH, dns:NAME:PORT"));
    for (QSpinBox *s : { m_repeats, m_maxFailures, m_maxTrain })
        connect(s, &QSpinBox::valueChanged, this, &StudyDesigner::changed);
}

void StudyDesigner::addButtons(QFormLayout *form)
{
    m_problems = new QLabel;
    m_problems->setObjectName(QStringLiteral("designerProblems"));
    m_problems->setWordWrap(true);
    m_problems->setTextFormat(Qt::PlainText);
    form->addRow(m_problems);
    auto *buttons = new QHBoxLayout;
    auto *load = new QPushButton(tr("Load plan…"));
    auto *save = new QPushButton(tr("Save plan…"));
    m_launch = new QPushButton(tr("Launch study"));
    m_launch->setDefault(true);
    buttons->addWidget(load);
    buttons->addWidget(save);
    buttons->addStretch();
    buttons->addWidget(m_launch);
    form->addRow(buttons);
    connect(load, &QPushButton::clicked, this, &StudyDesigner::loadRequested);
    connect(save, &QPushButton::clicked, this, &StudyDesigner::saveRequested);
    connect(m_launch, &QPushButton::clicked, this, &StudyDesigner::launchRequested);
}

void StudyDesigner::setAgents(const QList<AgentEndpoint> &agents)
{
    m_agents = agents;
}

void StudyDesigner::setInventories(const QMap<QString, v1::DescribeResponse> &inventories)
{
    m_inventories = inventories;
    updateDatasetChoices();
}

void StudyDesigner::updateDatasetChoices()
{
    struct Choice {
        qint64 train = 0, test = 0;
        bool synthetic = false;
        QStringList agents;
    };
    QMap<QString, Choice> choices;
    for (auto it = m_inventories.cbegin(); it != m_inventories.cend(); ++it)
        for (const auto &d : it.value().datasets()) {
            Choice &c = choices[QString::fromStdString(d.name())];
            c.train = d.train_images();
            c.test = d.test_images();
            c.synthetic = c.synthetic || d.synthetic();
            c.agents << it.key();
        }
    m_datasetPick->clear();
    m_datasetPick->addItem(choices.isEmpty() ? tr("No data sets on the connected agents")
                                             : tr("Choose one of the agents' data sets…"),
        QString());
    for (auto it = choices.cbegin(); it != choices.cend(); ++it)
        m_datasetPick->addItem(
            tr("%1 — %2 train / %3 test%4 (%5)")
                .arg(it.key())
                .arg(it->train)
                .arg(it->test)
                .arg(it->synthetic ? tr(" [SYNTHETIC]") : QString(), it->agents.join(QLatin1String(", "))),
            it.key());
    updateDatasetNote();
}

void StudyDesigner::updateDatasetNote()
{
    const QString name = m_dataset->text().trimmed();
    QStringList on, synthetic;
    for (auto it = m_inventories.cbegin(); it != m_inventories.cend(); ++it)
        for (const auto &d : it.value().datasets())
            if (QString::fromStdString(d.name()) == name) {
                on << it.key();
                if (d.synthetic())
                    synthetic << it.key();
            }
    m_agentsWithDataset = on;
    if (m_inventories.isEmpty() || name.isEmpty())
        m_datasetNote->clear();
    else if (on.isEmpty())
        m_datasetNote->setText(tr("No connected agent has a data set '%1': runs would wait (PENDING) until "
                                  "one has. Put CIFAR-10 in an agent's data folder, or create a synthetic "
                                  "set there (Run tab, New synthetic set).")
                                   .arg(name));
    else if (!synthetic.isEmpty())
        m_datasetNote->setText(tr("SYNTHETIC DATA: generated images, not CIFAR-10; every result and report "
                                  "of this study says so."));
    else
        m_datasetNote->setText(tr("On %1.").arg(on.join(QLatin1String(", "))));
}

void StudyDesigner::setDefaultDataset(const QString &dataset)
{
    if (!dataset.isEmpty())
        m_dataset->setText(dataset);
}

v1::StudyPlan StudyDesigner::planFromForm(QStringList *problems) const
{
    v1::StudyPlan plan = m_loaded; // overrides, baseline sizes, training options: as loaded
    const bool tune = plan.has_tune(); // its trials come from its search space, not the grid
    plan.clear_grid();
    plan.set_name(m_name->text().trimmed().toStdString());
    plan.set_dataset(m_dataset->text().trimmed().toStdString());
    plan.mutable_baseline()->set_skip(tune || !m_baseline->isChecked());
    v1::StudyGrid ignored;
    auto *g = tune ? &ignored : plan.mutable_grid();
    parseWorkers(m_workers, tr("Workers"), g, problems);
    for (int v : parseList<int>(m_batch, tr("Batch per worker"), problems))
        g->add_batch_size(v);
    for (int v : parseList<int>(m_accumulation, tr("Accumulation steps"), problems))
        g->add_accumulation_steps(v);
    for (int v : parseList<int>(m_epochs, tr("Epochs"), problems))
        g->add_epochs(v);
    for (double v : parseList<double>(m_gpus, tr("GPUs per worker"), problems))
        g->add_gpus_per_worker(v);
    for (int v : parseList<int>(m_threads, tr("Threads per worker"), problems))
        g->add_threads_per_worker(v);
    for (const QString &w : m_precision->currentText().split(QLatin1Char(','), Qt::SkipEmptyParts))
        g->add_precision(w.trimmed().toStdString());
    for (const QString &w : m_lrRule->currentText().split(QLatin1Char(','), Qt::SkipEmptyParts))
        g->add_lr_rule(w.trimmed().toStdString());
    // One model: training.model (a tune's trials train it too); several: the grid's axis.
    plan.mutable_training()->clear_model();
    if (QStringList chosen = m_model->currentText().split(QLatin1Char(','), Qt::SkipEmptyParts);
        chosen.size() == 1) {
        if (const QString model = chosen.first().trimmed();
            model != QLatin1String(worker::kDefaultModel.data(), qsizetype(worker::kDefaultModel.size())))
            plan.mutable_training()->set_model(model.toStdString());
    } else {
        for (const QString &w : chosen)
            g->add_model(w.trimmed().toStdString());
    }
    plan.set_repeats(tune ? 0 : m_repeats->value());
    if (!tune && m_repeatSeeds->currentData().toString() == QLatin1String("vary"))
        plan.set_repeat_seeds("vary"); // "same" is the default: left out of the plan file
    plan.set_max_failures(m_maxFailures->value());
    plan.set_target_accuracy(m_target->value() / 100.0);
    plan.set_placement(m_placement->currentText().toStdString());
    plan.clear_agents();
    for (const QString &spec : parseWords(m_planAgents))
        plan.add_agents(spec.toStdString());
    plan.mutable_training()->set_max_train_images(m_maxTrain->value());
    plan.mutable_training()->clear_learning_rate();
    plan.set_learning_rate_auto(false);
    if (const QString lr = m_lr->text().trimmed();
        lr.compare(QLatin1String("auto"), Qt::CaseInsensitive) == 0) {
        plan.set_learning_rate_auto(true);
    } else if (!lr.isEmpty()) {
        bool ok = false;
        const double value = lr.toDouble(&ok);
        if (ok)
            plan.mutable_training()->set_learning_rate(value);
        else
            *problems << tr("Learning rate: \"%1\" is neither a number nor \"auto\"").arg(lr);
    }
    if (const CheckStatus valid = checkPlan(plan); !valid)
        *problems << valid.error();
    return plan;
}

void StudyDesigner::findLearningRate()
{
    if (m_agents.isEmpty()) {
        m_problems->setText(tr("Find learning rate: connect an agent first (Agents tab)."));
        return;
    }
    QStringList problems;
    const QList<int> batches = parseList<int>(m_batch, tr("Batch per worker"), &problems);
    if (!problems.isEmpty() || m_dataset->text().trimmed().isEmpty()) {
        m_problems->setText(tr("Find learning rate: give a data set and a batch first."));
        return;
    }
    v1::FindLearningRateRequest request;
    auto *spec = request.mutable_spec();
    spec->set_dataset(m_dataset->text().trimmed().toStdString());
    spec->set_batch_size(batches.isEmpty() ? 64 : batches.first()); // the baseline's (global) batch
    spec->set_max_train_images(m_maxTrain->value());
    request.set_steps(200);
    // The agent that has the data set, as the designer's note found it; else the first.
    core::AgentEndpoint agent = m_agents.first();
    for (const auto &a : m_agents)
        if (m_agentsWithDataset.contains(a.name)) {
            agent = a;
            break;
        }
    auto *dialog = new app::LrFindDialog(agent, request, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &app::LrFindDialog::chosen, this,
        [this](double lr) { m_lr->setText(QString::number(lr, 'g', 3)); });
    m_lrDialog = dialog;
    dialog->show();
}

void StudyDesigner::setForm(const v1::StudyPlan &plan)
{
    m_loaded = plan;
    const auto &g = plan.grid();
    m_name->setText(QString::fromStdString(plan.name()));
    m_dataset->setText(QString::fromStdString(plan.dataset()));
    m_baseline->setChecked(!plan.baseline().skip());
    m_workers->setText(workersText(g));
    m_batch->setText(joinList(g.batch_size()));
    m_accumulation->setText(joinList(g.accumulation_steps()));
    // Empty: the plan's training.accumulationSteps, else none.
    const int trained = std::max(1, plan.training().accumulation_steps());
    m_accumulation->setPlaceholderText(
        trained > 1 ? tr("%1 (the plan's training)").arg(trained) : tr("1 (none)"));
    m_epochs->setText(joinList(g.epochs()));
    m_gpus->setText(joinList(g.gpus_per_worker()));
    m_threads->setText(joinList(g.threads_per_worker()));
    QStringList words;
    for (const auto &w : g.precision())
        words << QString::fromStdString(w);
    const auto choose = [](QComboBox *box, const QStringList &values, const QString &empty) {
        const QString text = values.isEmpty() ? empty : values.join(QLatin1String(", "));
        if (box->findText(text) < 0)
            box->addItem(text); // a plan's own list ("bf16, fp32"): kept as it is
        box->setCurrentText(text);
    };
    choose(m_precision, words, QStringLiteral("fp32"));
    words.clear();
    for (const auto &w : g.lr_rule())
        words << QString::fromStdString(w);
    choose(m_lrRule, words, QStringLiteral("none"));
    words.clear();
    for (const auto &w : g.model())
        words << QString::fromStdString(w);
    if (words.isEmpty() && !plan.training().model().empty())
        words << QString::fromStdString(plan.training().model());
    choose(m_model, words,
        QString::fromLatin1(worker::kDefaultModel.data(), qsizetype(worker::kDefaultModel.size())));
    m_repeats->setValue(std::max(1, plan.repeats()));
    m_repeatSeeds->setCurrentIndex(plan.repeat_seeds() == "vary" ? 1 : 0);
    m_maxFailures->setValue(plan.has_max_failures() ? plan.max_failures() : 2);
    m_target->setValue(plan.target_accuracy() * 100);
    m_maxTrain->setValue(int(plan.training().max_train_images()));
    m_lr->setText(plan.learning_rate_auto()       ? QStringLiteral("auto")
            : plan.training().has_learning_rate() ? QString::number(plan.training().learning_rate(), 'g', 17)
                                                  : QString());
    m_placement->setCurrentText(
        plan.placement().empty() ? QStringLiteral("pack") : QString::fromStdString(plan.placement()));
    m_planAgents->setText(core::planAgentSpecs(plan).join(QLatin1String(", ")));
    // A tune draws its trials from its search space: the grid's fields do not apply.
    const QString tuneNote
        = tr("A tune: its trials are drawn from the plan's search space (load another plan to "
             "design a grid)");
    for (QWidget *w : std::initializer_list<QWidget *> { m_baseline, m_workers, m_batch, m_accumulation,
             m_epochs, m_gpus, m_threads, m_precision, m_lrRule, m_repeats, m_repeatSeeds, m_lr }) {
        w->setEnabled(!plan.has_tune());
        w->setToolTip(plan.has_tune() ? tuneNote : QString());
    }
    m_launch->setText(plan.has_tune() ? tr("Launch tune") : tr("Launch study"));
}

QString StudyDesigner::describeProblem(const QString &problem, QWidget **field) const
{
    *field = nullptr;
    for (const FormField &f : m_fields) {
        // "grid.batchSize[1]: must be ..." (the plan's path) or "Batch per worker: ..." (the form's).
        QString rest;
        if (problem.startsWith(f.path + QLatin1Char('[')) || problem.startsWith(f.path + QLatin1Char(':')))
            rest = problem.mid(f.path.size());
        else if (problem.startsWith(f.label + QLatin1Char(':')))
            rest = problem.mid(f.label.size());
        else
            continue;
        *field = f.widget;
        if (rest.startsWith(QLatin1Char('['))) { // the n-th value of a list, counted from 1
            const int close = int(rest.indexOf(QLatin1Char(']')));
            rest = tr(" (value %1)").arg(rest.mid(1, close - 1).toInt() + 1) + rest.mid(close + 1);
        }
        return f.label + rest;
    }
    return problem; // a part of the plan the designer does not show (loaded from a file)
}

void StudyDesigner::showProblems(const QStringList &problems)
{
    for (const FormField &f : std::as_const(m_fields))
        f.widget->setStyleSheet({});
    if (problems.isEmpty()) {
        m_problems->setStyleSheet({});
        return;
    }
    QStringList lines;
    for (const QString &problem : problems) {
        QWidget *field = nullptr;
        lines << QStringLiteral("• ") + describeProblem(problem, &field);
        if (field)
            field->setStyleSheet(QStringLiteral("border: 1px solid #d32f2f;"));
    }
    const bool dark = isDarkPalette(palette());
    m_problems->setStyleSheet(
        QStringLiteral("color: %1; font-weight: 600;").arg(dark ? "#ff8a80" : "#c62828"));
    m_problems->setText(tr("Cannot launch:\n") + lines.join(QLatin1Char('\n')));
}

void StudyDesigner::showHint(const QString &text)
{
    // A note in the form's own colour, below what the summary said.
    const QString summary = m_problems->styleSheet().isEmpty() ? m_problems->text() : QString();
    m_problems->setStyleSheet(QStringLiteral("font-style: italic;"));
    m_problems->setText(summary.isEmpty() ? text : summary + QStringLiteral("\n") + text);
}

void StudyDesigner::showSummary(const QString &text)
{
    m_problems->setStyleSheet({});
    m_problems->setText(text);
}

void StudyDesigner::showMessage(const QString &text)
{
    m_problems->setText(text);
}

void StudyDesigner::setLaunchEnabled(bool enabled)
{
    m_launch->setEnabled(enabled);
}

} // namespace scalelab::app
