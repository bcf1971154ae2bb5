#include "agents_view.h"
#include "agents_view_node.h"

#include "agents_model.h"
#include "cell_bars.h"
#include "metric_chart.h"
#include "theme.h"

#include <QDateTime>
#include <QEvent>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>

namespace scalelab::app {

using app::MetricChart;
using app::MetricPoint;
using app::XAxis;

namespace {
const QString kLocalName = QStringLiteral("local-1");

using enum AgentsModel::Column;
constexpr int kGaugeRole = AgentsModel::GaugeRole;
} // namespace

AgentsView::AgentsView(QWidget *parent)
    : QWidget(parent)
    , m_originMs(QDateTime::currentMSecsSinceEpoch())
{
    buildUi();
}

AgentsView::~AgentsView()
{
    // Stop every stream first (all at once: each stop cancels its call), then the agent.
    for (auto &n : m_nodes)
        if (n->monitor)
            n->monitor->disconnect(this);
    for (auto &n : m_nodes)
        n->monitor.reset();
    m_local.reset();
}

// The actions above the table: add, edit, remove, and the console's own agent.
QHBoxLayout *AgentsView::buildActions()
{
    m_add = new QPushButton(tr("Add…"));
    m_add->setObjectName(QStringLiteral("addAgentButton"));
    m_add->setToolTip(tr("Add an agent running on another computer (scalelab-agent)"));
    m_edit = new QPushButton(tr("Edit…"));
    m_edit->setObjectName(QStringLiteral("editAgentButton"));
    m_remove = new QPushButton(tr("Remove"));
    m_remove->setObjectName(QStringLiteral("removeAgentButton"));
    m_startLocal = new QPushButton(tr("Start local agent"));
    m_startLocal->setObjectName(QStringLiteral("startLocalButton"));
    m_startLocal->setToolTip(tr("Run scalelab-agent on this computer (127.0.0.1, a fresh token); it "
                                "stops when the console closes"));
    connect(m_add, &QPushButton::clicked, this, &AgentsView::addFromDialog);
    connect(m_edit, &QPushButton::clicked, this, &AgentsView::editFromDialog);
    connect(m_remove, &QPushButton::clicked, this, &AgentsView::removeSelected);
    connect(m_startLocal, &QPushButton::clicked, this, &AgentsView::startLocalFromAction);
    auto *actions = new QHBoxLayout;
    actions->addWidget(m_add);
    actions->addWidget(m_edit);
    actions->addWidget(m_remove);
    actions->addSpacing(16);
    actions->addWidget(m_startLocal);
    actions->addStretch(1);
    return actions;
}

// The table of agents, its gauges and its columns' widths.
void AgentsView::buildTable()
{
    m_model = new AgentsModel(this);
    m_model->setPalette(palette());
    m_table = new QTableView;
    m_table->setObjectName(QStringLiteral("agentsTable"));
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->setWordWrap(false);
    m_table->setAlternatingRowColors(true);
    auto *gauges = new GaugeDelegate(kGaugeRole, m_table);
    for (int c : { CpuColumn, MemoryColumn, GpuColumn })
        m_table->setItemDelegateForColumn(c, gauges);
    auto *header = m_table->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::Interactive);
    // The state in words is what matters most: never clipped; data sets take what is left.
    header->setSectionResizeMode(StateColumn, QHeaderView::ResizeToContents);
    header->setSectionResizeMode(DataColumn, QHeaderView::Stretch);
    header->setMinimumSectionSize(60);
    const QFontMetrics fm(font());
    const auto widthOf
        = [&fm](const char *sample) { return fm.horizontalAdvance(QLatin1String(sample)) + 24; };
    // Widths for typical contents.
    m_table->setColumnWidth(NameColumn, widthOf("local-1 (started by the console)"));
    m_table->setColumnWidth(HostColumn, widthOf("node-name · 64 cores · 503 GiB"));
    m_table->setColumnWidth(CpuColumn, GaugeDelegate::kBarsWidth + widthOf("100% · ranks 100%"));
    m_table->setColumnWidth(MemoryColumn, GaugeDelegate::kBarsWidth + widthOf("503/503 GiB"));
    m_table->setColumnWidth(GpuColumn, GaugeDelegate::kBarsWidth + widthOf("100% · 80/80 GiB"));
    m_table->setColumnWidth(DataColumn, widthOf("cifar-10, synth"));
    m_table->setColumnWidth(SlotsColumn, widthOf("Free slots") - 12);
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        updateDetails();
        updateActions();
    });
    connect(m_table, &QTableView::doubleClicked, this, [this] {
        if (m_edit->isEnabled())
            editFromDialog();
    });
}

