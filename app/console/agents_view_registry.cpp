// The Agents tab's changes to the saved list (STATE/agents.json): each is saved at once, and
// the view's nodes follow it.
#include "agents_view.h"
#include "agents_view_node.h"

#include "agent_dialog.h"

#include <QMessageBox>

#include <algorithm>

namespace scalelab::app {

core::Status AgentsView::saveRegistry()
{
    if (!m_registryOpen)
        return core::Status::failure(tr("the console has no state folder: agents cannot be remembered"));
    return m_registry.save();
}

core::Status AgentsView::addAgent(const core::AgentConfig &agent)
{
    if (const Node *other = find(agent.name); other && !other->origin.isEmpty())
        return core::Status::failure(
            tr("the name '%1' is taken by %2: pick another name").arg(agent.name, other->label()));
    if (core::Status added = m_registry.add(agent); !added)
        return added;
    if (core::Status saved = saveRegistry(); !saved) {
        m_registry.remove(agent.name);
        return saved;
    }
    addNode(agent, QString());
    select(agent.name);
    return core::Status::success();
}

int AgentsView::addAddresses(const QStringList &addresses, const core::AgentConfig &shared, QStringList *log)
{
    int added = 0;
    for (const QString &address : addresses) {
        if (std::any_of(m_nodes.begin(), m_nodes.end(),
                [&](const auto &n) { return n->config.address == address || n->config.name == address; })) {
            *log << tr("agent %1 is already in the Agents tab").arg(address);
            continue;
        }
        core::AgentConfig agent = shared;
        agent.name = address;
        agent.address = address;
        if (const core::Status done = addAgent(agent)) {
            *log << tr("added agent %1 to the Agents tab").arg(address);
            ++added;
        } else {
            *log << tr("error: cannot add agent %1: %2").arg(address, done.error());
        }
    }
    return added;
}

core::Status AgentsView::editAgent(const QString &name, const core::AgentConfig &agent)
{
    const int index = m_registry.indexOf(name);
    if (index < 0)
        return core::Status::failure(tr("no saved agent named '%1'").arg(name));
    if (const Node *other = find(agent.name); other && other->config.name != name && !other->origin.isEmpty())
        return core::Status::failure(
            tr("the name '%1' is taken by %2: pick another name").arg(agent.name, other->label()));
    const core::AgentConfig before = m_registry.agents().at(index);
    if (core::Status replaced = m_registry.replace(index, agent); !replaced)
        return replaced;
    if (core::Status saved = saveRegistry(); !saved) {
        (void)m_registry.replace(index, before); // it was in the list: it validates
        return saved;
    }
    if (before == agent)
        return core::Status::success();
    // A changed agent is a new connection: drop the old stream and its charts.
    removeNode(name);
    addNode(agent, QString());
    select(agent.name);
    return core::Status::success();
}

core::Status AgentsView::removeAgent(const QString &name)
{
    if (!m_registry.remove(name))
        return core::Status::failure(tr("no saved agent named '%1'").arg(name));
    if (core::Status saved = saveRegistry(); !saved)
        return saved;
    removeNode(name);
    return core::Status::success();
}

void AgentsView::addFromDialog()
{
    runDialog(QString());
}

void AgentsView::editFromDialog()
{
    if (const Node *n = selected(); n && n->origin.isEmpty())
        runDialog(n->config.name);
}

void AgentsView::runDialog(const QString &editing)
{
    const int index = editing.isEmpty() ? -1 : m_registry.indexOf(editing);
    AgentDialog dialog(
        &m_registry, index, index < 0 ? core::AgentConfig {} : m_registry.agents().at(index), this);
    while (dialog.exec() == QDialog::Accepted) {
        if (dialog.isList()) {
            QStringList log;
            const int added = addAddresses(dialog.addresses(), dialog.config(), &log);
            QMessageBox::information(this, tr("Agents added"),
                tr("%1 of %2 agents in %3 added:\n%4")
                    .arg(added)
                    .arg(dialog.addresses().size())
                    .arg(dialog.config().address, log.join(QLatin1Char('\n'))));
            return;
        }
        const core::Status done = index < 0 ? addAgent(dialog.config()) : editAgent(editing, dialog.config());
        if (done)
            return;
        QMessageBox::warning(this, index < 0 ? tr("Agent not added") : tr("Agent not changed"), done.error());
    }
}

void AgentsView::removeSelected()
{
    const Node *n = selected();
    if (!n || !n->origin.isEmpty())
        return;
    const QString name = n->config.name;
    if (QMessageBox::question(this, tr("Remove agent"),
            tr("Forget agent %1 (%2)? Runs on it keep going; the console stops watching it.")
                .arg(name, n->config.address))
        != QMessageBox::Yes)
        return;
    if (const core::Status removed = removeAgent(name); !removed)
        QMessageBox::warning(this, tr("Agent not removed"), removed.error());
}

} // namespace scalelab::app
