#include "progress_display.h"

#include "cli_common.h"

#include <QDateTime>

#include <sys/ioctl.h>
#include <unistd.h>

namespace scalelab::app {

namespace {

int terminalColumns()
{
    winsize size {};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 20)
        return size.ws_col;
    return 100;
}

QString now()
{
    return QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss "));
}

bool terminalState(const v1::RunEvent &e)
{
    if (!e.has_state())
        return false;
    const auto s = e.state().state();
    return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

} // namespace

ProgressDisplay::ProgressDisplay(bool terminal, double plainInterval)
    : m_terminal(terminal)
    , m_plainInterval(plainInterval)
{
    m_clock.start();
}

bool ProgressDisplay::stdoutIsTerminal()
{
    const QByteArray term = qgetenv("TERM");
    return ::isatty(STDOUT_FILENO) == 1 && term != "dumb" && qgetenv("SCALELAB_PROGRESS") != "plain";
}

void ProgressDisplay::apply(
    const QString &runId, const QString &label, const std::vector<v1::RunEvent> &events)
{
    core::ProgressMeter &meter = m_meters[runId];
    bool ended = false;
    bool epochEnded = false;
    bool stepped = false;
    for (const auto &e : events) {
        meter.apply(e);
        ended = ended || terminalState(e);
        epochEnded = epochEnded || e.has_epoch();
        stepped = stepped || e.has_step();
    }
    if (ended) {
        m_lines.remove(runId);
        m_lastPlain.remove(runId);
        if (m_terminal) {
            erase();
            draw();
        }
        return;
    }
    if (!stepped && !epochEnded && !m_lines.contains(runId))
        return;
    if (m_terminal) {
        m_lines[runId] = core::formatProgress(label, meter.view(), terminalColumns());
        erase();
        draw();
        return;
    }
    // Plain: a line now and then, never one per step.
    const qint64 at = m_clock.elapsed();
    const auto last = m_lastPlain.constFind(runId);
    if (!epochEnded && last != m_lastPlain.constEnd() && at - *last < qint64(m_plainInterval * 1000))
        return;
    if (last == m_lastPlain.constEnd() && !epochEnded) {
        m_lastPlain.insert(runId, at); // the first line comes after an interval, not at once
        return;
    }
    m_lastPlain.insert(runId, at);
    m_lines[runId] = QString();
    out() << now() << core::formatProgress(label, meter.view(), 0) << "\n";
    out().flush();
}

void ProgressDisplay::print(const QString &line)
{
    if (m_terminal)
        erase();
    out() << line << "\n";
    if (m_terminal)
        draw();
    out().flush();
}

void ProgressDisplay::clear()
{
    if (m_terminal)
        erase();
    m_lines.clear();
    out().flush();
}

void ProgressDisplay::erase()
{
    // Up to the first progress line, and clear from there to the end of the screen.
    if (m_drawn > 0)
        out() << "\r\x1b[" << m_drawn << "A\x1b[J";
    else
        out() << "\r\x1b[J";
    m_drawn = 0;
}

void ProgressDisplay::draw()
{
    for (const QString &line : std::as_const(m_lines)) {
        out() << line << "\n";
        ++m_drawn;
    }
    out().flush();
}

} // namespace scalelab::app
