#include "tune_charts.h"

#include "metric_chart.h"
#include "parallel_coordinates.h"
#include "study_plan.h"
#include "tune_plan.h"

#include <QAbstractAxis>
#include <QHeaderView>
#include <QLabel>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

namespace scalelab::app {

using namespace scalelab::core;

namespace {

bool isAccuracy(const QString &metric)
{
    return metric == QLatin1String("test_accuracy");
}

// The metric as drawn: accuracy in percent.
double shown(const QString &metric, double value)
{
    return isAccuracy(metric) ? value * 100 : value;
}

QString metricTitle(const QString &metric)
{
    if (metric == QLatin1String("test_loss"))
        return QObject::tr("test loss");
    if (metric == QLatin1String("train_loss"))
        return QObject::tr("train loss");
    return QObject::tr("test accuracy (%)");
}

QString shortName(const QString &runId, const QString &studyId)
{
    return runId.startsWith(studyId + QLatin1Char('-')) ? runId.mid(studyId.size() + 1) : runId;
}

// A table cell that sorts by its number when it has one (text sorts "10" before "9"),
// cells without one after those with one.
class SortableCell : public QTableWidgetItem {
public:
    static constexpr int kSortRole = Qt::UserRole + 1;
    bool operator<(const QTableWidgetItem &other) const override
    {
        const QVariant a = data(kSortRole), b = other.data(kSortRole);
        if (a.isValid() || b.isValid())
            return a.isValid() && (!b.isValid() || a.toDouble() < b.toDouble());
        return QTableWidgetItem::operator<(other);
    }
};

QTableWidgetItem *cell(const QString &text, double sortValue = NAN)
{
    auto *item = new SortableCell;
    item->setText(text);
    if (std::isfinite(sortValue))
        item->setData(SortableCell::kSortRole, sortValue);
    item->setFlags(item->flags() & ~Qt::ItemIsEditable);
    return item;
}

// The hyperparameters the trials have, in drawing order.
QStringList searchedNames(const StudySnapshot &s)
{
    QStringList names;
    for (const QString &name : tunableNames())
        for (const RunResult &r : s.runs)
            if (r.params.contains(name)) {
                names << name;
                break;
            }
    return names;
}

std::optional<v1::StudyPlan> planOf(const StudySnapshot &s)
{
    auto plan = parsePlanJson(s.planJson);
    return plan ? std::optional(std::move(plan).value()) : std::nullopt;
}

} // namespace

TuneCharts::TuneCharts(QWidget *parent)
    : QWidget(parent)
{
    setObjectName(QStringLiteral("tuneCharts"));
    m_best = new QLabel;
    m_best->setObjectName(QStringLiteral("bestTrial"));
    m_best->setWordWrap(true);
    m_best->setTextFormat(Qt::PlainText);
    m_best->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_table = new QTableWidget;
    m_table->setObjectName(QStringLiteral("trialsTable"));
    m_table->verticalHeader()->hide();
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setToolTip(tr("Double-click a trial for its attempts and worker logs"));
    connect(m_table, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
        if (QTableWidgetItem *item = m_table->item(row, 0))
            Q_EMIT trialActivated(item->data(Qt::UserRole).toString());
    });

    m_metric = new MetricChart(tr("Metric by epoch"), tr("test accuracy (%)"));
    m_metric->setObjectName(QStringLiteral("tuneMetricChart"));
    m_metric->setXAxis(XAxis::Epoch);
    m_parallel = new ParallelCoordinates;

    m_tabs = new QTabWidget;
    m_tabs->addTab(m_table, tr("Trials"));
    m_tabs->addTab(m_metric, tr("Metric by epoch"));
    m_tabs->addTab(m_parallel, tr("Hyperparameters"));
    m_tabs->setTabToolTip(2,
        tr("One line per trial through its hyperparameters and its metric, coloured by the "
           "metric; faded lines were stopped early"));

    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_best);
    layout->addWidget(m_tabs, 1);
}

void TuneCharts::clear()
{
    m_metric->removeAllSeries();
    m_metric->removeVerticalMarkers(QStringLiteral("rungs"));
    m_drawn.clear();
    m_rungsMarked = false;
    m_metricName.clear();
    m_table->setRowCount(0);
    m_parallel->setData({}, {}, true);
    m_best->clear();
}

