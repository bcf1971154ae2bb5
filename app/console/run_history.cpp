#include "run_history.h"

#include "run_record.h"

#include <QClipboard>
#include <QDateTime>
#include <QEvent>
#include <QGuiApplication>
#include <QHeaderView>
#include <QMenu>
#include <QScopedValueRollback>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace scalelab::app {
namespace {

constexpr int kHistoryRunIdRole = Qt::UserRole + 1; // the run's full id, on the Run column

QString when(qint64 unixMs)
{
    if (unixMs <= 0)
        return QStringLiteral("-");
    const QDateTime t = QDateTime::fromMSecsSinceEpoch(unixMs);
    return t.date() == QDate::currentDate() ? t.toString(QStringLiteral("HH:mm:ss"))
                                            : t.toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

} // namespace

RunHistoryView::RunHistoryView(QWidget *parent)
    : QWidget(parent)
{
    m_tree = new QTreeWidget;
    m_tree->setObjectName(QStringLiteral("runHistory"));
    m_tree->setRootIsDecorated(false);
    m_tree->setUniformRowHeights(true);
    m_tree->setColumnCount(ColumnCount);
    m_tree->setHeaderLabels({ tr("Run"), tr("State"), tr("Test acc"), tr("img/s") });
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setSectionResizeMode(RunColumn, QHeaderView::Stretch);
    for (int c : { StateColumn, AccuracyColumn, ThroughputColumn })
        m_tree->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    m_tree->setContextMenuPolicy(Qt::CustomContextMenu);
    m_tree->setToolTip(tr("Single runs of this console, newest first. Tick a run to draw it beside the "
                          "current one; double-click to open it."));
    connect(m_tree, &QTreeWidget::customContextMenuRequested, this, &RunHistoryView::showMenu);
    connect(m_tree, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem *item) {
        Q_EMIT openRequested(item->data(RunColumn, kHistoryRunIdRole).toString());
    });
    connect(m_tree, &QTreeWidget::itemChanged, this, [this](QTreeWidgetItem *item, int column) {
        if (m_updating || column != RunColumn)
            return;
        Q_EMIT drawnChanged(
            item->data(RunColumn, kHistoryRunIdRole).toString(), item->checkState(RunColumn) == Qt::Checked);
    });
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_tree);
    fitCheckBoxesToPalette();
}

void RunHistoryView::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        fitCheckBoxesToPalette();
}

void RunHistoryView::fitCheckBoxesToPalette()
{
    // Fusion outlines an unticked box in the window colour, darkened: on a dark base that is
    // invisible. The tree's own window colour (it paints nothing else with it) is lifted so
    // the boxes show in a dark theme too.
    QPalette p = palette();
    if (p.color(QPalette::Base).lightness() < 128)
        p.setColor(QPalette::Window, p.color(QPalette::Text).darker(150));
    m_tree->setPalette(p);
}

QTreeWidgetItem *RunHistoryView::item(const QString &runId) const
{
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i)
        if (m_tree->topLevelItem(i)->data(RunColumn, kHistoryRunIdRole).toString() == runId)
            return m_tree->topLevelItem(i);
    return nullptr;
}

