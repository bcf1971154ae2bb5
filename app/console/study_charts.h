// The study view's charts: every run of the study overlaid (loss and throughput per step,
// train and test accuracy per epoch), one line per attempt so a retried run shows where
// its new attempt resumed; and the study's point, speedup and efficiency against the
// number of workers beside the ideal line, by wall-clock and by time to accuracy, with the
// scaling model's prediction and its band beyond them; and why it scales (ScalingPanel).
// Runs repeated with one configuration are drawn, while "Mean of repeats" is ticked, as
// their mean with a band from the lowest to the highest run, step by step.
// Fed from the journal, the durable record, so a reopened study draws exactly what a
// live one did; each stored event is read once (newEvents() reads only those after the
// charts' positions, off the GUI thread in the study view).
#pragma once

#include "run_plot.h"
#include "study_model.h"

#include <QHash>
#include <QSet>
#include <QWidget>

#include <map>
#include <vector>

class QCheckBox;
class QLabel;
class QTabWidget;

namespace scalelab::core {
class Journal;
struct StudyResults;
} // namespace scalelab::core

namespace scalelab::app {

class ChartControls;
class MetricChart;
class ScalingPanel;

class StudyCharts : public QWidget {
    Q_OBJECT
public:
    explicit StudyCharts(QWidget *parent = nullptr);

    // The stored events of each attempt the charts draw, by attemptPrefix(), in seq order.
    using AttemptEvents = std::map<QString, std::vector<v1::RunEvent>>;

    void clear(); // before showing another study
    // Appends `events` (those already drawn are skipped) and redraws the study's results.
    void update(
        const core::StudySnapshot &snapshot, const core::StudyResults &results, const AttemptEvents &events);
    // Where each attempt's line has been drawn to (its last seq), by attemptPrefix().
    QHash<QString, qint64> feedPositions() const;
    // The events of every attempt of `snapshot` stored after `positions`, from the agent
    // whose events draw it (rank 0's). Touches no widget: any thread, with its connection.
    static AttemptEvents newEvents(const core::Journal &journal, const core::StudySnapshot &snapshot,
        const QHash<QString, qint64> &positions);

    // Series ids: RunLines { attemptPrefix(run, attempt) }.loss() etc.; scaling lines by
    // their label.
    static QString attemptPrefix(const QString &runId, int attempt);
    static QString runLabel(const core::RunResult &run);

    ChartControls *controls() const { return m_controls; }
    QTabWidget *tabs() const { return m_tabs; }
    MetricChart *lossChart() const { return m_charts.loss; }
    MetricChart *accuracyChart() const { return m_charts.accuracy; }
    MetricChart *throughputChart() const { return m_charts.throughput; }
    MetricChart *speedupChart() const { return m_speedup; }
    MetricChart *efficiencyChart() const { return m_efficiency; }
    QCheckBox *groupRepeatsBox() const { return m_groupRepeats; }
    ScalingPanel *scalingPanel() const { return m_scalingPanel; }
    // The mean line of a repeated configuration on RunCharts: RunLines { repeatsPrefix(key) }.
    static QString repeatsPrefix(const QString &configKey);

private:
    struct AttemptFeed {
        RunLines lines;
        RunPlotState plot;
        QString label;
        QColor color;
        qint64 lastSeq = 0;
        bool added = false;
    };
    void feedAttempt(AttemptFeed &feed, const std::vector<v1::RunEvent> &events);
    void drawScaling(const core::StudyResults &results);
    void drawRepeats();
    // The scaling model's predicted speedup and efficiency with their band, out to the What
    // if panel's worker count (at least 16).
    void drawPredicted();

    ChartControls *m_controls = nullptr;
    QTabWidget *m_tabs = nullptr;
    RunCharts m_charts;
    MetricChart *m_speedup = nullptr;
    MetricChart *m_efficiency = nullptr;
    QLabel *m_scalingNote = nullptr; // how many runs a point stands for
    ScalingPanel *m_scalingPanel = nullptr;
    QStringList m_predictedIds; // the predicted lines drawn on the speedup charts
    std::map<QString, AttemptFeed> m_feeds; // by attemptPrefix
    QString m_scalingDrawn; // what the scaling charts show, to redraw only on change
    QCheckBox *m_groupRepeats = nullptr;
    core::StudySnapshot m_snapshot; // the last one drawn, for the box's toggles
    std::map<QString, QString> m_meanDrawn; // mean series id -> what it was drawn from (sizes)
    QSet<QString> m_hiddenByGrouping; // run lines the means stand for (a legend click is the user's)
};

} // namespace scalelab::app
