#include "study_view.h"

#include "chart_controls.h"
#include "frozen_columns.h"
#include "report.h"
#include "run_details.h"
#include "study_charts.h"
#include "tune_charts.h"
#include "tune_plan.h"
#include "study_plan.h"
#include "study_results.h"
#include "lr_find_dialog.h"
#include "spec_rules.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDesktopServices>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QUrl>
#include <QVBoxLayout>

#include <cmath>

namespace scalelab::app {
namespace {

using namespace scalelab::core;

// "2, 4" → {2, 4}; every entry that is not a number is a problem named by field.
template <typename T> QList<T> parseList(const QLineEdit *edit, const QString &field, QStringList *problems)
{
    QList<T> values;
    for (const QString &part : edit->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
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

QString pct(double v)
{
    return std::isfinite(v) ? QString::number(v * 100, 'f', 1) + QLatin1Char('%') : QString();
}
QString num(double v, int d)
{
    return std::isfinite(v) ? QString::number(v, 'f', d) : QString();
}

QTableWidgetItem *item(const QString &text)
{
    auto *i = new QTableWidgetItem(text);
    i->setFlags(i->flags() & ~Qt::ItemIsEditable);
    return i;
}

constexpr int kRunIdRole = Qt::UserRole; // the run's full id, on the Run column
constexpr int kFractionRole = Qt::UserRole + 1; // how far the run is, 0..1, on Progress

// A bar under the Progress column's text, filled as far as the run is.
class ProgressDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override
    {
        QStyledItemDelegate::paint(painter, option, index);
        const QVariant fraction = index.data(kFractionRole);
        if (!fraction.isValid())
            return;
        const QRect bar = option.rect.adjusted(4, option.rect.height() - 5, -4, -2);
        painter->save();
        painter->setPen(Qt::NoPen);
        painter->setBrush(option.palette.color(QPalette::Mid));
        painter->drawRect(bar);
        painter->setBrush(option.palette.color(QPalette::Highlight));
        painter->drawRect(QRect(bar.left(), bar.top(), int(std::lround(bar.width() * qBound(0.0, fraction.toDouble(), 1.0))),
            bar.height()));
        painter->restore();
    }
};

// What the Progress column says: live progress while the run trains (epoch, percent, ETA
// once the step rate is stable), else epochs done of planned.
QString progressText(const core::RunResult &r, const core::ProgressView *live, double *fraction)
{
    const int planned = r.config.epochs;
    const int done = int(r.epochs.size());
    *fraction = planned > 0 ? double(done) / planned : 0;
    if (live && r.state == QLatin1String("RUNNING") && live->stepsTotal > 0) {
        *fraction = live->fraction;
        QString text = QStringLiteral("epoch %1/%2 · %3%")
                           .arg(live->epoch)
                           .arg(live->epochs)
                           .arg(int(std::floor(live->fraction * 100)));
        if (live->etaSeconds)
            text += QStringLiteral(" · ETA ") + core::formatDuration(*live->etaSeconds);
        return text;
    }
    return QStringLiteral("%1/%2 epochs").arg(done).arg(planned);
}

// The run's name within its study: "r01" of "<study>-r01".
QString shortRunName(const QString &runId, const QString &studyId)
{
    return runId.startsWith(studyId + QLatin1Char('-')) ? runId.mid(studyId.size() + 1) : runId;
}

const char *const kRunColumnKeys[] = { "run", "configuration", "state", "progress", "accuracy", "images",
    "speedup", "efficiency", "attempt", "agents", "wall", "why" };

} // namespace

StudyView::StudyView(QWidget *parent)
    : QWidget(parent)
{
    qRegisterMetaType<scalelab::core::JournalEvent>();
    qRegisterMetaType<std::vector<scalelab::v1::RunEvent>>();
    buildUi();
    m_thread.setObjectName(QStringLiteral("study-runner"));
    m_thread.start();
    m_redraw.setInterval(250); // coalesces bursts of events into one redraw
    connect(&m_redraw, &QTimer::timeout, this, [this] {
        if (m_dirty)
            refresh();
    });
    m_redraw.start();
}

StudyView::~StudyView()
{
    stopRunner();
    m_thread.quit();
    m_thread.wait();
}

void StudyView::buildUi()
{
    auto *designer = new QGroupBox(tr("Study designer"));
    auto *form = new QFormLayout(designer);
    auto line = [&](const QString &label, const QString &value, const QString &tip) {
        auto *e = new QLineEdit(value);
        e->setToolTip(tip);
        form->addRow(label, e);
        connect(e, &QLineEdit::textChanged, this, &StudyView::preview);
        return e;
    };
    m_name = line(tr("Name"), QStringLiteral("scaleup"), tr("Letters, digits, '_', '-', '.'"));
    m_dataset = line(tr("Data set"), QStringLiteral("synthetic"), tr("A data set name on the agents"));
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
    connect(m_dataset, &QLineEdit::textChanged, this, &StudyView::updateDatasetNote);
    m_baseline = new QCheckBox(tr("A 1-worker baseline run, that speedups divide by"));
    m_baseline->setObjectName(QStringLiteral("baselineCheck"));
    m_baseline->setChecked(true);
    form->addRow(tr("Baseline"), m_baseline);
    connect(m_baseline, &QCheckBox::toggled, this, &StudyView::preview);
    m_workers = line(tr("Workers"), QStringLiteral("2"), tr("Distributed runs: comma-separated worker counts"));
    m_batch = line(tr("Batch per worker"), QStringLiteral("64"), tr("Comma-separated"));
    m_epochs = line(tr("Epochs"), QStringLiteral("2"), tr("Comma-separated"));
    m_gpus = line(tr("GPUs per worker"), QStringLiteral("0"), tr("0 = CPU; 0.5 = two workers share a GPU"));
    m_threads
        = line(tr("Threads per worker"), QStringLiteral("1"), tr("0 = cores of the node / ranks on it"));
    const auto choice = [&](const QString &label, const QStringList &items, const QString &tip) {
        auto *c = new QComboBox;
        c->addItems(items);
        c->setToolTip(tip);
        form->addRow(label, c);
        connect(c, &QComboBox::currentIndexChanged, this, &StudyView::preview);
        return c;
    };
    m_precision = choice(tr("Precision"), { QStringLiteral("fp32"), QStringLiteral("bf16"), QStringLiteral("fp32, bf16") },
        tr("fp32, or bf16 autocast (AVX-512 BF16/AMX CPUs, GPUs of compute capability 8.0+); both: a run of each"));
    m_precision->setObjectName(QStringLiteral("precision"));
    m_lrRule = choice(tr("LR rule"), { QStringLiteral("none"), QStringLiteral("linear"), QStringLiteral("none, linear") },
        tr("none: the learning rate as given; linear: scaled with the global batch (x global batch / 64); "
           "both: a run of each"));
    m_lrRule->setObjectName(QStringLiteral("lrRule"));
    // The learning rate: empty = the default recipe, a number, or "auto" (the range test
    // runs first). "Find…" runs the test now and shows its curve.
    m_lr = new QLineEdit;
    m_lr->setObjectName(QStringLiteral("learningRate"));
    m_lr->setPlaceholderText(tr("default (%1)").arg(rules::kDefaultLearningRate));
    m_lr->setToolTip(tr("Empty: the default recipe's %1 with a 1-epoch warm-up. A number, or \"auto\": the study "
                        "runs the learning-rate range test at the baseline's batch before any run.")
                         .arg(rules::kDefaultLearningRate));
    connect(m_lr, &QLineEdit::textChanged, this, &StudyView::preview);
    auto *findLr = new QPushButton(tr("Find…"));
    findLr->setObjectName(QStringLiteral("findLearningRate"));
    findLr->setToolTip(tr("Run the learning-rate range test on an agent with this data set and batch, and pick a "
                          "value from its curve"));
    connect(findLr, &QPushButton::clicked, this, &StudyView::findLearningRate);
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
    m_repeatSeeds->setToolTip(tr("Same seed: repeats differ only in time (the spread of a speedup). A seed each "
                                 "(seed + repeat): repeats also show how much training varies (the band of a curve)."));
    connect(m_repeatSeeds, &QComboBox::currentIndexChanged, this, &StudyView::preview);
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
    m_planAgents = line(tr("Agents"), QString(),
        tr("Where the study's agents are, saved with the plan, comma-separated: HOST:PORT, file:PATH (one "
           "HOST:PORT per line, as the Slurm launcher writes) or dns:NAME:PORT (every address of NAME). "
           "Loading or launching the plan adds them to the Agents tab; the study runs on that tab's agents."));
    m_planAgents->setObjectName(QStringLiteral("planAgents"));
    m_planAgents->setPlaceholderText(tr("optional: HOST:PORT, file:PATH, dns:NAME:PORT"));
    for (QSpinBox *s : { m_repeats, m_maxFailures, m_maxTrain })
        connect(s, &QSpinBox::valueChanged, this, &StudyView::preview);
    // What an empty list means, as the plan's defaults say.
    m_gpus->setPlaceholderText(tr("0 (CPU)"));
    m_threads->setPlaceholderText(tr("0 (cores / ranks)"));
    m_fields = { { QStringLiteral("name"), tr("Name"), m_name }, { QStringLiteral("dataset"), tr("Data set"), m_dataset },
        { QStringLiteral("grid.workers"), tr("Workers"), m_workers },
        { QStringLiteral("grid.batchSize"), tr("Batch per worker"), m_batch },
        { QStringLiteral("grid.epochs"), tr("Epochs"), m_epochs },
        { QStringLiteral("grid.gpusPerWorker"), tr("GPUs per worker"), m_gpus },
        { QStringLiteral("grid.threadsPerWorker"), tr("Threads per worker"), m_threads },
        { QStringLiteral("grid.precision"), tr("Precision"), m_precision },
        { QStringLiteral("grid.lrRule"), tr("LR rule"), m_lrRule },
        { QStringLiteral("training.learningRate"), tr("Learning rate"), m_lr },
        { QStringLiteral("training.maxTrainImages"), tr("Train images"), m_maxTrain },
        { QStringLiteral("repeats"), tr("Repeats"), m_repeats },
        { QStringLiteral("repeatSeeds"), tr("Repeat seeds"), m_repeatSeeds },
        { QStringLiteral("maxFailures"), tr("Max failures"), m_maxFailures },
        { QStringLiteral("targetAccuracy"), tr("Target accuracy"), m_target },
        { QStringLiteral("placement"), tr("Placement"), m_placement },
        { QStringLiteral("agents"), tr("Agents"), m_planAgents } };
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
    connect(load, &QPushButton::clicked, this, &StudyView::loadPlan);
    connect(save, &QPushButton::clicked, this, &StudyView::savePlan);
    connect(m_launch, &QPushButton::clicked, this, [this] {
        if (const Status launched = launch(); !launched)
            m_problems->setText(launched.error());
    });

    auto *studyBar = new QHBoxLayout;
    m_studies = new QComboBox;
    m_studies->setMinimumContentsLength(30);
    auto *openButton = new QPushButton(tr("Open"));
    m_cancel = new QPushButton(tr("Cancel study"));
    m_cancel->setObjectName(QStringLiteral("cancelStudy"));
    m_cancel->setToolTip(tr("Stop every run of the open study (its journal keeps what was done)"));
    m_cancel->setEnabled(false); // no study is open yet
    m_export = new QPushButton(tr("Export report…"));
    m_export->setObjectName(QStringLiteral("exportReport"));
    m_export->setToolTip(tr("Write the open study's report: HTML, PDF, JSON or CSV"));
    m_export->setEnabled(false);
    studyBar->addWidget(new QLabel(tr("Study")));
    studyBar->addWidget(m_studies, 1);
    studyBar->addWidget(openButton);
    studyBar->addWidget(m_cancel);
    studyBar->addWidget(m_export);
    connect(openButton, &QPushButton::clicked, this, [this] {
        if (const Status opened = open(m_studies->currentData().toString()); !opened)
            m_status->setText(opened.error());
    });
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_studyId.isEmpty())
            return;
        if (const Status recorded = StudyRunner::requestCancel(&m_journal, m_studyId, {}); !recorded)
            m_status->setText(recorded.error());
    });
    connect(m_export, &QPushButton::clicked, this, &StudyView::exportReport);

    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_filter = new QLineEdit;
    m_filter->setObjectName(QStringLiteral("runFilter"));
    m_filter->setPlaceholderText(tr("Filter runs: id, configuration, agent, reason…"));
    m_filter->setClearButtonEnabled(true);
    m_stateFilter = new QComboBox;
    m_stateFilter->setObjectName(QStringLiteral("stateFilter"));
    m_stateFilter->addItem(tr("All states"), QString());
    m_stateFilter->addItem(tr("Active"), QStringLiteral("PENDING|STARTING|RUNNING"));
    m_stateFilter->addItem(tr("Succeeded"), QStringLiteral("SUCCEEDED"));
    m_stateFilter->addItem(tr("Failed or cancelled"), QStringLiteral("FAILED|CANCELLED"));
    connect(m_filter, &QLineEdit::textChanged, this, &StudyView::applyFilter);
    connect(m_stateFilter, &QComboBox::currentIndexChanged, this, &StudyView::applyFilter);
    auto *filterBar = new QHBoxLayout;
    filterBar->addWidget(m_filter, 1);
    filterBar->addWidget(m_stateFilter);

    m_runs = new QTableWidget(0, RunColumnCount);
    m_runs->setObjectName(QStringLiteral("runsTable"));
    m_runs->setHorizontalHeaderLabels({ tr("Run"), tr("Configuration"), tr("State"), tr("Progress"), tr("Test acc"),
        tr("img/s"), tr("Speedup"), tr("Efficiency"), tr("Attempt"), tr("Agents"), tr("Wall s"), tr("Why") });
    m_runs->setItemDelegateForColumn(ProgressCol, new ProgressDelegate(m_runs));
    m_runs->setSortingEnabled(true);
    m_runs->sortByColumn(RunCol, Qt::AscendingOrder); // r01, r02, …: the plan's order
    for (int c : { AttemptCol, AgentsCol, WallCol })
        m_runs->setColumnHidden(c, true);
    // Which columns show: right-click the header.
    m_runs->horizontalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(m_runs->horizontalHeader(), &QWidget::customContextMenuRequested, this, [this](const QPoint &at) {
        QMenu menu;
        for (int c = ConfigCol; c < RunColumnCount; ++c) {
            QAction *action = menu.addAction(m_runs->horizontalHeaderItem(c)->text());
            action->setCheckable(true);
            action->setChecked(!m_runs->isColumnHidden(c));
            connect(action, &QAction::toggled, this, [this, c](bool on) { setRunColumnVisible(c, on); });
        }
        menu.exec(m_runs->horizontalHeader()->mapToGlobal(at));
    });
    m_runs->horizontalHeader()->setStretchLastSection(true);
    m_runs->verticalHeader()->hide();
    m_runs->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_runs->setSelectionMode(QAbstractItemView::SingleSelection);
    m_runs->setContextMenuPolicy(Qt::CustomContextMenu);
    m_runs->setToolTip(
        tr("Double-click a run for its attempts and worker logs; right-click to retry or cancel it"));
    connect(m_runs, &QTableWidget::customContextMenuRequested, this, &StudyView::showRunMenu);
    connect(m_runs, &QTableView::doubleClicked, this, [this](const QModelIndex &index) {
        if (const QString id = runIdAt(index.row()); !id.isEmpty() && !m_studyId.isEmpty())
            showRunDetails(id);
    });
    // The run and its configuration stay in view when the table scrolls sideways.
    m_frozen = new FrozenColumns(m_runs, ConfigCol + 1);

    auto *tablePane = new QWidget;
    auto *top = new QVBoxLayout(tablePane);
    top->setContentsMargins(0, 0, 0, 0);
    top->addLayout(studyBar);
    top->addWidget(m_status);
    top->addLayout(filterBar);
    top->addWidget(m_runs, 1);
    // Why a speedup may mislead (a baseline that did not learn), or why there is none.
    m_resultsNote = new QLabel;
    m_resultsNote->setObjectName(QStringLiteral("resultsNote"));
    m_resultsNote->setWordWrap(true);
    m_resultsNote->setTextFormat(Qt::PlainText);
    m_resultsNote->hide();
    top->addWidget(m_resultsNote);
    m_charts = new app::StudyCharts;
    m_tune = new app::TuneCharts; // in the charts' place while a tune is open
    m_tune->hide();
    connect(m_tune, &app::TuneCharts::trialActivated, this, [this](const QString &runId) {
        if (!m_studyId.isEmpty())
            showRunDetails(runId);
    });
    m_split = new QSplitter(Qt::Vertical);
    m_split->setObjectName(QStringLiteral("studySplit"));
    m_split->addWidget(tablePane);
    m_split->addWidget(m_charts);
    m_split->addWidget(m_tune);
    m_split->setStretchFactor(0, 2);
    m_split->setStretchFactor(1, 3);
    auto *layout = new QHBoxLayout(this);
    layout->addWidget(designer);
    layout->addWidget(m_split, 1);
}

