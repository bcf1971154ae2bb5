// Keeps the first columns of a table in place while the rest scroll sideways (Qt's
// "Frozen Column" example, made general): a second view over the same model and selection
// lies over the table's left edge and shows only those columns, in step with the table's
// rows, widths, hidden rows and sort order. Clicks, double-clicks and context menus on it
// act as on the table. GUI thread only.
#pragma once

#include <QTableView>

namespace scalelab::app {

class FrozenColumns : public QTableView {
    Q_OBJECT
public:
    // Lies over `table` (which owns it) and freezes its first `count` columns.
    FrozenColumns(QTableView *table, int count);

    // Copies what the table shows now (hidden rows and columns, widths, heights). The
    // table's own signals call it; call it after hiding rows from outside.
    void sync();

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    void place();

    QTableView *m_table;
    int m_count;
};

} // namespace scalelab::app
