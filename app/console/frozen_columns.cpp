#include "frozen_columns.h"

#include <QEvent>
#include <QHeaderView>
#include <QScrollBar>

namespace scalelab::app {

FrozenColumns::FrozenColumns(QTableView *table, int count)
    : QTableView(table)
    , m_table(table)
    , m_count(count)
{
    setObjectName(table->objectName() + QStringLiteral("Frozen"));
    setModel(table->model());
    setSelectionModel(table->selectionModel());
    setSelectionBehavior(table->selectionBehavior());
    setSelectionMode(table->selectionMode());
    setEditTriggers(QAbstractItemView::NoEditTriggers);
    setFocusPolicy(Qt::NoFocus);
    setContextMenuPolicy(table->contextMenuPolicy());
    setToolTip(table->toolTip());
    setWordWrap(table->wordWrap());
    verticalHeader()->hide();
    horizontalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    horizontalHeader()->setSortIndicatorShown(table->horizontalHeader()->isSortIndicatorShown());
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setVerticalScrollMode(table->verticalScrollMode());
    setFrameShape(QFrame::NoFrame);
    // A line at its right edge, where the scrolling columns pass under it.
    setStyleSheet(QStringLiteral("QTableView { border-right: 1px solid palette(mid); }"));
    table->viewport()->stackUnder(this);

    // Rows scroll together; sizes and sort order follow the table.
    connect(
        verticalScrollBar(), &QScrollBar::valueChanged, table->verticalScrollBar(), &QScrollBar::setValue);
    connect(
        table->verticalScrollBar(), &QScrollBar::valueChanged, verticalScrollBar(), &QScrollBar::setValue);
    connect(table->horizontalHeader(), &QHeaderView::sectionResized, this, [this](int column, int, int size) {
        if (column < m_count) {
            setColumnWidth(column, size);
            place();
        }
    });
    connect(table->verticalHeader(), &QHeaderView::sectionResized, this,
        [this](int row, int, int size) { setRowHeight(row, size); });
    connect(table->horizontalHeader(), &QHeaderView::sortIndicatorChanged, this,
        [this](int column, Qt::SortOrder order) { horizontalHeader()->setSortIndicator(column, order); });
    // Its header's clicks sort the table, as the table's own header would.
    connect(horizontalHeader(), &QHeaderView::sectionClicked, this, [this](int column) {
        const auto *header = m_table->horizontalHeader();
        const bool same = header->sortIndicatorSection() == column;
        m_table->sortByColumn(column,
            same && header->sortIndicatorOrder() == Qt::AscendingOrder ? Qt::DescendingOrder
                                                                       : Qt::AscendingOrder);
    });
    connect(this, &QTableView::doubleClicked, table, &QTableView::doubleClicked);
    connect(this, &QWidget::customContextMenuRequested, table, [this](const QPoint &at) {
        Q_EMIT m_table->customContextMenuRequested(
            m_table->viewport()->mapFromGlobal(viewport()->mapToGlobal(at)));
    });
    // Not modelReset: a QTableWidget's model resets while the table is being destroyed.
    connect(table->model(), &QAbstractItemModel::rowsInserted, this, &FrozenColumns::sync);
    connect(table->model(), &QAbstractItemModel::layoutChanged, this, &FrozenColumns::sync);
    // Resizes: of the table, and of its viewport (a horizontal scrollbar appearing after a
    // layout shrinks the viewport without resizing the table).
    table->installEventFilter(this);
    table->viewport()->installEventFilter(this);
    connect(table->horizontalScrollBar(), &QScrollBar::rangeChanged, this, &FrozenColumns::place);
    // Sideways by pixels, so no column is reachable only under the frozen ones.
    table->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
    sync();
    show();
}

void FrozenColumns::sync()
{
    const auto *model = m_table->model();
    for (int c = 0; c < model->columnCount(); ++c) {
        setColumnHidden(c, c >= m_count || m_table->isColumnHidden(c));
        if (c < m_count)
            setColumnWidth(c, m_table->columnWidth(c));
    }
    for (int r = 0; r < model->rowCount(); ++r) {
        setRowHidden(r, m_table->isRowHidden(r));
        setRowHeight(r, m_table->rowHeight(r));
    }
    const auto *header = m_table->horizontalHeader();
    horizontalHeader()->setSortIndicator(header->sortIndicatorSection(), header->sortIndicatorOrder());
    verticalScrollBar()->setValue(m_table->verticalScrollBar()->value());
    place();
}

bool FrozenColumns::eventFilter(QObject *watched, QEvent *event)
{
    if ((watched == m_table || watched == m_table->viewport())
        && (event->type() == QEvent::Resize || event->type() == QEvent::Show))
        place();
    return QTableView::eventFilter(watched, event);
}

void FrozenColumns::place()
{
    int width = 0;
    for (int c = 0; c < m_count; ++c)
        if (!m_table->isColumnHidden(c))
            width += m_table->columnWidth(c);
    const int frame = m_table->frameWidth();
    const int left
        = frame + (m_table->verticalHeader()->isVisible() ? m_table->verticalHeader()->width() : 0);
    setGeometry(
        left, frame, width + 1, m_table->viewport()->height() + m_table->horizontalHeader()->height());
}

} // namespace scalelab::app