Status StudyView::openJournal(const QString &stateDir)
{
    if (Status opened = m_journal.open(stateDir + QStringLiteral("/journal.sqlite")); !opened)
        return opened;
    refreshStudyList();
    return Status::success();
}

void StudyView::setAgents(const QList<AgentEndpoint> &agents)
{
    m_agents = agents;
    QStringList names;
    for (const auto &a : agents)
        names << a.name;
    for (const QString &gone : m_inventories.keys())
        if (!names.contains(gone))
            m_inventories.remove(gone);
    updateDatasetChoices();
    if (StudyRunner *runner = m_runner) // a reconnected agent may have a new address
        QMetaObject::invokeMethod(runner, [runner, agents] { runner->setAgents(agents); });
    preview();
}

void StudyView::setInventory(const QString &agent, const v1::DescribeResponse &inventory)
{
    m_inventories.insert(agent, inventory);
    updateDatasetChoices();
    preview();
}

void StudyView::updateDatasetChoices()
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

void StudyView::updateDatasetNote()
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

void StudyView::setDefaultDataset(const QString &dataset)
{
    if (!dataset.isEmpty())
        m_dataset->setText(dataset);
}

v1::StudyPlan StudyView::planFromForm(QStringList *problems) const
{
    v1::StudyPlan plan = m_loaded; // overrides, baseline sizes, training options: as loaded
    const bool tune = plan.has_tune(); // its trials come from its search space, not the grid
    plan.clear_grid();
    plan.set_name(m_name->text().trimmed().toStdString());
    plan.set_dataset(m_dataset->text().trimmed().toStdString());
    plan.mutable_baseline()->set_skip(tune || !m_baseline->isChecked());
    v1::StudyGrid ignored;
    auto *g = tune ? &ignored : plan.mutable_grid();
    for (int v : parseList<int>(m_workers, tr("Workers"), problems))
        g->add_workers(v);
    for (int v : parseList<int>(m_batch, tr("Batch per worker"), problems))
        g->add_batch_size(v);
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
    if (const QString lr = m_lr->text().trimmed(); lr.compare(QLatin1String("auto"), Qt::CaseInsensitive) == 0) {
        plan.set_learning_rate_auto(true);
    } else if (!lr.isEmpty()) {
        bool ok = false;
        const double value = lr.toDouble(&ok);
        if (ok)
            plan.mutable_training()->set_learning_rate(value);
        else
            *problems << tr("Learning rate: \"%1\" is neither a number nor \"auto\"").arg(lr);
    }
    *problems << validatePlan(plan);
    return plan;
}

