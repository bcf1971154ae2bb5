#include "metric_chart.h"

#include "axis_policy.h"

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QContextMenuEvent>
#include <QFile>
#include <QFileDialog>
#include <QGraphicsPathItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QCategoryAxis>
#include <QMenu>
#include <QMessageBox>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScatterSeries>
#include <QSvgGenerator>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace scalelab::app {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMinimumPixels = 64; // resolution of a plot not laid out yet
constexpr qreal kLineWidth = 1.6;
// Dense plots: lines of at most one pixel take the raster engine's fast path (a cosmetic
// stroker); wider ones are stroked segment by segment, several times slower for
// 2,000-point lines.
constexpr qreal kDenseLineWidth = 1.0;
constexpr qreal kMarkerLineWidth = 2.0; // few points (per epoch): worth a bolder line
constexpr qreal kRawAlpha = 0.28; // the raw line behind a smoothed one, as TensorBoard
constexpr int kHoverRadius = 24; // pixels around the plot area that still read out
// Above this many drawn points the chart is painted without antialiasing: dense min/max
// lines are mostly tall vertical strokes, which antialiased cost about 3× as much to
// paint (Qt's raster engine even hands their spans to a thread pool) for little gain.
constexpr qsizetype kAntialiasedPoints = 4000;
// A live line is drawn as two series: the pixel columns its samples have left behind
// (unchanged until the axes move) and a tail of at most this many columns that takes the
// new samples. Qt Charts re-strokes a series whenever its points change (a hit-test
// outline: about 1 µs per point), so a frame costs ~100 points per live line, not 2,400.
constexpr int kTailColumns = 48;

QString axisTitle(XAxis axis)
{
    switch (axis) {
    case XAxis::Step:
        return MetricChart::tr("step");
    case XAxis::Epoch:
        return MetricChart::tr("epoch");
    case XAxis::WallClock:
        return MetricChart::tr("wall-clock time (s)");
    case XAxis::Workers:
        return MetricChart::tr("workers");
    }
    return {};
}

QLegendMarker *markerOf(QChart *chart, QAbstractSeries *series)
{
    const auto markers = chart->legend()->markers(series);
    return markers.isEmpty() ? nullptr : markers.front();
}

} // namespace

// The grid a line was last drawn on; while it holds, finished pixel columns keep their points.
struct DrawKey {
    XAxis axis = XAxis::Step;
    double x0 = 0, x1 = 0;
    int pixels = 0;
    double smoothing = 0;
    bool log = false;
    bool visible = false;
    bool operator==(const DrawKey &) const = default;
};

// One drawn line: finished columns and the live tail (see kTailColumns), same pen.
struct Trace {
    QLineSeries *body = nullptr; // owns the legend entry
    QLineSeries *tail = nullptr;
    QList<QPointF> points() const
    {
        QList<QPointF> all = body->points();
        // After a body, the tail opens with the last sample before its columns, which lies in
        // the body's last column: drawn there already.
        all.append(all.isEmpty() ? tail->points() : tail->points().mid(1));
        return all;
    }
};

struct MetricChart::Entry {
    QString id;
    QString label;
    SeriesStyle style;
    QColor color;
    MetricSeries data;
    Trace line; // smoothed (or raw while smoothing is off)
    Trace raw; // faint raw values behind a smoothed line
    DrawKey drawnFor;
    std::size_t drawnSamples = static_cast<std::size_t>(-1);
    int split = 0; // columns [0, split) are drawn by the bodies, the rest by the tails
    YExtent bodyExtent, tailExtent; // what each draws: the y range holds both
    bool visible = true;
    bool inLegend = true; // a hidden line keeps its (dimmed) legend entry unless told not to
    std::array<QLineSeries *, 4> series() const { return { raw.body, raw.tail, line.body, line.tail }; }
};

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

QColor MetricChart::cycleColor(int index)
{
    // Tableau 10: distinct hues that read on light and dark backgrounds alike.
    static const QColor colors[]
        = { QColor(0x4e79a7), QColor(0xf28e2b), QColor(0xe15759), QColor(0x76b7b2), QColor(0x59a14f),
              QColor(0xedc948), QColor(0xb07aa1), QColor(0xff9da7), QColor(0x9c755f), QColor(0xbab0ac) };
    constexpr int count = int(std::size(colors));
    return colors[((index % count) + count) % count];
}