void RunHistoryView::setRun(const core::SingleRunEntry &entry, const RunHistoryResult &result)
{
    QScopedValueRollback<bool> updating(m_updating, true);
    QTreeWidgetItem *row = item(entry.runId);
    if (!row) {
        row = new QTreeWidgetItem;
        row->setData(RunColumn, kHistoryRunIdRole, entry.runId);
        row->setFlags(row->flags() | Qt::ItemIsUserCheckable);
        row->setCheckState(RunColumn, entry.runId == m_current ? Qt::Checked : Qt::Unchecked);
        // Newest first: runs arrive oldest first from the journal, and new ones as launched.
        m_tree->insertTopLevelItem(0, row);
    }
    row->setText(RunColumn, entry.label + (result.synthetic ? tr(" [SYNTHETIC]") : QString()));
    row->setText(StateColumn, core::RunRecord::stateName(entry.state));
    row->setText(AccuracyColumn,
        result.testAccuracy ? QStringLiteral("%1%").arg(*result.testAccuracy * 100, 0, 'f', 1)
                            : QStringLiteral("-"));
    row->setText(ThroughputColumn,
        result.imagesPerSecond > 0 ? QString::number(result.imagesPerSecond, 'f', 0) : QStringLiteral("-"));
    for (int c : { AccuracyColumn, ThroughputColumn })
        row->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
    const auto &spec = entry.request.spec();
    const QString tip
        = tr("%1\nagent %2\nstarted %3, ended %4\ndata set %5%6, %7 worker(s), batch %8 per worker, "
             "epoch %9 of %10")
              .arg(entry.runId, entry.agent, when(entry.launchedUnixMs), when(entry.endedUnixMs),
                  QString::fromStdString(spec.dataset()), result.synthetic ? tr(" (SYNTHETIC)") : QString())
              .arg(entry.request.world_size())
              .arg(spec.batch_size())
              .arg(result.epochsDone)
              .arg(result.epochs > 0 ? result.epochs : spec.epochs());
    for (int c = 0; c < ColumnCount; ++c)
        row->setToolTip(c, tip);
}

void RunHistoryView::removeRun(const QString &runId)
{
    delete item(runId);
    if (m_current == runId)
        m_current.clear();
}

void RunHistoryView::clear()
{
    m_tree->clear();
    m_current.clear();
}

QStringList RunHistoryView::runIds() const
{
    QStringList ids;
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i)
        ids << m_tree->topLevelItem(i)->data(RunColumn, kHistoryRunIdRole).toString();
    return ids;
}

bool RunHistoryView::isDrawn(const QString &runId) const
{
    const QTreeWidgetItem *row = item(runId);
    return row && row->checkState(RunColumn) == Qt::Checked;
}

void RunHistoryView::setDrawn(const QString &runId, bool drawn)
{
    QScopedValueRollback<bool> updating(m_updating, true);
    if (QTreeWidgetItem *row = item(runId))
        row->setCheckState(RunColumn, drawn ? Qt::Checked : Qt::Unchecked);
}

void RunHistoryView::setCurrent(const QString &runId)
{
    QScopedValueRollback<bool> updating(m_updating, true);
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        QTreeWidgetItem *row = m_tree->topLevelItem(i);
        const bool current = row->data(RunColumn, kHistoryRunIdRole).toString() == runId;
        QFont font = row->font(RunColumn);
        font.setBold(current);
        for (int c = 0; c < ColumnCount; ++c)
            row->setFont(c, font);
        // The shown run is always drawn: its box is ticked and cannot be cleared.
        if (current)
            row->setCheckState(RunColumn, Qt::Checked);
        row->setFlags(
            current ? row->flags() & ~Qt::ItemIsUserCheckable : row->flags() | Qt::ItemIsUserCheckable);
    }
    m_current = runId;
}

void RunHistoryView::showMenu(const QPoint &at)
{
    QTreeWidgetItem *row = m_tree->itemAt(at);
    if (!row)
        return;
    const QString runId = row->data(RunColumn, kHistoryRunIdRole).toString();
    QMenu menu;
    menu.addAction(tr("Open"), this, [this, runId] { Q_EMIT openRequested(runId); })
        ->setEnabled(runId != m_current);
    const bool drawn = isDrawn(runId);
    menu.addAction(drawn ? tr("Hide from the charts") : tr("Draw on the charts"), this,
            [this, runId, drawn] {
                setDrawn(runId, !drawn);
                Q_EMIT drawnChanged(runId, !drawn);
            })
        ->setEnabled(runId != m_current);
    menu.addAction(tr("Copy run id"), this, [runId] { QGuiApplication::clipboard()->setText(runId); });
    menu.addSeparator();
    menu.addAction(tr("Remove from history"), this, [this, runId] { Q_EMIT forgetRequested(runId); })
        ->setEnabled(runId != m_current);
    menu.exec(m_tree->viewport()->mapToGlobal(at));
}

} // namespace scalelab::app
