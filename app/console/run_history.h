// The Run tab's history: every single run launched from the console, recorded in the
// journal (STATE/journal.sqlite), listed newest first with its state and results. A row's
// check box draws the run on the charts beside the current one; double-click (or "Open")
// makes it the run the tab shows; "Remove from history" forgets it (its agent keeps it).
// GUI thread only. The view holds no journal: the Run tab (RunTab) reads and writes it.
#pragma once

#include "journal.h"

#include <QWidget>

#include <optional>

class QTreeWidget;
class QTreeWidgetItem;

namespace scalelab::app {

// What a row shows of a run besides its journal entry (folded from its stored events).
struct RunHistoryResult {
    std::optional<double> testAccuracy; // last epoch's, 0..1
    double imagesPerSecond = 0; // the summary's, else the last step's
    int epochsDone = 0;
    int epochs = 0;
    bool synthetic = false;
};

class RunHistoryView : public QWidget {
    Q_OBJECT
public:
    enum Column { RunColumn, StateColumn, AccuracyColumn, ThroughputColumn, ColumnCount };

    explicit RunHistoryView(QWidget *parent = nullptr);

    // Adds the run, or updates its row when listed; the newest run is the top row.
    void setRun(const core::SingleRunEntry &entry, const RunHistoryResult &result);
    void removeRun(const QString &runId);
    void clear();
    QStringList runIds() const; // newest first
    bool contains(const QString &runId) const { return item(runId) != nullptr; }

    // Whether the run is drawn on the charts. setDrawn does not emit drawnChanged.
    bool isDrawn(const QString &runId) const;
    void setDrawn(const QString &runId, bool drawn);
    // The run the tab shows: always drawn, its box cannot be cleared, its row in bold.
    void setCurrent(const QString &runId);
    QString current() const { return m_current; }

    QTreeWidget *tree() const { return m_tree; }

protected:
    void changeEvent(QEvent *event) override;

Q_SIGNALS:
    void drawnChanged(const QString &runId, bool drawn);
    void openRequested(const QString &runId);
    void forgetRequested(const QString &runId);

private:
    QTreeWidgetItem *item(const QString &runId) const;
    void showMenu(const QPoint &at);
    void fitCheckBoxesToPalette();

    QTreeWidget *m_tree = nullptr;
    QString m_current;
    bool m_updating = false; // while the view changes a box itself
};

} // namespace scalelab::app
