// scalelab-bench-console: how smooth the console's live charts stay under load.
//
// A MetricChart with several runs overlaid is fed synthetic step events (loss by step,
// epoch and time) through ChartFeed, as the console's Run tab feeds its charts (there
// from the GUI thread, run_plot.h; here from a producer thread, so the feed's locking is
// measured too). It reports, measured here and now:
//   fill    the events/s the GUI thread absorbs while a producer posts as fast as it can
//           (until every series holds --points samples);
//   steady  with --points samples per series, a producer offering --rate events/s for
//           --seconds to the first 1, 4, then all runs (--live-runs): events/s absorbed,
//           frame times and the longest UI-thread stall;
//   interactions  the x axis to epochs, the log scale, a new smoothing weight: one frame each;
//   side by side  the same chart, frame by frame on one thread, against the naive Qt
//           Charts approach (every point appended to a QLineSeries, no downsampling),
//           at sizes the naive chart can still draw, as ratios.
// A frame is the timer-driven update (drain, append, downsample, one replace() per line)
// plus a synchronous repaint of the chart view (posted layout work included). A stall is
// the longest gap between ticks of a 5 ms timer on the GUI thread.
// It is a benchmark, not a test: numbers are reported, never asserted.
#include "chart_feed.h"
#include "metric_chart.h"

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QLineSeries>
#include <QTimer>
#include <QValueAxis>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

using namespace scalelab::app;