MetricChart::MetricChart(const QString &title, const QString &yTitle, QWidget *parent)
    : QWidget(parent)
    , m_yTitle(yTitle)
{
    m_chart = new QChart;
    m_chart->setTitle(title);
    m_chart->setBackgroundRoundness(0);
    m_chart->setMargins(QMargins(4, 4, 4, 4));
    m_chart->legend()->setAlignment(Qt::AlignBottom);
    m_chart->legend()->setShowToolTips(true);

    m_x = new QValueAxis;
    m_x->setTitleText(axisTitle(m_xAxis));
    m_chart->addAxis(m_x, Qt::AlignBottom);
    connect(m_x, &QValueAxis::rangeChanged, this, [this](double from, double to) {
        if (m_applyingRange || !m_rubberBandReleased)
            return; // our own redraw, or Qt Charts following a series attached to the axis
        m_zoom = std::make_pair(from, to); // the user zoomed with the rubber band
        scheduleRedraw();
    });

    m_hover = new QScatterSeries;
    m_hover->setMarkerSize(9);
    m_chart->addSeries(m_hover);
    m_hover->attachAxis(m_x);
    rebuildYAxis();
    if (auto *marker = markerOf(m_chart, m_hover))
        marker->setVisible(false);

    connect(m_chart, &QChart::plotAreaChanged, this, &MetricChart::placeVerticalMarkers);
    connect(m_x, &QValueAxis::rangeChanged, this, &MetricChart::placeVerticalMarkers);
    connect(m_chart, &QChart::plotAreaChanged, this, &MetricChart::placeBands);

    m_view = new QChartView(m_chart);
    m_view->setRenderHint(QPainter::Antialiasing);
    m_view->setRubberBand(QChartView::HorizontalRubberBand);
    m_view->setMinimumSize(240, 180);
    m_view->viewport()->setMouseTracking(true);
    m_view->viewport()->installEventFilter(this);
    m_view->setToolTip(tr("Drag to zoom, double-click to reset; right-click to export"));

    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_view);

    m_redrawTimer.setSingleShot(true);
    m_redrawTimer.setInterval(kRedrawIntervalMs);
    connect(&m_redrawTimer, &QTimer::timeout, this, &MetricChart::redraw);
    applyPalette();
    redraw();
}

MetricChart::~MetricChart() = default;

void MetricChart::addVerticalMarker(const QString &group, const MetricPoint &at, const QString &label)
{
    VerticalMarker marker { group, at, new QGraphicsPathItem(m_chart), new QGraphicsSimpleTextItem(label, m_chart), {}, {} };
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.8);
    marker.label->setFont(small);
    // Behind the lines, above the plot's background.
    marker.line->setZValue(1);
    marker.label->setZValue(1);
    m_markers.push_back(marker);
    applyPalette();
    placeVerticalMarkers();
}

void MetricChart::removeVerticalMarkers(const QString &group)
{
    std::erase_if(m_markers, [&group](const VerticalMarker &m) {
        if (m.group != group)
            return false;
        delete m.line;
        delete m.label;
        return true;
    });
    scheduleRedraw(); // range bars widened the y range
}

void MetricChart::addRangeBar(const QString &group, const MetricPoint &at, double low, double high, const QColor &color)
{
    VerticalMarker bar { group, at, new QGraphicsPathItem(m_chart), nullptr, std::make_pair(low, high), color };
    bar.line->setZValue(3); // over the lines, as the points it belongs to
    bar.line->setPen(QPen(color, 1.6));
    m_markers.push_back(bar);
    scheduleRedraw(); // its ends widen the y range
    placeVerticalMarkers();
}

void MetricChart::setBand(const QString &id, std::vector<BandPoint> points, const QColor &color)
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
    scheduleRedraw(); // the band's ends count towards the y range
}

void MetricChart::removeBand(const QString &id)
{
    if (const auto it = m_bands.find(id); it != m_bands.end()) {
        delete it->second.item;
        m_bands.erase(it);
        scheduleRedraw();
    }
}

QPainterPath MetricChart::bandPath(const QString &id) const
{
    const auto it = m_bands.find(id);
    return it == m_bands.end() || !it->second.item->isVisible() ? QPainterPath() : it->second.item->path();
}

