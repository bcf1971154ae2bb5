// A connection to one scalelab-agent. Blocking calls, each with a deadline; safe to
// use from several threads (gRPC stubs are). Errors come back as CallResult with a
// message a person can act on ("cannot reach the agent at ...: is it running?").
// TLS: with AgentTls::caFile set the channel is TLS, verified against that CA, and
// with certFile/keyFile it presents a client certificate (mutual TLS). The two-argument
// constructor takes them from SCALELAB_TLS_CA, SCALELAB_TLS_CERT, SCALELAB_TLS_KEY and
// SCALELAB_TLS_SERVER_NAME, so every tool built on it can reach a TLS agent.
#pragma once

#include "core_status.h"
#include "scalelab/v1/agent.grpc.pb.h"

#include <QString>

#include <functional>
#include <memory>

namespace scalelab::core {

struct AgentTls;

// The result of a remote call: core's Status (core_status.h) with the gRPC code kept, so
// that an unreachable agent can be told from a refusal.
struct [[nodiscard]] CallResult {
    int code = 0; // grpc::StatusCode; 0 = OK
    QString message; // empty when ok
    bool ok() const { return code == 0; }
    bool unreachable() const; // UNAVAILABLE or DEADLINE_EXCEEDED
    // `tls`: how the call was made, so that a failed TLS handshake (or TLS on one side
    // only) is said as such, with what to set; null = not known, a hint on either side.
    // The code stays UNAVAILABLE; gRPC's own words end the message, in parentheses.
    static CallResult fromStatus(
        const grpc::Status &status, const QString &endpoint, const AgentTls *tls = nullptr);
};

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

    // Empty, or why the TLS files could not be used; every call then fails with it.
    QString setupError() const { return m_setupError; }

    // Whether `endpoint` is a usable HOST:PORT, and if not what is wrong with it.
    static Status checkEndpoint(const QString &endpoint);

    QString endpoint() const { return m_endpoint; }

    CallResult describe(v1::DescribeResponse *response, int timeoutMs = 5000);
    CallResult startWorkers(const v1::StartWorkersRequest &request, v1::StartWorkersResponse *response);
    CallResult stopRun(const QString &runId, v1::StopRunResponse *response);
    CallResult collectGarbage(const v1::CollectGarbageRequest &request, v1::CollectGarbageResponse *response);
    // One page of the agent's runs (ListRunsRequest says how pages work) ...
    CallResult listRuns(const v1::ListRunsRequest &request, v1::ListRunsResponse *response);
    // ... or every page, appended to `runs` in run id order.
    CallResult listAllRuns(QList<v1::RunInfo> *runs);
    CallResult createSyntheticDataset(
        const v1::CreateSyntheticDatasetRequest &request, v1::Dataset *response);
    // grpc.health.v1 Check: SERVING or an error.
    CallResult checkHealth(int timeoutMs = 3000);

    // Utilization samples every `intervalMs` (0 = the agent's default), handed to
    // `onSample` until it returns false (then the result is OK) or the stream fails.
    CallResult watchNode(int intervalMs, const std::function<bool(const v1::NodeSample &)> &onSample);
    // Has the agent download, check and unpack CIFAR-10 ("cifar-10"); progress goes to
    // `onProgress`. On success `dataset` describes what is now on the agent.
    CallResult fetchDataset(const QString &name,
        const std::function<void(const v1::FetchProgress &)> &onProgress, v1::Dataset *dataset,
        int timeoutMs = 3'600'000);

    // The learning-rate range test: each batch of points goes to `onPoints` (return false
    // to cancel, which stops the worker), the outcome to `result`.
    CallResult findLearningRate(const v1::FindLearningRateRequest &request,
        const std::function<bool(const v1::LrFindProgress &)> &onPoints, v1::LrFindResult *result,
        int timeoutMs = 3'600'000);

    // For RunWatch: a context carrying the token (no deadline: streams are long).
    void prepareStreamContext(grpc::ClientContext *context) const;
    // For streaming calls made elsewhere (checkpoint transfer): token and deadline.
    void prepare(grpc::ClientContext *context, int timeoutMs) const;
    v1::Agent::Stub &stub() { return *m_stub; }
    // CallResult::fromStatus with this client's TLS settings: for calls made elsewhere.
    CallResult result(const grpc::Status &status) const;
    // Set when the TLS files could not be used: the result every call returns then.
    CallResult setupFailure() const;

private:
    QString m_endpoint;
    AgentTls m_tls;
    QString m_setupError;
    std::string m_token;
    std::shared_ptr<grpc::Channel> m_channel;
    std::unique_ptr<v1::Agent::Stub> m_stub;
};

} // namespace scalelab::core
