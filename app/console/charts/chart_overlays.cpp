#include "chart_overlays.h"

#include "smoothing.h"

#include <QChart>
#include <QFont>
#include <QGraphicsPathItem>
#include <QGraphicsSimpleTextItem>
#include <QLineSeries>
#include <QPainterPath>
#include <QPen>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalelab::app {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

ChartOverlays::ChartOverlays(QChart *chart, QValueAxis *x, std::function<bool(const QString &id)> lineHidden)
    : m_chart(chart)
    , m_x(x)
    , m_lineHidden(std::move(lineHidden))
{ }

void ChartOverlays::addVerticalMarker(const QString &group, const MetricPoint &at, const QString &label,
    const QFont &font, const MarkerStyle &style)
{
    VerticalMarker marker { group, at, new QGraphicsPathItem(m_chart),
        new QGraphicsSimpleTextItem(label, m_chart), {}, {}, style.pen };
    QFont small = font;
    small.setPointSizeF(small.pointSizeF() * 0.8);
    marker.label->setFont(small);
    marker.line->setToolTip(style.toolTip);
    marker.label->setToolTip(style.toolTip);
    // Behind the lines, above the plot's background.
    marker.line->setZValue(1);
    marker.label->setZValue(1);
    m_markers.push_back(marker);
}

void ChartOverlays::removeGroup(const QString &group)
{
    std::erase_if(m_markers, [&group](const VerticalMarker &m) {
        if (m.group != group)
            return false;
        delete m.line;
        delete m.label;
        return true;
    });
}

void ChartOverlays::addRangeBar(
    const QString &group, const MetricPoint &at, double low, double high, const QColor &color)
{
    VerticalMarker bar { group, at, new QGraphicsPathItem(m_chart), nullptr, std::make_pair(low, high),
        color };
    bar.line->setZValue(3); // over the lines, as the points it belongs to
    bar.line->setPen(QPen(color, 1.6));
    m_markers.push_back(bar);
}

void ChartOverlays::setBand(const QString &id, std::vector<BandPoint> points, const QColor &color)
{
    Band &band = m_bands[id];
    if (!band.item) {
        band.item = new QGraphicsPathItem(m_chart);
        band.item->setZValue(0.5); // under the lines and markers
        band.item->setPen(Qt::NoPen);
    }
    QColor fill = color;
    fill.setAlphaF(0.2);
    band.item->setBrush(fill);
    band.points = std::move(points);
}

bool ChartOverlays::removeBand(const QString &id)
{
    const auto it = m_bands.find(id);
    if (it == m_bands.end())
        return false;
    delete it->second.item;
    m_bands.erase(it);
    return true;
}

QPainterPath ChartOverlays::bandPath(const QString &id) const
{
    const auto it = m_bands.find(id);
    return it == m_bands.end() || !it->second.item->isVisible() ? QPainterPath() : it->second.item->path();
}

void ChartOverlays::placeBands(const OverlayFrame &frame)
{
    const QRectF plot = m_chart->plotArea();
    const double from = m_x->min(), to = m_x->max();
    const auto *y = qobject_cast<const QValueAxis *>(frame.y);
    const double y0 = y ? y->min() : 0, y1 = y ? y->max() : 1;
    const auto yPixel = [&](double v) {
        if (frame.log)
            v = v > 0 ? std::log10(v) : y0;
        return plot.bottom() - (v - y0) / (y1 - y0) * plot.height();
    };
    const std::size_t axis = std::size_t(frame.axis);
    const double smoothing = frame.smoothing;
    const int columns = std::max(1, int(plot.width()));
    for (auto &[id, band] : m_bands) {
        if (m_lineHidden(id)) {
            band.item->setVisible(false); // hidden with the line it belongs to
            continue;
        }
        // Smoothed as the lines are (debiased EMA), then the lowest low and highest high per
        // pixel column, so a long band costs the plot's width, not its length.
        std::vector<std::pair<double, double>> column(std::size_t(columns), { kInf, -kInf });
        Ema lowEma { smoothing }, highEma { smoothing };
        for (const BandPoint &p : band.points) {
            double low = p.low, high = p.high;
            if (smoothing > 0) {
                low = lowEma.next(low);
                high = highEma.next(high);
            }
            const double x = p.mean.x[axis];
            if (!std::isfinite(x) || x < from || x > to || !(to > from))
                continue;
            const int c = std::clamp(int((x - from) / (to - from) * columns), 0, columns - 1);
            column[std::size_t(c)].first = std::min(column[std::size_t(c)].first, low);
            column[std::size_t(c)].second = std::max(column[std::size_t(c)].second, high);
        }
        QPolygonF top, bottom;
        for (int c = 0; c < columns; ++c) {
            const auto &[low, high] = column[std::size_t(c)];
            if (low > high)
                continue;
            const double px = plot.left() + (c + 0.5) / columns * plot.width();
            top << QPointF(px, yPixel(high));
            bottom.prepend(QPointF(px, yPixel(low)));
        }
        QPainterPath path;
        if (top.size() >= 2 && y1 > y0) {
            path.addPolygon(top + bottom);
            path.closeSubpath();
            QPainterPath clip;
            clip.addRect(plot);
            path = path.intersected(clip);
        }
        band.item->setPath(path);
        band.item->setVisible(!path.isEmpty());
    }
}

QList<std::tuple<double, double, double>> ChartOverlays::shownRangeBars(XAxis axis) const
{
    QList<std::tuple<double, double, double>> shown;
    for (const auto &m : m_markers)
        if (m.span && m.line->isVisible())
            shown.append({ m.at.x[std::size_t(axis)], m.span->first, m.span->second });
    std::sort(shown.begin(), shown.end());
    return shown;
}

