#include "run_record.h"

namespace scalelab::core {

namespace {
constexpr int kMaxLogLines = 5000; // older lines stay in the agent's event log
}

bool RunRecord::terminal() const
{
    return m_state == v1::SUCCEEDED || m_state == v1::FAILED || m_state == v1::CANCELLED;
}

QString RunRecord::stateName(v1::RunState state)
{
    switch (state) {
    case v1::PENDING:
        return QStringLiteral("PENDING");
    case v1::STARTING:
        return QStringLiteral("STARTING");
    case v1::RUNNING:
        return QStringLiteral("RUNNING");
    case v1::SUCCEEDED:
        return QStringLiteral("SUCCEEDED");
    case v1::FAILED:
        return QStringLiteral("FAILED");
    case v1::CANCELLED:
        return QStringLiteral("CANCELLED");
    default:
        return QStringLiteral("UNKNOWN");
    }
}

bool RunRecord::apply(const v1::RunEvent &event)
{
    if (event.has_heartbeat())
        return true;
    if (event.seq() <= m_lastSeq) {
        ++m_duplicates;
        return false;
    }
    const bool gapFree = event.seq() == m_lastSeq + 1;
    if (!gapFree)
        ++m_gaps;
    m_lastSeq = event.seq();
    switch (event.kind_case()) {
    case v1::RunEvent::kState:
        m_state = event.state().state();
        m_stateMessage = QString::fromStdString(event.state().message());
        break;
    case v1::RunEvent::kStarted:
        m_started = event.started();
        break;
    case v1::RunEvent::kStep:
        m_losses.push_back({ event.step().step(), event.step().epoch(), event.step().loss(),
            event.step().elapsed_seconds() });
        m_lastImagesPerSecond = event.step().images_per_second();
        break;
    case v1::RunEvent::kEpoch:
        m_epochs.push_back(event.epoch());
        break;
    case v1::RunEvent::kSummary:
        m_summary = event.summary();
        break;
    case v1::RunEvent::kLog:
        m_logs << QStringLiteral("[rank %1] %2")
                      .arg(event.rank())
                      .arg(QString::fromStdString(event.log().text()));
        if (m_logs.size() > kMaxLogLines)
            m_logs.removeFirst();
        break;
    default:
        break;
    }
    return gapFree;
}

} // namespace scalelab::core
