// The study view's "Why it scales" tab (docs/scaling.md): where each run's step time goes,
// as a stacked bar per run (data, forward, backward, exposed all-reduce, optimizer, in ms a
// step, rank 0's mean), what the study's efficiency loss is made of in words, and a What if
// panel that asks the scaling model fitted on the study's runs (core/studies/scaling_model.h)
// for other worker counts, batches per worker and link bandwidths, and, when the study has a
// target accuracy, the time to it there (core/studies/goodput_model.h).
#pragma once

#include "goodput_model.h"
#include "scaling_model.h"
#include "study_model.h"

#include <QWidget>

class QBarCategoryAxis;
class QChart;
class QChartView;
class QComboBox;
class QHorizontalStackedBarSeries;
class QLabel;
class QSpinBox;
class QValueAxis;

namespace scalelab::app {

class ScalingPanel : public QWidget {
    Q_OBJECT
public:
    explicit ScalingPanel(QWidget *parent = nullptr);

    // Redraws from the snapshot when its runs' anatomies changed.
    void update(const core::StudySnapshot &snapshot);
    void clear();

    // For tests: the bars' categories (run labels) and the answer the What if panel shows.
    QStringList barLabels() const;
    QString whatIfText() const;
    QSpinBox *whatIfWorkers() const { return m_workers; }
    QSpinBox *whatIfBatch() const { return m_batch; }
    QComboBox *whatIfBandwidth() const { return m_bandwidth; }
    QComboBox *whatIfFit() const { return m_fit; }
    // The critical-batch chart: its predicted line's points (0: not drawn), and B_noise's x
    // (log2 of the global batch).
    int criticalBatchPoints() const { return m_criticalPoints; }
    double criticalBatchNoiseX() const { return m_criticalNoiseX; }
    // The scalings the panel holds (one per model), for the speedup charts' predicted lines.
    const QList<core::StudyScaling> &scalings() const { return m_scalings; }

Q_SIGNALS:
    void scalingsChanged();

private:
    void drawBars(const core::StudySnapshot &snapshot);
    void drawCriticalBatch(const core::StudySnapshot &snapshot);
    void answer();
    // The What if answer's time to the target at `p`, with its band; why there is none.
    QString timeToTargetText(int fit, const core::ScalingPoint &p) const;

    QChart *m_chart = nullptr;
    QChartView *m_view = nullptr;
    QChart *m_critical = nullptr;
    QChartView *m_criticalView = nullptr;
    int m_criticalPoints = 0;
    double m_criticalNoiseX = 0;
    QLabel *m_losses = nullptr;
    QSpinBox *m_workers = nullptr;
    QSpinBox *m_batch = nullptr;
    QComboBox *m_bandwidth = nullptr;
    QComboBox *m_fit = nullptr; // which fit answers: a model, fp32 or bf16, as the study measured
    QLabel *m_answer = nullptr;
    QList<core::StudyScaling> m_scalings;
    QList<core::GoodputBasis> m_goodput; // per scaling; empty without a target accuracy
    QString m_drawn; // the anatomies drawn, to redraw only on change
    QStringList m_labels;
};

} // namespace scalelab::app
