// Everything known about one run, folded from its events. Checks the stream contract
// as it folds: sequence numbers must arrive gap-free and without duplicates; any
// breach is counted (and shown) rather than silently absorbed.
// A value type: one thread at a time; references it returns last until the next apply().
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace scalelab::core {

struct LossPoint {
    qint64 step;
    int epoch;
    double loss;
    double elapsedSeconds;
};

class RunRecord {
public:
    explicit RunRecord(QString runId = {})
        : m_runId(std::move(runId))
    { }

    // Returns false (and counts it) when the event is a duplicate or leaves a gap.
    bool apply(const v1::RunEvent &event);

    QString runId() const { return m_runId; }
    v1::RunState state() const { return m_state; }
    QString stateMessage() const { return m_stateMessage; }
    bool terminal() const;
    qint64 lastSeq() const { return m_lastSeq; }
    int gaps() const { return m_gaps; }
    int duplicates() const { return m_duplicates; }
    const std::optional<v1::RunStarted> &started() const { return m_started; }
    bool synthetic() const { return m_started && m_started->dataset().synthetic(); }
    const std::vector<LossPoint> &losses() const { return m_losses; }
    const std::vector<v1::EpochMetrics> &epochs() const { return m_epochs; }
    const std::optional<v1::RunSummary> &summary() const { return m_summary; }
    const QStringList &logs() const { return m_logs; }
    double lastImagesPerSecond() const { return m_lastImagesPerSecond; }

    static QString stateName(v1::RunState state);

private:
    QString m_runId;
    v1::RunState m_state = v1::PENDING;
    QString m_stateMessage;
    qint64 m_lastSeq = 0;
    int m_gaps = 0;
    int m_duplicates = 0;
    std::optional<v1::RunStarted> m_started;
    std::vector<LossPoint> m_losses;
    std::vector<v1::EpochMetrics> m_epochs;
    std::optional<v1::RunSummary> m_summary;
    QStringList m_logs;
    double m_lastImagesPerSecond = 0;
};

} // namespace scalelab::core
