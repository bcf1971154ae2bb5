#include "runs_table.h"

#include "goodput_model.h"

#include "cell_bars.h"
#include "frozen_columns.h"
#include "study_view.h"
#include "tune_plan.h"

#include <QComboBox>
#include <QHeaderView>
#include <QLineEdit>
#include <QMenu>
#include <QSettings>
#include <QTableWidget>

#include <array>
#include <cmath>

namespace scalelab::app {
namespace {

using namespace scalelab::core;
using V = StudyView; // the columns

QString pct(double v)
{
    return std::isfinite(v) ? QString::number(v * 100, 'f', 1) + QLatin1Char('%') : QString();
}
QString num(double v, int d)
{
    return std::isfinite(v) ? QString::number(v, 'f', d) : QString();
}

constexpr int kRunIdRole = Qt::UserRole; // the run's full id, on the Run column
constexpr int kFractionRole = Qt::UserRole + 1; // how far the run is, 0..1, on Progress

// What one cell says and keeps; an invalid QVariant is a role the cell does not have.
struct Cell {
    QString text;
    QVariant toolTip;
    QVariant runId; // kRunIdRole
    QVariant fraction; // kFractionRole
};
using Row = std::array<Cell, V::RunColumnCount>;

// Puts `row` in the table's row `at`. A new item is made as the table's items always were
// (not editable, only the roles given); an item already there is given the same values
// instead, each only where it differs, so an unchanged cell emits no dataChanged.
void putRow(QTableWidget *table, int at, const Row &row)
{
    for (int c = 0; c < V::RunColumnCount; ++c) {
        const Cell &cell = row[std::size_t(c)];
        const std::pair<int, const QVariant *> roles[] = { { Qt::ToolTipRole, &cell.toolTip },
            { kRunIdRole, &cell.runId }, { kFractionRole, &cell.fraction } };
        if (QTableWidgetItem *shown = table->item(at, c)) {
            if (shown->text() != cell.text)
                shown->setText(cell.text);
            for (const auto &[role, value] : roles)
                if (shown->data(role) != *value)
                    shown->setData(role, *value);
            continue;
        }
        auto *made = new QTableWidgetItem(cell.text);
        made->setFlags(made->flags() & ~Qt::ItemIsEditable);
        for (const auto &[role, value] : roles)
            if (value->isValid())
                made->setData(role, *value);
        table->setItem(at, c, made);
    }
}

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

const char *const kRunColumnKeys[] = { "run", "configuration", "state", "progress", "workers", "accuracy",
    "images", "speedup", "efficiency", "to-target", "noise", "attempt", "agents", "wall", "why" };

// The run's gradient noise scale (core's GradientNoise) in the runs table: B_simple, and
// "past" where its global batch is 4× or more past it (goodput_model.h).
QString noiseText(const RunResult &r)
{
    if (!r.noise.known())
        return r.noise.measured() ? QStringLiteral("…") : QString();
    const QString past = core::pastCriticalText(r.config.globalBatch(), r.noise.bSimple);
    return QString::number(r.noise.bSimple, 'f', 0)
        + (past.isEmpty() ? QString() : QStringLiteral(" · past"));
}

// The Workers column: the planned size ("2"), an elastic run's range ("1–2"), and once it
// trained at another size, the sizes in order (core::elasticSizesText: "2 → 1 → 2 workers").
QString workersText(const RunConfig &c, const QString &sizes)
{
    if (!sizes.isEmpty())
        return sizes;
    return c.elastic() ? QStringLiteral("%1–%2").arg(c.minWorkers).arg(c.workers)
                       : QString::number(c.workers);
}

// What an elastic run does, and why each of its attempts changed size.
QString workersToolTip(const RunConfig &c, const QList<AttemptRecord> &attempts)
{
    if (!c.elastic())
        return {};
    QStringList lines { QObject::tr("Elastic: goes on with as few as %1 of its %2 workers when workers or "
                                    "hosts are lost, at the same global batch of %3 (a step averages %4 "
                                    "micro-batches), and grows back at a checkpoint when they return.")
                            .arg(c.minWorkers)
                            .arg(c.workers)
                            .arg(c.globalBatch())
                            .arg(c.batchesPerStep()) };
    for (const AttemptRecord &a : attempts)
        if (!a.resize.isEmpty())
            lines << QObject::tr("Attempt %1: %2.").arg(a.attempt).arg(a.resize);
    return lines.join(QLatin1Char('\n'));
}

QString noiseToolTip(const RunResult &r)
{
    if (!r.noise.measured())
        return {};
    if (!r.noise.known())
        return QObject::tr(
            "Gradient noise scale not known yet: the averaged |G|² is not positive after %1 steps.")
            .arg(r.noise.samples);
    QString text
        = QObject::tr("Gradient noise scale B_simple = tr(Σ)/|G|² = %1 images, about the critical batch; the "
                      "global batch %2 is %3× it. %4 over %5 steps (docs/scaling.md).")
              .arg(r.noise.bSimple, 0, 'f', 0)
              .arg(r.config.globalBatch())
              .arg(r.config.globalBatch() / r.noise.bSimple, 0, 'f', 2)
              .arg(r.noise.differenced ? QObject::tr("One rank: the differenced estimator, biased while the "
                                                     "gradient moves,")
                                       : QObject::tr("Across %1 batches a step,").arg(r.noise.batchesPerStep))
              .arg(r.noise.samples);
    if (const QString past = core::pastCriticalText(r.config.globalBatch(), r.noise.bSimple); !past.isEmpty())
        text += QLatin1Char(' ') + past.left(1).toUpper() + past.mid(1) + QLatin1Char('.');
    return text;
}

} // namespace

RunsTable::RunsTable(QObject *parent)
    : QObject(parent)
{
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
    connect(m_filter, &QLineEdit::textChanged, this, &RunsTable::applyFilter);
    connect(m_stateFilter, &QComboBox::currentIndexChanged, this, &RunsTable::applyFilter);

    m_table = new QTableWidget(0, V::RunColumnCount);
    m_table->setObjectName(QStringLiteral("runsTable"));
    m_table->setHorizontalHeaderLabels({ tr("Run"), tr("Configuration"), tr("State"), tr("Progress"),
        tr("Workers"), tr("Test acc"), tr("img/s"), tr("Speedup"), tr("Efficiency"), tr("To target"),
        tr("B_simple"), tr("Attempt"), tr("Agents"), tr("Wall s"), tr("Why") });
    m_table->setItemDelegateForColumn(V::ProgressCol, new ProgressDelegate(kFractionRole, m_table));
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(V::RunCol, Qt::AscendingOrder); // r01, r02, …: the plan's order
    for (int c : { V::AttemptCol, V::AgentsCol, V::WallCol })
        m_table->setColumnHidden(c, true);
    hideFor(V::WorkersCol, true); // until a study or plan has an elastic run
    // Which columns show: right-click the header.
    m_table->horizontalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(
        m_table->horizontalHeader(), &QWidget::customContextMenuRequested, this, [this](const QPoint &at) {
            QMenu menu;
            for (int c = V::ConfigCol; c < V::RunColumnCount; ++c) {
                QAction *action = menu.addAction(m_table->horizontalHeaderItem(c)->text());
                action->setCheckable(true);
                action->setChecked(!m_table->isColumnHidden(c));
                connect(action, &QAction::toggled, this, [this, c](bool on) { setColumnVisible(c, on); });
            }
            menu.exec(m_table->horizontalHeader()->mapToGlobal(at));
        });
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->verticalHeader()->hide();
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setContextMenuPolicy(Qt::CustomContextMenu);
    m_table->setToolTip(
        tr("Double-click a run for its attempts and worker logs; right-click to retry or cancel it"));
    // The run and its configuration stay in view when the table scrolls sideways.
    m_frozen = new FrozenColumns(m_table, V::ConfigCol + 1);
}

void RunsTable::clear()
{
    m_table->setRowCount(0);
}

void RunsTable::showPlan(const QList<PlannedRun> &runs, const QList<Placement> &placements)
{
    m_table->setSortingEnabled(false);
    m_table->setRowCount(int(runs.size()));
    QList<RunConfig> configs;
    bool elastic = false;
    for (const auto &r : runs) {
        configs << r.config;
        elastic = elastic || r.config.elastic();
    }
    hideFor(V::WorkersCol, !elastic);
    const QStringList labels = distinguishingLabels(configs);
    for (int i = 0; i < runs.size(); ++i) {
        const Placement &p = placements[i];
        QStringList where;
        for (const auto &portion : p.portions)
            where << QStringLiteral("%1 ×%2").arg(portion.agent).arg(portion.ranks.size());
        Row row;
        row[V::RunCol].text = shortRunName(runs[i].runId, QStringLiteral("new"));
        row[V::RunCol].runId = runs[i].runId;
        row[V::ConfigCol].text = runs[i].trial ? paramsText(runs[i].params) : labels.value(i);
        row[V::ConfigCol].toolTip = runs[i].config.key();
        row[V::StateCol].text = p.infeasible ? tr("INFEASIBLE") : tr("planned");
        row[V::WorkersCol].text = workersText(runs[i].config, {});
        row[V::WorkersCol].toolTip = workersToolTip(runs[i].config, {});
        row[V::AgentsCol].text = where.join(QLatin1String(", "));
        // Where it would run, or why it cannot: in view, not in a hidden column.
        row[V::WhyCol].text = p.ok() ? tr("on %1").arg(where.join(QLatin1String(", "))) : p.reason;
        row[V::WhyCol].toolTip = row[V::WhyCol].text;
        putRow(m_table, i, row);
    }
    m_frozen->sync();
}

void RunsTable::showStudy(
    const StudySnapshot &s, const StudyResults &results, const QString &studyId, const LiveProgress &progress)
{
    m_table->setSortingEnabled(false);
    m_table->setRowCount(int(s.runs.size()));
    QList<RunConfig> configs;
    bool elastic = false;
    for (const RunResult &r : s.runs) {
        configs << r.config;
        elastic = elastic || r.config.elastic();
    }
    const QStringList labels = distinguishingLabels(configs, s.modelNames);
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        const RunOutcome outcome = i < results.runs.size() ? results.runs[i] : RunOutcome {};
        const Speedup &sp = outcome.shown();
        const QStringList agents = r.attempts.isEmpty() ? QStringList() : r.attempts.last().agents;
        Row row;
        row[V::RunCol].text = shortRunName(r.runId, studyId);
        row[V::RunCol].runId = r.runId;
        row[V::RunCol].toolTip = r.runId;
        row[V::ConfigCol].text = r.trial ? paramsText(r.params) : labels.value(i);
        row[V::ConfigCol].toolTip = r.config.key(); // the whole configuration
        row[V::StateCol].text = r.trial ? trialStatus(r) : r.state;
        const std::optional<ProgressView> live = progress(r.runId);
        double fraction = 0;
        row[V::ProgressCol].text = progressText(r, live ? &*live : nullptr, &fraction);
        row[V::ProgressCol].fraction = fraction;
        row[V::WorkersCol].text = workersText(r.config, elasticSizesText(r));
        row[V::WorkersCol].toolTip = workersToolTip(r.config, r.attempts);
        row[V::AccuracyCol].text = pct(r.epochs.isEmpty() ? kNotMeasured : r.epochs.last().testAccuracy);
        row[V::ImagesCol].text = num(r.imagesPerSecond, 1); // core::runImagesPerSecond, as every report
        // Wall-clock compares runs that do the baseline's work; others by images/s, said so.
        const QString basis = outcome.byThroughputShown() && sp.available() ? tr(" (img/s)") : QString();
        row[V::SpeedupCol].text = num(sp.speedup, 2) + basis;
        row[V::EfficiencyCol].text = pct(sp.efficiency) + basis;
        const QString why = outcome.byThroughputShown()
            ? tr("By images/s (this run / the baseline): %1.").arg(outcome.byWallClock.unavailableReason)
            : sp.unavailableReason;
        row[V::SpeedupCol].toolTip = why;
        row[V::EfficiencyCol].toolTip = why;
        const Speedup &toTarget = outcome.byTimeToAccuracy;
        row[V::TargetCol].text = toTarget.available()
            ? tr("%1× (%2)").arg(num(toTarget.speedup, 2), pct(toTarget.efficiency))
            : QString();
        row[V::TargetCol].toolTip = toTarget.available()
            ? tr(
                "By time to the target accuracy: the baseline's mean time to it / this run's, and that / the "
                "workers' ratio. Beside it, efficiency by throughput: %1.")
                  .arg(pct(outcome.byThroughput.efficiency))
            : toTarget.unavailableReason;
        row[V::NoiseCol].text = noiseText(r);
        row[V::NoiseCol].toolTip = noiseToolTip(r);
        row[V::AttemptCol].text = QString::number(r.attempts.size());
        row[V::AgentsCol].text = agents.join(QLatin1String(", "));
        row[V::WallCol].text = num(r.wallSeconds, 1);
        row[V::WhyCol].text = r.stateReason;
        row[V::WhyCol].toolTip = r.stateReason;
        putRow(m_table, i, row);
    }
    // Speedups need a baseline: a tune's table has none to show. Hidden for the tune
    // only, so the user's own choice of columns comes back with the next study. Before the
    // columns are sized: a hidden one is not.
    for (int c : { V::SpeedupCol, V::EfficiencyCol, V::TargetCol })
        hideFor(c, s.tune);
    hideFor(V::WorkersCol, !elastic); // the configuration says a fixed size already
    m_table->setSortingEnabled(true);
    m_table->resizeColumnsToContents();
    // The configuration can be long: a third of the table at most, whole in its tooltip.
    m_table->setColumnWidth(
        V::ConfigCol, qMin(m_table->columnWidth(V::ConfigCol), qMax(160, m_table->width() / 3)));
    m_table->setColumnWidth(V::ProgressCol, qMax(m_table->columnWidth(V::ProgressCol), 120));
    applyFilter();
}

