// Brings samples to MetricCharts on the GUI thread, in batches: the Run tab's charts take
// every run event's samples through one (RunTabCharts, run_plot.h), and the benchmark's
// producer thread posts through one the same way (bench/console_frames.cpp).
//
// post() is safe from any thread and cheap: it appends to a mutex-guarded buffer and,
// for the first sample after a drain, queues a single wake-up to the GUI thread. The
// GUI thread then waits out a coalescing interval (40 ms), takes the whole buffer in
// one swap, appends each channel's samples to its chart and redraws each touched chart
// once. Plot cost is bounded by pixels and frames, not by the event rate.
//
// Channels are made on the GUI thread with channel() before producers use them; the
// feed must outlive its producers' post() calls, and the charts must outlive the feed
// or be forgotten with forget(). Before a chart's series is removed, drain() the feed, so
// samples still waiting are not drawn into a series added later under the same id.
#pragma once

#include "metric_series.h"

#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QPointer>
#include <QTimer>

#include <atomic>
#include <mutex>
#include <vector>

namespace scalelab::app {

class MetricChart;

class ChartFeed : public QObject {
    Q_OBJECT
public:
    using Channel = int;

    explicit ChartFeed(QObject *parent = nullptr);
    ~ChartFeed() override;

    // GUI thread. A channel delivers to series `seriesId` of `chart` (added beforehand).
    Channel channel(MetricChart *chart, const QString &seriesId);
    void forget(MetricChart *chart);
    void setInterval(int milliseconds) { m_timer.setInterval(milliseconds); }
    // GUI thread: post() through the channel of (chart, seriesId), made on first use.
    void post(MetricChart *chart, const QString &seriesId, const MetricPoint &point);

    // Any thread.
    void post(Channel channel, const MetricPoint &point);
    void post(Channel channel, const std::vector<MetricPoint> &points);
    std::size_t pending() const; // posted, not yet drained
    std::uint64_t posted() const { return m_posted.load(std::memory_order_relaxed); }

    // GUI thread: take everything posted so far into the charts and redraw them now.
    // Returns the number of samples taken. The timer calls this.
    std::size_t drain();
    std::uint64_t drained() const { return m_drained; }

Q_SIGNALS:
    // After each drain, on the GUI thread: samples taken and the milliseconds spent
    // appending and redrawing (painting follows in the event loop).
    void frameDone(std::size_t samples, double milliseconds);

private:
    struct Posted {
        Channel channel;
        MetricPoint point;
    };
    struct Route {
        QPointer<MetricChart> chart;
        QString seriesId;
    };
    void wake();

    mutable std::mutex m_mutex;
    std::vector<Posted> m_buffer; // guarded by m_mutex
    bool m_wakeQueued = false; // guarded by m_mutex
    std::atomic<std::uint64_t> m_posted = 0;
    std::vector<Posted> m_taking; // GUI thread: the swapped-out buffer, reused
    std::vector<Route> m_routes; // GUI thread
    QHash<QPair<const MetricChart *, QString>, Channel> m_channels; // GUI thread: routes by target
    std::vector<std::vector<MetricPoint>> m_byChannel; // GUI thread, reused
    std::uint64_t m_drained = 0;
    QTimer m_timer;
};

} // namespace scalelab::app