void TuneCharts::update(const StudySnapshot &s)
{
    if (!s.tune)
        return;
    if (m_metricName != s.tuneMetric) {
        clear();
        m_metricName = s.tuneMetric;
        m_metric->yAxisItem()->setTitleText(metricTitle(s.tuneMetric));
        if (isAccuracy(s.tuneMetric))
            m_metric->setYEmptyRange(0, 100);
    }
    const int best = bestTrialIndex(s);
    const QStringList names = searchedNames(s);
    if (best >= 0) {
        const RunResult &r = s.runs[best];
        m_best->setText(
            tr("Best so far: %1 — %2 — %3 %4 after %5 epoch(s). Epochs trained: %6 of %7 without early "
               "stopping. Scheduler: %8.")
                .arg(shortName(r.runId, s.studyId), paramsText(r.params),
                    QString(s.tuneMetric).replace(u'_', u' '))
                .arg(metricText(s.tuneMetric, trialMetric(s, r.epochs.last())))
                .arg(r.epochs.size())
                .arg(epochsSpent(s))
                .arg(epochsWithoutStopping(s))
                .arg(s.tuneScheduler));
    } else {
        m_best->setText(tr("No trial has finished an epoch yet. Scheduler: %1.").arg(s.tuneScheduler));
    }
    updateTable(s, names, best);
    updateMetricChart(s);
    updateParallel(s, names, best);
}

void TuneCharts::updateTable(const StudySnapshot &s, const QStringList &names, int best)
{
    // The rung epochs any trial stopped at for a decision, ascending: one column each.
    QList<int> rungs;
    for (const RunResult &r : s.runs)
        for (const TrialDecision &d : r.decisions)
            if (d.action != QLatin1String("promote") && !rungs.contains(d.epoch))
                rungs << d.epoch;
    std::sort(rungs.begin(), rungs.end());
    QStringList headers { tr("Trial"), tr("State"), tr("Epochs"), QString(s.tuneMetric).replace(u'_', u' ') };
    for (const QString &name : names)
        headers << paramLabel(name);
    for (int epoch : rungs)
        headers << tr("at epoch %1").arg(epoch);
    headers << tr("Why");
    m_table->setSortingEnabled(false);
    m_table->setColumnCount(int(headers.size()));
    m_table->setHorizontalHeaderLabels(headers);
    m_table->setRowCount(int(s.runs.size()));
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        int c = 0;
        QTableWidgetItem *id
            = cell(shortName(r.runId, s.studyId) + (i == best ? QStringLiteral(" ★") : QString()));
        id->setData(Qt::UserRole, r.runId);
        id->setToolTip(i == best ? tr("%1: the best so far").arg(r.runId) : r.runId);
        m_table->setItem(i, c++, id);
        m_table->setItem(i, c++, cell(trialStatus(r)));
        m_table->setItem(i, c++, cell(QString::number(r.epochs.size()), double(r.epochs.size())));
        const double last = r.epochs.isEmpty() ? NAN : trialMetric(s, r.epochs.last());
        m_table->setItem(i, c++, cell(metricText(s.tuneMetric, last), last));
        for (const QString &name : names) {
            const QJsonValue v = r.params.value(name);
            m_table->setItem(i, c++,
                v.isString() ? cell(v.toString())
                             : cell(QString::number(v.toDouble(), 'g', 4), v.toDouble()));
        }
        for (int epoch : rungs) {
            double value = NAN;
            QString tip;
            for (const TrialDecision &d : r.decisions)
                if (d.epoch == epoch && d.action != QLatin1String("promote")) {
                    value = d.value;
                    tip = d.reason;
                }
            QTableWidgetItem *at
                = cell(std::isnan(value) ? QString() : metricText(s.tuneMetric, value), value);
            at->setToolTip(tip);
            m_table->setItem(i, c++, at);
        }
        const QString why = r.decisions.isEmpty() ? r.stateReason : r.decisions.last().reason;
        QTableWidgetItem *reason
            = cell(r.state == QLatin1String("STOPPED") || r.decisions.isEmpty() ? why : QString());
        reason->setToolTip(why);
        m_table->setItem(i, c++, reason);
        if (i == best)
            for (int k = 0; k < c; ++k) {
                QFont f = m_table->item(i, k)->font();
                f.setBold(true);
                m_table->item(i, k)->setFont(f);
            }
        if (r.state == QLatin1String("STOPPED"))
            for (int k = 0; k < c; ++k)
                m_table->item(i, k)->setForeground(palette().color(QPalette::Disabled, QPalette::Text));
    }
    m_table->setSortingEnabled(true);
    m_table->resizeColumnsToContents();
}

