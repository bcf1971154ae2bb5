#include "study_charts.h"

#include "chart_controls.h"
#include "journal.h"
#include "metric_chart.h"
#include "scaling_model.h"
#include "scaling_panel.h"
#include "study_results.h"

#include <QCheckBox>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>
#include <optional>

namespace scalelab::app {
namespace {

using core::ConfigResult;
using core::RunConfig;

// The part of a configuration that is not its width: runs that differ only in workers
// form one scaling line.
QString scalingGroup(const RunConfig &c)
{
    const QString group = QStringLiteral("b%1 e%2 %3 %4")
                              .arg(c.batchSize)
                              .arg(c.epochs)
                              .arg(c.gpusPerWorker > 0 ? QStringLiteral("%1 GPU").arg(c.gpusPerWorker)
                                                       : QStringLiteral("CPU"),
                                  c.precision);
    return c.defaultModel() ? group : group + QLatin1Char(' ') + c.model;
}

struct ScalingPoint {
    int workers;
    double wallClock; // speedup, or efficiency in percent
    double timeToAccuracy;
    // The slowest and fastest run's (wall-clock), when more than one run stands behind it.
    std::optional<std::pair<double, double>> wallClockSpread;
};

// Speedup over the baseline's mean from the slowest to the fastest run of a configuration
// (NaN-free, two runs or more); times `scale` (1 for speedup, 100 / workers for efficiency).
std::optional<std::pair<double, double>> wallClockSpread(
    const ConfigResult &c, const ConfigResult &baseline, double scale)
{
    const double base = baseline.wallSeconds.mean;
    if (c.wallSeconds.count < 2 || !(c.wallSeconds.min > 0) || !(base > 0))
        return std::nullopt;
    return std::make_pair(base / c.wallSeconds.max * scale, base / c.wallSeconds.min * scale);
}

} // namespace

StudyCharts::StudyCharts(QWidget *parent)
    : QWidget(parent)
{
    m_charts.loss = new MetricChart(tr("Training loss, every run"), tr("loss"));
    m_charts.loss->setObjectName(QStringLiteral("studyLossChart"));
    m_charts.accuracy = new MetricChart(tr("Accuracy after each epoch, every run"), tr("accuracy %"));
    m_charts.accuracy->setObjectName(QStringLiteral("studyAccuracyChart"));
    m_charts.accuracy->setYEmptyRange(0, 100);
    m_charts.throughput = new MetricChart(tr("Throughput, every run"), tr("images / s"));
    m_charts.throughput->setObjectName(QStringLiteral("studyThroughputChart"));
    m_charts.stepTime = new MetricChart(
        tr("Step time: compute and exposed all-reduce wait, every CPU run"), tr("ms / step"));
    m_charts.stepTime->setObjectName(QStringLiteral("studyStepTimeChart"));
    m_charts.learningRate = new MetricChart(tr("Learning rate, every run"), tr("learning rate"));
    m_charts.learningRate->setObjectName(QStringLiteral("studyLearningRateChart"));
    m_charts.gradNorm = new MetricChart(tr("Gradient norm, every run"), tr("L2 norm"));
    m_charts.gradNorm->setObjectName(QStringLiteral("studyGradNormChart"));
    m_speedup = new MetricChart(tr("Speedup against the baseline"), tr("speedup ×"));
    m_speedup->setObjectName(QStringLiteral("speedupChart"));
    m_speedup->setXAxis(XAxis::Workers);
    m_speedup->setReferenceLine(tr("ideal (linear)"), 1, 0);
    m_speedup->setYInclude(0, 1); // from 0, as the reports draw it
    m_efficiency = new MetricChart(tr("Scaling efficiency"), tr("efficiency %"));
    m_efficiency->setObjectName(QStringLiteral("efficiencyChart"));
    m_efficiency->setXAxis(XAxis::Workers);
    m_efficiency->setReferenceLine(tr("ideal (100%)"), 0, 100);
    m_efficiency->setYInclude(0, 100);
    m_scalingNote = new QLabel;
    m_scalingNote->setObjectName(QStringLiteral("scalingNote"));
    m_scalingNote->setWordWrap(true);
    m_scalingNote->hide();

    m_controls = new ChartControls;
    m_controls->setObjectName(QStringLiteral("studyChartControls"));
    m_groupRepeats = new QCheckBox(tr("Mean of repeats"));
    m_groupRepeats->setObjectName(QStringLiteral("groupRepeats"));
    m_groupRepeats->setChecked(true);
    m_groupRepeats->setEnabled(false); // until a configuration has two runs
    m_groupRepeats->setToolTip(tr("Draw runs repeated with one configuration as their mean, with a band from "
                                  "the lowest to the highest run at each step"));
    connect(m_groupRepeats, &QCheckBox::toggled, this, &StudyCharts::drawRepeats);
    m_controls->drive({ m_charts.loss, m_charts.accuracy, m_charts.throughput, m_charts.stepTime,
                          m_charts.learningRate, m_charts.gradNorm },
        { m_charts.loss, m_charts.throughput, m_charts.stepTime, m_charts.gradNorm }, { m_charts.loss });

    m_controls->trailing()->addWidget(m_groupRepeats);

    auto *charts = new QSplitter(Qt::Horizontal);
    charts->addWidget(m_speedup);
    charts->addWidget(m_efficiency);
    auto *scaling = new QWidget;
    auto *scalingLayout = new QVBoxLayout(scaling);
    scalingLayout->setContentsMargins(0, 0, 0, 0);
    scalingLayout->addWidget(charts, 1);
    scalingLayout->addWidget(m_scalingNote);
    m_tabs = new QTabWidget;
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(m_charts.loss, tr("Loss"));
    m_tabs->addTab(m_charts.accuracy, tr("Accuracy"));
    m_tabs->addTab(m_charts.throughput, tr("Throughput"));
    m_tabs->addTab(scaling, tr("Speedup && efficiency"));
    m_scalingPanel = new ScalingPanel;
    m_scalingPanel->setObjectName(QStringLiteral("scalingPanel"));
    m_tabs->addTab(m_scalingPanel, tr("Why it scales"));
    connect(m_scalingPanel, &ScalingPanel::scalingsChanged, this, &StudyCharts::drawPredicted);
    connect(m_scalingPanel->whatIfWorkers(), &QSpinBox::valueChanged, this, &StudyCharts::drawPredicted);
    m_tabs->addTab(m_charts.stepTime, tr("Step time"));
    m_tabs->addTab(m_charts.learningRate, tr("Learning rate"));
    m_tabs->addTab(m_charts.gradNorm, tr("Gradient norm"));

    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_controls);
    layout->addWidget(m_tabs, 1);
}

