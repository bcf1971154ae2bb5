// What AgentsView holds for one agent: its settings, its stream and its charts. Private to
// the view's own files (agents_view.cpp, agents_view_registry.cpp).
#pragma once

#include "agents_model.h"
#include "agents_view.h"

#include <QLabel>
#include <QSet>
#include <QString>

#include <memory>
#include <optional>

namespace scalelab::app {

struct AgentsView::Node {
    core::AgentConfig config;
    QString origin; // empty: saved in the registry
    std::unique_ptr<core::NodeMonitor> monitor;
    core::AgentStatus status;
    std::optional<v1::DescribeResponse> inventory;
    std::optional<v1::NodeSample> last;
    qint64 samples = 0;
    int gpuSeries = 0;
    QSet<QString> liveRuns; // run#attempt with ranks in the last sample, for the start/end marks
    QWidget *page = nullptr;
    MetricChart *cpu = nullptr;
    MetricChart *memory = nullptr;
    MetricChart *gpu = nullptr;
    MetricChart *gpuMemory = nullptr;
    QLabel *noGpus = nullptr;

    QString label() const
    {
        return origin.isEmpty() ? config.name : QStringLiteral("%1 (%2)").arg(config.name, origin);
    }
    AgentsModel::Agent row() const
    {
        return { label(), config.address, config.tls.enabled(), status, inventory, last };
    }
};

} // namespace scalelab::app
