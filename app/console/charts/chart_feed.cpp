#include "chart_feed.h"

#include "metric_chart.h"

#include <algorithm>

namespace scalelab::app {

ChartFeed::ChartFeed(QObject *parent)
    : QObject(parent)
{
    m_timer.setSingleShot(true);
    m_timer.setInterval(MetricChart::kRedrawIntervalMs);
    connect(&m_timer, &QTimer::timeout, this, &ChartFeed::drain);
}

ChartFeed::~ChartFeed() = default;

ChartFeed::Channel ChartFeed::channel(MetricChart *chart, const QString &seriesId)
{
    const QPair<const MetricChart *, QString> key(chart, seriesId);
    if (const auto known = m_channels.constFind(key); known != m_channels.constEnd())
        return *known;
    m_routes.push_back({ chart, seriesId });
    const auto made = Channel(m_routes.size() - 1);
    m_channels.insert(key, made);
    return made;
}

void ChartFeed::forget(MetricChart *chart)
{
    for (auto &r : m_routes)
        if (r.chart == chart)
            r.chart = nullptr;
    m_channels.removeIf([chart](const auto &entry) { return entry.key().first == chart; });
}

void ChartFeed::post(MetricChart *chart, const QString &seriesId, const MetricPoint &point)
{
    post(channel(chart, seriesId), point);
}

void ChartFeed::post(Channel channel, const MetricPoint &point)
{
    bool wakeUp = false;
    {
        std::lock_guard lock(m_mutex);
        m_buffer.push_back({ channel, point });
        wakeUp = !std::exchange(m_wakeQueued, true);
    }
    m_posted.fetch_add(1, std::memory_order_relaxed);
    if (wakeUp)
        QMetaObject::invokeMethod(this, &ChartFeed::wake, Qt::QueuedConnection);
}

void ChartFeed::post(Channel channel, const std::vector<MetricPoint> &points)
{
    if (points.empty())
        return;
    bool wakeUp = false;
    {
        std::lock_guard lock(m_mutex);
        for (const auto &p : points)
            m_buffer.push_back({ channel, p });
        wakeUp = !std::exchange(m_wakeQueued, true);
    }
    m_posted.fetch_add(points.size(), std::memory_order_relaxed);
    if (wakeUp)
        QMetaObject::invokeMethod(this, &ChartFeed::wake, Qt::QueuedConnection);
}

std::size_t ChartFeed::pending() const
{
    std::lock_guard lock(m_mutex);
    return m_buffer.size();
}

void ChartFeed::wake()
{
    // The first samples of a batch start the coalescing interval; later ones ride along.
    if (!m_timer.isActive())
        m_timer.start();
}

std::size_t ChartFeed::drain()
{
    QElapsedTimer clock;
    clock.start();
    m_timer.stop();
    m_taking.clear();
    {
        std::lock_guard lock(m_mutex);
        std::swap(m_taking, m_buffer);
        m_wakeQueued = false; // the next post() wakes us again
    }
    // Sorted by channel (each keeping its order), appended a channel at a time; every
    // chart is redrawn once, after all of its samples are in.
    m_byChannel.resize(m_routes.size());
    for (const auto &p : m_taking)
        if (p.channel >= 0 && std::size_t(p.channel) < m_routes.size())
            m_byChannel[std::size_t(p.channel)].push_back(p.point);
    std::vector<MetricChart *> touched;
    for (std::size_t c = 0; c < m_routes.size(); ++c) {
        auto &points = m_byChannel[c];
        MetricChart *chart = m_routes[c].chart;
        if (chart && !points.empty()) {
            chart->append(m_routes[c].seriesId, points);
            if (std::find(touched.begin(), touched.end(), chart) == touched.end())
                touched.push_back(chart);
        }
        points.clear();
    }
    for (MetricChart *chart : touched)
        chart->redraw();
    const std::size_t taken = m_taking.size();
    m_drained += taken;
    if (taken)
        Q_EMIT frameDone(taken, clock.nsecsElapsed() / 1e6);
    return taken;
}

} // namespace scalelab::app