QString StudyCharts::attemptPrefix(const QString &runId, int attempt)
{
    return QStringLiteral("%1#%2").arg(runId).arg(attempt);
}

QString StudyCharts::runLabel(const core::RunResult &run)
{
    const QString shortId = run.runId.section(QLatin1Char('-'), -1); // "r03"
    if (run.config.baseline)
        return tr("%1 baseline").arg(shortId);
    return run.config.elastic()
        ? tr("%1 · %2–%3 workers").arg(shortId).arg(run.config.minWorkers).arg(run.config.workers)
        : tr("%1 · %2 workers").arg(shortId).arg(run.config.workers);
}

QString StudyCharts::repeatsPrefix(const QString &configKey)
{
    return QStringLiteral("repeats:") + configKey;
}

void StudyCharts::clear()
{
    for (const auto &[prefix, feed] : m_feeds)
        if (feed.added)
            removeRunLines(m_charts, feed.lines);
    m_feeds.clear();
    for (const auto &[id, drawn] : m_meanDrawn) {
        for (MetricChart *chart : { m_charts.loss, m_charts.accuracy, m_charts.throughput }) {
            chart->removeSeries(id);
            chart->removeBand(id);
        }
    }
    m_meanDrawn.clear();
    m_hiddenByGrouping.clear();
    m_snapshot = {};
    m_speedup->removeAllSeries();
    m_efficiency->removeAllSeries();
    m_scalingDrawn.clear();
    m_scalingPanel->clear();
}

QHash<QString, qint64> StudyCharts::feedPositions() const
{
    QHash<QString, qint64> positions;
    for (const auto &[prefix, feed] : m_feeds)
        positions.insert(prefix, feed.lastSeq);
    return positions;
}

StudyCharts::AttemptEvents StudyCharts::newEvents(const core::Journal &journal,
    const core::StudySnapshot &snapshot, const QHash<QString, qint64> &positions)
{
    AttemptEvents events;
    for (const core::RunResult &run : snapshot.runs)
        for (const core::AttemptRecord &attempt : run.attempts) {
            if (attempt.agents.isEmpty())
                continue;
            const QString prefix = attemptPrefix(run.runId, attempt.attempt);
            if (auto stored = journal.runEvents(
                    run.runId, attempt.attempt, attempt.agents.first(), positions.value(prefix));
                !stored.empty())
                events[prefix] = std::move(stored);
        }
    return events;
}

