// Runs' progress on scalelab-cli's standard output. On a terminal: one line per running
// run (bar, epoch, step, loss, img/s, ETA), redrawn in place below the log lines. Anywhere
// else (a pipe, a file, TERM=dumb, or SCALELAB_PROGRESS=plain): a plain timestamped line
// per run at most every `plainInterval` seconds and at each epoch's end, so a log shows
// a long epoch is moving.
#pragma once

#include "progress_meter.h"

#include <QElapsedTimer>
#include <QHash>
#include <QMap>
#include <QString>

#include <vector>

namespace scalelab::app {

class ProgressDisplay {
public:
    ProgressDisplay(bool terminal, double plainInterval = 30);
    // True when standard output is a terminal that understands cursor movement.
    static bool stdoutIsTerminal();

    // Events of a run (`label` names it on the line); a terminal state removes its line.
    void apply(const QString &runId, const QString &label, const std::vector<v1::RunEvent> &events);
    // A log line, printed above the progress lines.
    void print(const QString &line);
    // Removes every progress line (before a final summary).
    void clear();

private:
    void erase();
    void draw();

    bool m_terminal;
    double m_plainInterval;
    int m_drawn = 0; // progress lines on screen below the cursor's line
    QMap<QString, core::ProgressMeter> m_meters;
    QMap<QString, QString> m_lines; // runId -> its line, while it runs
    QHash<QString, qint64> m_lastPlain; // runId -> when its last plain line was printed (ms)
    QElapsedTimer m_clock;
};

} // namespace scalelab::app
