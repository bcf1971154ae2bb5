// The controls TensorBoard users expect beside a group of charts: what the x axis counts
// (step, epoch, wall-clock time), the smoothing weight (debiased EMA, 0–0.999) and a
// log-scale toggle. One ChartControls drives every chart given to it, so the charts of
// a view always agree.
#pragma once

#include "metric_series.h"

#include <QList>
#include <QPointer>
#include <QWidget>

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QSettings;
class QSlider;

namespace scalelab::app {

class MetricChart;

class ChartControls : public QWidget {
    Q_OBJECT
public:
    static constexpr double kDefaultSmoothing = 0.6; // TensorBoard's default

    explicit ChartControls(QWidget *parent = nullptr);

    // `timeline` charts follow the x-axis choice; `smoothed` ones the smoothing weight;
    // `logScaled` ones the log-scale toggle. A chart may be in several lists.
    void drive(const QList<MetricChart *> &timeline, const QList<MetricChart *> &smoothed,
        const QList<MetricChart *> &logScaled);

    XAxis xAxis() const;
    void setXAxis(XAxis axis);
    double smoothing() const;
    void setSmoothing(double weight);
    bool logScale() const;
    void setLogScale(bool on);

    // Kept under `group` in settings (x axis, smoothing, log scale).
    void save(QSettings &settings, const QString &group) const;
    void restore(const QSettings &settings, const QString &group);

    // Room for a view's own buttons, right-aligned after the controls.
    QHBoxLayout *trailing() const { return m_trailing; }

private:
    void apply();

    QList<QPointer<MetricChart>> m_timeline, m_smoothed, m_logScaled;
    QComboBox *m_xAxis = nullptr;
    QSlider *m_smoothing = nullptr;
    QLabel *m_smoothingLabel = nullptr;
    QCheckBox *m_logScale = nullptr;
    QHBoxLayout *m_trailing = nullptr;
};

} // namespace scalelab::app