void StudyCharts::update(
    const core::StudySnapshot &snapshot, const core::StudyResults &results, const AttemptEvents &events)
{
    for (int i = 0; i < snapshot.runs.size(); ++i) {
        const core::RunResult &run = snapshot.runs[i];
        double earlierSeconds = 0; // wall-clock of the run's earlier attempts
        for (const core::AttemptRecord &attempt : run.attempts) {
            if (attempt.agents.isEmpty())
                continue;
            const QString prefix = attemptPrefix(run.runId, attempt.attempt);
            auto [it, created] = m_feeds.try_emplace(prefix);
            AttemptFeed &feed = it->second;
            if (created) {
                feed.lines.prefix = prefix;
                feed.plot.secondsOffset = earlierSeconds;
                feed.color = MetricChart::cycleColor(i);
                feed.label = attempt.attempt > 1
                    ? tr("%1 · attempt %2").arg(runLabel(run)).arg(attempt.attempt)
                    : runLabel(run);
                // An elastic run's attempt on another size: its legend says it, its start is marked.
                if (!attempt.resize.isEmpty() && attempt.worldSize > 0) {
                    feed.plot.resizedTo = attempt.worldSize;
                    feed.plot.resizeReason = attempt.resize;
                    feed.label += attempt.worldSize == 1 ? tr(" on 1 worker")
                                                         : tr(" on %1 workers").arg(attempt.worldSize);
                }
            }
            if (const auto fresh = events.find(prefix); fresh != events.end())
                feedAttempt(feed, fresh->second);
            earlierSeconds = feed.plot.secondsOffset + feed.plot.lastSeconds;
        }
    }
    m_snapshot = snapshot;
    drawRepeats();
    drawScaling(results);
    m_scalingPanel->update(snapshot);
}

void StudyCharts::drawPredicted()
{
    for (MetricChart *chart : { m_speedup, m_efficiency })
        for (const QString &id : m_predictedIds) {
            chart->removeSeries(id);
            chart->removeBand(id);
        }
    m_predictedIds.clear();
    int color = 0;
    for (const core::StudyScaling &s : m_scalingPanel->scalings()) {
        if (!s.fit.valid)
            continue;
        int measured = 1;
        for (const core::ScalingRun &r : s.runs)
            measured = std::max(measured, r.workers);
        const int most = std::max({ 16, 2 * measured, m_scalingPanel->whatIfWorkers()->value() });
        QList<int> workers;
        for (int p = 1; p < most; p *= 2)
            workers << p;
        workers << most;
        const QList<core::ScalingPoint> points
            = core::predictWithBand(s.runs, workers, s.batchPerWorker, 0, 100);
        const QString id = QStringLiteral("predicted/") + s.model
            + (s.precision == QLatin1String("bf16") ? QStringLiteral("/bf16") : QString());
        m_predictedIds << id;
        const QColor c = MetricChart::cycleColor(color++);
        const QString label = tr("predicted by images/s of the steps, b%1%2 (95 % band)")
                                  .arg(s.batchPerWorker)
                                  .arg(m_scalingPanel->scalings().size() > 1 ? QStringLiteral(" · ")
                                              + core::scalingLabel(s, m_snapshot.modelNames)
                                                                             : QString());
        for (MetricChart *chart : { m_speedup, m_efficiency }) {
            const bool speedup = chart == m_speedup;
            chart->addSeries(id, label, { c, Qt::DotLine, false, false });
            std::vector<BandPoint> band;
            for (const core::ScalingPoint &p : points) {
                const double scale = speedup ? p.workers : 100.0;
                const MetricPoint at = MetricPoint::at(XAxis::Workers, p.workers, p.efficiency * scale);
                chart->append(id, at);
                band.push_back({ at, p.efficiencyLow * scale, p.efficiencyHigh * scale });
            }
            chart->setBand(id, std::move(band), c);
        }
    }
}

