// One agent as the runner, the node monitors and the console's agent list reach it.
#pragma once

#include "agent_client.h"

#include <QString>

namespace scalelab::core {

struct AgentEndpoint {
    QString name; // how the journal names it; the address unless told otherwise
    QString address; // HOST:PORT
    QString token;
    AgentTls tls = {}; // no CA file: SCALELAB_TLS_* from the environment, as before
};

} // namespace scalelab::core
