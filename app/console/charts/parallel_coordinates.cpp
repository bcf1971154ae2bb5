#include "parallel_coordinates.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace scalelab::app {
namespace {

constexpr double kMargin = 16;
constexpr double kTop = 34; // room for the axis labels
constexpr double kBottom = 28; // and the low ends' values
constexpr double kColorBar = 70; // the colour bar and its values, on the right

// Viridis at five stops (matplotlib's): dark for the worst, yellow for the best.
QColor viridis(double t)
{
    static const QColor stops[] = { QColor(68, 1, 84), QColor(59, 82, 139), QColor(33, 145, 140),
        QColor(94, 201, 98), QColor(253, 231, 37) };
    t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
    const int i = std::min(3, int(std::floor(t)));
    const double f = t - i;
    const QColor &a = stops[i];
    const QColor &b = stops[i + 1];
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * f),
        float(a.greenF() + (b.greenF() - a.greenF()) * f), float(a.blueF() + (b.blueF() - a.blueF()) * f));
}

QString tickText(double v)
{
    return QString::number(v, 'g', 3);
}

double segmentDistance(const QPointF &p, const QPointF &a, const QPointF &b)
{
    const QPointF d = b - a;
    const double length2 = d.x() * d.x() + d.y() * d.y();
    const double t = length2 > 0 ? std::clamp(QPointF::dotProduct(p - a, d) / length2, 0.0, 1.0) : 0.0;
    const QPointF nearest = a + t * d;
    return std::hypot(p.x() - nearest.x(), p.y() - nearest.y());
}

} // namespace

ParallelCoordinates::ParallelCoordinates(QWidget *parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(320, 200);
    setObjectName(QStringLiteral("parallelCoordinates"));
}

void ParallelCoordinates::setData(const QList<Axis> &axes, const QList<Line> &lines, bool maximize)
{
    m_axes = axes;
    m_lines = lines;
    m_maximize = maximize;
    m_ranges.clear();
    for (int a = 0; a < m_axes.size(); ++a) {
        Range r;
        if (!m_axes[a].words.isEmpty()) {
            r = { 0, double(std::max<qsizetype>(1, m_axes[a].words.size() - 1)) };
        } else {
            double low = INFINITY, high = -INFINITY;
            for (const Line &l : m_lines) {
                const double v = l.values.value(a, NAN);
                if (std::isfinite(v) && (!m_axes[a].log || v > 0)) {
                    low = std::min(low, m_axes[a].log ? std::log10(v) : v);
                    high = std::max(high, m_axes[a].log ? std::log10(v) : v);
                }
            }
            if (!std::isfinite(low)) {
                low = 0;
                high = 1;
            } else if (high - low < 1e-12) { // one value: centred
                low -= 0.5;
                high += 0.5;
            }
            r = { low, high };
        }
        m_ranges << r;
    }
    m_hovered = -1;
    update();
}

QRectF ParallelCoordinates::plotArea() const
{
    return QRectF(kMargin + 30, kTop, std::max(10.0, width() - 2 * kMargin - 60 - kColorBar),
        std::max(10.0, height() - kTop - kBottom));
}

double ParallelCoordinates::axisX(int axis) const
{
    const QRectF area = plotArea();
    if (m_axes.size() <= 1)
        return area.center().x();
    return area.left() + area.width() * axis / double(m_axes.size() - 1);
}

double ParallelCoordinates::axisY(int axis, double value) const
{
    if (axis < 0 || axis >= m_axes.size() || !std::isfinite(value))
        return NAN;
    const Axis &a = m_axes[axis];
    if (a.log && value <= 0)
        return NAN;
    const double v = a.log ? std::log10(value) : value;
    const Range &r = m_ranges[axis];
    const QRectF area = plotArea();
    const double t = (v - r.low) / (r.high - r.low);
    return area.bottom() - t * area.height();
}

QColor ParallelCoordinates::colorFor(double metric) const
{
    if (m_ranges.isEmpty() || !std::isfinite(metric))
        return QColor(150, 150, 150);
    const Range &r = m_ranges.last();
    double t = (metric - r.low) / (r.high - r.low);
    if (!m_maximize)
        t = 1 - t; // a loss: the lowest is the best, the brightest
    return viridis(t);
}

QList<QPointF> ParallelCoordinates::polyline(int index) const
{
    QList<QPointF> points;
    if (index < 0 || index >= m_lines.size())
        return points;
    for (int a = 0; a < m_axes.size(); ++a) {
        const double y = axisY(a, m_lines[index].values.value(a, NAN));
        if (std::isfinite(y))
            points << QPointF(axisX(a), y);
    }
    return points;
}

