#include "cell_bars.h"

#include "theme.h"

#include <QPainter>

#include <cmath>

namespace scalelab::app {
namespace {

QColor levelColor(double fraction, const QPalette &palette)
{
    const bool dark = isDarkPalette(palette);
    if (fraction >= 0.9)
        return dark ? QColor(0xef, 0x53, 0x50) : QColor(0xd3, 0x2f, 0x2f);
    if (fraction >= 0.7)
        return dark ? QColor(0xff, 0xb7, 0x4d) : QColor(0xf5, 0x7c, 0x00);
    // Green, not blue: a blue bar would vanish in a selected (highlighted) row.
    return dark ? QColor(0x66, 0xbb, 0x6a) : QColor(0x38, 0x8e, 0x3c);
}

} // namespace

GaugeDelegate::GaugeDelegate(int role, QObject *parent)
    : QStyledItemDelegate(parent)
    , m_role(role)
{ }

void GaugeDelegate::paint(
    QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    const QVariantList gauges = index.data(m_role).toList();
    if (gauges.isEmpty()) {
        QStyledItemDelegate::paint(painter, option, index);
        return;
    }
    QStyleOptionViewItem o = option;
    initStyleOption(&o, index);
    const QString text = o.text;
    o.text.clear();
    o.widget->style()->drawControl(QStyle::CE_ItemViewItem, &o, painter, o.widget);
    const QRect r = option.rect.adjusted(6, 0, -4, 0);
    const int height = qMin(12, r.height() - 8);
    const int n = int(gauges.size());
    const int gap = n > 1 ? 3 : 0;
    const int barWidth = qMax(6, (kBarsWidth - gap * (n - 1)) / n);
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing, false);
    const QColor track = option.palette.color(QPalette::Mid);
    for (int i = 0; i < n; ++i) {
        const double f = qBound(0.0, gauges[i].toDouble(), 1.0);
        const QRect bar(r.left() + i * (barWidth + gap), r.center().y() - height / 2, barWidth, height);
        painter->setPen(Qt::NoPen);
        painter->setBrush(track);
        painter->drawRect(bar);
        painter->setBrush(levelColor(f, option.palette));
        painter->drawRect(QRect(bar.left(), bar.top(), int(std::lround(bar.width() * f)), bar.height()));
    }
    const int used = n * barWidth + gap * (n - 1) + 6;
    const QRect textRect = r.adjusted(used, 0, 0, 0);
    painter->setPen(option.palette.color(
        option.state & QStyle::State_Selected ? QPalette::HighlightedText : QPalette::Text));
    painter->drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
        option.fontMetrics.elidedText(text, Qt::ElideRight, textRect.width()));
    painter->restore();
}

QSize GaugeDelegate::sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QSize s = QStyledItemDelegate::sizeHint(option, index);
    if (!index.data(m_role).toList().isEmpty())
        s.setWidth(s.width() + kBarsWidth + 12);
    return s;
}

ProgressDelegate::ProgressDelegate(int role, QObject *parent)
    : QStyledItemDelegate(parent)
    , m_role(role)
{ }

void ProgressDelegate::paint(
    QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QStyledItemDelegate::paint(painter, option, index);
    const QVariant fraction = index.data(m_role);
    if (!fraction.isValid())
        return;
    const QRect bar = option.rect.adjusted(4, option.rect.height() - 5, -4, -2);
    painter->save();
    painter->setPen(Qt::NoPen);
    painter->setBrush(option.palette.color(QPalette::Mid));
    painter->drawRect(bar);
    painter->setBrush(option.palette.color(QPalette::Highlight));
    painter->drawRect(QRect(bar.left(), bar.top(),
        int(std::lround(bar.width() * qBound(0.0, fraction.toDouble(), 1.0))), bar.height()));
    painter->restore();
}

} // namespace scalelab::app
