// Starts a scalelab-agent on 127.0.0.1 with a fresh token, for a console or CLI that
// has no agent configured. The agent is our child: it dies with us (PR_SET_PDEATHSIG),
// and the destructor stops it (SIGTERM, which stops its workers, then SIGKILL).
// Threads: a QObject with a QProcess; use it from the thread that created it.
#pragma once

#include "core_status.h"

#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace scalelab::core {

struct LocalAgentOptions {
    QString agentBinary; // empty = findAgentBinary()
    QString dataDir; // empty = the agent's default
    QString stateDir; // empty = the agent's default
    QString logFile; // agent log; empty = <stateDir or temp>/local-agent.log
    QString listen = QStringLiteral("127.0.0.1");
    QStringList extraArguments; // passed to the agent as they are (tests, TLS files)
    bool withToken = true; // false: no token (loopback only)
    QString token; // with withToken: this token instead of a fresh random one
};

class LocalAgent : public QObject {
    Q_OBJECT
public:
    explicit LocalAgent(QObject *parent = nullptr);
    ~LocalAgent() override;

    // Starts the agent and waits (up to `timeoutMs`) until it listens, or says why it
    // did not (with the tail of its log).
    Status start(const LocalAgentOptions &options, int timeoutMs = 20'000);
    void stop();

    QString endpoint() const { return m_endpoint; }
    QString token() const { return m_token; }
    QString logFile() const { return m_logFile; }
    // The agent's process id while it runs, else 0.
    qint64 processId() const { return m_process.processId(); }
    // The agent refused its configuration (exit code 2): bad input, not a crash.
    bool refusedConfiguration() const { return m_refused; }

    // $SCALELAB_AGENT_BIN, else scalelab-agent next to this program, else on PATH.
    static QString findAgentBinary();

private:
    QProcess m_process;
    QString m_endpoint;
    QString m_token;
    QString m_logFile;
    bool m_refused = false;
};

} // namespace scalelab::core
