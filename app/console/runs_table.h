// The study panel's runs table: one row per run, of the open study (showStudy) or of the
// designer's plan before launch (showPlan); what each cell says, and what it keeps for
// the view (the run's full id on the Run column, how far the run is on Progress, drawn
// as a bar under the text); which columns show (right-click the header; remembered in
// the settings); the run and configuration columns frozen in place when the table
// scrolls sideways; and the text and state filters that hide rows.
//
// The columns are StudyView::RunColumn: the view publishes them, since tests address
// cells by them. The table is a QTableWidget, read by the view and
// by tests as it is (item(row, column)->text()). A refill sets each cell's text, tooltip
// and roles to what a new item with them would hold, reusing the item already there, so
// a cell whose values did not change is not repainted.
//
// StudyView owns this object (a child) and puts table(), filter() and stateFilter() in
// its layout, which then owns them. GUI thread only.
#pragma once

#include "placement.h"
#include "progress_meter.h"
#include "study_model.h"
#include "study_plan.h"
#include "study_results.h"

#include <QObject>
#include <QSet>

#include <functional>
#include <optional>

class QComboBox;
class QLineEdit;
class QSettings;
class QTableWidget;

namespace scalelab::app {

class FrozenColumns;

class RunsTable : public QObject {
    Q_OBJECT
public:
    // A run's live progress (the attempt the runner measures now), if it has reported any.
    using LiveProgress = std::function<std::optional<core::ProgressView>(const QString &runId)>;

    // Makes the table (sorted by run, attempt, agents and wall time hidden), its frozen
    // columns and its filters.
    explicit RunsTable(QObject *parent = nullptr);

    QTableWidget *table() const { return m_table; }
    FrozenColumns *frozenColumns() const { return m_frozen; }
    QLineEdit *filter() const { return m_filter; }
    QComboBox *stateFilter() const { return m_stateFilter; }

    // No rows: a plan that cannot be launched has none to preview.
    void clear();
    // Before launch: the plan's runs (of study "new"), each with its placement, in the
    // plan's order; where each would go, or why it cannot. Sorting stays off until the
    // next showStudy().
    void showPlan(const QList<core::PlannedRun> &runs, const QList<core::Placement> &placements);
    // The runs of study `studyId` as `s` has them, sorted, sized, filtered; a tune's table
    // hides the speedup columns until a study that is not a tune is shown, and the Workers
    // column shows while a study (or a plan) has an elastic run.
    void showStudy(const core::StudySnapshot &s, const core::StudyResults &results, const QString &studyId,
        const LiveProgress &progress);
    // Hides the rows neither filter lets through.
    void applyFilter();

    QString runIdAt(int row) const; // the table shows the short name ("r01")
    QString selectedRunId() const; // of the row selected; empty when none
    void setColumnVisible(int column, bool visible); // not the Run column, which always shows

    // The columns chosen hidden ("study/hiddenColumns"), not those hidden for a tune.
    void saveColumns(QSettings &settings) const;
    void restoreColumns(const QSettings &settings);

private:
    QTableWidget *m_table = nullptr;
    FrozenColumns *m_frozen = nullptr;
    QLineEdit *m_filter = nullptr;
    QComboBox *m_stateFilter = nullptr;
    // Hides `column` while `hide` (a tune's speedups, the workers of a study without an
    // elastic run) and gives it back after, unless the user hid it too.
    void hideFor(int column, bool hide);

    QSet<int> m_hiddenFor; // columns hidden because of what is shown (hideFor), not by the user
};

} // namespace scalelab::app
