// What a tune looks like in the console (issue 18): the best trial so far, the trials
// table (hyperparameters, state, the metric at each rung and why a trial stopped), the
// metric against epochs for every trial (stopped ones faded, rungs marked) and a
// parallel-coordinates chart of the hyperparameters coloured by the metric. Fed from the
// study's snapshot, so a reopened tune shows what a live one did.
#pragma once

#include "study_model.h"

#include <QMap>
#include <QWidget>

class QLabel;
class QTabWidget;
class QTableWidget;

namespace scalelab::app {

class MetricChart;
class ParallelCoordinates;

class TuneCharts : public QWidget {
    Q_OBJECT
public:
    explicit TuneCharts(QWidget *parent = nullptr);

    void clear(); // before showing another study
    void update(const core::StudySnapshot &snapshot);

    QLabel *bestLabel() const { return m_best; }
    QTableWidget *trialsTable() const { return m_table; }
    MetricChart *metricChart() const { return m_metric; }
    ParallelCoordinates *parallel() const { return m_parallel; }
    QTabWidget *tabs() const { return m_tabs; }

Q_SIGNALS:
    void trialActivated(const QString &runId); // double-clicked in the trials table

private:
    void updateTable(const core::StudySnapshot &s, const QStringList &names, int best);
    void updateMetricChart(const core::StudySnapshot &s);
    void updateParallel(const core::StudySnapshot &s, const QStringList &names, int best);

    QLabel *m_best = nullptr;
    QTabWidget *m_tabs = nullptr;
    QTableWidget *m_table = nullptr;
    MetricChart *m_metric = nullptr;
    ParallelCoordinates *m_parallel = nullptr;
    // What the metric chart holds per trial: points drawn and whether faded (stopped).
    struct Drawn {
        int points = 0;
        bool faded = false;
    };
    QMap<QString, Drawn> m_drawn;
    QString m_metricName; // the metric the chart was made for
    bool m_rungsMarked = false;
};

} // namespace scalelab::app
