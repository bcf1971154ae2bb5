#include "metric_chart.h"

#include "axis_policy.h"
#include "chart_overlays.h"
#include "line_bodies.h"

#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPainter>
#include <QPainterPath>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <QtConcurrent/QtConcurrentMap>

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalelab::app {

namespace {

constexpr int kMinimumPixels = 64; // resolution of a plot not laid out yet
// Above this many drawn points the chart is painted without antialiasing: dense min/max
// lines are mostly tall vertical strokes, which antialiased cost about 3× as much to
// paint (Qt's raster engine even hands their spans to a thread pool) for little gain.
constexpr qsizetype kAntialiasedPoints = 4000;

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

} // namespace

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
    m_overlays = std::make_unique<ChartOverlays>(m_chart, m_x, [this](const QString &id) {
        const ChartLine *line = find(id);
        return line && !line->visible;
    });
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
    m_bodies = new LineBodies(m_chart, &m_entries);
    connect(m_chart, &QChart::plotAreaChanged, this, &MetricChart::placeBodies);
    connect(m_x, &QValueAxis::rangeChanged, this, &MetricChart::placeBodies); // a zoom, before its redraw

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

OverlayFrame MetricChart::overlayFrame() const
{
    return { m_xAxis, m_logScale, m_smoothing, m_yAxis };
}

void MetricChart::addVerticalMarker(
    const QString &group, const MetricPoint &at, const QString &label, const MarkerStyle &style)
{
    m_overlays->addVerticalMarker(group, at, label, font(), style);
    applyPalette();
    placeVerticalMarkers();
}

void MetricChart::removeVerticalMarkers(const QString &group)
{
    m_overlays->removeGroup(group);
    scheduleRedraw(); // range bars widened the y range
}

void MetricChart::addRangeBar(
    const QString &group, const MetricPoint &at, double low, double high, const QColor &color)
{
    m_overlays->addRangeBar(group, at, low, high, color);
    scheduleRedraw(); // its ends widen the y range
    placeVerticalMarkers();
}

void MetricChart::setBand(const QString &id, std::vector<BandPoint> points, const QColor &color)
{
    m_overlays->setBand(id, std::move(points), color);
    scheduleRedraw(); // the band's ends count towards the y range
}

void MetricChart::removeBand(const QString &id)
{
    if (m_overlays->removeBand(id))
        scheduleRedraw();
}

QPainterPath MetricChart::bandPath(const QString &id) const
{
    return m_overlays->bandPath(id);
}

void MetricChart::placeBands()
{
    m_overlays->placeBands(overlayFrame());
}

QList<std::tuple<double, double, double>> MetricChart::shownRangeBars() const
{
    return m_overlays->shownRangeBars(m_xAxis);
}

QList<std::pair<double, QString>> MetricChart::shownVerticalMarkers() const
{
    return m_overlays->shownVerticalMarkers(m_xAxis);
}

void MetricChart::placeBodies()
{
    const auto *y = static_cast<QValueAxis *>(m_yAxis); // QCategoryAxis on a log scale
    m_bodies->setFrame(m_chart->plotArea(), m_x->min(), m_x->max(), y->min(), y->max());
}

void MetricChart::placeVerticalMarkers()
{
    m_overlays->placeMarkers(overlayFrame());
}

ChartLine *MetricChart::find(const QString &id) const
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
    auto entry = std::make_unique<ChartLine>(m_chart, m_x, m_yAxis, id, label, style,
        style.color.isValid() ? style.color : cycleColor(m_nextColor++));
    if (auto *marker = markerOf(m_chart, entry->line.body)) {
        ChartLine *e = entry.get();
        connect(marker, &QLegendMarker::clicked, this, [this, e] { setSeriesVisible(e->id, !e->visible); });
    }
    if (style.smoothable)
        entry->data.setSmoothing(m_smoothing);
    entry->applyStyle(m_dense, palette().color(QPalette::Base));
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
    m_bodies->invalidate();
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
    const ChartLine *e = find(id);
    return e ? e->data.size() : 0;
}

const MetricSeries *MetricChart::data(const QString &id) const
{
    const ChartLine *e = find(id);
    return e ? &e->data : nullptr;
}

QLineSeries *MetricChart::line(const QString &id) const
{
    const ChartLine *e = find(id);
    return e ? e->line.body : nullptr;
}

