// The console's Agents tab: every agent the console knows, its connection state in words,
// its inventory and its live utilization at a glance (bars in the table), and for the
// selected node charts of CPU, memory and per-GPU utilization and memory over time.
// Agents are added, edited and removed through AgentDialog and remembered in
// STATE/agents.json (owner-only; see AgentRegistry). The console's own local agent and
// an agent given on the command line are listed too, marked as such, and not saved.
//
// Threading: one core::NodeMonitor per enabled agent runs the gRPC calls on a thread of
// its own and hands samples over in batches; the table and charts are updated on the
// GUI thread (charts redraw on their 40 ms coalescing timer). Removing an agent, or
// destroying the view, stops and joins its monitor; the local agent stops with the view.
#pragma once

#include "agent_registry.h"
#include "local_agent.h"
#include "node_monitor.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QHBoxLayout;
class QLabel;
class QPushButton;
class QStackedWidget;
class QTableView;

namespace scalelab::app {
class MetricChart;
}

namespace scalelab::app {

class AgentsModel;

class AgentsView : public QWidget {
    Q_OBJECT
public:
    explicit AgentsView(QWidget *parent = nullptr);
    ~AgentsView() override;

    // Loads STATE/agents.json and starts watching its enabled agents. Problems with the
    // file (permissions tightened, entries that do not validate) are shown in a banner.
    core::Status openRegistry(const QString &stateDir);
    const core::AgentRegistry &registry() const { return m_registry; }
    int configuredCount() const { return int(m_registry.agents().size()); }

    // How the "Start local agent" action starts one (binary, folders).
    void setLocalAgentOptions(const core::LocalAgentOptions &options) { m_localOptions = options; }
    // Starts the console's own agent once (blocking until it listens, as LocalAgent does)
    // and lists it as "local-1 (started by the console)"; later calls return the same one.
    // Fails with the reason when it cannot start.
    core::Result<core::LocalAgent *> startLocalAgent();
    core::LocalAgent *localAgent() const { return m_local.get(); }
    // Lists an agent this session uses but that is not saved (e.g. --agent on the command
    // line), labelled "(origin)"; one per origin, replaced by the next call.
    void setSessionAgent(const QString &origin, const core::AgentConfig &agent);

    // Changes to the saved list; each saves at once.
    core::Status addAgent(const core::AgentConfig &agent);
    // Adds an agent per address, named by it, with `shared`'s token, TLS and enabled
    // setting; an address already listed (as an address or a name) is skipped. Says what
    // it did, a line per address, in `log`; returns how many it added.
    int addAddresses(const QStringList &addresses, const core::AgentConfig &shared, QStringList *log);
    core::Status editAgent(const QString &name, const core::AgentConfig &agent);
    core::Status removeAgent(const QString &name);

    // The agents that answer now, for the Study tab.
    QList<core::AgentEndpoint> reachableAgents() const;

    // For tests and tools.
    void setSampleInterval(int ms) { m_sampleIntervalMs = ms; } // for monitors started later
    void setBackoff(int initialMs, int maxMs);
    QStringList agentNames() const; // in table order
    core::AgentStatus status(const QString &name) const;
    QString stateText(const QString &name) const; // the Connection column
    QString inventoryText(const QString &name) const; // the details pane
    qint64 samplesReceived(const QString &name) const;
    bool isWatching(const QString &name) const; // a monitor thread runs for it
    int activeMonitors() const;
    app::MetricChart *cpuChart(const QString &name) const;
    app::MetricChart *memoryChart(const QString &name) const;
    app::MetricChart *gpuChart(const QString &name) const;
    app::MetricChart *gpuMemoryChart(const QString &name) const;
    QTableView *table() const { return m_table; }
    const AgentsModel *model() const { return m_model; }
    void select(const QString &name);
    QLabel *bannerLabel() const { return m_banner; }

Q_SIGNALS:
    // The reachable agents changed (connected, lost, added, removed, edited).
    void agentsChanged(const QList<scalelab::core::AgentEndpoint> &reachable);
    // A node's inventory arrived or changed (data sets, cores, GPUs, free slots).
    void inventoryChanged(const QString &agent, const scalelab::v1::DescribeResponse &inventory);

protected:
    void changeEvent(QEvent *event) override;

private:
    struct Node;
    void buildUi();
    QHBoxLayout *buildActions();
    void buildTable();
    Node *find(const QString &name) const;
    Node *selected() const;
    void addNode(const core::AgentConfig &config, const QString &origin);
    void removeNode(const QString &name);
    void startMonitor(Node &node);
    void onStatus(Node *node, const core::AgentStatus &status);
    void onInventory(Node *node, const v1::DescribeResponse &inventory);
    void onSamples(Node *node);
    void ensureGpuSeries(Node &node, int gpuCount);
    void updateRow(const Node &node);
    void updateDetails();
    void updateActions();
    void emitIfReachableChanged();
    void addFromDialog();
    void editFromDialog();
    void runDialog(const QString &editing); // empty: a new agent
    void removeSelected();
    void startLocalFromAction();
    core::Status saveRegistry();
    void showBanner(const QStringList &lines, bool error);

    core::AgentRegistry m_registry;
    bool m_registryOpen = false;
    core::LocalAgentOptions m_localOptions;
    std::unique_ptr<core::LocalAgent> m_local;
    std::vector<std::unique_ptr<Node>> m_nodes;
    int m_sampleIntervalMs = 0;
    int m_backoffInitialMs = 500;
    int m_backoffMaxMs = 15'000;
    qint64 m_originMs = 0; // x = 0 of every utilization chart
    QString m_reachableKey; // what agentsChanged last said

    QLabel *m_banner = nullptr;
    AgentsModel *m_model = nullptr;
    QTableView *m_table = nullptr;
    QPushButton *m_add = nullptr;
    QPushButton *m_edit = nullptr;
    QPushButton *m_remove = nullptr;
    QPushButton *m_startLocal = nullptr;
    QLabel *m_details = nullptr;
    QStackedWidget *m_pages = nullptr;
    QLabel *m_noSelection = nullptr;
};

} // namespace scalelab::app
