#include "agents_model.h"

#include "theme.h"

#include <QColor>

#include <algorithm>
#include <cmath>

namespace scalelab::app {

QString AgentsModel::gib(qint64 bytes)
{
    return QString::number(double(bytes) / kBytesPerGiB, 'f', bytes >= 100 * kBytesPerGiB ? 0 : 1);
}

double AgentsModel::ranksCpuPercent(const v1::NodeSample &sample)
{
    double cores = 0; // ProcessSample.cpu_percent is of one core
    for (const auto &p : sample.processes())
        cores += p.cpu_percent() / 100.0;
    return 100.0 * cores / std::max(1, sample.cpu_cores());
}

QString AgentsModel::noGpuSentence(const std::string &gpuStatus)
{
    const QString status = QString::fromStdString(gpuStatus);
    if (status.isEmpty())
        return tr("No GPUs on this node: runs here train on its CPUs.");
    if (status.contains(QLatin1String("libnvidia-ml.so.1")) && status.contains(QLatin1String("not found")))
        return tr("No GPUs on this node: it has no NVIDIA driver (libnvidia-ml.so.1 is not installed), so "
                  "runs here train on its CPUs.");
    QString why = status;
    if (why.startsWith(QLatin1String("no GPU: ")))
        why = why.mid(8);
    return tr("No GPUs on this node (%1): runs here train on its CPUs.").arg(why);
}

qint64 AgentsModel::ranksMemoryBytes(const v1::NodeSample &sample)
{
    qint64 bytes = 0;
    for (const auto &p : sample.processes())
        bytes += p.rss_bytes();
    return bytes;
}

// Colours that read on light and dark backgrounds alike.
QColor AgentsModel::stateColor(core::AgentStatus::State state, const QPalette &palette)
{
    const bool dark = isDarkPalette(palette);
    switch (state) {
    case core::AgentStatus::Connected:
        return dark ? QColor(0x81, 0xc7, 0x84) : QColor(0x2e, 0x7d, 0x32);
    case core::AgentStatus::Connecting:
        return dark ? QColor(0xff, 0xd5, 0x4f) : QColor(0x8d, 0x6e, 0x00);
    case core::AgentStatus::Stopped:
        return palette.color(QPalette::Disabled, QPalette::Text);
    default:
        return dark ? QColor(0xff, 0x8a, 0x80) : QColor(0xc6, 0x28, 0x28);
    }
}

AgentsModel::AgentsModel(QObject *parent)
    : QAbstractTableModel(parent)
{ }

int AgentsModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_agents.size());
}

int AgentsModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant AgentsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case NameColumn:
        return tr("Agent");
    case StateColumn:
        return tr("Connection");
    case HostColumn:
        return tr("Node");
    case CpuColumn:
        return tr("CPU");
    case MemoryColumn:
        return tr("Memory");
    case GpuColumn:
        return tr("GPUs");
    case DataColumn:
        return tr("Data sets");
    case SlotsColumn:
        return tr("Free slots");
    default:
        return {};
    }
}

QVariant AgentsModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    switch (role) {
    case Qt::DisplayRole:
        return text(index.row(), index.column());
    case Qt::ToolTipRole:
        return tooltip(index.row(), index.column());
    case Qt::ForegroundRole:
        if (index.column() == StateColumn)
            return stateColor(agent(index.row()).status.state, m_palette);
        return {};
    case GaugeRole:
        return gauges(index.row(), index.column());
    default:
        return {};
    }
}

QString AgentsModel::text(int row, int column) const
{
    const Agent &a = agent(row);
    const auto *inv = a.inventory ? &*a.inventory : nullptr;
    const auto *s = a.last ? &*a.last : nullptr;
    switch (column) {
    case NameColumn:
        return a.label;
    case StateColumn: {
        QString words = a.status.words;
        if (a.status.retryInMs > 0)
            words += tr(" — retrying in %1 s").arg((a.status.retryInMs + 999) / 1000);
        return words;
    }
    case HostColumn:
        return inv ? tr("%1 · %2 cores · %3 GiB")
                         .arg(QString::fromStdString(inv->hostname()))
                         .arg(inv->cpu_cores())
                         .arg(gib(inv->memory_bytes()))
                   : QString();
    case CpuColumn:
        if (!s)
            return {};
        if (s->processes_size() == 0)
            return QStringLiteral("%1%").arg(s->cpu_percent(), 0, 'f', 0);
        return tr("%1% · ranks %2%").arg(s->cpu_percent(), 0, 'f', 0).arg(ranksCpuPercent(*s), 0, 'f', 0);
    case MemoryColumn:
        return s ? tr("%1/%2 GiB").arg(gib(s->memory_used_bytes()), gib(s->memory_total_bytes())) : QString();
    case GpuColumn: {
        if (s && s->gpus_size() > 0) {
            double util = 0;
            qint64 used = 0, total = 0;
            for (const auto &g : s->gpus()) {
                util += g.utilization_percent();
                used += g.memory_used_bytes();
                total += g.memory_total_bytes();
            }
            return tr("%1% · %2/%3 GiB").arg(util / s->gpus_size(), 0, 'f', 0).arg(gib(used), gib(total));
        }
        if (inv)
            return inv->gpus_size() == 0 ? tr("none") : tr("%1 GPU(s)").arg(inv->gpus_size());
        return {};
    }
    case DataColumn: {
        if (!inv)
            return {};
        QStringList datasets;
        for (const auto &d : inv->datasets())
            datasets << QString::fromStdString(d.name()) + (d.synthetic() ? tr(" (synthetic)") : QString());
        return datasets.isEmpty() ? tr("none") : datasets.join(QStringLiteral(", "));
    }
    case SlotsColumn:
        return inv ? QString::number(inv->free_slots()) : QString();
    default:
        return {};
    }
}

