// The rows of the Agents tab: one per agent the console knows, with its connection state
// in words, its inventory and its latest utilization sample, formatted for the table
// (text, tooltip, state colour, and gauge fractions for GaugeDelegate). AgentsView owns
// the monitors and feeds this model; the model decides what a cell says.
//
// GUI thread only (a QAbstractItemModel). Rows are addressed by position, which is the
// order agents were added; a row's data stays valid until removeAgent() of that row.
#pragma once

#include "node_monitor.h"
#include "scalelab/v1/agent.pb.h"

#include <QAbstractTableModel>
#include <QColor>
#include <QPalette>
#include <QSet>

#include <optional>
#include <vector>

namespace scalelab::app {

class AgentsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        NameColumn,
        StateColumn,
        HostColumn,
        CpuColumn,
        MemoryColumn,
        GpuColumn,
        DataColumn,
        SlotsColumn,
        ColumnCount
    };
    // QVariantList of fractions in [0, 1], one per bar: CPU, memory, one per GPU.
    static constexpr int GaugeRole = Qt::UserRole + 1;

    struct Agent {
        QString label; // "node-a", or "local-1 (started by the console)"
        QString address; // HOST:PORT
        bool tls = false;
        core::AgentStatus status;
        std::optional<v1::DescribeResponse> inventory;
        std::optional<v1::NodeSample> last;
    };

    explicit AgentsModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Appends a row; returns its position.
    int addAgent(const Agent &agent);
    void removeAgent(int row);
    const Agent &agent(int row) const { return m_agents.at(std::size_t(row)); }
    void setAgent(int row, const Agent &agent);
    // State colours are chosen to read on this palette (light or dark).
    void setPalette(const QPalette &palette);

    // The cell's text, as shown.
    QString text(int row, int column) const;
    // The details pane of the Agents tab for one agent, as rich text: its address and
    // connection state (with the advice and the retry), its node, network, GPUs and data
    // sets, and its latest sample, its own ranks' share included.
    static QString detailsHtml(const Agent &agent, const QPalette &palette);

    // The colour of a connection state that reads on `palette` (light or dark).
    static QColor stateColor(core::AgentStatus::State state, const QPalette &palette);
    static constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
    // Bytes as GiB, one decimal below 100 GiB: "7.6", "503".
    static QString gib(qint64 bytes);
    // What ScaleLab's own ranks use of the node, so they can be told from other load: CPU
    // in % of the whole node (as cpu_percent), and resident memory in bytes.
    static double ranksCpuPercent(const v1::NodeSample &sample);
    // Why a node has no GPU, in a sentence for a user, from the agent's gpu_status
    // ("no GPU: NVML (libnvidia-ml.so.1) not found (...)"): said once, where the GPU
    // charts would be.
    static QString noGpuSentence(const std::string &gpuStatus);
    static qint64 ranksMemoryBytes(const v1::NodeSample &sample);
    // Runs that started or ended between the sample before and `sample`, as labels for the
    // utilization charts ("r01 ▶", "r01 ■"; a single run by its id's last part); `live`
    // holds the runs (id#attempt) of the sample before and is updated.
    static QStringList runMarks(QSet<QString> *live, const v1::NodeSample &sample);

private:
    QString tooltip(int row, int column) const;
    QVariantList gauges(int row, int column) const;
    void rowChanged(int row);

    std::vector<Agent> m_agents;
    QPalette m_palette;
};

} // namespace scalelab::app