QList<QPointF> MetricChart::drawnPoints(const QString &id) const
{
    const ChartLine *e = find(id);
    return e ? fromPlot(e->line.points()) : QList<QPointF> {};
}

QList<QPointF> MetricChart::plottedPoints(const QString &id) const
{
    const ChartLine *e = find(id);
    return e ? e->line.points() : QList<QPointF> {};
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
    const ChartLine *e = find(id);
    return e ? fromPlot(e->raw.points()) : QList<QPointF> {};
}

QAbstractAxis *MetricChart::xAxisItem() const
{
    return m_x;
}

std::size_t MetricChart::append(const QString &id, const MetricPoint &point)
{
    ChartLine *e = find(id);
    if (!e || !e->data.append(point))
        return 0;
    scheduleRedraw();
    return 1;
}

std::size_t MetricChart::append(const QString &id, const std::vector<MetricPoint> &points)
{
    ChartLine *e = find(id);
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
    m_overlays->setReferenceLine(label, slope, intercept, m_yAxis);
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
    // Each run's series is its own: re-smoothed side by side, on every core.
    std::vector<MetricSeries *> smoothable;
    for (auto &e : m_entries)
        if (e->style.smoothable)
            smoothable.push_back(&e->data);
    QtConcurrent::blockingMap(smoothable, [weight](MetricSeries *series) { series->setSmoothing(weight); });
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
    ChartLine *e = find(id);
    if (!e || (e->visible == visible && e->inLegend == inLegend))
        return;
    e->visible = visible;
    e->inLegend = inLegend || visible;
    e->line.body->setVisible(visible);
    e->line.tail->setVisible(visible);
    e->updateLegendMarker(m_chart, palette().color(QPalette::Text));
    m_hover->clear();
    redraw();
}

bool MetricChart::isSeriesVisible(const QString &id) const
{
    const ChartLine *e = find(id);
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
    double x0 = std::numeric_limits<double>::infinity(), x1 = -x0;
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
    bool bodies = false; // a body LineBodies paints changed
    // When the x axis grows, one line a frame reduces its bodies to the new grid; the
    // others keep theirs (correct, only denser) until their frame: a frame re-reduces ~2
    // traces of a million samples, not 16.
    bool reduceBudget = true;
    bool stale = false;
    for (auto &e : m_entries) {
        bodies = e->draw(m_xAxis, x0, x1, pixels, m_smoothing, m_logScale, stage, reduceBudget) || bodies;
        stale = stale || e->stale;
        all.merge(e->bodyExtent);
        all.merge(e->tailExtent);
    }
    if (QLineSeries *reference = m_overlays->referenceLine()) {
        QList<QPointF> ideal = m_overlays->referencePoints(x0, x1, m_logScale);
        all.add(ideal, x0, x1);
        stage(reference, ideal);
    }
    // Bands and range bars are seen whole: their ends count towards the y range.
    all.merge(m_overlays->extent(overlayFrame(), x0, x1));
    if (const bool dense = all.points > kAntialiasedPoints; dense != m_dense) {
        m_dense = dense;
        m_view->setRenderHint(QPainter::Antialiasing, !dense);
        for (auto &e : m_entries)
            e->applyStyle(m_dense, palette().color(QPalette::Base));
        bodies = true;
    }

    // y: kept while it holds the data without wasting more than about a quarter of the height.
    const auto *yAxis = static_cast<QValueAxis *>(m_yAxis); // QCategoryAxis on a log scale
    const YRange y = m_logScale
        ? logYRange(all.lo, all.hi, yAxis->min(), yAxis->max())
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
    placeBodies();
    if (bodies)
        m_bodies->invalidate();
    placeVerticalMarkers(); // the y range may have moved under the range bars
    placeBands();
    if (stale)
        scheduleRedraw(); // the next line's bodies, without waiting for samples
    Q_EMIT redrawn();
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
    m_overlays->applyPalette(text);
    m_hover->setColor(withAlpha(text, 0.0));
    m_hover->setBorderColor(text);
    for (auto &e : m_entries) {
        e->applyStyle(m_dense, base); // the faint raw colour is mixed with the background
        e->updateLegendMarker(m_chart, text);
    }
    if (m_bodies)
        m_bodies->invalidate();
}

void MetricChart::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::FontChange)
        applyPalette();
}

} // namespace scalelab::app
