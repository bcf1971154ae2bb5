// The Run tab's charts: training loss and accuracy on top; throughput, step time, learning
// rate and gradient norm below, a tab each, beside the widget it is given (the run's log);
// one ChartControls (x axis, smoothing, log scale) drives them all, as TensorBoard's
// sidebar. Several runs can be drawn at once, each in the next colour of the cycle that
// no drawn run has:
//
//   charts->addRun(runId, label);                      // its (empty) lines, in its colour
//   plotRunEvent(charts->charts(), { runId }, state, event); // run_plot.h fills them
//   charts->removeRun(runId);
//
// The panel holds no run data and does not know which run is current: RunTab decides what
// is drawn, and "Clear earlier runs" is a request it carries out (clearEarlierRunsClicked).
// Samples reach the charts through the panel's ChartFeed (charts().feed): those of one
// batch of events are appended together and each chart they touch is redrawn once, at
// most every 40 ms, whatever the event rate.
// The panel owns its charts, controls and feed; the widget given stays its owner's to use.
// GUI thread only.
#pragma once

#include "run_plot.h"

#include <QColor>
#include <QMap>
#include <QStringList>
#include <QWidget>

class QPushButton;
class QTabWidget;

namespace scalelab::app {

class ChartControls;
class ChartFeed;
class MetricChart;

class RunTabCharts : public QWidget {
    Q_OBJECT
public:
    explicit RunTabCharts(QWidget *besideStepCharts, QWidget *parent = nullptr);

    // Every chart, with epoch boundaries marked (for the current run only: overlaid runs'
    // would crowd it; set epochMarkers to false to draw another run).
    RunCharts charts() const;
    // Adds the run's lines, labelled `label`, in the next free colour of the cycle.
    void addRun(const QString &runId, const QString &label);
    void removeRun(const QString &runId);
    bool isDrawn(const QString &runId) const { return m_runColors.contains(runId); }
    QStringList drawnRuns() const { return m_runColors.keys(); }
    // Once earlier runs were cleared: colours start again after the `runsLeft` still drawn.
    void restartColorCycle(int runsLeft);
    // Takes the run's epoch boundaries off the loss and throughput charts.
    void unmarkEpochs(const QString &runId);

    MetricChart *lossChart() const { return m_lossChart; }
    MetricChart *accuracyChart() const { return m_accuracyChart; }
    MetricChart *throughputChart() const { return m_throughputChart; }
    MetricChart *stepTimeChart() const { return m_stepTimeChart; }
    MetricChart *learningRateChart() const { return m_lrChart; }
    MetricChart *gradNormChart() const { return m_gradNormChart; }
    ChartControls *controls() const { return m_chartControls; }
    ChartFeed *feed() const { return m_feed; }
    // Which of the per-step charts is shown (kept in console.ini by RunTab).
    int stepChart() const;
    void setStepChart(int index);

Q_SIGNALS:
    void clearEarlierRunsClicked();

private:
    MetricChart *m_lossChart = nullptr;
    MetricChart *m_accuracyChart = nullptr;
    MetricChart *m_throughputChart = nullptr;
    MetricChart *m_stepTimeChart = nullptr;
    MetricChart *m_lrChart = nullptr;
    MetricChart *m_gradNormChart = nullptr;
    QTabWidget *m_stepCharts = nullptr; // throughput, step time, learning rate, gradient norm
    ChartControls *m_chartControls = nullptr;
    ChartFeed *m_feed = nullptr; // a child: every sample of every run drawn
    QPushButton *m_clearRunsButton = nullptr;
    int m_runsPlotted = 0; // colours runs in the order they were launched
    QMap<QString, QColor> m_runColors; // of the runs drawn
};

} // namespace scalelab::app