void StudyView::findLearningRate()
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

void StudyView::setForm(const v1::StudyPlan &plan)
{
    m_loaded = plan;
    const auto &g = plan.grid();
    m_name->setText(QString::fromStdString(plan.name()));
    m_dataset->setText(QString::fromStdString(plan.dataset()));
    m_baseline->setChecked(!plan.baseline().skip());
    m_workers->setText(joinList(g.workers()));
    m_batch->setText(joinList(g.batch_size()));
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
    m_repeats->setValue(std::max(1, plan.repeats()));
    m_repeatSeeds->setCurrentIndex(plan.repeat_seeds() == "vary" ? 1 : 0);
    m_maxFailures->setValue(plan.has_max_failures() ? plan.max_failures() : 2);
    m_target->setValue(plan.target_accuracy() * 100);
    m_maxTrain->setValue(int(plan.training().max_train_images()));
    m_lr->setText(plan.learning_rate_auto()           ? QStringLiteral("auto")
            : plan.training().has_learning_rate() ? QString::number(plan.training().learning_rate(), 'g', 17)
                                                  : QString());
    m_placement->setCurrentText(
        plan.placement().empty() ? QStringLiteral("pack") : QString::fromStdString(plan.placement()));
    m_planAgents->setText(core::planAgentSpecs(plan).join(QLatin1String(", ")));
    // A tune draws its trials from its search space: the grid's fields do not apply.
    const QString tuneNote = tr("A tune: its trials are drawn from the plan's search space (load another plan to "
                                "design a grid)");
    for (QWidget *w : std::initializer_list<QWidget *> { m_baseline, m_workers, m_batch, m_epochs, m_gpus, m_threads,
             m_precision, m_lrRule, m_repeats, m_repeatSeeds, m_lr }) {
        w->setEnabled(!plan.has_tune());
        w->setToolTip(plan.has_tune() ? tuneNote : QString());
    }
    m_launch->setText(plan.has_tune() ? tr("Launch tune") : tr("Launch study"));
}