void RunsTable::hideFor(int column, bool hide)
{
    if (hide && !m_table->isColumnHidden(column)) {
        m_table->setColumnHidden(column, true);
        m_hiddenFor.insert(column);
    } else if (!hide && m_hiddenFor.remove(column)) {
        m_table->setColumnHidden(column, false);
    }
}

void RunsTable::applyFilter()
{
    const QString text = m_filter->text().trimmed();
    const QStringList states
        = m_stateFilter->currentData().toString().split(QLatin1Char('|'), Qt::SkipEmptyParts);
    for (int row = 0; row < m_table->rowCount(); ++row) {
        const QTableWidgetItem *state = m_table->item(row, V::StateCol);
        bool show = states.isEmpty() || (state && states.contains(state->text()));
        if (show && !text.isEmpty()) {
            show = false;
            for (int c = 0; c < m_table->columnCount() && !show; ++c)
                if (const QTableWidgetItem *i = m_table->item(row, c))
                    show = i->text().contains(text, Qt::CaseInsensitive) // or the full id and key
                        || i->toolTip().contains(text, Qt::CaseInsensitive);
        }
        m_table->setRowHidden(row, !show);
    }
    m_frozen->sync();
}

QString RunsTable::selectedRunId() const
{
    const auto rows = m_table->selectionModel()->selectedRows();
    if (rows.isEmpty())
        return {};
    return runIdAt(rows.first().row());
}

