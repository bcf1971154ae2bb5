// One run of a study, in detail: its configuration and state, every attempt (agents,
// outcome, where it resumed, why it ended) and the worker logs of all its ranks, read
// from the journal and followed live while the dialog is open. Retry and cancel are
// requests the StudyView carries out.
#pragma once

#include <QDialog>
#include <QMap>
#include <QTimer>

#include <functional>

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTableWidget;

namespace scalelab::core {
class Journal;
struct RunResult;
} // namespace scalelab::core

namespace scalelab::console {

class RunDetails : public QDialog {
    Q_OBJECT
public:
    // `lookup` gives the run's current state (from the view's snapshot); false when gone.
    RunDetails(const core::Journal &journal, const QString &runId,
        std::function<bool(core::RunResult *)> lookup, QWidget *parent = nullptr);

    QString runId() const { return m_runId; }
    QPlainTextEdit *log() const { return m_log; }
    QTableWidget *attempts() const { return m_attempts; }
    void refresh(); // the timer calls this every second

Q_SIGNALS:
    void retryRequested(const QString &runId);
    void cancelRequested(const QString &runId);

private:
    const core::Journal &m_journal;
    QString m_runId;
    std::function<bool(core::RunResult *)> m_lookup;
    QMap<QString, qint64> m_lastSeq; // "attempt/agent" -> last event read
    QLabel *m_header = nullptr;
    QTableWidget *m_attempts = nullptr;
    QPlainTextEdit *m_log = nullptr;
    QPushButton *m_retry = nullptr;
    QPushButton *m_cancel = nullptr;
    QTimer m_timer;
};

} // namespace scalelab::console