QString StudyView::describeProblem(const QString &problem, QWidget **field) const
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

void StudyView::markProblems(const QStringList &problems)
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
    const bool dark = palette().color(QPalette::Window).lightness() < 128;
    m_problems->setStyleSheet(QStringLiteral("color: %1; font-weight: 600;").arg(dark ? "#ff8a80" : "#c62828"));
    m_problems->setText(tr("Cannot launch:\n") + lines.join(QLatin1Char('\n')));
}

// Before launch: the runs the plan makes, where each would go, which cannot be placed.
void StudyView::preview()
{
    // While a study runs the table shows it; the designer is still checked and summarised
    // below it, so an edit is answered at once, and Launch starts the edited plan.
    const bool studyShown = !m_studyId.isEmpty() && m_runner;
    QStringList problems;
    const v1::StudyPlan plan = planFromForm(&problems);
    // A data set no connected agent has: every run would wait. Said before launch, not after.
    const auto anyAgentHas = [this](const std::string &name) {
        for (const auto &inventory : std::as_const(m_inventories))
            for (const auto &d : inventory.datasets())
                if (d.name() == name)
                    return true;
        return false;
    };
    if (!m_inventories.isEmpty() && !plan.dataset().empty() && !anyAgentHas(plan.dataset()))
        problems << tr("dataset: no connected agent has a data set '%1' (pick one of theirs, or create a synthetic "
                       "set on one: Run tab, New synthetic set)")
                        .arg(QString::fromStdString(plan.dataset()));
    m_launch->setEnabled(problems.isEmpty());
    markProblems(problems);
    if (!problems.isEmpty()) {
        if (!studyShown) {
            m_runs->setRowCount(0); // not the last valid plan's runs: this one has none yet
            m_status->setText(tr("Preview: the plan cannot be launched as it is"));
        }
        return;
    }
    QList<NodeCapacity> nodes;
    for (const auto &a : m_agents) {
        NodeCapacity n;
        n.agent = a.name;
        v1::DescribeResponse d;
        if (const auto known = m_inventories.constFind(a.name); known != m_inventories.constEnd()) {
            d = *known; // kept fresh by the Agents tab
            n.reachable = true;
        } else { // no inventory yet: ask (briefly)
            const CallResult r = AgentClient(a.address, a.token, a.tls.orEnvironment()).describe(&d, 1500);
            n.reachable = r.ok();
            n.error = r.message;
        }
        n.host = QString::fromStdString(d.hostname());
        n.cpuCores = d.cpu_cores();
        n.freeSlots = d.free_slots();
        n.gpus = d.gpus_size();
        for (const auto &dataset : d.datasets())
            n.datasets << QString::fromStdString(dataset.name());
        nodes << n;
    }
    const auto runs = expandPlan(plan, QStringLiteral("new"));
    int infeasible = 0;
    const auto placementOf = [&](const RunConfig &config) {
        return placeRun(config, nodes, plan.placement() == "spread" ? PlacementPolicy::Spread : PlacementPolicy::Pack,
            false, QString::fromStdString(plan.dataset()));
    };
    if (studyShown) {
        for (const auto &r : runs)
            infeasible += placementOf(r.config).infeasible ? 1 : 0;
        m_problems->setStyleSheet({});
        m_problems->setText((isTune(plan) ? tr("The designer's plan: a tune of %n trial(s)", nullptr, int(runs.size()))
                                          : tr("The designer's plan: %n run(s)", nullptr, int(runs.size())))
            + (infeasible ? tr(", %1 cannot be placed").arg(infeasible) : QString())
            + tr(". The table shows study %1; Launch starts the designer's plan as a new study.").arg(m_studyId));
        return;
    }
    m_runs->setSortingEnabled(false);
    m_runs->setRowCount(int(runs.size()));
    QList<RunConfig> configs;
    for (const auto &r : runs)
        configs << r.config;
    const QStringList labels = distinguishingLabels(configs);
    for (int i = 0; i < runs.size(); ++i) {
        const Placement p = placementOf(runs[i].config);
        QStringList where;
        for (const auto &portion : p.portions)
            where << QStringLiteral("%1 ×%2").arg(portion.agent).arg(portion.ranks.size());
        infeasible += p.infeasible ? 1 : 0;
        for (int c = 0; c < RunColumnCount; ++c)
            m_runs->setItem(i, c, item({}));
        QTableWidgetItem *name = item(shortRunName(runs[i].runId, QStringLiteral("new")));
        name->setData(kRunIdRole, runs[i].runId);
        m_runs->setItem(i, RunCol, name);
        QTableWidgetItem *config = item(runs[i].trial ? paramsText(runs[i].params) : labels.value(i));
        config->setToolTip(runs[i].config.key());
        m_runs->setItem(i, ConfigCol, config);
        m_runs->setItem(i, StateCol, item(p.infeasible ? tr("INFEASIBLE") : tr("planned")));
        m_runs->setItem(i, AgentsCol, item(where.join(QLatin1String(", "))));
        // Where it would run, or why it cannot: in view, not in a hidden column.
        QTableWidgetItem *why = item(p.ok() ? tr("on %1").arg(where.join(QLatin1String(", "))) : p.reason);
        why->setToolTip(why->text());
        m_runs->setItem(i, WhyCol, why);
    }
    m_frozen->sync();
    m_problems->setStyleSheet({});
    m_problems->setText((isTune(plan) ? tr("A tune of %n trial(s); scheduler %1", nullptr, int(runs.size()))
                                              .arg(QString::fromStdString(plan.tune().scheduler().kind().empty()
                                                      ? "none"
                                                      : plan.tune().scheduler().kind()))
                                        : tr("%n run(s)", nullptr, int(runs.size())))
        + (infeasible ? tr("; %1 cannot be placed on the agents (they wait, PENDING, with the reason)")
                            .arg(infeasible)
                      : QString()));
    m_status->setText(tr("Preview of the plan — not launched"));
}