void AgentsView::buildUi()
{
    m_banner = new QLabel;
    m_banner->setObjectName(QStringLiteral("agentsBanner"));
    m_banner->setWordWrap(true);
    m_banner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_banner->hide();

    QHBoxLayout *actions = buildActions();
    buildTable();

    m_details = new QLabel;
    m_details->setObjectName(QStringLiteral("agentDetails"));
    m_details->setWordWrap(true);
    m_details->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_details->setMargin(6);
    auto *detailsScroll = new QScrollArea;
    detailsScroll->setWidget(m_details);
    detailsScroll->setWidgetResizable(true);
    detailsScroll->setFrameShape(QFrame::NoFrame);
    detailsScroll->setMinimumWidth(280);

    m_pages = new QStackedWidget;
    m_noSelection = new QLabel(tr("Select an agent to see its utilization over time."));
    m_noSelection->setAlignment(Qt::AlignCenter);
    m_noSelection->setEnabled(false);
    m_pages->addWidget(m_noSelection);

    auto *bottom = new QSplitter(Qt::Horizontal);
    bottom->addWidget(detailsScroll);
    bottom->addWidget(m_pages);
    bottom->setStretchFactor(1, 1);
    bottom->setSizes({ 320, 1000 });
    auto *split = new QSplitter(Qt::Vertical);
    split->addWidget(m_table);
    split->addWidget(bottom);
    split->setStretchFactor(1, 1);
    split->setSizes({ 220, 500 });

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_banner);
    layout->addLayout(actions);
    layout->addWidget(split, 1);
    updateDetails();
    updateActions();
}

void AgentsView::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) { // state colours follow a light/dark switch
        m_model->setPalette(palette());
        updateDetails();
    }
}

void AgentsView::showBanner(const QStringList &lines, bool error)
{
    if (lines.isEmpty()) {
        m_banner->hide();
        return;
    }
    const bool dark = isDarkPalette(palette());
    const QString background = error ? (dark ? QStringLiteral("#5c1f1f") : QStringLiteral("#fdecea"))
                                     : (dark ? QStringLiteral("#4d3d00") : QStringLiteral("#fff3cd"));
    const QString foreground = error ? (dark ? QStringLiteral("#ffcdd2") : QStringLiteral("#7f1d1d"))
                                     : (dark ? QStringLiteral("#ffecb3") : QStringLiteral("#664d03"));
    m_banner->setStyleSheet(
        QStringLiteral("background: %1; color: %2; padding: 4px;").arg(background, foreground));
    m_banner->setText(lines.join(QLatin1Char('\n')));
    m_banner->show();
}

core::Status AgentsView::openRegistry(const QString &stateDir)
{
    m_registry = core::AgentRegistry(core::AgentRegistry::defaultPath(stateDir));
    m_registryOpen = true;
    const core::Status loaded = m_registry.load();
    QStringList lines = m_registry.warnings();
    if (!loaded)
        lines.prepend(loaded.error());
    showBanner(lines, !loaded);
    for (const auto &agent : m_registry.agents())
        addNode(agent, QString());
    return loaded;
}

core::Result<core::LocalAgent *> AgentsView::startLocalAgent()
{
    if (m_local)
        return m_local.get();
    auto agent = std::make_unique<core::LocalAgent>();
    if (const core::Status started = agent->start(m_localOptions); !started)
        return started;
    m_local = std::move(agent);
    core::AgentConfig config;
    config.name = kLocalName; // stable, so a study reopened after a restart finds it
    config.address = m_local->endpoint();
    config.token = m_local->token();
    addNode(config, tr("started by the console"));
    updateActions();
    return m_local.get();
}

void AgentsView::startLocalFromAction()
{
    m_startLocal->setEnabled(false);
    if (const auto started = startLocalAgent(); !started)
        showBanner({ tr("The local agent did not start: %1").arg(started.error()) }, true);
    updateActions();
}

void AgentsView::setSessionAgent(const QString &origin, const core::AgentConfig &agent)
{
    for (const auto &n : m_nodes)
        if (n->origin == origin) {
            if (n->config == agent)
                return;
            removeNode(n->config.name);
            break;
        }
    addNode(agent, origin);
}

void AgentsView::setBackoff(int initialMs, int maxMs)
{
    m_backoffInitialMs = initialMs;
    m_backoffMaxMs = maxMs;
}

