// One run of a study, in detail: its configuration and state, every attempt (agents,
// outcome, where it resumed, why it ended) and the worker logs of all its ranks, read
// from the journal and followed live while the dialog is open. Retry and cancel are
// requests the StudyView carries out.
#pragma once

#include "core_status.h"

#include <QDialog>
#include <QMap>
#include <QTimer>

#include <functional>
#include <optional>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace scalelab::core {
class Journal;
struct RunResult;
struct ProgressView;
} // namespace scalelab::core

namespace scalelab::app {

class JournalReader;

class RunDetails : public QDialog {
    Q_OBJECT
public:
    // `lookup` gives the run's current state (from the view's snapshot); false when gone.
    // Its log is read through `reader` (off the GUI thread), which must outlive the dialog.
    RunDetails(JournalReader &reader, const QString &runId, std::function<bool(core::RunResult *)> lookup,
        QWidget *parent = nullptr);

    // Live progress while the run trains (the view's meter); nothing when not followed.
    void setProgressSource(std::function<std::optional<core::ProgressView>()> progress);

    QString runId() const { return m_runId; }
    QProgressBar *progress() const { return m_progress; }
    QPlainTextEdit *log() const { return m_log; }
    // Only the log lines holding this text (case-insensitive); empty: every line.
    void setLogFilter(const QString &text);
    QLineEdit *logFilter() const { return m_filter; }
    // The whole log (not only the lines the filter shows) to a text file.
    core::Status saveLog(const QString &path) const;
    QTableWidget *attempts() const { return m_attempts; }
    void refresh(); // the timer calls this every second

Q_SIGNALS:
    void retryRequested(const QString &runId);
    void cancelRequested(const QString &runId);

private:
    struct LogRead {
        QMap<QString, qint64> positions; // m_lastSeq after the read
        QStringList lines;
    };
    void appendLogLine(const QString &line);
    // Asks the reader for the new log lines of `run`'s attempts; one read at a time.
    void readLog(const core::RunResult &run);
    void showWorkerCommand(const QStringList &command);

    JournalReader &m_reader;
    bool m_logReading = false;
    QString m_runId;
    std::function<bool(core::RunResult *)> m_lookup;
    QMap<QString, qint64> m_lastSeq; // "attempt/agent" -> last event read
    std::function<std::optional<core::ProgressView>()> m_progressSource;
    QLabel *m_header = nullptr;
    QProgressBar *m_progress = nullptr; // epoch and step x/y, percent and ETA
    QTableWidget *m_attempts = nullptr;
    QPlainTextEdit *m_log = nullptr;
    QLineEdit *m_filter = nullptr;
    QStringList m_lines; // every log line read, in order; the view shows those matching the filter
    QStringList m_commandShown; // the worker command last written to the log
    QPushButton *m_retry = nullptr;
    QPushButton *m_cancel = nullptr;
    QTimer m_timer;
};

} // namespace scalelab::app
