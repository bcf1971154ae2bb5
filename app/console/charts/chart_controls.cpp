#include "chart_controls.h"

#include "metric_chart.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSettings>
#include <QSlider>

namespace scalelab::app {

ChartControls::ChartControls(QWidget *parent)
    : QWidget(parent)
{
    m_xAxis = new QComboBox;
    m_xAxis->setObjectName(QStringLiteral("xAxisCombo"));
    m_xAxis->addItem(tr("Step"), int(XAxis::Step));
    m_xAxis->addItem(tr("Epoch"), int(XAxis::Epoch));
    m_xAxis->addItem(tr("Wall-clock time"), int(XAxis::WallClock));
    m_xAxis->setToolTip(tr("What the charts' horizontal axis counts"));

    m_smoothing = new QSlider(Qt::Horizontal);
    m_smoothing->setObjectName(QStringLiteral("smoothingSlider"));
    m_smoothing->setRange(0, 999); // weight × 1000, up to 0.999 as TensorBoard
    m_smoothing->setMaximumWidth(180);
    m_smoothing->setToolTip(tr("Exponential moving average of the loss and throughput (debiased, as "
                               "TensorBoard); the raw values stay faintly behind"));
    m_smoothingLabel = new QLabel;
    m_smoothingLabel->setMinimumWidth(QFontMetrics(font()).horizontalAdvance(QStringLiteral("0.000")));

    m_logScale = new QCheckBox(tr("Log-scale loss"));
    m_logScale->setObjectName(QStringLiteral("logScaleCheck"));

    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    layout->addWidget(new QLabel(tr("X axis")));
    layout->addWidget(m_xAxis);
    layout->addSpacing(12);
    layout->addWidget(new QLabel(tr("Smoothing")));
    layout->addWidget(m_smoothing);
    layout->addWidget(m_smoothingLabel);
    layout->addSpacing(12);
    layout->addWidget(m_logScale);
    layout->addStretch(1);
    m_trailing = new QHBoxLayout;
    layout->addLayout(m_trailing);

    connect(m_xAxis, &QComboBox::currentIndexChanged, this, &ChartControls::apply);
    connect(m_smoothing, &QSlider::valueChanged, this, &ChartControls::apply);
    connect(m_logScale, &QCheckBox::toggled, this, &ChartControls::apply);
    setSmoothing(kDefaultSmoothing);
}

void ChartControls::drive(const QList<MetricChart *> &timeline, const QList<MetricChart *> &smoothed,
    const QList<MetricChart *> &logScaled)
{
    const auto guarded = [](const QList<MetricChart *> &charts) {
        QList<QPointer<MetricChart>> out;
        for (MetricChart *c : charts)
            out << c;
        return out;
    };
    m_timeline = guarded(timeline);
    m_smoothed = guarded(smoothed);
    m_logScaled = guarded(logScaled);
    apply();
}

void ChartControls::apply()
{
    m_smoothingLabel->setText(QString::number(smoothing(), 'f', 3));
    for (const auto &chart : std::as_const(m_timeline))
        if (chart)
            chart->setXAxis(xAxis());
    for (const auto &chart : std::as_const(m_smoothed))
        if (chart)
            chart->setSmoothing(smoothing());
    for (const auto &chart : std::as_const(m_logScaled))
        if (chart)
            chart->setLogScale(logScale());
}

XAxis ChartControls::xAxis() const
{
    return XAxis(m_xAxis->currentData().toInt());
}

void ChartControls::setXAxis(XAxis axis)
{
    m_xAxis->setCurrentIndex(std::max(0, m_xAxis->findData(int(axis))));
}

double ChartControls::smoothing() const
{
    return m_smoothing->value() / 1000.0;
}

void ChartControls::setSmoothing(double weight)
{
    m_smoothing->setValue(int(std::lround(std::clamp(weight, 0.0, 0.999) * 1000)));
    apply(); // also when the value did not change, so the label is set
}

void ChartControls::save(QSettings &settings, const QString &group) const
{
    settings.setValue(group + QStringLiteral("/xAxis"), int(xAxis()));
    settings.setValue(group + QStringLiteral("/smoothing"), smoothing());
    settings.setValue(group + QStringLiteral("/logScale"), logScale());
}

void ChartControls::restore(const QSettings &settings, const QString &group)
{
    setXAxis(XAxis(settings.value(group + QStringLiteral("/xAxis"), int(XAxis::Step)).toInt()));
    setSmoothing(settings.value(group + QStringLiteral("/smoothing"), kDefaultSmoothing).toDouble());
    setLogScale(settings.value(group + QStringLiteral("/logScale"), false).toBool());
}

bool ChartControls::logScale() const
{
    return m_logScale->isChecked();
}

void ChartControls::setLogScale(bool on)
{
    m_logScale->setChecked(on);
}

} // namespace scalelab::app
