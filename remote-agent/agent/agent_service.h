// The gRPC service of scalelab-agent (proto/scalelab/v1/agent.proto).
// Contract: every handler validates its request and answers INVALID_ARGUMENT,
// NOT_FOUND or FAILED_PRECONDITION with a message that names the field. Nothing a
// client sends can make the agent write outside its state and data folders.
// The handlers check requests and answer; what they answer from lives in its own parts:
// the runs in run_table.h, the node in node_inventory.h, the disk in storage.h, a worker's
// pipes in worker_pump.h (a run's ranks in run_supervisor.h, the range test in
// lr_find_session.h), the token check in bearer_token.h.
// Thread-safe: gRPC calls handlers from its own thread pool.
#pragma once

#include "agent_metrics.h"
#include "dataset_fetcher.h"
#include "model_store.h"
#include "node_inventory.h"
#include "process_launcher.h"
#include "run_table.h"
#include "safe_name.h"
#include "scalelab/v1/agent.grpc.pb.h"
#include "storage.h"
#include "stream_guard.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

namespace scalelab::agent {

struct AgentOptions {
    std::filesystem::path dataDir;
    std::filesystem::path stateDir;
    std::string workerBinary;
    std::string token; // empty = no authentication (loopback only)
    // Numeric address other hosts' ranks reach this node's ranks at (see advertise.h):
    // rank 0's store listens there, and every rank's Gloo/NCCL sockets use it.
    std::string advertiseHost = "127.0.0.1";
    std::string advertiseInterface; // that holds it ("" = unknown)
    std::string advertiseHow; // how it was chosen, in words
    std::string networkWarning; // why runs spanning hosts cannot work from here, or ""
    std::chrono::milliseconds heartbeat { 2000 };
    std::chrono::milliseconds sampleInterval { 1000 }; // WatchNode default
    std::chrono::milliseconds stopGrace { 5000 }; // StopRun default
    FetchSource cifarSource;
    RetentionPolicy retention; // what finished runs keep on disk (storage.h)
    // Server streams (stream_guard.h): at most this many at once, this many from one
    // client host, and one whose client takes no data for streamStall is cancelled.
    int maxStreams = 256;
    int maxStreamsPerClient = 64;
    std::chrono::milliseconds streamStall { 30'000 };
    // Finished runs kept in memory, the most recently used; the others are read back from
    // disk when asked for, so memory does not grow with the runs an agent has finished.
    std::size_t finishedRunsInMemory = 32;
};

struct StartPlacement; // agent_service_start.cpp

class AgentService final : public v1::Agent::Service {
public:
    // Reopens the runs recorded under options.stateDir by an earlier agent process.
    explicit AgentService(AgentOptions options);
    ~AgentService() override;

    // Stops every run and waits for its ranks to exit (agent shutdown).
    void shutdown();

    // The node and the active runs now, for the metrics (agent_metrics.h): every field but
    // the version and the start time. Any thread.
    AgentSnapshot metricsSnapshot();

    grpc::Status Describe(
        grpc::ServerContext *, const v1::DescribeRequest *, v1::DescribeResponse *) override;
    grpc::Status StartWorkers(
        grpc::ServerContext *, const v1::StartWorkersRequest *, v1::StartWorkersResponse *) override;
    grpc::Status WatchRun(
        grpc::ServerContext *, const v1::WatchRunRequest *, grpc::ServerWriter<v1::RunEvent> *) override;
    grpc::Status StopRun(grpc::ServerContext *, const v1::StopRunRequest *, v1::StopRunResponse *) override;
    grpc::Status ListRuns(
        grpc::ServerContext *, const v1::ListRunsRequest *, v1::ListRunsResponse *) override;
    grpc::Status CreateSyntheticDataset(
        grpc::ServerContext *, const v1::CreateSyntheticDatasetRequest *, v1::Dataset *) override;
    grpc::Status WatchNode(
        grpc::ServerContext *, const v1::WatchNodeRequest *, grpc::ServerWriter<v1::NodeSample> *) override;
    grpc::Status FetchDataset(grpc::ServerContext *, const v1::FetchDatasetRequest *,
        grpc::ServerWriter<v1::FetchProgress> *) override;
    grpc::Status ReadCheckpoint(grpc::ServerContext *, const v1::ReadCheckpointRequest *,
        grpc::ServerWriter<v1::CheckpointChunk> *) override;
    grpc::Status WriteCheckpoint(grpc::ServerContext *, grpc::ServerReader<v1::CheckpointChunk> *,
        v1::WriteCheckpointResponse *) override;
    grpc::Status FindLearningRate(grpc::ServerContext *, const v1::FindLearningRateRequest *,
        grpc::ServerWriter<v1::LrFindProgress> *) override;
    grpc::Status CollectGarbage(
        grpc::ServerContext *, const v1::CollectGarbageRequest *, v1::CollectGarbageResponse *) override;
    // agent_service_models.cpp
    grpc::Status PutModel(
        grpc::ServerContext *, grpc::ServerReader<v1::ModelChunk> *, v1::PutModelResponse *) override;

private:
    grpc::Status authorize(grpc::ServerContext *context) const; // bearer_token.h
    // authorize(), then the request's size limits (request_limits.h): every handler's first step.
    grpc::Status admit(grpc::ServerContext *context, const google::protobuf::Message &request) const;
    // FAILED_PRECONDITION while an attempt of the run is active here. Caller holds m_runs.lock().
    grpc::Status refuseWhileActive(const std::string &runId, const char *what) const;
    // Points `launch` at the stored modules its spec names (model, initial_weights:
    // "sha256:HEX"); FAILED_PRECONDITION, saying how to send it, when one is not stored.
    grpc::Status resolveModels(RunLaunch *launch) const;
    // scalelab-worker check-model on a received module: its cost, or INVALID_ARGUMENT in the
    // worker's words.
    grpc::Status checkModel(const std::filesystem::path &file, v1::StoredModel *cost);
    // agent_service_start.cpp: what this node gives a StartWorkers request (GPUs, the
    // rendezvous, the data set), or why it cannot serve it.
    grpc::Status placeOnThisNode(const v1::StartWorkersRequest &request, StartPlacement *placement) const;
    // The launch of a new attempt, its modules resolved. Caller holds m_runs.lock().
    grpc::Status makeLaunch(
        const v1::StartWorkersRequest &request, const StartPlacement &placement, RunLaunch *launch) const;

    static constexpr int kDefaultRunsPerPage = 100;
    static constexpr int kMaxRunsPerPage = 1000;
    AgentOptions m_options;
    ProcessLauncher m_launcher; // outlives the runs, which are destroyed first
    RunTable m_runs; // the runs known here: in memory, or read back from disk when asked for
    NodeInventory m_inventory; // what Describe says about this node, data sets included
    ModelStore m_models; // TorchScript modules sent with PutModel
    StorageGauge m_storage; // the state folder's use, measured at most once a second
    std::atomic<int> m_lrFinds { 0 }; // range tests running: each takes a worker slot
    std::shared_ptr<AgentCounters> m_counters = std::make_shared<AgentCounters>(); // given to each run
    std::unique_ptr<StreamLimits> m_streams;
};

} // namespace scalelab::agent