Status StudyView::launch()
{
    QStringList problems;
    const v1::StudyPlan plan = planFromForm(&problems);
    if (!problems.isEmpty()) {
        const QString why = tr("Cannot launch:\n") + problems.join(QLatin1Char('\n'));
        m_problems->setText(why);
        return Status::failure(why);
    }
    if (!m_journal.isOpen())
        return Status::failure(tr("No study journal is open"));
    if (plan.agents_size() > 0)
        Q_EMIT agentsNamed(core::planAgentSpecs(plan), m_planDir);
    StudyRunner creator(&m_journal);
    creator.setAgents(m_agents);
    const auto created = creator.createStudy(plan);
    if (!created)
        return Status::failure(created.error());
    refreshStudyList();
    return open(created.value());
}

Status StudyView::open(const QString &studyId)
{
    if (studyId.isEmpty() || !m_journal.hasStudy(studyId))
        return Status::failure(tr("No study %1 in the journal").arg(studyId));
    stopRunner();
    if (studyId != m_studyId) {
        m_charts->clear();
        m_tune->clear();
        m_progress.clear();
    }
    m_studyId = studyId;
    auto *runner = new StudyRunner(&m_journal);
    runner->setAgents(m_agents);
    runner->moveToThread(&m_thread);
    m_runner = runner;
    connect(runner, &StudyRunner::stateChanged, this, [this] { m_dirty = true; });
    connect(runner, &StudyRunner::runEvents, this,
        [this](const QString &runId, int attempt, const std::vector<v1::RunEvent> &events) {
            auto &[measured, meter] = m_progress[runId];
            if (measured != attempt) { // a new attempt measures afresh
                measured = attempt;
                meter = core::ProgressMeter();
            }
            for (const auto &event : events)
                if (event.rank() <= 0) // rank 0 and the run's own; every rank says "started"
                    meter.apply(event);
            m_dirty = true;
        });
    connect(runner, &StudyRunner::message, this, [this](const QString &line) { m_status->setText(line); });
    connect(runner, &StudyRunner::fatal, this,
        [this](const QString &e) { m_status->setText(tr("Stopped: %1").arg(e)); });
    connect(runner, &StudyRunner::finished, this, [this](const QString &state) {
        m_dirty = true;
        m_status->setText(tr("Study %1 ended: %2").arg(m_studyId, state));
        refreshStudyList();
        Q_EMIT studyFinished(state);
    });
    QMetaObject::invokeMethod(runner, [this, runner, studyId] {
        if (const Status driven = runner->drive(studyId); !driven)
            QMetaObject::invokeMethod(this, [this, e = driven.error()] { m_status->setText(e); });
    });
    m_studies->setCurrentIndex(m_studies->findData(studyId));
    m_dirty = true;
    return Status::success();
}