void StudyCharts::drawRepeats()
{
    // Runs by configuration, in the plan's order.
    std::map<QString, std::vector<const core::RunResult *>> byConfig;
    std::map<QString, int> firstRun; // the configuration's colour is its first run's
    QList<RunConfig> configs;
    for (int i = 0; i < m_snapshot.runs.size(); ++i) {
        const core::RunResult &run = m_snapshot.runs.at(i);
        auto &runs = byConfig[run.config.key()];
        if (runs.empty()) {
            configs << run.config;
            firstRun[run.config.key()] = i;
        }
        runs.push_back(&run);
    }
    const QStringList labels = distinguishingLabels(configs, m_snapshot.modelNames);
    bool anyRepeated = false;
    for (int c = 0; c < configs.size(); ++c) {
        const QString key = configs[c].key();
        const auto &runs = byConfig[key];
        anyRepeated = anyRepeated || runs.size() >= 2;
        const RunLines mean { repeatsPrefix(key) };
        const std::pair<MetricChart *, QString> means[] = { { m_charts.loss, mean.loss() },
            { m_charts.throughput, mean.throughput() }, { m_charts.accuracy, mean.testAccuracy() } };
        for (const auto &[chart, id] : means) {
            // Each run's series of this kind, one per attempt in order; the runs with data.
            std::vector<std::vector<const MetricSeries *>> series;
            QStringList members; // their ids, with the train accuracy beside the test one
            QString drawnFrom; // sizes: the mean is drawn again only when they change
            for (const core::RunResult *run : runs) {
                std::vector<const MetricSeries *> attempts;
                QStringList ids;
                for (const core::AttemptRecord &attempt : run->attempts) {
                    const RunLines lines { attemptPrefix(run->runId, attempt.attempt) };
                    const QString member = chart == m_charts.loss ? lines.loss()
                        : chart == m_charts.throughput            ? lines.throughput()
                                                                  : lines.testAccuracy();
                    if (const MetricSeries *data = chart->data(member); data && data->size() > 0) {
                        attempts.push_back(data);
                        ids << member;
                        if (chart == m_charts.accuracy)
                            ids << lines.trainAccuracy();
                        drawnFrom += QStringLiteral("%1:%2;").arg(member).arg(data->size());
                    }
                }
                if (!attempts.empty()) {
                    series.push_back(std::move(attempts));
                    members << ids;
                }
            }
            const bool grouped = series.size() >= 2 && m_groupRepeats->isChecked();
            // The member runs' own lines: hidden while their mean stands for them; given back
            // only if the grouping hid them (a legend click stays the user's).
            for (const QString &member : std::as_const(members)) {
                if (grouped && chart->isSeriesVisible(member)) {
                    chart->setSeriesVisible(member, false, false);
                    m_hiddenByGrouping.insert(member);
                } else if (!grouped && m_hiddenByGrouping.remove(member)) {
                    chart->setSeriesVisible(member, true);
                }
            }
            if (!grouped) {
                if (m_meanDrawn.erase(id) > 0) {
                    chart->removeSeries(id);
                    chart->removeBand(id);
                }
                continue;
            }
            if (const auto drawn = m_meanDrawn.find(id);
                drawn != m_meanDrawn.end() && drawn->second == drawnFrom)
                continue; // nothing new since it was drawn
            m_meanDrawn[id] = drawnFrom;
            // Drawn whole each time: a step's mean changes as more runs reach it, and a retried
            // run's new attempt replaces its samples from where it resumed.
            const QColor color = MetricChart::cycleColor(firstRun[key]);
            chart->removeSeries(id);
            chart->addSeries(id,
                tr("%1 · mean of %2%3")
                    .arg(labels.value(c))
                    .arg(series.size())
                    .arg(chart == m_charts.accuracy ? tr(" (test)") : QString()),
                { color, Qt::SolidLine, chart == m_charts.accuracy });
            std::vector<BandPoint> band = repeatBand(series);
            std::vector<MetricPoint> points;
            points.reserve(band.size());
            for (const BandPoint &p : band)
                points.push_back(p.mean);
            chart->append(id, points);
            chart->setBand(id, std::move(band), color);
        }
    }
    m_groupRepeats->setEnabled(anyRepeated);
}

void StudyCharts::feedAttempt(AttemptFeed &feed, const std::vector<v1::RunEvent> &events)
{
    for (const auto &event : events) {
        if (event.seq() <= feed.lastSeq)
            continue; // read twice (two reads asked from one position): drawn once
        feed.lastSeq = std::max<qint64>(feed.lastSeq, event.seq());
        if (!feed.added && (event.has_started() || event.has_step() || event.has_epoch())) {
            // A resumed attempt says so in its legend; its line starts at the resume point.
            QString label = feed.label;
            if (event.has_started() && event.started().resumed_from_epoch() > 0)
                label += tr(" (resumed after epoch %1)").arg(event.started().resumed_from_epoch());
            addRunLines(m_charts, feed.lines, label, feed.color);
            feed.added = true;
        }
        if (feed.added)
            plotRunEvent(m_charts, feed.lines, feed.plot, event);
    }
}