std::optional<int> ParallelCoordinates::lineAt(const QPointF &position) const
{
    std::optional<int> best;
    double nearest = 5;
    for (int i = 0; i < m_lines.size(); ++i) {
        const QList<QPointF> points = polyline(i);
        for (int k = 1; k < points.size(); ++k)
            if (const double d = segmentDistance(position, points[k - 1], points[k]); d < nearest) {
                nearest = d;
                best = i;
            }
    }
    return best;
}

void ParallelCoordinates::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.base());
    const QColor text = pal.color(QPalette::Text);
    if (m_axes.isEmpty() || m_lines.isEmpty()) {
        p.setPen(text);
        p.drawText(rect(), Qt::AlignCenter, tr("No trial has a result yet"));
        return;
    }
    const QRectF area = plotArea();
    // Lines first, the faded under the rest, the hovered and the best on top.
    QList<int> order;
    for (int i = 0; i < m_lines.size(); ++i)
        order << i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        const auto rank = [&](int i) {
            return i == m_hovered ? 3 : m_lines[i].best ? 2 : m_lines[i].faded ? 0 : 1;
        };
        return rank(a) < rank(b);
    });
    for (int i : order) {
        const Line &line = m_lines[i];
        QColor color = colorFor(line.values.value(m_axes.size() - 1, NAN));
        if (line.faded && i != m_hovered)
            color.setAlpha(90);
        QPen pen(color, i == m_hovered ? 3.5 : line.best ? 2.8 : 1.6);
        p.setPen(pen);
        // A value the trial does not have leaves a gap, not a line across its axis.
        for (int a = 1; a < m_axes.size(); ++a) {
            const double y0 = axisY(a - 1, line.values.value(a - 1, NAN));
            const double y1 = axisY(a, line.values.value(a, NAN));
            if (std::isfinite(y0) && std::isfinite(y1))
                p.drawLine(QPointF(axisX(a - 1), y0), QPointF(axisX(a), y1));
        }
    }
    // Axes, their labels and their ends.
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    for (int a = 0; a < m_axes.size(); ++a) {
        const double x = axisX(a);
        p.setPen(QPen(text, 1.2));
        p.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()));
        const QString label = m_axes[a].label + (m_axes[a].log ? tr(" (log)") : QString());
        p.setFont(font());
        p.drawText(QRectF(x - 80, 2, 160, kTop - 14), Qt::AlignHCenter | Qt::AlignBottom, label);
        p.setFont(small);
        const Range &r = m_ranges[a];
        if (!m_axes[a].words.isEmpty()) {
            for (int w = 0; w < m_axes[a].words.size(); ++w) {
                const double y = axisY(a, w);
                p.drawText(
                    QRectF(x + 4, y - 8, 60, 16), Qt::AlignLeft | Qt::AlignVCenter, m_axes[a].words[w]);
            }
        } else {
            const auto value = [&](double v) { return m_axes[a].log ? std::pow(10.0, v) : v; };
            p.drawText(QRectF(x - 60, area.top() - 14, 120, 14), Qt::AlignHCenter, tickText(value(r.high)));
            p.drawText(QRectF(x - 60, area.bottom() + 2, 120, 14), Qt::AlignHCenter, tickText(value(r.low)));
        }
    }
    // The colour bar: the metric's range, its highest value at the top (the brightest for
    // a metric to maximise, the darkest for a loss).
    const QRectF bar(width() - kMargin - kColorBar + 8, area.top(), 14, area.height());
    const Range &metric = m_ranges.last();
    for (int y = 0; y < int(bar.height()); ++y) {
        const double t = 1 - y / bar.height();
        p.setPen(colorFor(metric.low + t * (metric.high - metric.low)));
        p.drawLine(QPointF(bar.left(), bar.top() + y), QPointF(bar.right(), bar.top() + y));
    }
    p.setPen(text);
    p.setFont(small);
    p.drawText(QRectF(bar.right() + 3, bar.top() - 6, 60, 14), Qt::AlignLeft, tickText(metric.high));
    p.drawText(QRectF(bar.right() + 3, bar.bottom() - 8, 60, 14), Qt::AlignLeft, tickText(metric.low));
}

void ParallelCoordinates::mouseMoveEvent(QMouseEvent *event)
{
    const std::optional<int> line = lineAt(event->position());
    const int hovered = line.value_or(-1);
    if (hovered != m_hovered) {
        m_hovered = hovered;
        update();
    }
    if (line)
        QToolTip::showText(event->globalPosition().toPoint(), m_lines[*line].label, this);
    else
        QToolTip::hideText();
}

void ParallelCoordinates::leaveEvent(QEvent *)
{
    m_hovered = -1;
    update();
}

} // namespace scalelab::app
