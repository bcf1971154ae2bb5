#include "chart_readout.h"

#include "metric_chart.h" // the read-out's words are MetricChart's (its translation context)

#include <QLineF>
#include <QStringList>

#include <cmath>
#include <limits>

namespace scalelab::app {

QString ReadOut::text() const
{
    QStringList where;
    if (std::isfinite(point.x[int(XAxis::Step)]))
        where << MetricChart::tr("step %1").arg(qint64(point.x[int(XAxis::Step)]));
    if (std::isfinite(point.x[int(XAxis::Epoch)]))
        where << MetricChart::tr("epoch %1").arg(point.x[int(XAxis::Epoch)], 0, 'f', 2);
    if (std::isfinite(point.x[int(XAxis::WallClock)]))
        where << MetricChart::tr("%1 s").arg(point.x[int(XAxis::WallClock)], 0, 'f', 1);
    if (std::isfinite(point.x[int(XAxis::Workers)]))
        where << MetricChart::tr("%1 workers").arg(point.x[int(XAxis::Workers)]);
    QString value = MetricChart::tr("value %1").arg(shown, 0, 'g', 5);
    if (shown != point.y)
        value += MetricChart::tr(" (raw %1)").arg(point.y, 0, 'g', 5);
    return label + QLatin1Char('\n') + where.join(QStringLiteral(" · ")) + QLatin1Char('\n') + value;
}

std::optional<ReadOut> nearestSample(const std::vector<std::unique_ptr<ChartLine>> &lines, XAxis axis,
    bool log, double x, const QPointF &at, const std::function<QPointF(const QPointF &drawn)> &toPosition)
{
    std::optional<ReadOut> best;
    double bestDistance = std::numeric_limits<double>::infinity();
    for (const auto &e : lines) {
        if (!e->visible || !e->data.hasAxis(axis))
            continue;
        const std::size_t i = e->data.nearest(axis, x);
        const double shown = e->data.shownValue(i);
        if (log && !(shown > 0))
            continue;
        const QPointF position
            = toPosition(QPointF(e->data.column(axis)[i], log ? std::log10(shown) : shown));
        const double distance = QLineF(position, at).length();
        if (distance >= bestDistance)
            continue;
        bestDistance = distance;
        ReadOut r;
        r.seriesId = e->id;
        r.label = e->label;
        r.index = i;
        for (int a = 0; a < kXAxisCount; ++a)
            if (e->data.hasAxis(XAxis(a)))
                r.point.x[a] = e->data.column(XAxis(a))[i];
        r.point.y = e->data.rawValue(i);
        r.shown = shown;
        best = r;
    }
    return best;
}

} // namespace scalelab::app