void TuneCharts::updateMetricChart(const StudySnapshot &s)
{
    if (!m_rungsMarked) {
        if (const auto plan = planOf(s)) {
            // Every bracket's rungs (ASHA stopping with brackets > 1 has several).
            const TuneSettings settings = tuneSettings(*plan);
            QList<int> rungs;
            for (int b = 0; b < std::max(1, settings.brackets); ++b)
                for (int epoch : trialTargets(settings, b))
                    if (epoch < settings.trialEpochs && !rungs.contains(epoch))
                        rungs << epoch;
            std::sort(rungs.begin(), rungs.end());
            for (int epoch : rungs) {
                MetricPoint at;
                at.x[int(XAxis::Epoch)] = epoch;
                m_metric->addVerticalMarker(QStringLiteral("rungs"), at, tr("rung at epoch %1").arg(epoch));
            }
            m_rungsMarked = true;
        }
    }
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        if (r.epochs.isEmpty())
            continue;
        const bool faded = r.state == QLatin1String("STOPPED");
        Drawn &drawn = m_drawn[r.runId];
        if (!m_metric->hasSeries(r.runId) || drawn.faded != faded || drawn.points > r.epochs.size()) {
            m_metric->removeSeries(r.runId);
            SeriesStyle style;
            style.color = MetricChart::cycleColor(i);
            style.markers = true;
            style.smoothable = false;
            if (faded) {
                style.color.setAlpha(80);
                style.pen = Qt::DashLine;
            }
            m_metric->addSeries(r.runId, shortName(r.runId, s.studyId), style);
            drawn = Drawn { 0, faded };
        }
        std::vector<MetricPoint> points;
        for (int k = drawn.points; k < r.epochs.size(); ++k) {
            MetricPoint p;
            p.x[int(XAxis::Epoch)] = r.epochs[k].epoch;
            p.y = shown(s.tuneMetric, trialMetric(s, r.epochs[k]));
            points.push_back(p);
        }
        if (!points.empty())
            m_metric->append(r.runId, points);
        drawn.points = int(r.epochs.size());
    }
}

void TuneCharts::updateParallel(const StudySnapshot &s, const QStringList &names, int best)
{
    const auto plan = planOf(s);
    QList<ParallelCoordinates::Axis> axes;
    for (const QString &name : names) {
        ParallelCoordinates::Axis axis;
        axis.label = paramLabel(name);
        axis.log = plan && drawnInLogSpace(*plan, name);
        for (const RunResult &r : s.runs)
            if (r.params.value(name).isString() && !axis.words.contains(r.params.value(name).toString()))
                axis.words << r.params.value(name).toString();
        std::sort(axis.words.begin(), axis.words.end());
        axes << axis;
    }
    axes << ParallelCoordinates::Axis { metricTitle(s.tuneMetric), false, {} };
    QList<ParallelCoordinates::Line> lines;
    for (int i = 0; i < s.runs.size(); ++i) {
        const RunResult &r = s.runs[i];
        if (r.epochs.isEmpty())
            continue;
        ParallelCoordinates::Line line;
        line.id = r.runId;
        const double metric = trialMetric(s, r.epochs.last());
        line.label = tr("%1: %2\n%3 %4 after %5 epoch(s), %6")
                         .arg(shortName(r.runId, s.studyId), paramsText(r.params), metricTitle(s.tuneMetric))
                         .arg(metricText(s.tuneMetric, metric))
                         .arg(r.epochs.size())
                         .arg(trialStatus(r));
        for (int a = 0; a < names.size(); ++a) {
            const QJsonValue v = r.params.value(names[a]);
            line.values << (v.isString() ? double(axes[a].words.indexOf(v.toString()))
                    : v.isDouble()       ? v.toDouble()
                                         : NAN);
        }
        line.values << shown(s.tuneMetric, metric);
        line.faded = r.state == QLatin1String("STOPPED");
        line.best = i == best;
        lines << line;
    }
    m_parallel->setData(axes, lines, s.tuneMaximize);
}

} // namespace scalelab::app
