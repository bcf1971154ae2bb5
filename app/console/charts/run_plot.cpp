#include "run_plot.h"

#include "chart_feed.h"
#include "metric_chart.h"

#include <QCoreApplication>

#include <algorithm>

namespace scalelab::app {

void addRunLines(const RunCharts &charts, const RunLines &lines, const QString &label, const QColor &color)
{
    charts.loss->addSeries(lines.loss(), label, { color });
    charts.throughput->addSeries(lines.throughput(), label, { color });
    charts.accuracy->addSeries(lines.testAccuracy(),
        QCoreApplication::translate("RunPlot", "%1 test").arg(label), { color, Qt::SolidLine, true });
    // Train: dashed and lighter, so its legend square differs from test's too.
    const QColor train = QColor::fromHslF(color.hslHueF(), color.hslSaturationF() * 0.6,
        std::min(0.85, color.lightnessF() + (1 - color.lightnessF()) * 0.45));
    charts.accuracy->addSeries(lines.trainAccuracy(),
        QCoreApplication::translate("RunPlot", "%1 train (dashed)").arg(label),
        { train, Qt::DashLine, true });
    if (charts.learningRate)
        charts.learningRate->addSeries(lines.learningRate(), label, { color, Qt::SolidLine, false, false });
    if (charts.gradNorm)
        charts.gradNorm->addSeries(lines.gradNorm(), label, { color });
    if (charts.stepTime) {
        charts.stepTime->addSeries(
            lines.compute(), QCoreApplication::translate("RunPlot", "%1 compute").arg(label), { color });
        charts.stepTime->addSeries(lines.allReduceWait(),
            QCoreApplication::translate("RunPlot", "%1 all-reduce wait (dashed)").arg(label),
            { train, Qt::DashLine });
    }
}

QList<MetricChart *> chartsOf(const RunCharts &charts)
{
    QList<MetricChart *> all;
    for (MetricChart *chart : { charts.loss, charts.accuracy, charts.throughput, charts.learningRate,
             charts.gradNorm, charts.stepTime })
        if (chart)
            all << chart;
    return all;
}

void removeRunLines(const RunCharts &charts, const RunLines &lines)
{
    if (charts.feed)
        charts.feed->drain(); // samples on their way to these lines go with them
    charts.loss->removeSeries(lines.loss());
    charts.throughput->removeSeries(lines.throughput());
    charts.accuracy->removeSeries(lines.testAccuracy());
    charts.accuracy->removeSeries(lines.trainAccuracy());
    if (charts.learningRate)
        charts.learningRate->removeSeries(lines.learningRate());
    if (charts.gradNorm)
        charts.gradNorm->removeSeries(lines.gradNorm());
    if (charts.stepTime) {
        charts.stepTime->removeSeries(lines.compute());
        charts.stepTime->removeSeries(lines.allReduceWait());
    }
    charts.loss->removeVerticalMarkers(lines.epochMarkers());
    charts.throughput->removeVerticalMarkers(lines.epochMarkers());
    charts.loss->removeVerticalMarkers(lines.phaseMarkers());
    charts.accuracy->removeVerticalMarkers(lines.phaseMarkers());
    for (MetricChart *chart : chartsOf(charts))
        chart->removeVerticalMarkers(lines.resizeMarkers());
}

namespace {

void appendTo(const RunCharts &charts, MetricChart *chart, const QString &seriesId, const MetricPoint &point)
{
    if (charts.feed)
        charts.feed->post(chart, seriesId, point);
    else
        chart->append(seriesId, point);
}

// Where an attempt that changed the run's size starts: the step, epoch and seconds its line
// resumes from, marked dashed on every chart.
void markResize(const RunCharts &charts, const RunLines &lines, const RunPlotState &state)
{
    const double epoch = state.resumedFromEpoch;
    double step = epoch * double(state.stepsPerEpoch);
    if (epoch > 0 && state.stepsPerEpoch <= 0)
        step = MetricPoint::kNone; // steps not known: not marked by step
    const MetricPoint at = MetricPoint::timeline(step, epoch, state.secondsOffset, MetricPoint::kNone);
    const QString label = state.resizedTo == 1
        ? QCoreApplication::translate("RunPlot", "→ 1 worker")
        : QCoreApplication::translate("RunPlot", "→ %1 workers").arg(state.resizedTo);
    for (MetricChart *chart : chartsOf(charts)) {
        chart->removeVerticalMarkers(lines.resizeMarkers()); // a repeated started event marks once
        chart->addVerticalMarker(lines.resizeMarkers(), at, label, { Qt::DashLine, state.resizeReason });
    }
}

} // namespace

void plotRunEvent(
    const RunCharts &charts, const RunLines &lines, RunPlotState &state, const v1::RunEvent &event)
{
    if (event.has_started()) {
        state.stepsPerEpoch = event.started().steps_per_epoch();
        state.resumedFromEpoch = event.started().resumed_from_epoch();
        state.headEpochs = event.started().effective().finetune().head_epochs();
        state.epochs = event.started().effective().epochs();
        // On a GPU the work is queued: host-side times do not split a step (worker.proto).
        state.hostTimes = event.started().effective().gpus_per_worker() <= 0;
        if (state.resizedTo > 0)
            markResize(charts, lines, state);
    } else if (event.has_step()) {
        const auto &s = event.step();
        state.lastStep = s.step();
        state.lastSeconds = std::max(state.lastSeconds, s.elapsed_seconds());
        // Fractional epochs when the run said how many steps make one.
        const double epoch
            = state.stepsPerEpoch > 0 ? double(s.step()) / double(state.stepsPerEpoch) : double(s.epoch());
        const double seconds = state.secondsOffset + s.elapsed_seconds();
        appendTo(charts, charts.loss, lines.loss(),
            MetricPoint::timeline(double(s.step()), epoch, seconds, s.loss()));
        const auto at
            = [&](double value) { return MetricPoint::timeline(double(s.step()), epoch, seconds, value); };
        if (s.images_per_second() > 0)
            appendTo(charts, charts.throughput, lines.throughput(), at(s.images_per_second()));
        if (charts.learningRate && s.learning_rate() > 0)
            appendTo(charts, charts.learningRate, lines.learningRate(), at(s.learning_rate()));
        if (charts.gradNorm && s.grad_norm() > 0)
            appendTo(charts, charts.gradNorm, lines.gradNorm(), at(s.grad_norm()));
        if (charts.stepTime && s.step_seconds() > 0 && state.hostTimes) {
            const double wait = std::clamp(s.exposed_allreduce_seconds(), 0.0, s.step_seconds());
            appendTo(charts, charts.stepTime, lines.compute(), at((s.step_seconds() - wait) * 1000));
            appendTo(charts, charts.stepTime, lines.allReduceWait(), at(wait * 1000));
        }
    } else if (event.has_epoch()) {
        const auto &e = event.epoch();
        state.lastSeconds = std::max(state.lastSeconds, e.elapsed_seconds());
        const double step
            = state.stepsPerEpoch > 0 ? double(e.epoch() * state.stepsPerEpoch) : double(state.lastStep);
        const auto at = [&](double value) {
            return MetricPoint::timeline(
                step, double(e.epoch()), state.secondsOffset + e.elapsed_seconds(), value);
        };
        appendTo(charts, charts.accuracy, lines.trainAccuracy(), at(e.train_accuracy() * 100));
        appendTo(charts, charts.accuracy, lines.testAccuracy(), at(e.test_accuracy() * 100));
        if (state.headEpochs > 0 && e.epoch() == state.headEpochs && state.headEpochs < state.epochs)
            for (MetricChart *chart : { charts.loss, charts.accuracy })
                chart->addVerticalMarker(lines.phaseMarkers(), at(MetricPoint::kNone),
                    QCoreApplication::translate("RunPlot", "head trained: whole model from here"));
        if (charts.epochMarkers)
            for (MetricChart *chart : { charts.loss, charts.throughput })
                chart->addVerticalMarker(lines.epochMarkers(), at(MetricPoint::kNone),
                    QCoreApplication::translate("RunPlot", "epoch %1").arg(e.epoch()));
    } else if (event.has_summary()) {
        state.lastSeconds = std::max(state.lastSeconds, event.summary().wall_seconds());
    }
}

} // namespace scalelab::app