AgentsView::Node *AgentsView::find(const QString &name) const
{
    for (const auto &n : m_nodes)
        if (n->config.name == name)
            return n.get();
    return nullptr;
}

AgentsView::Node *AgentsView::selected() const
{
    const int row = m_table->currentIndex().row();
    const auto selection = m_table->selectionModel()->selectedRows();
    if (selection.isEmpty() || row < 0 || row >= int(m_nodes.size()))
        return nullptr;
    return m_nodes[std::size_t(row)].get();
}

void AgentsView::addNode(const core::AgentConfig &config, const QString &origin)
{
    auto node = std::make_unique<Node>();
    node->config = config;
    node->origin = origin;

    const auto chart = [](const QString &title, const QString &y) {
        auto *c = new MetricChart(title, y);
        c->setXAxis(XAxis::WallClock);
        c->setMinimumHeight(180);
        return c;
    };
    node->page = new QWidget;
    node->cpu = chart(tr("CPU — %1").arg(config.name), tr("% of all cores"));
    node->cpu->setObjectName(QStringLiteral("cpuChart"));
    node->cpu->addSeries(QStringLiteral("cpu"), tr("whole node"));
    node->cpu->addSeries(QStringLiteral("ranks"), tr("ScaleLab ranks")); // told from other load
    node->memory = chart(tr("Memory — %1").arg(config.name), tr("GiB"));
    node->memory->setObjectName(QStringLiteral("memoryChart"));
    node->memory->addSeries(QStringLiteral("used"), tr("used"));
    node->memory->addSeries(QStringLiteral("ranks"), tr("ScaleLab ranks"));
    node->memory->addSeries(QStringLiteral("total"), tr("total"), { QColor(), Qt::DashLine, false, false });
    node->gpu = chart(tr("GPU utilization — %1").arg(config.name), tr("%"));
    node->gpu->setObjectName(QStringLiteral("gpuChart"));
    node->gpuMemory = chart(tr("GPU memory — %1").arg(config.name), tr("GiB used"));
    node->gpuMemory->setObjectName(QStringLiteral("gpuMemoryChart"));
    node->cpu->setYInclude(0, 100); // utilization reads against the whole scale
    node->gpu->setYInclude(0, 100);
    node->memory->setYInclude(0, 0);
    node->gpuMemory->setYInclude(0, 0);
    node->noGpus = new QLabel;
    node->noGpus->setWordWrap(true);
    node->noGpus->setAlignment(Qt::AlignCenter);
    node->noGpus->setEnabled(false);
    auto *grid = new QGridLayout(node->page);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->addWidget(node->cpu, 0, 0);
    grid->addWidget(node->memory, 0, 1);
    grid->addWidget(node->gpu, 1, 0);
    grid->addWidget(node->gpuMemory, 1, 1);
    grid->addWidget(node->noGpus, 2, 0, 1, 2);
    node->gpu->hide();
    node->gpuMemory->hide();
    m_pages->addWidget(node->page);

    const int row = m_model->addAgent({});
    Node &n = *node;
    m_nodes.push_back(std::move(node));
    if (n.config.enabled)
        startMonitor(n);
    else
        n.status = { core::AgentStatus::Stopped, tr("disabled (not contacted)"), {}, 0 };
    updateRow(n);
    if (!m_table->currentIndex().isValid())
        m_table->selectRow(row);
    updateDetails();
    emitIfReachableChanged();
}

void AgentsView::startMonitor(Node &node)
{
    node.monitor = std::make_unique<core::NodeMonitor>(node.config.endpoint());
    node.monitor->setSampleInterval(m_sampleIntervalMs);
    node.monitor->setBackoff(m_backoffInitialMs, m_backoffMaxMs);
    Node *n = &node;
    connect(node.monitor.get(), &core::NodeMonitor::statusChanged, this,
        [this, n](const core::AgentStatus &s) { onStatus(n, s); });
    connect(node.monitor.get(), &core::NodeMonitor::inventoryChanged, this,
        [this, n](const v1::DescribeResponse &inventory) { onInventory(n, inventory); });
    connect(node.monitor.get(), &core::NodeMonitor::samplesArrived, this, [this, n] { onSamples(n); });
    node.status = { core::AgentStatus::Connecting, tr("connecting…"), {}, 0 };
    node.monitor->start();
}