QString AgentsModel::tooltip(int row, int column) const
{
    const Agent &a = agent(row);
    switch (column) {
    case NameColumn:
        return tr("%1 at %2%3").arg(a.label, a.address, a.tls ? tr(", TLS") : QString());
    case StateColumn:
        return a.status.advice.isEmpty() ? text(row, column)
                                         : text(row, column) + QLatin1Char('\n') + a.status.advice;
    case CpuColumn:
        if (a.last && a.last->processes_size() > 0) {
            QStringList tips { tr("The whole node: %1% of %2 cores; ScaleLab's ranks: %3%")
                                   .arg(a.last->cpu_percent(), 0, 'f', 0)
                                   .arg(a.last->cpu_cores())
                                   .arg(ranksCpuPercent(*a.last), 0, 'f', 0) };
            for (const auto &p : a.last->processes())
                tips << tr("%1 attempt %2, rank %3 (pid %4): %5% of a core, %6 GiB")
                            .arg(QString::fromStdString(p.run_id()))
                            .arg(p.attempt())
                            .arg(p.rank())
                            .arg(p.pid())
                            .arg(p.cpu_percent(), 0, 'f', 0)
                            .arg(gib(p.rss_bytes()));
            return tips.join(QLatin1Char('\n'));
        }
        return text(row, column);
    case GpuColumn:
        if (a.last && a.last->gpus_size() > 0) {
            QStringList tips;
            for (const auto &g : a.last->gpus()) {
                QString name = tr("GPU %1").arg(g.index());
                if (a.inventory && g.index() < a.inventory->gpus_size())
                    name += QStringLiteral(" ") + QString::fromStdString(a.inventory->gpus(g.index()).name());
                tips << tr("%1: %2% busy, %3/%4 GiB")
                            .arg(name)
                            .arg(g.utilization_percent(), 0, 'f', 0)
                            .arg(gib(g.memory_used_bytes()), gib(g.memory_total_bytes()));
            }
            return tips.join(QLatin1Char('\n'));
        }
        return text(row, column);
    default:
        return text(row, column);
    }
}

QVariantList AgentsModel::gauges(int row, int column) const
{
    const auto &s = agent(row).last;
    if (!s)
        return {};
    switch (column) {
    case CpuColumn:
        return { s->cpu_percent() / 100.0 };
    case MemoryColumn:
        return { s->memory_total_bytes() > 0
                ? double(s->memory_used_bytes()) / double(s->memory_total_bytes())
                : 0.0 };
    case GpuColumn: {
        QVariantList bars;
        for (const auto &g : s->gpus())
            bars << g.utilization_percent() / 100.0;
        return bars;
    }
    default:
        return {};
    }
}

int AgentsModel::addAgent(const Agent &agent)
{
    const int row = rowCount();
    beginInsertRows({}, row, row);
    m_agents.push_back(agent);
    endInsertRows();
    return row;
}

void AgentsModel::removeAgent(int row)
{
    if (row < 0 || row >= rowCount())
        return;
    beginRemoveRows({}, row, row);
    m_agents.erase(m_agents.begin() + row);
    endRemoveRows();
}

void AgentsModel::setAgent(int row, const Agent &agent)
{
    m_agents.at(std::size_t(row)) = agent;
    rowChanged(row);
}

void AgentsModel::setPalette(const QPalette &palette)
{
    m_palette = palette;
    if (rowCount() > 0)
        Q_EMIT dataChanged(index(0, StateColumn), index(rowCount() - 1, StateColumn), { Qt::ForegroundRole });
}