void StudyView::stopRunner()
{
    if (!m_runner)
        return;
    // The runner lives on its thread: delete it there (it joins its stream threads).
    StudyRunner *runner = m_runner;
    QMetaObject::invokeMethod(
        runner, [runner] { delete runner; }, Qt::BlockingQueuedConnection);
    m_runner = nullptr;
}

StudySnapshot StudyView::snapshot() const
{
    if (m_studyId.isEmpty())
        return {};
    return buildSnapshot(StudyState::replay(m_journal.events(m_studyId)), m_journal);
}

void StudyView::refresh()
{
    m_dirty = false;
    if (m_studyId.isEmpty())
        return;
    const StudySnapshot s = snapshot();
    const StudyResults results = computeStudyResults(s);
    m_runs->setSortingEnabled(false);
    m_runs->setRowCount(int(s.runs.size()));
    QList<RunConfig> configs;
    for (const RunResult &r : s.runs)
        configs << r.config;
    const QStringList labels = distinguishingLabels(configs);
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        const Speedup sp = i < results.runs.size() ? results.runs[i].byWallClock : Speedup {};
        const QStringList agents = r.attempts.isEmpty() ? QStringList() : r.attempts.last().agents;
        QTableWidgetItem *name = item(shortRunName(r.runId, m_studyId));
        name->setData(kRunIdRole, r.runId);
        name->setToolTip(r.runId);
        m_runs->setItem(i, RunCol, name);
        QTableWidgetItem *config = item(r.trial ? paramsText(r.params) : labels.value(i));
        config->setToolTip(r.config.key()); // the whole configuration
        m_runs->setItem(i, ConfigCol, config);
        m_runs->setItem(i, StateCol, item(r.trial ? trialStatus(r) : r.state));
        const auto live = m_progress.find(r.runId);
        const core::ProgressView view = live != m_progress.end() ? live->second.second.view() : core::ProgressView {};
        double fraction = 0;
        QTableWidgetItem *progress
            = item(progressText(r, live != m_progress.end() ? &view : nullptr, &fraction));
        progress->setData(kFractionRole, fraction);
        m_runs->setItem(i, ProgressCol, progress);
        m_runs->setItem(i, AccuracyCol, item(pct(r.epochs.isEmpty() ? kNotMeasured : r.epochs.last().testAccuracy)));
        m_runs->setItem(
            i, ImagesCol, item(num(r.imagesPerSecond, 1))); // core::runImagesPerSecond, as every report
        m_runs->setItem(i, SpeedupCol, item(num(sp.speedup, 2)));
        m_runs->setItem(i, EfficiencyCol, item(pct(sp.efficiency)));
        m_runs->setItem(i, AttemptCol, item(QString::number(r.attempts.size())));
        m_runs->setItem(i, AgentsCol, item(agents.join(QLatin1String(", "))));
        m_runs->setItem(i, WallCol, item(num(r.wallSeconds, 1)));
        QTableWidgetItem *why = item(r.stateReason);
        why->setToolTip(r.stateReason);
        m_runs->setItem(i, WhyCol, why);
    }
    m_runs->setSortingEnabled(true);
    m_runs->resizeColumnsToContents();
    // The configuration can be long: a third of the table at most, whole in its tooltip.
    m_runs->setColumnWidth(ConfigCol, qMin(m_runs->columnWidth(ConfigCol), qMax(160, m_runs->width() / 3)));
    m_runs->setColumnWidth(ProgressCol, qMax(m_runs->columnWidth(ProgressCol), 120));
    const QString note = !results.baselineWarning.isEmpty()
        ? tr("Warning: %1").arg(results.baselineWarning)
        : results.baselineNote;
    m_resultsNote->setText(note);
    m_resultsNote->setStyleSheet(results.baselineWarning.isEmpty() ? QString()
                                                                   : QStringLiteral("color: #b45309; font-weight: 600;"));
    m_resultsNote->setVisible(!note.isEmpty() && !s.tune); // a tune has no baseline by design
    // Speedups need a baseline: a tune's table has none to show. Hidden for the tune
    // only, so the user's own choice of columns comes back with the next study.
    for (int c : { SpeedupCol, EfficiencyCol }) {
        if (s.tune && !m_runs->isColumnHidden(c)) {
            m_runs->setColumnHidden(c, true);
            m_hiddenForTune.insert(c);
        } else if (!s.tune && m_hiddenForTune.remove(c)) {
            m_runs->setColumnHidden(c, false);
        }
    }
    applyFilter();
    // A tune has no speedups: its trials, their metric and hyperparameters instead.
    m_charts->setVisible(!s.tune);
    m_tune->setVisible(s.tune);
    if (s.tune)
        m_tune->update(s);
    else
        m_charts->update(s, results, m_journal);
    m_cancel->setEnabled(!m_studyId.isEmpty() && s.state == QLatin1String("RUNNING"));
    m_export->setEnabled(!m_studyId.isEmpty());
    if (s.synthetic)
        m_status->setText(m_status->text().startsWith(QLatin1String("SYNTHETIC"))
                ? m_status->text()
                : tr("SYNTHETIC DATA — ") + m_status->text());
}