// Speedup and efficiency against workers: one line per scaling group and measure, the
// baseline at (1, 1×, 100%) so every line starts from it.
void StudyCharts::drawScaling(const core::StudyResults &results)
{
    std::map<QString, std::vector<ScalingPoint>> speedups, efficiencies;
    int fewest = std::numeric_limits<int>::max(), most = 0; // succeeded runs behind a point
    for (const ConfigResult &c : results.configs) {
        if (c.succeeded > 0) {
            fewest = std::min(fewest, c.succeeded);
            most = std::max(most, c.succeeded);
        }
        const ConfigResult *reference = results.baselineFor(c.config); // of the same model
        if (c.config.baseline || !c.byWallClock.available())
            continue;
        const QString group = scalingGroup(c.config);
        speedups[group].push_back({ c.config.workers, c.byWallClock.speedup, c.byTimeToAccuracy.speedup,
            reference ? wallClockSpread(c, *reference, 1.0) : std::nullopt });
        efficiencies[group].push_back(
            { c.config.workers, c.byWallClock.efficiency * 100, c.byTimeToAccuracy.efficiency * 100,
                reference ? wallClockSpread(c, *reference, 100.0 / c.config.workers) : std::nullopt });
    }
    QString drawn;
    for (const auto &[group, points] : speedups)
        for (const ScalingPoint &p : points)
            drawn += QStringLiteral("%1/%2/%3/%4;")
                         .arg(group)
                         .arg(p.workers)
                         .arg(p.wallClock)
                         .arg(p.timeToAccuracy)
                + (p.wallClockSpread ? QStringLiteral("%1-%2;")
                                           .arg(p.wallClockSpread->first)
                                           .arg(p.wallClockSpread->second)
                                     : QString());
    // How much each point stands for: a single run shows no spread.
    if (most == 0)
        m_scalingNote->hide();
    else {
        m_scalingNote->setText(
            most == 1 ? tr(
                "Each point is a single run: how much it varies is not shown. Give the plan repeats ≥ 3 to "
                "see the spread.")
                      : (fewest == most ? tr("Each point is the mean of %1 runs").arg(most)
                                        : tr("Each point is the mean of %1 to %2 runs").arg(fewest).arg(most))
                    + tr("; a bar spans its slowest and fastest run (wall-clock).")
                    + tr(" The dotted line is the scaling model's prediction (Why it scales): the training "
                         "steps' "
                         "images/s, which wall-clock exceeds by start-up, evaluation and checkpoints."));
        m_scalingNote->show();
    }
    if (drawn == m_scalingDrawn)
        return;
    m_scalingDrawn = drawn;

    const ConfigResult *baseline = results.baseline(); // every baseline is one worker at 1×, 100 %
    const bool oneGroup = speedups.size() == 1;
    const auto draw = [&](MetricChart *chart, std::map<QString, std::vector<ScalingPoint>> &groups,
                          double atBaseline) {
        chart->removeAllSeries();
        chart->removeVerticalMarkers(QStringLiteral("spread"));
        int color = 0;
        for (auto &[group, points] : groups) {
            std::sort(points.begin(), points.end(),
                [](const ScalingPoint &a, const ScalingPoint &b) { return a.workers < b.workers; });
            const QColor c = MetricChart::cycleColor(color++);
            const QString prefix = oneGroup ? QString() : group + QStringLiteral(" · ");
            const QString wallId = group + QStringLiteral("/wall");
            const QString ttaId = group + QStringLiteral("/tta");
            // Time to target: dashed and lighter, so its legend entry differs as well.
            const QColor light = QColor::fromHslF(c.hslHueF(), c.hslSaturationF() * 0.6,
                std::min(0.85, c.lightnessF() + (1 - c.lightnessF()) * 0.45));
            chart->addSeries(wallId, prefix + tr("wall-clock"), { c, Qt::SolidLine, true, false });
            chart->addSeries(ttaId, prefix + tr("time to target"), { light, Qt::DashLine, true, false });
            if (baseline) {
                chart->append(wallId, MetricPoint::at(XAxis::Workers, baseline->config.workers, atBaseline));
                chart->append(ttaId, MetricPoint::at(XAxis::Workers, baseline->config.workers, atBaseline));
            }
            for (const ScalingPoint &p : points) {
                chart->append(wallId, MetricPoint::at(XAxis::Workers, p.workers, p.wallClock));
                chart->append(ttaId, MetricPoint::at(XAxis::Workers, p.workers, p.timeToAccuracy));
                if (p.wallClockSpread)
                    chart->addRangeBar(QStringLiteral("spread"),
                        MetricPoint::at(XAxis::Workers, p.workers, p.wallClock), p.wallClockSpread->first,
                        p.wallClockSpread->second, c);
            }
        }
    };
    draw(m_speedup, speedups, 1.0);
    draw(m_efficiency, efficiencies, 100.0);
    drawPredicted(); // removeAllSeries took the predicted lines too
}

} // namespace scalelab::app
