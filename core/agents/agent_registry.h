// The agents a console knows: name, address, token and TLS files of each, kept in one
// JSON file in the console's state folder (STATE/agents.json).
//
// The file holds tokens, so it is owner-only (0600): save() tightens an existing file
// before opening it and sets 0600 on the new file before a byte is written (QSaveFile:
// written aside, then renamed over, so a crash never leaves half a list); load() tightens
// a file found readable by others and says so in warnings().
//
// Validation speaks to a person: problems() returns what is wrong with an agent, by
// field, in words that say what to write instead. Plain value type; no threads, no
// network, Qt Core only.
#pragma once

#include "agent_client.h"
#include "agent_endpoint.h"
#include "core_status.h"

#include <QList>
#include <QString>
#include <QStringList>

namespace scalelab::core {

struct AgentConfig {
    QString name; // unique; how studies and the journal name the agent
    QString address; // HOST:PORT
    QString token; // empty: the agent takes calls without one (loopback only)
    AgentTls tls; // no CA file: plaintext (or SCALELAB_TLS_* when set)
    bool enabled = true; // disabled agents are kept but not contacted

    AgentEndpoint endpoint() const { return { name, address, token, tls }; }
    bool operator==(const AgentConfig &other) const;
};

// One problem with one field ("name", "address", "token", "tls.ca", "tls.cert",
// "tls.key"), in words.
struct AgentProblem {
    QString field;
    QString message;
};

class AgentRegistry {
public:
    // `path` is the JSON file (see defaultPath()); nothing is read until load().
    explicit AgentRegistry(QString path = {});

    static QString defaultPath(const QString &stateDir); // STATE/agents.json
    QString path() const { return m_path; }

    // Reads the file; a missing file is an empty list. Fails (bad JSON, unreadable)
    // leaving the list empty. Entries that do not validate are kept (so the user can fix
    // them) and named in warnings().
    Status load();
    // Writes the list atomically with mode 0600.
    Status save() const;
    // What load() noticed and fixed or kept: permissions tightened, invalid entries.
    QStringList warnings() const { return m_warnings; }

    const QList<AgentConfig> &agents() const { return m_agents; }
    int indexOf(const QString &name) const;

    // Everything wrong with `agent`; `replacing` is the index it would replace (-1 when
    // added), so its own old name is not a duplicate.
    QList<AgentProblem> problems(const AgentConfig &agent, int replacing = -1) const;
    // Without the registry: what is wrong with the agent on its own.
    static QList<AgentProblem> problemsOf(const AgentConfig &agent);
    static Status checkAddress(const QString &address); // ok when HOST:PORT

    // Change the list (in memory: save() to keep it). Fails with the problems joined
    // when the agent does not validate.
    Status add(const AgentConfig &agent);
    Status replace(int index, const AgentConfig &agent);
    bool remove(const QString &name);

private:
    QString m_path;
    QList<AgentConfig> m_agents;
    QStringList m_warnings;
};

} // namespace scalelab::core