void AgentsModel::rowChanged(int row)
{
    Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

QStringList AgentsModel::runMarks(QSet<QString> *live, const v1::NodeSample &sample)
{
    QSet<QString> now;
    for (const auto &p : sample.processes())
        now.insert(QStringLiteral("%1#%2").arg(QString::fromStdString(p.run_id())).arg(p.attempt()));
    const auto name = [](const QString &key) {
        const QString runId = key.section(QLatin1Char('#'), 0, 0);
        const int attempt = key.section(QLatin1Char('#'), 1).toInt();
        const QString shortName = runId.section(QLatin1Char('-'), -1);
        return attempt > 1 ? QStringLiteral("%1 #%2").arg(shortName).arg(attempt) : shortName;
    };
    QStringList marks;
    QStringList started(now.begin(), now.end()), ended(live->begin(), live->end());
    started.sort();
    ended.sort();
    for (const QString &key : ended)
        if (!now.contains(key))
            marks << QStringLiteral("%1 \u25A0").arg(name(key)); // ■
    for (const QString &key : started)
        if (!live->contains(key))
            marks << QStringLiteral("%1 \u25B6").arg(name(key)); // ▶
    *live = now;
    return marks;
}

QString AgentsModel::detailsHtml(const Agent &agent, const QPalette &palette)
{
    QString html
        = QStringLiteral("<b>%1</b><br>%2%3<br><span style='color:%4'>%5</span>")
              .arg(agent.label.toHtmlEscaped(), agent.address.toHtmlEscaped(),
                  agent.tls ? tr(" · TLS") : tr(" · no TLS"), stateColor(agent.status.state, palette).name(),
                  agent.status.words.toHtmlEscaped());
    if (agent.status.retryInMs > 0)
        html += tr(" (retrying in %1 s)").arg((agent.status.retryInMs + 999) / 1000);
    if (!agent.status.advice.isEmpty())
        html += QStringLiteral("<br>") + agent.status.advice.toHtmlEscaped();
    if (const auto *inv = agent.inventory ? &*agent.inventory : nullptr) {
        html += tr("<p><b>%1</b>, agent %2<br>%3 CPU cores, %4 GiB memory<br>%5 free slot(s), %6 run(s) "
                   "known</p>")
                    .arg(QString::fromStdString(inv->hostname()).toHtmlEscaped(),
                        QString::fromStdString(inv->agent_version()).toHtmlEscaped())
                    .arg(inv->cpu_cores())
                    .arg(gib(inv->memory_bytes()))
                    .arg(inv->free_slots())
                    .arg(inv->runs_recorded());
        if (!inv->advertise_address().empty())
            html += tr("<p><b>Network</b><br>ranks reached at %1%2<br><small>%3</small>%4</p>")
                        .arg(QString::fromStdString(inv->advertise_address()).toHtmlEscaped(),
                            inv->network_interface().empty()
                                ? QString()
                                : tr(" on %1").arg(
                                    QString::fromStdString(inv->network_interface()).toHtmlEscaped()),
                            QString::fromStdString(inv->network_note()).toHtmlEscaped(),
                            inv->network_warning().empty()
                                ? QString()
                                : QStringLiteral("<br><span style=\"color:%1\">%2</span>")
                                      .arg(stateColor(core::AgentStatus::Connecting, palette).name(),
                                          QString::fromStdString(inv->network_warning()).toHtmlEscaped()));
        html += tr("<p><b>GPUs</b><br>");
        if (inv->gpus_size() == 0) // why is said once, under the charts
            html += tr("none");
        for (const auto &g : inv->gpus())
            html += tr("%1: %2, %3 GiB<br>")
                        .arg(g.index())
                        .arg(QString::fromStdString(g.name()).toHtmlEscaped(), gib(g.memory_bytes()));
        html += tr("</p><p><b>Data sets</b> in %1<br>")
                    .arg(QString::fromStdString(inv->data_dir()).toHtmlEscaped());
        if (inv->datasets_size() == 0)
            html += tr("none yet");
        for (const auto &d : inv->datasets())
            html += tr("%1: %2 train / %3 test images%4<br>")
                        .arg(QString::fromStdString(d.name()).toHtmlEscaped())
                        .arg(d.train_images())
                        .arg(d.test_images())
                        .arg(d.synthetic() ? tr(" (SYNTHETIC)") : QString());
        html += QStringLiteral("</p>");
    }
    if (const auto *s = agent.last ? &*agent.last : nullptr) {
        html += tr("<p><b>Now</b><br>CPU %1%, memory %2 of %3 GiB<br>")
                    .arg(s->cpu_percent(), 0, 'f', 1)
                    .arg(gib(s->memory_used_bytes()), gib(s->memory_total_bytes()));
        html += s->processes_size() == 0 ? tr("no ScaleLab rank running")
                                         : tr("ScaleLab's %1 rank(s): CPU %2%, memory %3 GiB")
                                               .arg(s->processes_size())
                                               .arg(ranksCpuPercent(*s), 0, 'f', 1)
                                               .arg(gib(ranksMemoryBytes(*s)));
        for (const auto &g : s->gpus())
            html += tr("<br>GPU %1: %2% busy, %3 of %4 GiB")
                        .arg(g.index())
                        .arg(g.utilization_percent(), 0, 'f', 0)
                        .arg(gib(g.memory_used_bytes()), gib(g.memory_total_bytes()));
        html += QStringLiteral("</p>");
    }
    return html;
}

} // namespace scalelab::app