void AgentsView::removeNode(const QString &name)
{
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
        if (m_nodes[i]->config.name != name)
            continue;
        std::unique_ptr<Node> node = std::move(m_nodes[i]);
        m_nodes.erase(m_nodes.begin() + std::ptrdiff_t(i));
        if (node->monitor) {
            node->monitor->disconnect(this); // nothing more from it reaches a dead Node
            node->monitor->stop();
        }
        m_model->removeAgent(int(i));
        m_pages->removeWidget(node->page);
        node->page->deleteLater();
        break;
    }
    updateDetails();
    updateActions();
    emitIfReachableChanged();
}

void AgentsView::onStatus(Node *node, const core::AgentStatus &status)
{
    node->status = status;
    if (!status.ok())
        node->last.reset(); // no stale bars for a node we cannot see
    updateRow(*node);
    if (selected() == node)
        updateDetails();
    emitIfReachableChanged();
}

void AgentsView::onInventory(Node *node, const v1::DescribeResponse &inventory)
{
    node->inventory = inventory;
    if (inventory.gpus_size() == 0)
        node->noGpus->setText(AgentsModel::noGpuSentence(inventory.gpu_status()));
    ensureGpuSeries(*node, inventory.gpus_size());
    updateRow(*node);
    if (selected() == node)
        updateDetails();
    Q_EMIT inventoryChanged(node->config.name, inventory);
}

void AgentsView::ensureGpuSeries(Node &node, int gpuCount)
{
    for (int g = node.gpuSeries; g < gpuCount; ++g) {
        QString label = tr("GPU %1").arg(g);
        if (node.inventory && g < node.inventory->gpus_size())
            label += QStringLiteral(" ") + QString::fromStdString(node.inventory->gpus(g).name());
        const QColor color = MetricChart::cycleColor(g);
        node.gpu->addSeries(QStringLiteral("gpu%1").arg(g), label, { color });
        node.gpuMemory->addSeries(QStringLiteral("gpu%1").arg(g), label, { color });
    }
    node.gpuSeries = qMax(node.gpuSeries, gpuCount);
    node.gpu->setVisible(node.gpuSeries > 0);
    node.gpuMemory->setVisible(node.gpuSeries > 0);
    node.noGpus->setVisible(node.gpuSeries == 0);
}

void AgentsView::onSamples(Node *node)
{
    const auto batch = node->monitor ? node->monitor->takeSamples() : std::vector<core::TimedNodeSample> {};
    if (batch.empty())
        return;
    for (const auto &t : batch) {
        const auto &s = t.sample;
        const double x = double(t.receivedMs - m_originMs) / 1000.0;
        node->cpu->append(QStringLiteral("cpu"), MetricPoint::at(XAxis::WallClock, x, s.cpu_percent()));
        node->cpu->append(
            QStringLiteral("ranks"), MetricPoint::at(XAxis::WallClock, x, AgentsModel::ranksCpuPercent(s)));
        node->memory->append(QStringLiteral("ranks"),
            MetricPoint::at(
                XAxis::WallClock, x, double(AgentsModel::ranksMemoryBytes(s)) / AgentsModel::kBytesPerGiB));
        node->memory->append(QStringLiteral("used"),
            MetricPoint::at(XAxis::WallClock, x, double(s.memory_used_bytes()) / AgentsModel::kBytesPerGiB));
        node->memory->append(QStringLiteral("total"),
            MetricPoint::at(XAxis::WallClock, x, double(s.memory_total_bytes()) / AgentsModel::kBytesPerGiB));
        if (s.gpus_size() > node->gpuSeries)
            ensureGpuSeries(*node, s.gpus_size());
        // Where runs started and ended, on every chart of the node.
        for (const QString &mark : AgentsModel::runMarks(&node->liveRuns, s))
            for (MetricChart *chart : { node->cpu, node->memory, node->gpu, node->gpuMemory })
                chart->addVerticalMarker(
                    QStringLiteral("runs"), MetricPoint::at(XAxis::WallClock, x, 0), mark);
        for (const auto &g : s.gpus()) {
            const QString id = QStringLiteral("gpu%1").arg(g.index());
            if (!node->gpu->hasSeries(id))
                continue;
            node->gpu->append(id, MetricPoint::at(XAxis::WallClock, x, g.utilization_percent()));
            node->gpuMemory->append(id,
                MetricPoint::at(
                    XAxis::WallClock, x, double(g.memory_used_bytes()) / AgentsModel::kBytesPerGiB));
        }
    }
    node->samples += qint64(batch.size());
    node->last = batch.back().sample;
    updateRow(*node);
    if (selected() == node)
        updateDetails();
}

