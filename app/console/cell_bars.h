#pragma once
// Bars drawn in table cells, from numbers the model gives under a role: an agent's gauges
// (CPU, memory, one per GPU, coloured by level) and a run's progress under its text.
#include <QStyledItemDelegate>

namespace scalelab::app {

// Bars side by side at the left of the cell (one per value of the role's QVariantList,
// each 0..1), the cell's text at their right. Cells without the role draw as usual.
class GaugeDelegate : public QStyledItemDelegate {
public:
    static constexpr int kBarsWidth = 64;
    GaugeDelegate(int role, QObject *parent);
    void paint(
        QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override;
    QSize sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const override;

private:
    int m_role;
};

// A thin bar under the cell's text, filled as far as the role's number (0..1) says.
class ProgressDelegate : public QStyledItemDelegate {
public:
    ProgressDelegate(int role, QObject *parent);
    void paint(
        QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override;

private:
    int m_role;
};

} // namespace scalelab::app