QList<std::pair<double, QString>> ChartOverlays::shownVerticalMarkers(XAxis axis) const
{
    QList<std::pair<double, QString>> shown;
    for (const auto &m : m_markers)
        if (m.label && m.line->isVisible())
            shown.append({ m.at.x[std::size_t(axis)], m.label->text() });
    std::sort(shown.begin(), shown.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    return shown;
}

void ChartOverlays::placeMarkers(const OverlayFrame &frame)
{
    const QRectF plot = m_chart->plotArea();
    const double from = m_x->min(), to = m_x->max();
    double labelRight = -kInf; // labels that would overlap the previous one are left out
    std::vector<VerticalMarker *> ordered;
    for (auto &m : m_markers)
        ordered.push_back(&m);
    const auto xOf = [&frame](const VerticalMarker *m) { return m->at.x[std::size_t(frame.axis)]; };
    std::sort(ordered.begin(), ordered.end(), [&](auto *a, auto *b) { return xOf(a) < xOf(b); });
    const auto *y = qobject_cast<const QValueAxis *>(frame.y); // QCategoryAxis is one too
    const auto yPixel = [&](double v) {
        if (frame.log)
            v = v > 0 ? std::log10(v) : -kInf;
        const double y0 = y ? y->min() : 0, y1 = y ? y->max() : 1;
        return std::clamp(plot.bottom() - (v - y0) / (y1 - y0) * plot.height(), plot.top(), plot.bottom());
    };
    for (VerticalMarker *m : ordered) {
        const double x = xOf(m);
        const bool shown = std::isfinite(x) && to > from && x >= from && x <= to && plot.width() > 0;
        m->line->setVisible(shown);
        if (m->label)
            m->label->setVisible(false);
        if (!shown)
            continue;
        const double px = plot.left() + (x - from) / (to - from) * plot.width();
        QPainterPath path;
        if (m->span) { // an I-beam from low to high
            const double top = yPixel(m->span->second), bottom = yPixel(m->span->first);
            path.moveTo(px, top);
            path.lineTo(px, bottom);
            for (const double at : { top, bottom }) {
                path.moveTo(px - 4, at);
                path.lineTo(px + 4, at);
            }
            m->line->setPath(path);
            continue;
        }
        path.moveTo(px, plot.top());
        path.lineTo(px, plot.bottom());
        m->line->setPath(path);
        // The label ends at its line: "epoch 2" is written over epoch 2, left of where it ends.
        const QRectF box = m->label->boundingRect();
        // At the plot's left edge it goes right of its line instead.
        double left = px - 3 - box.width();
        if (left < plot.left())
            left = px + 3;
        if (left > labelRight && left + box.width() <= plot.right()) {
            m->label->setPos(left, plot.top() + 1);
            m->label->setVisible(true);
            labelRight = std::max(px, left + box.width()) + 4;
        }
    }
}

void ChartOverlays::setReferenceLine(const QString &label, double slope, double intercept, QAbstractAxis *y)
{
    if (!m_reference) {
        m_reference = new QLineSeries;
        m_reference->setObjectName(QStringLiteral("reference"));
        m_chart->addSeries(m_reference);
        m_reference->attachAxis(m_x);
        m_reference->attachAxis(y);
    }
    m_reference->setName(label);
    m_referenceSlope = slope;
    m_referenceIntercept = intercept;
}

QList<QPointF> ChartOverlays::referencePoints(double x0, double x1, bool log) const
{
    QList<QPointF> ideal { { x0, m_referenceSlope * x0 + m_referenceIntercept },
        { x1, m_referenceSlope * x1 + m_referenceIntercept } };
    if (log)
        toLogPlot(ideal);
    return ideal;
}

YExtent ChartOverlays::extent(const OverlayFrame &frame, double x0, double x1) const
{
    YExtent all;
    // Bands are seen whole, as range bars are: their ends count towards the y range.
    for (const auto &[id, band] : m_bands) {
        if (m_lineHidden(id))
            continue;
        QList<QPointF> ends;
        for (const BandPoint &p : band.points) {
            const double x = p.mean.x[std::size_t(frame.axis)];
            if (std::isfinite(x))
                ends << QPointF(x, p.low) << QPointF(x, p.high);
        }
        if (frame.log)
            toLogPlot(ends);
        all.add(ends, x0, x1);
    }
    // Range bars are seen whole: their ends count towards the y range.
    for (const auto &m : m_markers) {
        const double x = m.at.x[std::size_t(frame.axis)];
        if (!m.span || !std::isfinite(x))
            continue;
        QList<QPointF> ends { { x, m.span->first }, { x, m.span->second } };
        if (frame.log)
            toLogPlot(ends);
        all.add(ends, x0, x1);
    }
    return all;
}

void ChartOverlays::applyPalette(const QColor &text)
{
    auto withAlpha = [](QColor c, qreal a) {
        c.setAlphaF(a);
        return c;
    };
    if (m_reference)
        m_reference->setPen(QPen(withAlpha(text, 0.6), 1.4, Qt::DashLine));
    for (auto &m : m_markers) {
        if (m.span)
            continue; // a range bar keeps its point's colour
        // A dotted boundary stays in the background; a dashed change is read first.
        const bool change = m.pen != Qt::DotLine;
        m.line->setPen(QPen(withAlpha(text, change ? 0.6 : 0.35), change ? 1.3 : 1, m.pen));
        m.label->setBrush(withAlpha(text, change ? 0.85 : 0.6));
    }
}

} // namespace scalelab::app