QString RunsTable::runIdAt(int row) const
{
    const QTableWidgetItem *name = m_table->item(row, V::RunCol);
    return name ? name->data(kRunIdRole).toString() : QString();
}

void RunsTable::setColumnVisible(int column, bool visible)
{
    if (column <= V::RunCol || column >= V::RunColumnCount)
        return; // the run's name always shows
    m_table->setColumnHidden(column, !visible);
    m_hiddenFor.remove(column); // the user's choice from now on
    m_frozen->sync();
}

void RunsTable::saveColumns(QSettings &settings) const
{
    QStringList hidden;
    for (int c = V::ConfigCol; c < V::RunColumnCount; ++c)
        if (m_table->isColumnHidden(c) && !m_hiddenFor.contains(c))
            hidden << QLatin1String(kRunColumnKeys[c]);
    settings.setValue(
        QStringLiteral("study/hiddenColumns"), hidden.isEmpty() ? QStringLiteral("none") : hidden.join(u','));
}

void RunsTable::restoreColumns(const QSettings &settings)
{
    if (settings.contains(QStringLiteral("study/hiddenColumns"))) {
        const QStringList hidden
            = settings.value(QStringLiteral("study/hiddenColumns")).toString().split(u',');
        for (int c = V::ConfigCol; c < V::RunColumnCount; ++c)
            setColumnVisible(c, !hidden.contains(QLatin1String(kRunColumnKeys[c])));
    }
}

} // namespace scalelab::app