void StudyView::applyFilter()
{
    const QString text = m_filter->text().trimmed();
    const QStringList states
        = m_stateFilter->currentData().toString().split(QLatin1Char('|'), Qt::SkipEmptyParts);
    for (int row = 0; row < m_runs->rowCount(); ++row) {
        const QTableWidgetItem *state = m_runs->item(row, StateCol);
        bool show = states.isEmpty() || (state && states.contains(state->text()));
        if (show && !text.isEmpty()) {
            show = false;
            for (int c = 0; c < m_runs->columnCount() && !show; ++c)
                if (const QTableWidgetItem *i = m_runs->item(row, c))
                    show = i->text().contains(text, Qt::CaseInsensitive) // or the full id and key
                        || i->toolTip().contains(text, Qt::CaseInsensitive);
        }
        m_runs->setRowHidden(row, !show);
    }
    m_frozen->sync();
}

QString StudyView::selectedRun() const
{
    const auto rows = m_runs->selectionModel()->selectedRows();
    if (rows.isEmpty() || m_studyId.isEmpty())
        return {};
    return runIdAt(rows.first().row());
}

QString StudyView::runIdAt(int row) const
{
    const QTableWidgetItem *name = m_runs->item(row, RunCol);
    return name ? name->data(kRunIdRole).toString() : QString();
}

void StudyView::setRunColumnVisible(int column, bool visible)
{
    if (column <= RunCol || column >= RunColumnCount)
        return; // the run's name always shows
    m_runs->setColumnHidden(column, !visible);
    m_frozen->sync();
}

void StudyView::showRunMenu(const QPoint &position)
{
    const QString runId = selectedRun();
    if (runId.isEmpty())
        return;
    QMenu menu;
    menu.addAction(tr("Details and logs…"), this, [this, runId] { showRunDetails(runId); });
    menu.addSeparator();
    const auto report = [this](const Status &done) {
        if (!done)
            m_status->setText(done.error());
    };
    menu.addAction(tr("Retry run"), this, [this, runId, report] { report(retryRun(runId)); });
    menu.addAction(tr("Cancel run"), this, [this, runId, report] { report(cancelRun(runId)); });
    if (const RunProgress *run = StudyState::replay(m_journal.events(m_studyId)).run(runId); run && run->planned.trial) {
        menu.addSeparator();
        menu.addAction(tr("Continue trial for more epochs…"), this, [this, runId, report] {
            bool ok = false;
            const int more = QInputDialog::getInt(this, tr("Continue trial"),
                tr("Train %1 this many more epochs, from its last checkpoint:").arg(runId), 3, 1, 1000, 1, &ok);
            if (!ok)
                return;
            report(continueTrial(runId, more));
        });
    }
    menu.exec(m_runs->viewport()->mapToGlobal(position));
}

Status StudyView::continueTrial(const QString &runId, int moreEpochs)
{
    const bool ended = StudyState::replay(m_journal.events(m_studyId)).ended();
    if (Status recorded = StudyRunner::requestContinue(&m_journal, m_studyId, runId, moreEpochs); !recorded)
        return recorded;
    m_status->setText(tr("%1 continues for %2 more epoch(s) from its last checkpoint").arg(runId).arg(moreEpochs));
    m_dirty = true;
    return ended || !m_runner ? open(m_studyId) : Status::success();
}

RunDetails *StudyView::showRunDetails(const QString &runId)
{
    auto *details = new RunDetails(
        m_journal, runId,
        [this, runId](RunResult *out) {
            for (const RunResult &r : snapshot().runs)
                if (r.runId == runId) {
                    *out = r;
                    return true;
                }
            return false;
        },
        this);
    details->setProgressSource([this, runId]() -> std::optional<core::ProgressView> {
        const auto live = m_progress.find(runId);
        if (live == m_progress.end())
            return std::nullopt;
        return live->second.second.view();
    });
    connect(details, &RunDetails::retryRequested, this, [this, details](const QString &id) {
        if (const Status recorded = retryRun(id); !recorded)
            QMessageBox::warning(details, tr("Retry run"), recorded.error());
        details->refresh();
    });
    connect(details, &RunDetails::cancelRequested, this, [this, details](const QString &id) {
        if (const Status recorded = cancelRun(id); !recorded)
            QMessageBox::warning(details, tr("Cancel run"), recorded.error());
        details->refresh();
    });
    details->show();
    return details;
}

