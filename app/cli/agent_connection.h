// What scalelab-cli's one-agent commands (run, describe, runs, lr-find, gc) share: the
// --agent option set and the connection it leads to, a given agent or a local one the
// command starts and owns.
#pragma once

#include "agent_client.h"
#include "local_agent.h"

#include <QCommandLineParser>
#include <QString>

#include <google/protobuf/message.h>

#include <memory>

namespace scalelab::app {

// Where the command talks to: a given agent, or a local one it started (stopped with it).
struct AgentConnection {
    std::unique_ptr<core::LocalAgent> local;
    std::unique_ptr<core::AgentClient> client;
};

// --agent HOST:PORT, --token-file, and --data-dir/--state-dir for a local agent.
void addOneAgentOptions(QCommandLineParser &parser);

// Connects as the options say: Ok, BadInput (a malformed address, an unreadable token
// file, a local agent refusing its configuration) or AgentError, said on stderr.
int connectAgent(const QCommandLineParser &parser, AgentConnection *connection);

// A message as JSON on one line, every primitive field printed (zeros included).
QString protoJson(const google::protobuf::Message &message);

} // namespace scalelab::app
