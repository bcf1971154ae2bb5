#include "scaling_panel.h"

#include "metric_chart.h"
#include "report_charts.h"
#include "theme.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <QValueAxis>

#include <cmath>

namespace scalelab::app {

namespace {

// The parts of a step, in the order a step spends them, with a colour each.
struct Part {
    const char *name;
    double core::StepTimes::*field;
};
const Part kParts[] = {
    { QT_TRANSLATE_NOOP("ScalingPanel", "data"), &core::StepTimes::data },
    { QT_TRANSLATE_NOOP("ScalingPanel", "forward"), &core::StepTimes::forward },
    { QT_TRANSLATE_NOOP("ScalingPanel", "backward"), &core::StepTimes::backward },
    { QT_TRANSLATE_NOOP("ScalingPanel", "all-reduce"), &core::StepTimes::exposedAllReduce },
    { QT_TRANSLATE_NOOP("ScalingPanel", "optimizer"), &core::StepTimes::optimizer },
};

} // namespace

ScalingPanel::ScalingPanel(QWidget *parent)
    : QWidget(parent)
{
    m_chart = new QChart;
    m_chart->setTitle(tr("Where the time goes: a step of each run (rank 0's mean, ms; data: waiting for the "
                         "batch; all-reduce: what backward did not hide)"));
    m_chart->legend()->setAlignment(Qt::AlignBottom);
    m_view = new QChartView(m_chart);
    m_view->setObjectName(QStringLiteral("anatomyChart"));
    m_view->setRenderHint(QPainter::Antialiasing);

    m_losses = new QLabel;
    m_losses->setObjectName(QStringLiteral("scalingWords"));
    m_losses->setWordWrap(true);
    m_losses->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_workers = new QSpinBox;
    m_workers->setObjectName(QStringLiteral("whatIfWorkers"));
    m_workers->setRange(1, 4096);
    m_workers->setValue(16);
    m_batch = new QSpinBox;
    m_batch->setObjectName(QStringLiteral("whatIfBatch"));
    m_batch->setRange(1, 65536);
    m_batch->setValue(64);
    m_batch->setSuffix(tr(" per worker"));
    m_bandwidth = new QComboBox;
    m_bandwidth->setObjectName(QStringLiteral("whatIfBandwidth"));
    m_bandwidth->setEditable(true);
    m_bandwidth->addItems({ tr("as measured"), QStringLiteral("100Mbit"), QStringLiteral("1Gbit"),
        QStringLiteral("10Gbit"), QStringLiteral("25Gbit"), QStringLiteral("100Gbit") });
    m_bandwidth->setToolTip(
        tr("The link between workers: as the study's probes measured it, or a rate (10Gbit, "
           "125MB/s, or bytes per second)"));
    m_fit = new QComboBox;
    m_fit->setObjectName(QStringLiteral("whatIfFit"));
    m_fit->setToolTip(tr("The model and precision to ask, as the study measured them: bf16 computes at "
                         "its own speed, so it is offered once the study has a bf16 run (precision in "
                         "its grid)"));
    m_answer = new QLabel;
    m_answer->setObjectName(QStringLiteral("whatIfAnswer"));
    m_answer->setWordWrap(true);
    m_answer->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto *whatIf = new QGroupBox(tr("What if"));
    auto *form = new QFormLayout(whatIf);
    form->addRow(tr("Model"), m_fit);
    form->addRow(tr("Workers"), m_workers);
    form->addRow(tr("Batch"), m_batch);
    form->addRow(tr("Link"), m_bandwidth);
    form->addRow(m_answer);
    connect(m_workers, &QSpinBox::valueChanged, this, &ScalingPanel::answer);
    connect(m_batch, &QSpinBox::valueChanged, this, &ScalingPanel::answer);
    connect(m_bandwidth, &QComboBox::currentTextChanged, this, &ScalingPanel::answer);
    connect(m_fit, &QComboBox::currentIndexChanged, this, &ScalingPanel::answer);

    auto *side = new QVBoxLayout;
    side->addWidget(m_losses);
    side->addWidget(whatIf);
    side->addStretch(1);
    // Under the anatomy: epochs to the target against the global batch, as the reports draw it.
    m_critical = new QChart;
    m_critical->legend()->hide(); // the title names the lines: the panel has little height
    m_critical->setMargins(QMargins(4, 4, 4, 4));
    m_criticalView = new QChartView(m_critical);
    m_criticalView->setObjectName(QStringLiteral("criticalBatchChart"));
    m_criticalView->setRenderHint(QPainter::Antialiasing);
    m_criticalView->setVisible(false);
    m_criticalView->setMinimumHeight(240);
    auto *charts = new QVBoxLayout;
    charts->addWidget(m_view, 3);
    charts->addWidget(m_criticalView, 2);
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(charts, 3);
    layout->addLayout(side, 2);
    clear();
}

void ScalingPanel::drawCriticalBatch(const core::StudySnapshot &snapshot)
{
    m_critical->removeAllSeries();
    for (QAbstractAxis *axis : m_critical->axes())
        m_critical->removeAxis(axis);
    const QList<core::ChartSpec> specs = core::criticalBatchCharts(snapshot);
    m_criticalView->setVisible(!specs.isEmpty());
    m_criticalPoints = 0;
    if (specs.isEmpty())
        return;
    const core::ChartSpec &spec = specs.first();
    m_critical->setTitle(
        tr("Epochs to %1 %: predicted (line), runs (dots), %2 (dashed)")
            .arg(100 * snapshot.targetAccuracy, 0, 'f', 0)
            .arg(spec.verticalLines.isEmpty() ? QString() : spec.verticalLines.first().label));
    // Short words: the panel is narrow (the report's chart says it in full).
    auto *x = new QValueAxis;
    x->setTitleText(tr("global batch, log2 (6 = 64)"));
    x->setLabelFormat(QStringLiteral("%.0f"));
    auto *y = new QValueAxis;
    y->setTitleText(tr("epochs"));
    y->setLabelFormat(QStringLiteral("%.0f"));
    m_critical->addAxis(x, Qt::AlignBottom);
    m_critical->addAxis(y, Qt::AlignLeft);
    double top = 0, left = 1e9, right = 0;
    for (const core::ChartSeries &cs : spec.series) {
        QXYSeries *series = cs.line ? static_cast<QXYSeries *>(new QLineSeries) : new QScatterSeries;
        series->setName(cs.line ? tr("predicted") : tr("runs"));
        series->setColor(cs.color);
        for (const QPointF &p : cs.points) {
            series->append(p);
            top = std::max(top, p.y());
            left = std::min(left, p.x());
            right = std::max(right, p.x());
        }
        if (cs.line)
            m_criticalPoints = int(cs.points.size());
        m_critical->addSeries(series);
        series->attachAxis(x);
        series->attachAxis(y);
    }
    for (const core::ChartVerticalLine &v : spec.verticalLines) {
        auto *line = new QLineSeries;
        line->setName(v.label);
        line->setPen(QPen(v.color, 1.5, Qt::DashLine));
        line->append(v.x, 0);
        line->append(v.x, top);
        m_critical->addSeries(line);
        line->attachAxis(x);
        line->attachAxis(y);
        m_criticalNoiseX = v.x;
    }
    x->setRange(std::floor(left), std::ceil(right));
    x->setTickCount(int(std::ceil(right) - std::floor(left)) / 2 + 1);
    y->setRange(0, top * 1.05);
}

void ScalingPanel::clear()
{
    for (QChart *chart : { m_chart, m_critical }) {
        chart->removeAllSeries();
        for (QAbstractAxis *axis : chart->axes())
            chart->removeAxis(axis);
    }
    m_criticalView->setVisible(false);
    m_criticalPoints = 0;
    m_scalings.clear();
    {
        const QSignalBlocker quiet(m_fit);
        m_fit->clear();
    }
    m_drawn.clear();
    m_labels.clear();
    m_losses->setText(tr("No run has a measured step yet: the anatomy of a step appears after a run's first "
                         "epoch."));
    answer();
}

QStringList ScalingPanel::barLabels() const
{
    return m_labels;
}

QString ScalingPanel::whatIfText() const
{
    return m_answer->text();
}

void ScalingPanel::update(const core::StudySnapshot &snapshot)
{
    QString drawn;
    for (const core::RunResult &r : snapshot.runs)
        if (r.anatomy.measured())
            drawn += QStringLiteral("%1:%2:%3;").arg(r.runId).arg(r.anatomy.steps).arg(r.state);
    if (drawn == m_drawn)
        return;
    m_drawn = drawn;
    drawBars(snapshot);
    drawCriticalBatch(snapshot);
    m_scalings = core::studyScaling(snapshot);
    m_goodput.clear();
    if (snapshot.targetAccuracy > 0)
        for (const core::StudyScaling &s : m_scalings)
            m_goodput << core::goodputBasis(snapshot, s, snapshot.targetAccuracy);
    {
        // The fits the What if panel can ask, keeping the one chosen.
        const QSignalBlocker quiet(m_fit);
        const QString chosen = m_fit->currentText();
        m_fit->clear();
        for (int i = 0; i < m_scalings.size(); ++i)
            if (m_scalings[i].fit.valid)
                m_fit->addItem(core::scalingLabel(m_scalings[i], snapshot.modelNames), i);
        if (const int again = m_fit->findText(chosen); again >= 0)
            m_fit->setCurrentIndex(again);
        m_fit->setEnabled(m_fit->count() > 1);
    }
    QStringList words;
    for (const core::StudyScaling &s : m_scalings) {
        words += s.losses;
        if (!s.fit.valid)
            words << tr("No prediction for %1: %2.")
                         .arg(core::scalingLabel(s, snapshot.modelNames), s.fit.problem);
        for (const core::HeldOutError &e : s.heldOut)
            if (e.problem.isEmpty())
                words << tr("%1 workers predicted without their run: %2 images/s, measured %3 (%4%5 %).")
                             .arg(e.workers)
                             .arg(e.predicted, 0, 'f', 1)
                             .arg(e.measured, 0, 'f', 1)
                             .arg(e.relativeError() >= 0 ? QStringLiteral("+") : QString())
                             .arg(100 * e.relativeError(), 0, 'f', 1);
    }
    if (!m_scalings.isEmpty() && m_scalings.first().batchPerWorker > 0)
        m_batch->setValue(m_scalings.first().batchPerWorker);
    m_losses->setText(words.isEmpty()
            ? tr("One worker count so far: the loss of efficiency shows once runs of "
                 "two counts at one batch per worker have finished.")
            : words.join(QStringLiteral("\n\n")));
    answer();
    Q_EMIT scalingsChanged();
}

void ScalingPanel::drawBars(const core::StudySnapshot &snapshot)
{
    m_chart->removeAllSeries();
    for (QAbstractAxis *axis : m_chart->axes())
        m_chart->removeAxis(axis);
    m_labels.clear();
    auto *series = new QHorizontalStackedBarSeries;
    QList<QBarSet *> sets;
    int color = 0;
    for (const Part &part : kParts) {
        auto *set = new QBarSet(tr(part.name));
        set->setColor(MetricChart::cycleColor(color++));
        sets << set;
    }
    double longest = 0;
    // Bottom to top in the plan's order: the chart lists categories upwards.
    for (auto run = snapshot.runs.crbegin(); run != snapshot.runs.crend(); ++run) {
        if (!run->anatomy.measured())
            continue;
        const QString shortId = run->runId.section(QLatin1Char('-'), -1);
        QString label = run->config.baseline
            ? tr("%1 baseline").arg(shortId)
            : tr("%1 · %2 workers · b%3").arg(shortId).arg(run->config.workers).arg(run->config.batchSize);
        if (run->anatomy.slowestRank >= 0 && run->anatomy.slowestLagSeconds > 0.001)
            label += tr(" · rank %1 +%2 ms")
                         .arg(run->anatomy.slowestRank)
                         .arg(run->anatomy.slowestLagSeconds * 1000, 0, 'f', 1);
        m_labels.prepend(label);
        for (int i = 0; i < sets.size(); ++i)
            *sets[i] << std::max(0.0, run->anatomy.perStep.*kParts[i].field * 1000);
        longest = std::max(longest, run->anatomy.perStep.total() * 1000);
    }
    for (QBarSet *set : sets)
        series->append(set);
    m_chart->addSeries(series);
    auto *runs = new QBarCategoryAxis;
    QStringList bottomUp = m_labels;
    std::reverse(bottomUp.begin(), bottomUp.end());
    runs->append(bottomUp);
    m_chart->addAxis(runs, Qt::AlignLeft);
    series->attachAxis(runs);
    auto *ms = new QValueAxis;
    ms->setTitleText(tr("ms per step"));
    ms->setRange(0, longest > 0 ? longest * 1.05 : 1);
    ms->setLabelFormat(QStringLiteral("%.0f"));
    ms->applyNiceNumbers();
    m_chart->addAxis(ms, Qt::AlignBottom);
    series->attachAxis(ms);
}

void ScalingPanel::answer()
{
    const int chosen = m_fit->currentData().isValid() ? m_fit->currentData().toInt() : -1;
    const core::StudyScaling *scaling
        = chosen >= 0 && chosen < m_scalings.size() ? &m_scalings[chosen] : nullptr;
    if (!scaling) {
        m_answer->setText(m_scalings.isEmpty()
                ? tr("The model is fitted once runs have finished with a measured step anatomy.")
                : tr("No model to ask: %1.").arg(m_scalings.first().fit.problem));
        return;
    }
    double bandwidth = 0;
    if (m_bandwidth->currentIndex() != 0 || m_bandwidth->currentText() != m_bandwidth->itemText(0)) {
        bandwidth = core::parseBandwidth(m_bandwidth->currentText());
        if (!(bandwidth > 0)) {
            m_answer->setText(tr("'%1' is not a rate: write 10Gbit, 125MB/s or bytes per second.")
                                  .arg(m_bandwidth->currentText()));
            return;
        }
    }
    const core::ScalingPoint p
        = core::predictScaling(scaling->fit, m_workers->value(), m_batch->value(), bandwidth);
    m_answer->setText(tr("%1 workers × %2 images at %3: %4 images/s, speedup %5×, efficiency %6 % "
                         "(%7 ms a step, %8 ms of it exposed all-reduce).%10 %9")
                          .arg(p.workers)
                          .arg(p.batchPerWorker)
                          .arg(core::bandwidthText(p.bandwidth))
                          .arg(p.imagesPerSecond, 0, 'f', 0)
                          .arg(p.speedup, 0, 'f', 2)
                          .arg(100 * p.efficiency, 0, 'f', 0)
                          .arg(p.stepSeconds * 1000, 0, 'f', 1)
                          .arg(p.exposedSeconds * 1000, 0, 'f', 1)
                          .arg(scaling->fit.notes.isEmpty()
                                  ? QString()
                                  : scaling->fit.notes.join(QStringLiteral(". ")) + QLatin1Char('.'))
                          .arg(timeToTargetText(chosen, p)));
}

QString ScalingPanel::timeToTargetText(int fit, const core::ScalingPoint &p) const
{
    if (fit < 0 || fit >= m_goodput.size())
        return {};
    const core::GoodputBasis &basis = m_goodput[fit];
    if (!basis.valid)
        return tr("\n\nTime to the target: no prediction: %1.").arg(basis.problem);
    // One point, so the throughput's band is not drawn: the time's band is the repeats' and
    // the noise scales' alone.
    const core::ScalingPoint reference = core::predictScaling(
        m_scalings[fit].fit, basis.referenceWorkers, basis.referenceBatch, p.bandwidth);
    const QList<core::GoodputPoint> g = core::predictGoodput(basis, { p }, reference);
    if (g.isEmpty())
        return {};
    const core::GoodputPoint &t = g.first();
    QString text
        = tr("\n\nTime to %1 % test accuracy: %2 [%3, %4], %5 epochs (statistical efficiency %6 % "
             "against the reference's global batch %7, B_noise %8): %9× the reference's speed to it, "
             "against %10× by throughput.")
              .arg(100 * basis.target, 0, 'f', 0)
              .arg(core::durationText(t.seconds.value), core::durationText(t.seconds.low),
                  core::durationText(t.seconds.high))
              .arg(t.epochs.value, 0, 'f', 2)
              .arg(100 * t.efficiency.value, 0, 'f', 0)
              .arg(basis.referenceGlobalBatch)
              .arg(basis.noiseScale.value, 0, 'f', 0)
              .arg(t.speedup.value, 0, 'f', 2)
              .arg(p.imagesPerSecond / reference.imagesPerSecond, 0, 'f', 2);
    if (const QString past = core::pastCriticalText(t.globalBatch, basis.noiseScale.value); !past.isEmpty())
        text += QLatin1Char(' ') + past.left(1).toUpper() + past.mid(1) + QLatin1Char('.');
    return text;
}

} // namespace scalelab::app
