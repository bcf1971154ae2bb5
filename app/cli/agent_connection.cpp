#include "agent_connection.h"

#include "cli_common.h"

#include <google/protobuf/util/json_util.h>

namespace scalelab::app {

using core::AgentClient;
using core::LocalAgent;
using core::LocalAgentOptions;
using core::Status;

QString protoJson(const google::protobuf::Message &message)
{
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    google::protobuf::util::MessageToJsonString(message, &json, options);
    return QString::fromStdString(json);
}

void addOneAgentOptions(QCommandLineParser &parser)
{
    parser.addOption({ QStringLiteral("agent"),
        QStringLiteral("Agent address HOST:PORT. Without it a local agent is started "
                       "on 127.0.0.1 and stopped at the end."),
        QStringLiteral("host:port") });
    parser.addOption({ QStringLiteral("token-file"),
        QStringLiteral("File with the agent's token (or set SCALELAB_TOKEN)."), QStringLiteral("path") });
    parser.addOption({ QStringLiteral("data-dir"),
        QStringLiteral("Data folder for the local agent (ignored with --agent)."), QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("state-dir"),
        QStringLiteral(
            "State folder: the journal (journal.sqlite) where `run` records its run, and the local "
            "agent's state (default: the journal in $SCALELAB_STATE_DIR or ~/.local/share/scalelab, "
            "the local agent's state where the agent keeps it)."),
        QStringLiteral("dir") });
}

int connectAgent(const QCommandLineParser &parser, AgentConnection *connection)
{
    QString endpoint = parser.value(QStringLiteral("agent"));
    QString token;
    if (const int rc = readToken(parser, &token); rc != Ok)
        return rc;
    if (endpoint.isEmpty()) {
        connection->local = std::make_unique<LocalAgent>();
        LocalAgentOptions options;
        options.dataDir = parser.value(QStringLiteral("data-dir"));
        options.stateDir = parser.value(QStringLiteral("state-dir"));
        if (const Status started = connection->local->start(options); !started) {
            err() << "scalelab-cli: " << started.error() << "\n";
            return connection->local->refusedConfiguration() ? BadInput : AgentError;
        }
        endpoint = connection->local->endpoint();
        token = connection->local->token();
        err() << "started a local agent at " << endpoint << " (log: " << connection->local->logFile()
              << ")\n";
        err().flush();
    } else if (const QString problem = AgentClient::checkEndpoint(endpoint).error(); !problem.isEmpty()) {
        return badInput(problem);
    }
    connection->client = std::make_unique<AgentClient>(endpoint, token);
    return Ok;
}

} // namespace scalelab::app