Status StudyView::retryRun(const QString &runId)
{
    const bool ended = StudyState::replay(m_journal.events(m_studyId)).ended();
    if (Status recorded = StudyRunner::requestRetry(&m_journal, m_studyId, runId); !recorded)
        return recorded;
    m_status->setText(tr("Retry of %1 recorded: it resumes from its last checkpoint").arg(runId));
    m_dirty = true;
    // A runner that saw the study end has stopped: start one again to drive the retry.
    return ended || !m_runner ? open(m_studyId) : Status::success();
}

Status StudyView::cancelRun(const QString &runId)
{
    if (Status recorded = StudyRunner::requestCancel(&m_journal, m_studyId, runId); !recorded)
        return recorded;
    m_dirty = true;
    return Status::success();
}

QString StudyView::unfinishedStudy(const QString &preferred) const
{
    const auto unfinished = [this](const QString &id) {
        return m_journal.hasStudy(id) && !StudyState::replay(m_journal.events(id)).ended();
    };
    if (!preferred.isEmpty() && unfinished(preferred))
        return preferred;
    const QStringList ids = m_journal.studyIds();
    for (auto it = ids.crbegin(); it != ids.crend(); ++it)
        if (unfinished(*it))
            return *it;
    return {};
}

void StudyView::saveSettings(QSettings &settings) const
{
    settings.setValue(QStringLiteral("study/split"), m_split->saveState());
    settings.setValue(QStringLiteral("study/lastStudy"), m_studyId);
    settings.setValue(QStringLiteral("study/chartTab"), m_charts->tabs()->currentIndex());
    settings.setValue(QStringLiteral("study/tuneTab"), m_tune->tabs()->currentIndex());
    m_charts->controls()->save(settings, QStringLiteral("studyCharts"));
    settings.setValue(QStringLiteral("study/plan"), QString::fromUtf8(planToJson([this] {
        QStringList ignored;
        return planFromForm(&ignored);
    }())));
    settings.setValue(QStringLiteral("study/planDir"), m_planDir);
    QStringList hidden;
    for (int c = ConfigCol; c < RunColumnCount; ++c)
        if (m_runs->isColumnHidden(c) && !m_hiddenForTune.contains(c))
            hidden << QLatin1String(kRunColumnKeys[c]);
    settings.setValue(QStringLiteral("study/hiddenColumns"), hidden.isEmpty() ? QStringLiteral("none") : hidden.join(u','));
}

void StudyView::restoreSettings(const QSettings &settings)
{
    m_split->restoreState(settings.value(QStringLiteral("study/split")).toByteArray());
    m_charts->tabs()->setCurrentIndex(settings.value(QStringLiteral("study/chartTab"), 0).toInt());
    m_tune->tabs()->setCurrentIndex(settings.value(QStringLiteral("study/tuneTab"), 0).toInt());
    m_charts->controls()->restore(settings, QStringLiteral("studyCharts"));
    if (const auto plan = parsePlanJson(settings.value(QStringLiteral("study/plan")).toString().toUtf8()))
        setForm(*plan);
    m_planDir = settings.value(QStringLiteral("study/planDir")).toString();
    if (settings.contains(QStringLiteral("study/hiddenColumns"))) {
        const QStringList hidden = settings.value(QStringLiteral("study/hiddenColumns")).toString().split(u',');
        for (int c = ConfigCol; c < RunColumnCount; ++c)
            setRunColumnVisible(c, !hidden.contains(QLatin1String(kRunColumnKeys[c])));
    }
}

void StudyView::refreshStudyList()
{
    const QSignalBlocker blocker(m_studies);
    m_studies->clear();
    for (const QString &id : m_journal.studyIds()) {
        const StudyState state = StudyState::replay(m_journal.events(id));
        m_studies->addItem(QStringLiteral("%1 — %2 — %3").arg(id, state.name(), state.state()), id);
    }
    if (const int current = m_studies->findData(m_studyId); current >= 0)
        m_studies->setCurrentIndex(current);
}

void StudyView::exportReport()
{
    if (m_studyId.isEmpty())
        return;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export report"),
        m_studyId + QStringLiteral(".html"), tr("Reports (*.html *.pdf *.json *.csv)"));
    if (path.isEmpty())
        return;
    const auto format = reportFormatForPath(path);
    if (!format) {
        QMessageBox::warning(
            this, tr("Export report"), tr("Use a name ending in .html, .pdf, .json or .csv"));
        return;
    }
    const WrittenReport written = writeReport(snapshot(), *format, path);
    if (!written.error.isEmpty()) {
        QMessageBox::warning(this, tr("Export report"), written.error);
        return;
    }
    QDesktopServices::openUrl(QUrl::fromLocalFile(written.paths.first())); // show what was written
}

void StudyView::loadPlan()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Load plan"), {}, tr("Study plans (*.json)"));
    if (path.isEmpty())
        return;
    if (const Status loaded = loadPlanFile(path); !loaded)
        m_problems->setText(loaded.error());
}

Status StudyView::loadPlanFile(const QString &path)
{
    const auto plan = core::loadPlan(path);
    if (!plan)
        return Status::failure(tr("Cannot load %1:\n%2").arg(path, plan.error().join(QLatin1Char('\n'))));
    m_planDir = QFileInfo(path).absolutePath();
    setForm(*plan);
    if (plan->agents_size() > 0)
        Q_EMIT agentsNamed(core::planAgentSpecs(*plan), m_planDir);
    return Status::success();
}

void StudyView::savePlan()
{
    QStringList problems;
    const v1::StudyPlan plan = planFromForm(&problems);
    if (!problems.isEmpty()) {
        m_problems->setText(tr("Cannot save:\n") + problems.join(QLatin1Char('\n')));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save plan"), QStringLiteral("plan.json"), tr("Study plans (*.json)"));
    if (path.isEmpty())
        return;
    if (const Status saved = core::savePlan(plan, path); !saved)
        m_problems->setText(saved.error());
}

} // namespace scalelab::app
