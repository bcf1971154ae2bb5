// A connection to one scalelab-agent. Blocking calls, each with a deadline; safe to
// use from several threads (gRPC stubs are). Errors come back as a Status (core_status.h)
// with a message a person can act on ("cannot reach the agent at ...: is it running?")
// and the kind of failure in its code(): isUnreachable() when the agent could not be
// reached or did not answer in time, isInvalidArgument() when it refused the request, ...
// gRPC stays behind this header: calls made elsewhere in core/agents (streams, checkpoint
// transfers) use the client's Connection through the private agent_grpc.h.
// TLS: with AgentTls::caFile set the channel is TLS, verified against that CA, and
// with certFile/keyFile it presents a client certificate (mutual TLS). The two-argument
// constructor takes them from SCALELAB_TLS_CA, SCALELAB_TLS_CERT, SCALELAB_TLS_KEY and
// SCALELAB_TLS_SERVER_NAME, so every tool built on it can reach a TLS agent.
#pragma once

#include "core_status.h"
#include "scalelab/v1/agent.pb.h"

#include <QString>

#include <functional>
#include <memory>
#include <vector>

namespace scalelab::core {

struct AgentTls {
    QString caFile; // PEM CA that signed the agent's certificate; empty = plaintext
    QString certFile; // PEM client certificate for mutual TLS (optional)
    QString keyFile; // its private key
    QString serverName; // name to check in the agent's certificate; empty = the host
    bool enabled() const { return !caFile.isEmpty(); }
    static AgentTls fromEnvironment();
    // These settings when TLS is on here (a CA file), else fromEnvironment(): a per-agent
    // setting wins and SCALELAB_TLS_* stays the default for agents without one.
    AgentTls orEnvironment() const { return enabled() ? *this : fromEnvironment(); }
    bool operator==(const AgentTls &) const = default;
    // The SCALELAB_TLS_* variables, a line each ("  NAME  meaning"), for --help texts.
    static QString environmentHelp();
};

class AgentClient {
public:
    // `endpoint` is HOST:PORT. Check checkEndpoint() before use. TLS settings come
    // from the environment (see above).
    AgentClient(const QString &endpoint, const QString &token);
    AgentClient(const QString &endpoint, const QString &token, const AgentTls &tls);
    ~AgentClient();

    // Success, or why the TLS files could not be used (FailedPrecondition); every call
    // then fails with it.
    Status setup() const;

    // Whether `endpoint` is a usable HOST:PORT, and if not what is wrong with it.
    static Status checkEndpoint(const QString &endpoint);

    QString endpoint() const { return m_endpoint; }

    Status describe(v1::DescribeResponse *response, int timeoutMs = 5000);
    Status startWorkers(const v1::StartWorkersRequest &request, v1::StartWorkersResponse *response);
    Status stopRun(const QString &runId, v1::StopRunResponse *response);
    Status collectGarbage(const v1::CollectGarbageRequest &request, v1::CollectGarbageResponse *response);
    // One page of the agent's runs (ListRunsRequest says how pages work) ...
    Status listRuns(const v1::ListRunsRequest &request, v1::ListRunsResponse *response);
    // ... or every page, appended to `runs` in run id order.
    Status listAllRuns(QList<v1::RunInfo> *runs);
    Status createSyntheticDataset(const v1::CreateSyntheticDatasetRequest &request, v1::Dataset *response);
    // grpc.health.v1 Check: SERVING or an error.
    Status checkHealth(int timeoutMs = 3000);

    // Utilization samples every `intervalMs` (0 = the agent's default), handed to
    // `onSample` until it returns false (then the result is OK) or the stream fails.
    Status watchNode(int intervalMs, const std::function<bool(const v1::NodeSample &)> &onSample);
    // Has the agent download, check and unpack CIFAR-10 ("cifar-10"); progress goes to
    // `onProgress`. On success `dataset` describes what is now on the agent.
    Status fetchDataset(const QString &name, const std::function<void(const v1::FetchProgress &)> &onProgress,
        v1::Dataset *dataset, int timeoutMs = 3'600'000);

    // The learning-rate range test: each batch of points goes to `onPoints` (return false
    // to cancel, which stops the worker), the outcome to `result`.
    Status findLearningRate(const v1::FindLearningRateRequest &request,
        const std::function<bool(const v1::LrFindProgress &)> &onPoints, v1::LrFindResult *result,
        int timeoutMs = 3'600'000);

    // The gRPC side (channel, stub, call contexts), for calls made beside the ones above
    // (core/agents' watches and transfers, tests): complete in agent_grpc.h only.
    struct Connection;
    Connection &connection() const { return *m_connection; }

private:
    QString m_endpoint;
    AgentTls m_tls;
    QString m_setupError;
    std::unique_ptr<Connection> m_connection;
};

// What one agent answered to Describe, or why it did not.
struct DescribeAnswer {
    Status status;
    v1::DescribeResponse response;
};

// One Describe to each client at once, each on a thread of its own, and back when all have
// answered or reached `timeoutMs`: agents that do not answer cost one deadline together,
// not one each. A null client's answer is NotFound. (AgentClient's calls may run on
// several threads at once, so the caller's other threads may go on using the clients.)
[[nodiscard]] std::vector<DescribeAnswer> describeEach(
    const std::vector<AgentClient *> &clients, int timeoutMs);

// The version of the gRPC library this program runs with, for its software list.
QString grpcVersion();

} // namespace scalelab::core