void AgentsView::updateRow(const Node &node)
{
    for (std::size_t i = 0; i < m_nodes.size(); ++i)
        if (m_nodes[i].get() == &node) {
            m_model->setAgent(int(i), node.row());
            return;
        }
}

void AgentsView::updateDetails()
{
    const Node *n = selected();
    if (!n) {
        m_details->setText(m_nodes.empty()
                ? tr("No agents yet. <b>Add…</b> one running on another computer, or <b>Start local "
                     "agent</b> to use this one.")
                : tr("Select an agent."));
        m_pages->setCurrentWidget(m_noSelection);
        return;
    }
    m_pages->setCurrentWidget(n->page);
    m_details->setText(AgentsModel::detailsHtml(n->row(), palette()));
}

void AgentsView::updateActions()
{
    const Node *n = selected();
    const bool saved = n && n->origin.isEmpty();
    m_edit->setEnabled(saved);
    m_remove->setEnabled(saved);
    const QString why = n && !saved
        ? tr("%1 is not in the saved list: it belongs to this session").arg(n->label())
        : QString();
    m_edit->setToolTip(why.isEmpty() ? tr("Change the selected agent's address, token or TLS files") : why);
    m_remove->setToolTip(why.isEmpty() ? tr("Forget the selected agent (its runs keep going)") : why);
    m_startLocal->setEnabled(!m_local);
}

void AgentsView::emitIfReachableChanged()
{
    const auto reachable = reachableAgents();
    QStringList key;
    for (const auto &a : reachable)
        key << a.name + QLatin1Char('|') + a.address + QLatin1Char('|') + a.token + QLatin1Char('|')
                + a.tls.caFile + QLatin1Char('|') + a.tls.certFile + QLatin1Char('|') + a.tls.keyFile
                + QLatin1Char('|') + a.tls.serverName;
    const QString joined = key.join(QLatin1Char('\n'));
    if (joined == m_reachableKey)
        return;
    m_reachableKey = joined;
    Q_EMIT agentsChanged(reachable);
}

QList<core::AgentEndpoint> AgentsView::reachableAgents() const
{
    QList<core::AgentEndpoint> out;
    for (const auto &n : m_nodes)
        if (n->status.ok())
            out << n->config.endpoint();
    return out;
}

void AgentsView::select(const QString &name)
{
    for (std::size_t i = 0; i < m_nodes.size(); ++i)
        if (m_nodes[i]->config.name == name)
            m_table->selectRow(int(i));
}

QStringList AgentsView::agentNames() const
{
    QStringList names;
    for (const auto &n : m_nodes)
        names << n->config.name;
    return names;
}

core::AgentStatus AgentsView::status(const QString &name) const
{
    const Node *n = find(name);
    return n ? n->status : core::AgentStatus {};
}

QString AgentsView::stateText(const QString &name) const
{
    for (std::size_t i = 0; i < m_nodes.size(); ++i)
        if (m_nodes[i]->config.name == name)
            return m_model->text(int(i), StateColumn);
    return {};
}

QString AgentsView::inventoryText(const QString &name) const
{
    for (std::size_t i = 0; i < m_nodes.size(); ++i)
        if (m_nodes[i]->config.name == name) {
            QStringList cells;
            for (int c : { HostColumn, GpuColumn, DataColumn, SlotsColumn })
                cells << m_model->text(int(i), c);
            return cells.join(QStringLiteral(" | "));
        }
    return {};
}

qint64 AgentsView::samplesReceived(const QString &name) const
{
    const Node *n = find(name);
    return n ? n->samples : 0;
}

bool AgentsView::isWatching(const QString &name) const
{
    const Node *n = find(name);
    return n && n->monitor && n->monitor->running();
}

int AgentsView::activeMonitors() const
{
    int count = 0;
    for (const auto &n : m_nodes)
        count += n->monitor && n->monitor->running() ? 1 : 0;
    return count;
}

MetricChart *AgentsView::cpuChart(const QString &name) const
{
    const Node *n = find(name);
    return n ? n->cpu : nullptr;
}

MetricChart *AgentsView::memoryChart(const QString &name) const
{
    const Node *n = find(name);
    return n ? n->memory : nullptr;
}

MetricChart *AgentsView::gpuChart(const QString &name) const
{
    const Node *n = find(name);
    return n ? n->gpu : nullptr;
}

MetricChart *AgentsView::gpuMemoryChart(const QString &name) const
{
    const Node *n = find(name);
    return n ? n->gpuMemory : nullptr;
}

} // namespace scalelab::app
