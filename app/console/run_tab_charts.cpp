#include "run_tab_charts.h"

#include "chart_controls.h"
#include "chart_feed.h"
#include "metric_chart.h"

#include <QHBoxLayout>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>

namespace scalelab::app {

RunTabCharts::RunTabCharts(QWidget *besideStepCharts, QWidget *parent)
    : QWidget(parent)
    , m_feed(new ChartFeed(this))
{
    m_lossChart = new MetricChart(tr("Training loss"), tr("loss"));
    m_lossChart->setObjectName(QStringLiteral("lossChart"));
    m_accuracyChart = new MetricChart(tr("Accuracy after each epoch"), tr("accuracy %"));
    m_accuracyChart->setYEmptyRange(0, 100);
    m_accuracyChart->setObjectName(QStringLiteral("accuracyChart"));
    m_throughputChart = new MetricChart(tr("Throughput"), tr("images / s"));
    m_throughputChart->setObjectName(QStringLiteral("throughputChart"));
    m_stepTimeChart
        = new MetricChart(tr("Step time: compute and exposed all-reduce wait (CPU runs)"), tr("ms / step"));
    m_stepTimeChart->setObjectName(QStringLiteral("stepTimeChart"));
    m_lrChart = new MetricChart(tr("Learning rate"), tr("learning rate"));
    m_lrChart->setObjectName(QStringLiteral("lrChart"));
    m_gradNormChart = new MetricChart(tr("Gradient norm (all ranks, before the step)"), tr("L2 norm"));
    m_gradNormChart->setObjectName(QStringLiteral("gradNormChart"));

    // One set of controls for every chart, as TensorBoard's sidebar.
    m_chartControls = new ChartControls;
    m_chartControls->setObjectName(QStringLiteral("runChartControls"));
    m_chartControls->drive(
        { m_lossChart, m_accuracyChart, m_throughputChart, m_stepTimeChart, m_lrChart, m_gradNormChart },
        { m_lossChart, m_throughputChart, m_stepTimeChart, m_gradNormChart }, { m_lossChart });
    m_clearRunsButton = new QPushButton(tr("Clear earlier runs"));
    m_clearRunsButton->setToolTip(tr("Remove every run but the current one from the charts"));
    m_clearRunsButton->setEnabled(false);
    connect(m_clearRunsButton, &QPushButton::clicked, this, &RunTabCharts::clearEarlierRunsClicked);
    m_chartControls->trailing()->addWidget(m_clearRunsButton);

    auto *top = new QSplitter(Qt::Horizontal);
    top->addWidget(m_lossChart);
    top->addWidget(m_accuracyChart);
    top->setSizes({ 560, 400 });
    // Per-step series share the lower-left place, a tab each.
    m_stepCharts = new QTabWidget;
    m_stepCharts->setObjectName(QStringLiteral("stepCharts"));
    m_stepCharts->setDocumentMode(true);
    m_stepCharts->addTab(m_throughputChart, tr("Throughput"));
    m_stepCharts->addTab(m_stepTimeChart, tr("Step time"));
    m_stepCharts->addTab(m_lrChart, tr("Learning rate"));
    m_stepCharts->addTab(m_gradNormChart, tr("Gradient norm"));
    auto *bottom = new QSplitter(Qt::Horizontal);
    bottom->addWidget(m_stepCharts);
    bottom->addWidget(besideStepCharts);
    bottom->setSizes({ 560, 400 });
    auto *rows = new QSplitter(Qt::Vertical);
    rows->addWidget(top);
    rows->addWidget(bottom);
    rows->setSizes({ 420, 300 });

    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_chartControls);
    layout->addWidget(rows, 1);
}

RunCharts RunTabCharts::charts() const
{
    // Epoch boundaries are marked for the current run only: overlaid runs' would crowd it.
    return { m_lossChart, m_accuracyChart, m_throughputChart, m_lrChart, m_gradNormChart, m_stepTimeChart,
        true, m_feed };
}

void RunTabCharts::addRun(const QString &runId, const QString &label)
{
    // The next colour of the cycle that no drawn run has.
    QColor color = MetricChart::cycleColor(m_runsPlotted++);
    for (int tries = 0; tries < 16 && m_runColors.values().contains(color); ++tries)
        color = MetricChart::cycleColor(m_runsPlotted++);
    addRunLines(charts(), { runId }, label, color);
    m_runColors.insert(runId, color);
    m_clearRunsButton->setEnabled(m_runColors.size() > 1);
}

void RunTabCharts::removeRun(const QString &runId)
{
    removeRunLines(charts(), { runId });
    m_runColors.remove(runId);
    m_clearRunsButton->setEnabled(m_runColors.size() > 1);
}

void RunTabCharts::restartColorCycle(int runsLeft)
{
    m_runsPlotted = runsLeft;
    m_clearRunsButton->setEnabled(false);
}

void RunTabCharts::unmarkEpochs(const QString &runId)
{
    for (MetricChart *chart : { m_lossChart, m_throughputChart })
        chart->removeVerticalMarkers(RunLines { runId }.epochMarkers());
}

int RunTabCharts::stepChart() const
{
    return m_stepCharts->currentIndex();
}

void RunTabCharts::setStepChart(int index)
{
    m_stepCharts->setCurrentIndex(index);
}

} // namespace scalelab::app