namespace {

constexpr double kStepsPerEpoch = 390; // CIFAR-10 at batch 128
constexpr double kSecondsPerStep = 0.02;
constexpr int kFrameMs = MetricChart::kRedrawIntervalMs;

// Step i of run r: a noisy, falling loss with an occasional spike.
struct LossSource {
    std::mt19937_64 rng;
    std::normal_distribution<double> noise { 0, 0.08 };
    std::uniform_real_distribution<double> spike { 0, 1 };
    explicit LossSource(unsigned seed)
        : rng(seed)
    { }
    MetricPoint at(qint64 step, int run)
    {
        double y = (2.3 + 0.1 * run) * std::exp(-double(step) / 200'000.0) + 0.15 + noise(rng);
        if (spike(rng) < 1e-5)
            y += 3;
        return MetricPoint::timeline(
            double(step), double(step) / kStepsPerEpoch, double(step) * kSecondsPerStep, std::max(y, 0.01));
    }
};

struct Stats {
    std::vector<double> samples;
    void add(double v) { samples.push_back(v); }
    double quantile(double q) const
    {
        if (samples.empty())
            return NAN;
        auto s = samples;
        std::sort(s.begin(), s.end());
        return s[std::min(s.size() - 1, std::size_t(q * double(s.size() - 1) + 0.5))];
    }
    double median() const { return quantile(0.5); }
    double worst() const { return samples.empty() ? NAN : *std::max_element(samples.begin(), samples.end()); }
};

// What the GUI thread could not do: the gaps between ticks of a 5 ms timer.
class StallWatch {
public:
    StallWatch()
    {
        m_timer.setTimerType(Qt::PreciseTimer);
        m_timer.setInterval(5);
        QObject::connect(&m_timer, &QTimer::timeout, [this] {
            const double now = m_clock.nsecsElapsed() / 1e6;
            const double gap = now - m_last;
            m_longest = std::max(m_longest, gap);
            if (gap > 50)
                ++m_over50;
            m_last = now;
        });
    }
    void start()
    {
        m_clock.start();
        m_last = 0;
        m_longest = 0;
        m_over50 = 0;
        m_timer.start();
    }
    void stop() { m_timer.stop(); }
    double longest() const { return m_longest; }
    int over50() const { return m_over50; }

private:
    QTimer m_timer;
    QElapsedTimer m_clock;
    double m_last = 0, m_longest = 0;
    int m_over50 = 0;
};

// Paints now what the chart view shows, as the event loop would after an update: the
// posted layout work, the scene's dirty items and the paint they request, delivered
// synchronously; a repaint is forced only if none was requested, so nothing is painted twice.
double repaint(QChartView *view)
{
    struct PaintCounter : QObject {
        int paints = 0;
        bool eventFilter(QObject *, QEvent *event) override
        {
            paints += event->type() == QEvent::Paint ? 1 : 0;
            return false;
        }
    } counter;
    view->viewport()->installEventFilter(&counter);
    QElapsedTimer t;
    t.start();
    QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
    QCoreApplication::sendPostedEvents(nullptr, QEvent::MetaCall); // the scene's dirty items
    QCoreApplication::sendPostedEvents(nullptr, QEvent::UpdateRequest);
    if (counter.paints == 0)
        view->viewport()->repaint();
    const double ms = t.nsecsElapsed() / 1e6;
    view->viewport()->removeEventFilter(&counter);
    return ms;
}

// The GUI thread sleeps between events, as the console's does in exec(): `done` is checked
// every 5 ms. (processEvents(flags, ms) ignores WaitForMoreEvents: a loop of it spun a core,
// which a CPU quota, bench/console-slowed.sh, then took from the frames.)
void runEventLoopUntil(const std::function<bool()> &done)
{
    if (done())
        return;
    QEventLoop loop;
    QTimer check;
    check.setInterval(5);
    QObject::connect(&check, &QTimer::timeout, &loop, [&] {
        if (done())
            loop.quit();
    });
    check.start();
    loop.exec();
}

struct LivePhase {
    Stats frames, updates, paints;
    double seconds = 0;
    std::uint64_t absorbed = 0;
    std::size_t backlog = 0;
    double longestStall = 0;
    int stallsOver50 = 0;
};

// Feeds `chart` from a producer thread: `total` events, at `rate` per second (0 = as fast
// as the feed takes them, keeping at most `maxPending` queued), round robin over runs.
LivePhase feedLive(MetricChart *chart, ChartFeed &feed, const std::vector<ChartFeed::Channel> &channels,
    std::vector<qint64> &nextStep, std::uint64_t total, double rate, double maxSeconds)
{
    LivePhase phase;
    StallWatch stalls;
    auto connection = QObject::connect(&feed, &ChartFeed::frameDone, [&](std::size_t, double updateMs) {
        const double paintMs = repaint(chart->view());
        phase.updates.add(updateMs);
        phase.paints.add(paintMs);
        phase.frames.add(updateMs + paintMs);
        if (updateMs + paintMs > 35 && qEnvironmentVariableIsSet("BENCH_TRACE")) {
            auto *x = static_cast<QValueAxis *>(chart->xAxisItem());
            std::fprintf(stderr, "slow frame: update %.1f paint %.1f x [%g, %g]\n", updateMs, paintMs,
                x->min(), x->max());
        }
    });
    std::atomic<bool> stop = false;
    std::atomic<bool> producing = true;
    const std::uint64_t drainedBefore = feed.drained();
    QElapsedTimer clock;
    stalls.start();
    clock.start();
    std::thread producer([&] {
        std::vector<LossSource> sources;
        for (std::size_t r = 0; r < channels.size(); ++r)
            sources.emplace_back(unsigned(r + 1 + nextStep[r]));
        const auto begin = std::chrono::steady_clock::now();
        std::uint64_t posted = 0;
        std::size_t run = 0;
        while (posted < total && !stop) {
            std::uint64_t due = total;
            if (rate > 0) {
                const double elapsed
                    = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
                due = std::min<std::uint64_t>(total, std::uint64_t(elapsed * rate));
            } else if (feed.pending() > 200'000) {
                due = posted; // the GUI is behind: back off
            }
            for (int burst = 0; posted < due && burst < 4096; ++posted, ++burst) {
                feed.post(channels[run], sources[run].at(nextStep[run]++, int(run)));
                run = (run + 1) % channels.size();
            }
            if (posted < total && (posted >= due))
                std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
        producing = false;
    });
    runEventLoopUntil([&] {
        if (clock.elapsed() > maxSeconds * 1000)
            stop = true;
        return !producing && feed.drained() == feed.posted();
    });
    producer.join();
    phase.seconds = clock.nsecsElapsed() / 1e9;
    stalls.stop();
    phase.absorbed = feed.drained() - drainedBefore;
    phase.backlog = feed.pending();
    phase.longestStall = stalls.longest();
    phase.stallsOver50 = stalls.over50();
    QObject::disconnect(connection);
    return phase;
}

struct SideBySide {
    Stats ours, naive;
};

// One size of the side-by-side comparison: raw lines (no smoothing) on both sides.
// The naive side keeps every point in its QLineSeries and, per frame, either hands the whole
// list over with one replace() or (appendEach) calls append() once per event.
SideBySide compare(int series, qint64 points, int frames, int eventsPerFrame, QSize size, double naiveBudgetS,
    bool appendEach = false)
{
    SideBySide result;
    {
        MetricChart chart(QStringLiteral("Loss"), QStringLiteral("loss"));
        chart.resize(size);
        chart.show();
        std::vector<qint64> next(series, 1);
        for (int r = 0; r < series; ++r) {
            chart.addSeries(QStringLiteral("run%1").arg(r), QStringLiteral("run %1").arg(r));
            LossSource source(r + 1);
            std::vector<MetricPoint> fill;
            fill.reserve(std::size_t(points));
            for (; next[r] <= points; ++next[r])
                fill.push_back(source.at(next[r], r));
            chart.append(QStringLiteral("run%1").arg(r), fill);
        }
        chart.redraw();
        repaint(chart.view());
        std::vector<LossSource> sources;
        for (int r = 0; r < series; ++r)
            sources.emplace_back(100 + r);
        for (int f = 0; f < frames; ++f) {
            QElapsedTimer t;
            t.start();
            for (int e = 0; e < eventsPerFrame; ++e) {
                const int r = e % series;
                chart.append(QStringLiteral("run%1").arg(r), sources[r].at(next[r]++, r));
            }
            chart.redraw();
            repaint(chart.view());
            result.ours.add(t.nsecsElapsed() / 1e6);
        }
    }
    {
        auto *qchart = new QChart;
        qchart->setTitle(QStringLiteral("Loss"));
        auto *x = new QValueAxis, *y = new QValueAxis;
        qchart->addAxis(x, Qt::AlignBottom);
        qchart->addAxis(y, Qt::AlignLeft);
        y->setRange(0, 6);
        QChartView view(qchart);
        // Same rule as MetricChart: no antialiasing for more than 4,000 drawn points.
        view.setRenderHint(QPainter::Antialiasing, series * points <= 4000);
        view.resize(size);
        view.show();
        std::vector<QLineSeries *> lines;
        std::vector<QList<QPointF>> all(series);
        std::vector<qint64> next(series, 1);
        for (int r = 0; r < series; ++r) {
            auto *line = new QLineSeries;
            line->setName(QStringLiteral("run %1").arg(r));
            qchart->addSeries(line);
            line->attachAxis(x);
            line->attachAxis(y);
            LossSource source(r + 1);
            for (; next[r] <= points; ++next[r])
                all[r].append(QPointF(double(next[r]), source.at(next[r], r).y));
            line->replace(all[r]);
            lines.push_back(line);
        }
        x->setRange(1, double(points));
        repaint(&view);
        std::vector<LossSource> sources;
        for (int r = 0; r < series; ++r)
            sources.emplace_back(100 + r);
        QElapsedTimer budget;
        budget.start();
        for (int f = 0; f < frames && budget.elapsed() < naiveBudgetS * 1000; ++f) {
            QElapsedTimer t;
            t.start();
            for (int e = 0; e < eventsPerFrame; ++e) {
                const int r = e % series;
                if (appendEach) {
                    // What a first attempt does: QLineSeries::append() per event. Each one
                    // re-strokes the whole line inside Qt Charts.
                    lines[r]->append(double(next[r]), sources[r].at(next[r], r).y);
                } else {
                    all[r].append(QPointF(double(next[r]), sources[r].at(next[r], r).y));
                }
                ++next[r];
            }
            if (!appendEach)
                for (int r = 0; r < series; ++r)
                    lines[r]->replace(all[r]);
            x->setRange(1, double(next[0]));
            repaint(&view);
            result.naive.add(t.nsecsElapsed() / 1e6);
        }
    }
    return result;
}

QString cpuModel()
{
    QFile f(QStringLiteral("/proc/cpuinfo"));
    if (f.open(QIODevice::ReadOnly))
        for (const QByteArray &line : f.readAll().split('\n'))
            if (line.startsWith("model name"))
                return QString::fromLatin1(line.mid(line.indexOf(':') + 1).trimmed());
    return QStringLiteral("unknown CPU");
}

QString thousands(double v)
{
    return QLocale(QLocale::English).toString(qint64(std::llround(v)));
}

struct Options {
    qint64 points = 0;
    int runs = 0;
    double rate = 0;
    double seconds = 0;
    double smoothing = 0;
    QStringList peerSizes, liveRuns;
    qint64 appendPeerPoints = 0;
    int peerFrames = 0;
    QString png;
    QSize size { 1200, 700 };
    int eventsPerFrame() const { return std::max(1, int(rate * kFrameMs / 1000)); }
};

Options parseOptions(const QApplication &app)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Frame times of the console's live charts under load."));
    parser.addHelpOption();
    parser.addOptions({
        { QStringLiteral("points"), QStringLiteral("Samples per series."), QStringLiteral("n"),
            QStringLiteral("1000000") },
        { QStringLiteral("runs"), QStringLiteral("Runs (series) overlaid."), QStringLiteral("n"),
            QStringLiteral("4") },
        { QStringLiteral("rate"), QStringLiteral("Offered events/s in the steady phase."),
            QStringLiteral("n"), QStringLiteral("50000") },
        { QStringLiteral("seconds"), QStringLiteral("Length of the steady phase."), QStringLiteral("s"),
            QStringLiteral("10") },
        { QStringLiteral("smoothing"), QStringLiteral("Smoothing weight in the live phases."),
            QStringLiteral("w"), QStringLiteral("0.6") },
        { QStringLiteral("peer-sizes"), QStringLiteral("Points per series for the side-by-side table."),
            QStringLiteral("list"), QStringLiteral("10000,100000,1000000") },
        { QStringLiteral("append-peer-points"),
            QStringLiteral("Points per series for the naive per-event append() row (0 = skip)."),
            QStringLiteral("n"), QStringLiteral("1000") },
        { QStringLiteral("peer-frames"), QStringLiteral("Frames per side and size."), QStringLiteral("n"),
            QStringLiteral("30") },
        { QStringLiteral("live-runs"),
            QStringLiteral("Runs receiving events in each steady phase, e.g. 1,4,8: one live run beside the "
                           "finished ones, then four, then eight (at most --runs)."),
            QStringLiteral("list"), QStringLiteral("1,4,8") },
        { QStringLiteral("png"), QStringLiteral("Save the live chart as PNG at the end."),
            QStringLiteral("file") },
    });
    parser.process(app);
    Options o;
    o.points = parser.value(QStringLiteral("points")).toLongLong();
    o.runs = std::max(1, parser.value(QStringLiteral("runs")).toInt());
    o.rate = parser.value(QStringLiteral("rate")).toDouble();
    o.seconds = parser.value(QStringLiteral("seconds")).toDouble();
    o.smoothing = parser.value(QStringLiteral("smoothing")).toDouble();
    o.peerSizes = parser.value(QStringLiteral("peer-sizes")).split(QLatin1Char(','));
    o.liveRuns = parser.value(QStringLiteral("live-runs")).split(QLatin1Char(','));
    o.appendPeerPoints = parser.value(QStringLiteral("append-peer-points")).toLongLong();
    o.peerFrames = parser.value(QStringLiteral("peer-frames")).toInt();
    o.png = parser.value(QStringLiteral("png"));
    return o;
}

void printHeader(const Options &o)
{
    double load[3] = { 0, 0, 0 };
    getloadavg(load, 3);
    std::printf("ScaleLab console frame benchmark\n");
    std::printf("platform: Qt %s, QPA '%s', %s, %u hardware threads, load average %.2f\n", qVersion(),
        qPrintable(QGuiApplication::platformName()), qPrintable(cpuModel()),
        std::thread::hardware_concurrency(), load[0]);
    std::printf("chart: %dx%d px, %d runs overlaid (antialiased up to 4,000 drawn points); frame = "
                "timer-driven update + synchronous "
                "repaint\n\n",
        o.size.width(), o.size.height(), o.runs);
}

// The live chart and its feed: o.runs series, each fed through a channel of its own.
struct LiveChart {
    MetricChart chart { QStringLiteral("Training loss"), QStringLiteral("loss") };
    ChartFeed feed;
    std::vector<ChartFeed::Channel> channels;
    std::vector<qint64> nextStep;
    std::uint64_t pointsPerRun() const { return std::uint64_t(chart.pointCount(QStringLiteral("run0"))); }
};

void setUp(LiveChart &live, const Options &o)
{
    live.chart.resize(o.size);
    live.chart.show();
    live.chart.setSmoothing(o.smoothing);
    live.nextStep.assign(std::size_t(o.runs), 1);
    for (int r = 0; r < o.runs; ++r) {
        const QString id = QStringLiteral("run%1").arg(r);
        live.chart.addSeries(id, QStringLiteral("run %1").arg(r));
        live.channels.push_back(live.feed.channel(&live.chart, id));
    }
    QCoreApplication::processEvents();
}

void fill(LiveChart &live, const Options &o)
{
    const LivePhase fill = feedLive(&live.chart, live.feed, live.channels, live.nextStep,
        std::uint64_t(o.points) * std::uint64_t(o.runs), 0, 600);
    std::printf("fill: a producer thread posts %s events as fast as the GUI takes them (smoothing %.2f: a "
                "smoothed and a raw line per run)\n",
        qPrintable(thousands(double(fill.absorbed))), live.chart.smoothing());
    std::printf("  absorbed %s events/s over %.1f s; frames: median %.1f ms, worst %.1f ms (%zu frames, %s "
                "events/frame on average); longest UI stall %.0f ms\n\n",
        qPrintable(thousands(double(fill.absorbed) / fill.seconds)), fill.seconds, fill.frames.median(),
        fill.frames.worst(), fill.frames.samples.size(),
        qPrintable(thousands(double(fill.absorbed) / std::max<std::size_t>(1, fill.frames.samples.size()))),
        fill.longestStall);
}

// One steady phase per --live-runs entry (e.g. one live run beside finished ones, then all live).
std::vector<std::pair<int, LivePhase>> steadyPhases(LiveChart &live, const Options &o)
{
    std::vector<std::pair<int, LivePhase>> steadies;
    for (const QString &text : o.liveRuns) {
        const int liveRuns = std::clamp(text.toInt(), 1, o.runs);
        if (!steadies.empty() && steadies.back().first == liveRuns)
            continue; // 8 with --runs 4: the phase of all four is done
        const std::vector<ChartFeed::Channel> liveChannels(
            live.channels.begin(), live.channels.begin() + liveRuns);
        const std::uint64_t before = live.pointsPerRun();
        const LivePhase steady = feedLive(&live.chart, live.feed, liveChannels, live.nextStep,
            std::uint64_t(o.rate * o.seconds), o.rate, o.seconds * 3 + 10);
        std::printf("steady: %s to %s points per run, %s events/s offered for %.0f s to %d of the %d runs\n",
            qPrintable(thousands(double(before))), qPrintable(thousands(double(live.pointsPerRun()))),
            qPrintable(thousands(o.rate)), o.seconds, liveRuns, o.runs);
        std::printf("  absorbed %s events/s, backlog at the end %zu; frames: median %.1f ms (update %.1f + "
                    "paint %.1f), "
                    "p95 %.1f ms, worst %.1f ms (%zu frames); UI stalls > 50 ms: %d, longest %.0f ms\n\n",
            qPrintable(thousands(double(steady.absorbed) / steady.seconds)), steady.backlog,
            steady.frames.median(), steady.updates.median(), steady.paints.median(),
            steady.frames.quantile(0.95), steady.frames.worst(), steady.frames.samples.size(),
            steady.stallsOver50, steady.longestStall);
        std::fflush(stdout);
        steadies.emplace_back(liveRuns, steady);
    }
    return steadies;
}

// Interactive changes on the full data, each one frame: the slowest of them, in ms.
double interactions(LiveChart &live)
{
    struct Timed {
        double change = 0, paint = 0; // the change with its redraw (re-smooth, reduce, axes); the paint
        double total() const { return change + paint; }
    };
    auto timed = [&](auto change) {
        Timed t;
        QElapsedTimer clock;
        clock.start();
        change();
        t.change = clock.nsecsElapsed() / 1e6;
        t.paint = repaint(live.chart.view());
        return t;
    };
    const Timed toEpoch = timed([&] { live.chart.setXAxis(XAxis::Epoch); });
    const Timed toLog = timed([&] { live.chart.setLogScale(true); });
    const Timed resmooth = timed([&] { live.chart.setSmoothing(0.9); });
    std::printf(
        "interactions at %s points per run: x axis to epoch %.1f ms, log scale %.1f ms, new smoothing "
        "weight (re-smooths every run) %.1f ms\n",
        qPrintable(thousands(double(live.pointsPerRun()))), toEpoch.total(), toLog.total(), resmooth.total());
    std::printf(
        "  of which the change and its redraw / the paint: %.1f / %.1f, %.1f / %.1f, %.1f / %.1f ms\n\n",
        toEpoch.change, toEpoch.paint, toLog.change, toLog.paint, resmooth.change, resmooth.paint);
    return std::max({ toEpoch.total(), toLog.total(), resmooth.total() });
}

void sideBySide(const Options &o)
{
    std::printf(
        "side by side, one thread: per frame %d new events (%s/s × %d ms) and a repaint; raw lines, "
        "no smoothing, %d runs.\n  naive = every point in one QLineSeries per run, the whole list handed "
        "over with one replace() per frame, no downsampling\n",
        o.eventsPerFrame(), qPrintable(thousands(o.rate)), kFrameMs, o.runs);
    std::printf("  %12s  %22s  %30s  %s\n", "points/run", "ScaleLab median/worst",
        "naive QLineSeries median/worst", "naive ÷ ScaleLab (median)");
    for (const QString &text : o.peerSizes) {
        const qint64 n = text.toLongLong();
        if (n <= 0)
            continue;
        const SideBySide r = compare(o.runs, n, o.peerFrames, o.eventsPerFrame(), o.size, 30);
        std::printf("  %12s  %9.1f / %6.1f ms  %14.1f / %7.1f ms (%2zu fr)  %.1f×\n",
            qPrintable(thousands(double(n))), r.ours.median(), r.ours.worst(), r.naive.median(),
            r.naive.worst(), r.naive.samples.size(), r.naive.median() / r.ours.median());
        std::fflush(stdout);
    }
    if (o.appendPeerPoints > 0) {
        const SideBySide r = compare(o.runs, o.appendPeerPoints, 3, o.eventsPerFrame(), o.size, 20, true);
        std::printf(
            "  %12s  %9.1f / %6.1f ms  %14.1f / %7.1f ms (%2zu fr)  %.1f×   <- naive with append() per "
            "event instead of one replace() per frame\n",
            qPrintable(thousands(double(o.appendPeerPoints))), r.ours.median(), r.ours.worst(),
            r.naive.median(), r.naive.worst(), r.naive.samples.size(), r.naive.median() / r.ours.median());
    }
}

void printGoals(
    const Options &o, const std::vector<std::pair<int, LivePhase>> &steadies, double slowestInteraction)
{
    std::printf("\ngoals (issue 56): median frame < 16 ms, worst frame < 33 ms, >= 50,000 events/s absorbed "
                "with no UI stall > 50 ms; an interaction < 100 ms\n");
    for (const auto &[liveRuns, steady] : steadies) {
        const bool rateOk = double(steady.absorbed) / steady.seconds >= 0.98 * std::min(o.rate, 50'000.0)
            && steady.longestStall <= 50 && steady.backlog == 0;
        std::printf("  %d live run(s): median %s, worst %s, events/s %s\n", liveRuns,
            steady.frames.median() < 16 ? "met" : "MISSED", steady.frames.worst() < 33 ? "met" : "MISSED",
            rateOk ? "met" : "MISSED");
    }
    std::printf("  interactions: %s\n", slowestInteraction < 100 ? "met" : "MISSED");
}

} // namespace

int main(int argc, char **argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    const Options o = parseOptions(app);
    printHeader(o);
    LiveChart live;
    setUp(live, o);
    fill(live, o);
    const auto steadies = steadyPhases(live, o);
    if (!o.png.isEmpty())
        if (const auto written = live.chart.exportPng(o.png); !written)
            std::fprintf(stderr, "console_frames: %s\n", qPrintable(written.error()));
    const double slowestInteraction = interactions(live);
    sideBySide(o);
    printGoals(o, steadies, slowestInteraction);
    return 0;
}