void MetricChart::placeBands()
{
    const QRectF plot = m_chart->plotArea();
    const double from = m_x->min(), to = m_x->max();
    const auto *y = qobject_cast<const QValueAxis *>(m_yAxis);
    const double y0 = y ? y->min() : 0, y1 = y ? y->max() : 1;
    const auto yPixel = [&](double v) {
        if (m_logScale)
            v = v > 0 ? std::log10(v) : y0;
        return plot.bottom() - (v - y0) / (y1 - y0) * plot.height();
    };
    const std::size_t axis = std::size_t(m_xAxis);
    const int columns = std::max(1, int(plot.width()));
    for (auto &[id, band] : m_bands) {
        if (const Entry *line = find(id); line && !line->visible) {
            band.item->setVisible(false); // hidden with the line it belongs to
            continue;
        }
        // Smoothed as the lines are (debiased EMA), then the lowest low and highest high per
        // pixel column, so a long band costs the plot's width, not its length.
        std::vector<std::pair<double, double>> column(std::size_t(columns), { kInf, -kInf });
        double lowAccumulator = 0, highAccumulator = 0, power = 1;
        for (const BandPoint &p : band.points) {
            double low = p.low, high = p.high;
            if (m_smoothing > 0) {
                lowAccumulator = m_smoothing * lowAccumulator + (1 - m_smoothing) * low;
                highAccumulator = m_smoothing * highAccumulator + (1 - m_smoothing) * high;
                power *= m_smoothing;
                low = lowAccumulator / (1 - power);
                high = highAccumulator / (1 - power);
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

QList<std::tuple<double, double, double>> MetricChart::shownRangeBars() const
{
    QList<std::tuple<double, double, double>> shown;
    for (const auto &m : m_markers)
        if (m.span && m.line->isVisible())
            shown.append({ m.at.x[std::size_t(m_xAxis)], m.span->first, m.span->second });
    std::sort(shown.begin(), shown.end());
    return shown;
}

QList<std::pair<double, QString>> MetricChart::shownVerticalMarkers() const
{
    QList<std::pair<double, QString>> shown;
    for (const auto &m : m_markers)
        if (m.label && m.line->isVisible())
            shown.append({ m.at.x[std::size_t(m_xAxis)], m.label->text() });
    std::sort(shown.begin(), shown.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    return shown;
}

void MetricChart::placeVerticalMarkers()
{
    const QRectF plot = m_chart->plotArea();
    const double from = m_x->min(), to = m_x->max();
    double labelRight = -kInf; // labels that would overlap the previous one are left out
    std::vector<VerticalMarker *> ordered;
    for (auto &m : m_markers)
        ordered.push_back(&m);
    const auto xOf = [this](const VerticalMarker *m) { return m->at.x[std::size_t(m_xAxis)]; };
    std::sort(ordered.begin(), ordered.end(), [&](auto *a, auto *b) { return xOf(a) < xOf(b); });
    const auto *y = qobject_cast<const QValueAxis *>(m_yAxis); // QCategoryAxis is one too
    const auto yPixel = [&](double v) {
        if (m_logScale)
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

MetricChart::Entry *MetricChart::find(const QString &id) const
{
    for (const auto &e : m_entries)
        if (e->id == id)
            return e.get();
    return nullptr;
}

void MetricChart::rebuildYAxis()
{
    QAbstractAxis *axis = nullptr;
    if (m_logScale) {
        // Lines are drawn at log10(y) against a value axis whose labels are placed at the
        // decades and, over a short range, the values between them (setLogTicks): Qt's
        // QLogValueAxis labels decades only, so a loss between 0.3 and 3 had one label.
        auto *log = new QCategoryAxis;
        log->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
        axis = log;
    } else {
        axis = new QValueAxis;
    }
    axis->setTitleText(m_yTitle);
    if (m_yAxis) {
        m_chart->removeAxis(m_yAxis); // detaches it from every series
        delete m_yAxis;
    }
    m_yAxis = axis;
    m_chart->addAxis(axis, Qt::AlignLeft);
    for (auto *series : m_chart->series())
        series->attachAxis(axis);
}

void MetricChart::addSeries(const QString &id, const QString &label, const SeriesStyle &style)
{
    if (find(id))
        return;
    auto entry = std::make_unique<Entry>();
    entry->id = id;
    entry->label = label;
    entry->style = style;
    entry->color = style.color.isValid() ? style.color : cycleColor(m_nextColor++);
    for (Trace *trace : { &entry->raw, &entry->line }) {
        trace->body = new QLineSeries;
        trace->tail = new QLineSeries;
    }
    entry->line.body->setName(label);
    entry->line.body->setObjectName(id);
    for (auto *series : entry->series()) { // raw lines first: drawn behind the smoothed ones
        m_chart->addSeries(series);
        series->attachAxis(m_x);
        series->attachAxis(m_yAxis);
        if (auto *marker = markerOf(m_chart, series); marker && series != entry->line.body)
            marker->setVisible(false);
    }
    if (auto *marker = markerOf(m_chart, entry->line.body)) {
        Entry *e = entry.get();
        connect(marker, &QLegendMarker::clicked, this, [this, e] { setSeriesVisible(e->id, !e->visible); });
    }
    if (style.smoothable)
        entry->data.setSmoothing(m_smoothing);
    styleEntry(*entry);
    m_entries.push_back(std::move(entry));
    // Keep the hover marker above every line.
    m_chart->removeSeries(m_hover);
    m_chart->addSeries(m_hover);
    m_hover->attachAxis(m_x);
    m_hover->attachAxis(m_yAxis);
    if (auto *marker = markerOf(m_chart, m_hover))
        marker->setVisible(false);
    scheduleRedraw();
}

bool MetricChart::hasSeries(const QString &id) const
{
    return find(id) != nullptr;
}

void MetricChart::removeSeries(const QString &id)
{
    const auto it
        = std::find_if(m_entries.begin(), m_entries.end(), [&](const auto &e) { return e->id == id; });
    if (it == m_entries.end())
        return;
    for (auto *series : (*it)->series()) {
        m_chart->removeSeries(series);
        delete series;
    }
    m_entries.erase(it);
    m_hover->clear();
    scheduleRedraw();
}

void MetricChart::removeAllSeries()
{
    while (!m_entries.empty())
        removeSeries(m_entries.back()->id);
    m_nextColor = 0;
}

QStringList MetricChart::seriesIds() const
{
    QStringList ids;
    for (const auto &e : m_entries)
        ids << e->id;
    return ids;
}

std::size_t MetricChart::pointCount(const QString &id) const
{
    const Entry *e = find(id);
    return e ? e->data.size() : 0;
}

const MetricSeries *MetricChart::data(const QString &id) const
{
    const Entry *e = find(id);
    return e ? &e->data : nullptr;
}

QLineSeries *MetricChart::line(const QString &id) const
{
    const Entry *e = find(id);
    return e ? e->line.body : nullptr;
}

QList<QPointF> MetricChart::drawnPoints(const QString &id) const
{
    const Entry *e = find(id);
    return e ? fromPlot(e->line.points()) : QList<QPointF> {};
}

QList<QPointF> MetricChart::fromPlot(QList<QPointF> points) const
{
    if (m_logScale)
        for (QPointF &p : points)
            p.setY(std::pow(10.0, p.y()));
    return points;
}

void MetricChart::setLogTicks(double from, double to)
{
    auto *axis = static_cast<QCategoryAxis *>(m_yAxis);
    m_applyingRange = true;
    for (const QString &label : axis->categoriesLabels())
        axis->remove(label);
    axis->setStartValue(from);
    for (const LogTick &tick : logTicks(from, to))
        axis->append(tick.label, tick.at);
    axis->setRange(from, to);
    m_applyingRange = false;
}

QList<QPointF> MetricChart::drawnRawPoints(const QString &id) const
{
    const Entry *e = find(id);
    return e ? fromPlot(e->raw.points()) : QList<QPointF> {};
}

QAbstractAxis *MetricChart::xAxisItem() const
{
    return m_x;
}

std::size_t MetricChart::append(const QString &id, const MetricPoint &point)
{
    Entry *e = find(id);
    if (!e || !e->data.append(point))
        return 0;
    scheduleRedraw();
    return 1;
}

std::size_t MetricChart::append(const QString &id, const std::vector<MetricPoint> &points)
{
    Entry *e = find(id);
    if (!e)
        return 0;
    std::size_t kept = 0;
    for (const auto &p : points)
        kept += e->data.append(p) ? 1 : 0;
    if (kept)
        scheduleRedraw();
    return kept;
}

void MetricChart::setReferenceLine(const QString &label, double slope, double intercept)
{
    if (!m_reference) {
        m_reference = new QLineSeries;
        m_reference->setObjectName(QStringLiteral("reference"));
        m_chart->addSeries(m_reference);
        m_reference->attachAxis(m_x);
        m_reference->attachAxis(m_yAxis);
    }
    m_reference->setName(label);
    m_referenceSlope = slope;
    m_referenceIntercept = intercept;
    applyPalette();
    scheduleRedraw();
}

void MetricChart::setXAxis(XAxis axis)
{
    if (axis == m_xAxis)
        return;
    m_xAxis = axis;
    m_zoom.reset();
    m_hover->clear();
    m_x->setTitleText(axisTitle(axis));
    redraw();
}

void MetricChart::setSmoothing(double weight)
{
    weight = std::clamp(std::isfinite(weight) ? weight : 0.0, 0.0, 0.999);
    if (weight == m_smoothing)
        return;
    m_smoothing = weight;
    for (auto &e : m_entries)
        if (e->style.smoothable)
            e->data.setSmoothing(weight);
    redraw();
}

void MetricChart::setLogScale(bool on)
{
    if (on == m_logScale)
        return;
    m_logScale = on;
    m_hover->clear();
    rebuildYAxis();
    applyPalette();
    redraw();
}

void MetricChart::setSeriesVisible(const QString &id, bool visible, bool inLegend)
{
    Entry *e = find(id);
    if (!e || (e->visible == visible && e->inLegend == inLegend))
        return;
    e->visible = visible;
    e->inLegend = inLegend || visible;
    e->line.body->setVisible(visible);
    e->line.tail->setVisible(visible);
    updateLegendMarker(*e);
    m_hover->clear();
    redraw();
}

bool MetricChart::isSeriesVisible(const QString &id) const
{
    const Entry *e = find(id);
    return e && e->visible;
}

void MetricChart::setXRange(double from, double to)
{
    if (!(to > from))
        return;
    m_zoom = std::make_pair(from, to);
    redraw();
}

void MetricChart::setYInclude(double low, double high)
{
    m_yInclude = std::pair { low, high };
    scheduleRedraw();
}

void MetricChart::setYEmptyRange(double low, double high)
{
    m_yEmpty = { low, high };
    scheduleRedraw();
}

void MetricChart::resetZoom()
{
    m_zoom.reset();
    redraw();
}

void MetricChart::scheduleRedraw()
{
    if (!m_redrawTimer.isActive())
        m_redrawTimer.start();
}

void MetricChart::setAxisRange(QValueAxis *axis, double from, double to)
{
    // A range Qt Charts could not step through is widened (valueAxisTicks).
    const ValueTicks ticks = valueAxisTicks(
        from, to, axis == m_x ? kXTickIntervals : kYTickIntervals, axis == m_x && m_xAxis == XAxis::Workers);
    m_applyingRange = true;
    // Interval first: the new range with the old interval could mean 100,000 tick labels.
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickAnchor(0);
    axis->setTickInterval(ticks.interval);
    axis->setLabelFormat(ticks.labelFormat);
    if (axis->min() != ticks.from || axis->max() != ticks.to)
        axis->setRange(ticks.from, ticks.to);
    m_applyingRange = false;
}

void MetricChart::redraw()
{
    m_redrawTimer.stop();
    const int plotWidth = int(m_chart->plotArea().width());
    const int pixels = plotWidth >= kMinimumPixels ? plotWidth : std::max(kMinimumPixels, m_view->width());

    // x: what the visible series span on this axis, or the zoomed range.
    double x0 = kInf, x1 = -kInf;
    bool markers = false;
    for (const auto &e : m_entries) {
        const auto &c = e->data.column(m_xAxis);
        if (!e->visible || c.empty())
            continue;
        x0 = std::min(x0, c.front());
        x1 = std::max(x1, c.back());
        markers = markers || e->style.markers;
    }
    // Room for markers at the ends; axes move in steps, not every frame: each change makes
    // Qt Charts re-stroke every line.
    std::tie(x0, x1) = xRange(x0, x1, markers, m_zoom, m_x->min(), m_x->max());

    // New points for every line whose inputs changed (a finished run keeps its points while
    // the axes hold still, a live one re-draws its tail); the y range from what is drawn
    // inside [x0, x1].
    std::vector<std::pair<QLineSeries *, QList<QPointF>>> replacements;
    auto stage = [&](QLineSeries *line, QList<QPointF> points) {
        if (points != line->points())
            replacements.emplace_back(line, std::move(points));
    };
    YExtent all;
    for (auto &e : m_entries) {
        const bool smoothed = e->style.smoothable && m_smoothing > 0;
        const DrawKey key { m_xAxis, x0, x1, pixels, smoothed ? m_smoothing : 0.0, m_logScale, e->visible };
        const bool regrid = key != e->drawnFor;
        if (regrid || e->data.size() != e->drawnSamples) {
            const bool drawable = e->visible && e->data.hasAxis(m_xAxis);
            // Columns left of the newest sample's are complete: samples only append. One more
            // stays in the tail, against rounding at the boundary.
            const int complete = drawable
                ? std::max(0, core::pixelColumn(e->data.column(m_xAxis).back(), x0, x1, pixels) - 1)
                : 0;
            auto draw = [&](int first, int last, YExtent &extent, QLineSeries *line, QLineSeries *raw) {
                extent = {};
                QList<QPointF> shownPoints, rawPoints;
                if (drawable) {
                    shownPoints = e->data.downsample(m_xAxis, x0, x1, pixels, smoothed, first, last);
                    if (smoothed)
                        rawPoints = e->data.downsample(m_xAxis, x0, x1, pixels, false, first, last);
                    for (auto *points : { &shownPoints, &rawPoints }) {
                        if (m_logScale)
                            toLogPlot(*points);
                        extent.add(*points, x0, x1);
                    }
                }
                stage(line, std::move(shownPoints));
                stage(raw, std::move(rawPoints));
            };
            if (regrid || complete < e->split || complete - e->split > kTailColumns) {
                e->split = complete;
                draw(0, e->split, e->bodyExtent, e->line.body, e->raw.body);
            }
            draw(e->split, pixels, e->tailExtent, e->line.tail, e->raw.tail);
            e->drawnFor = key;
            e->drawnSamples = e->data.size();
        }
        all.merge(e->bodyExtent);
        all.merge(e->tailExtent);
    }
    if (m_reference) {
        QList<QPointF> ideal { { x0, m_referenceSlope * x0 + m_referenceIntercept },
            { x1, m_referenceSlope * x1 + m_referenceIntercept } };
        if (m_logScale)
            toLogPlot(ideal);
        all.add(ideal, x0, x1);
        stage(m_reference, ideal);
    }
    // Bands are seen whole, as range bars are: their ends count towards the y range.
    for (const auto &[id, band] : m_bands) {
        if (const Entry *line = find(id); line && !line->visible)
            continue;
        QList<QPointF> ends;
        for (const BandPoint &p : band.points) {
            const double x = p.mean.x[std::size_t(m_xAxis)];
            if (std::isfinite(x))
                ends << QPointF(x, p.low) << QPointF(x, p.high);
        }
        if (m_logScale)
            toLogPlot(ends);
        all.add(ends, x0, x1);
    }
    // Range bars are seen whole: their ends count towards the y range.
    for (const auto &m : m_markers) {
        const double x = m.at.x[std::size_t(m_xAxis)];
        if (!m.span || !std::isfinite(x))
            continue;
        QList<QPointF> ends { { x, m.span->first }, { x, m.span->second } };
        if (m_logScale)
            toLogPlot(ends);
        all.add(ends, x0, x1);
    }
    if (const bool dense = all.points > kAntialiasedPoints; dense != m_dense) {
        m_dense = dense;
        m_view->setRenderHint(QPainter::Antialiasing, !dense);
        for (auto &e : m_entries)
            styleEntry(*e);
    }

    // y: kept while it holds the data without wasting more than about a quarter of the height.
    const auto *yAxis = static_cast<QValueAxis *>(m_yAxis); // QCategoryAxis on a log scale
    const YRange y = m_logScale ? logYRange(all.lo, all.hi, yAxis->min(), yAxis->max())
                                : linearYRange(all.lo, all.hi, m_yInclude, m_yEmpty, yAxis->min(), yAxis->max());
    bool yChanges = y.changes;

    // A range change makes Qt Charts re-stroke every line with the points it has; lines about
    // to get new points are emptied first, so each is stroked once, with its new points.
    if (yChanges || m_x->min() != x0 || m_x->max() != x1)
        for (auto &[line, points] : replacements)
            if (line->count() > 0)
                line->clear();
    setAxisRange(m_x, x0, x1);
    if (m_logScale && static_cast<QCategoryAxis *>(m_yAxis)->count() == 0)
        yChanges = true; // a new log axis has no labels yet, whatever its default range holds
    if (yChanges && m_logScale) {
        setLogTicks(y.from, y.to);
    } else if (yChanges) {
        setAxisRange(static_cast<QValueAxis *>(m_yAxis), y.from, y.to);
    }
    for (auto &[line, points] : replacements)
        line->replace(points);
    placeVerticalMarkers(); // the y range may have moved under the range bars
    placeBands();
    Q_EMIT redrawn();
}

void MetricChart::styleEntry(Entry &e)
{
    // Default square caps and bevel joins: round ones make the stroker compute arcs at every
    // vertex, which costs more than everything else in a frame of 1,000-point lines.
    const qreal width = e.style.markers ? kMarkerLineWidth : m_dense ? kDenseLineWidth : kLineWidth;
    for (auto *line : { e.line.body, e.line.tail }) {
        line->setPen(QPen(e.color, width, e.style.pen));
        line->setColor(e.color);
        if (e.style.markers) {
            line->setPointsVisible(true);
            line->setMarkerSize(4); // Qt 6.4 draws it as the radius
        }
    }
    // Opaque, mixed with the background by hand: blending every pixel of a dense line costs
    // more than drawing it.
    const QColor base = palette().color(QPalette::Base);
    const QColor faint = QColor::fromRgbF(e.color.redF() * kRawAlpha + base.redF() * (1 - kRawAlpha),
        e.color.greenF() * kRawAlpha + base.greenF() * (1 - kRawAlpha),
        e.color.blueF() * kRawAlpha + base.blueF() * (1 - kRawAlpha));
    for (auto *raw : { e.raw.body, e.raw.tail })
        raw->setPen(QPen(faint, kDenseLineWidth));
}

void MetricChart::updateLegendMarker(Entry &e)
{
    QLegendMarker *marker = markerOf(m_chart, e.line.body);
    if (!marker)
        return;
    marker->setVisible(e.inLegend); // hiding a series hides its marker; we keep it to click again
    const qreal alpha = e.visible ? 1.0 : 0.35;
    QColor label = palette().color(QPalette::Text);
    label.setAlphaF(alpha);
    marker->setLabelBrush(label);
    QColor swatch = e.color;
    swatch.setAlphaF(alpha);
    marker->setBrush(swatch);
    marker->setPen(QPen(swatch));
}

void MetricChart::applyPalette()
{
    const QPalette pal = palette();
    const QColor base = pal.color(QPalette::Base);
    const QColor text = pal.color(QPalette::Text);
    auto withAlpha = [](QColor c, qreal a) {
        c.setAlphaF(a);
        return c;
    };
    m_chart->setBackgroundBrush(base);
    m_chart->setBackgroundPen(Qt::NoPen);
    m_chart->setPlotAreaBackgroundVisible(false);
    m_chart->setTitleBrush(text);
    QFont titleFont = font();
    titleFont.setBold(true);
    m_chart->setTitleFont(titleFont);
    m_chart->legend()->setLabelColor(text);
    for (QAbstractAxis *axis : { static_cast<QAbstractAxis *>(m_x), m_yAxis }) {
        axis->setLabelsColor(text);
        axis->setTitleBrush(text);
        axis->setLinePenColor(withAlpha(text, 0.45));
        axis->setGridLineColor(withAlpha(text, 0.14));
        axis->setMinorGridLineColor(withAlpha(text, 0.06));
    }
    if (m_view)
        m_view->setBackgroundBrush(base);
    if (m_reference)
        m_reference->setPen(QPen(withAlpha(text, 0.6), 1.4, Qt::DashLine));
    for (auto &m : m_markers) {
        if (m.span)
            continue; // a range bar keeps its point's colour
        m.line->setPen(QPen(withAlpha(text, 0.35), 1, Qt::DotLine));
        m.label->setBrush(withAlpha(text, 0.6));
    }
    m_hover->setColor(withAlpha(text, 0.0));
    m_hover->setBorderColor(text);
    for (auto &e : m_entries) {
        styleEntry(*e); // the faint raw colour is mixed with the background
        updateLegendMarker(*e);
    }
}

void MetricChart::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::FontChange)
        applyPalette();
}

bool MetricChart::eventFilter(QObject *watched, QEvent *event)
{
    if (watched != m_view->viewport())
        return QWidget::eventFilter(watched, event);
    switch (event->type()) {
    case QEvent::MouseMove:
        showReadOut(static_cast<QMouseEvent *>(event)->position().toPoint());
        break;
    case QEvent::Leave:
        QToolTip::hideText();
        m_hover->clear();
        break;
    case QEvent::ToolTip:
        // The mouse rests: over a point, its read-out stays (the view's hint about zooming
        // would replace it); elsewhere the hint shows.
        if (readOutAt(static_cast<QHelpEvent *>(event)->pos())) {
            showReadOut(static_cast<QHelpEvent *>(event)->pos());
            return true;
        }
        break;
    case QEvent::MouseButtonDblClick:
        resetZoom();
        return true;
    case QEvent::MouseButtonRelease:
        // QChartView zooms out on a right click; the context menu is ours instead.
        if (static_cast<QMouseEvent *>(event)->button() == Qt::RightButton)
            return true;
        // QChartView zooms when it handles this release, right after us.
        m_rubberBandReleased = true;
        QTimer::singleShot(0, this, [this] { m_rubberBandReleased = false; });
        break;
    case QEvent::ContextMenu:
        showContextMenu(static_cast<QContextMenuEvent *>(event)->pos());
        return true;
    default:
        break;
    }
    return QWidget::eventFilter(watched, event);
}

std::optional<ReadOut> MetricChart::readOutAt(const QPoint &viewPosition) const
{
    const QPointF at = m_chart->mapFromScene(m_view->mapToScene(viewPosition));
    const QRectF area = m_chart->plotArea();
    if (!area.adjusted(-kHoverRadius, -kHoverRadius, kHoverRadius, kHoverRadius).contains(at))
        return std::nullopt;
    const QPointF value = m_chart->mapToValue(at, m_hover);
    std::optional<ReadOut> best;
    double bestDistance = kInf;
    for (const auto &e : m_entries) {
        if (!e->visible || !e->data.hasAxis(m_xAxis))
            continue;
        const std::size_t i = e->data.nearest(m_xAxis, value.x());
        const double shown = e->data.shownValue(i);
        if (m_logScale && !(shown > 0))
            continue;
        const QPointF position
            = m_chart->mapToPosition(QPointF(e->data.column(m_xAxis)[i], m_logScale ? std::log10(shown) : shown), m_hover);
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

void MetricChart::showReadOut(const QPoint &position)
{
    const auto r = readOutAt(position);
    if (!r) {
        QToolTip::hideText();
        m_hover->clear();
        return;
    }
    const Entry *e = find(r->seriesId);
    m_hover->setBorderColor(e->color);
    m_hover->replace({ QPointF(r->point.x[int(m_xAxis)], m_logScale ? std::log10(r->shown) : r->shown) });
    QToolTip::showText(m_view->viewport()->mapToGlobal(position), r->text(), m_view->viewport());
}

void MetricChart::showContextMenu(const QPoint &position)
{
    QMenu menu(this);
    const QString title = m_chart->title().isEmpty() ? tr("chart") : m_chart->title();
    menu.addAction(tr("Export as PNG…"), this, [this, title] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export chart"), title + QStringLiteral(".png"), tr("PNG image (*.png)"));
        if (path.isEmpty())
            return;
        if (const core::Status written = exportPng(path); !written)
            QMessageBox::warning(this, tr("Export chart"), written.error());
    });
    menu.addAction(tr("Export as SVG…"), this, [this, title] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Export chart"), title + QStringLiteral(".svg"), tr("SVG image (*.svg)"));
        if (path.isEmpty())
            return;
        if (const core::Status written = exportSvg(path); !written)
            QMessageBox::warning(this, tr("Export chart"), written.error());
    });
    menu.addSeparator();
    menu.addAction(tr("Reset zoom"), this, &MetricChart::resetZoom)->setEnabled(m_zoom.has_value());
    menu.exec(m_view->viewport()->mapToGlobal(position));
}

bool MetricChart::renderTo(QPaintDevice *device, const QSize &size)
{
    redraw(); // what is exported is the latest data, not the last frame
    QCoreApplication::sendPostedEvents(m_chart, QEvent::LayoutRequest);
    QPainter painter;
    if (!painter.begin(device))
        return false;
    painter.setRenderHint(QPainter::Antialiasing);
    painter.fillRect(QRect(QPoint(), size), palette().color(QPalette::Base));
    m_chart->scene()->render(&painter, QRectF(QPoint(), size), m_chart->geometry());
    return painter.end();
}

core::Status MetricChart::exportPng(const QString &path)
{
    const QSize size = m_chart->size().toSize().expandedTo(QSize(1, 1));
    constexpr qreal scale = 2; // crisp on high-density screens and in documents
    QImage image(size * scale, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(scale);
    if (!renderTo(&image, size) || !image.save(path, "PNG"))
        return core::Status::failure(tr("Could not write %1").arg(path));
    return core::Status::success();
}

core::Status MetricChart::exportSvg(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return core::Status::failure(tr("Could not write %1: %2").arg(path, file.errorString()));
    const QSize size = m_chart->size().toSize().expandedTo(QSize(1, 1));
    QSvgGenerator svg;
    svg.setOutputDevice(&file);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(), size));
    svg.setTitle(m_chart->title());
    svg.setDescription(tr("ScaleLab chart"));
    if (!renderTo(&svg, size))
        return core::Status::failure(tr("Could not render the chart to %1").arg(path));
    return core::Status::success();
}

} // namespace scalelab::app
