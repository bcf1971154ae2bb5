// A connection to one scalelab-agent. Blocking calls, each with a deadline; safe to
// use from several threads (gRPC stubs are). Errors come back as CallResult with a
// message a person can act on ("cannot reach the agent at ...: is it running?").
#pragma once

#include "scalelab/v1/agent.grpc.pb.h"

#include <QString>

#include <memory>

namespace scalelab::core {

struct CallResult {
    int code = 0; // grpc::StatusCode; 0 = OK
    QString message; // empty when ok
    bool ok() const { return code == 0; }
    bool unreachable() const; // UNAVAILABLE or DEADLINE_EXCEEDED
    static CallResult fromStatus(const grpc::Status &status, const QString &endpoint);
};

class AgentClient {
public:
    // `endpoint` is HOST:PORT. Check endpointError() before use.
    AgentClient(const QString &endpoint, const QString &token);

    // Empty when `endpoint` is a usable HOST:PORT, else what is wrong with it.
    static QString endpointError(const QString &endpoint);

    QString endpoint() const { return m_endpoint; }

    CallResult describe(v1::DescribeResponse *response, int timeoutMs = 5000);
    CallResult startWorkers(const v1::StartWorkersRequest &request, v1::StartWorkersResponse *response);
    CallResult stopRun(const QString &runId, v1::StopRunResponse *response);
    CallResult listRuns(v1::ListRunsResponse *response);
    CallResult createSyntheticDataset(
        const v1::CreateSyntheticDatasetRequest &request, v1::Dataset *response);
    // grpc.health.v1 Check: SERVING or an error.
    CallResult checkHealth(int timeoutMs = 3000);

    // For RunWatch: a context carrying the token (no deadline: streams are long).
    void prepareStreamContext(grpc::ClientContext *context) const;
    v1::Agent::Stub &stub() { return *m_stub; }

private:
    void prepare(grpc::ClientContext *context, int timeoutMs) const;

    QString m_endpoint;
    std::string m_token;
    std::shared_ptr<grpc::Channel> m_channel;
    std::unique_ptr<v1::Agent::Stub> m_stub;
};

} // namespace scalelab::core
