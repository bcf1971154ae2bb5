// The gRPC service of scalelab-agent (proto/scalelab/v1/agent.proto).
// Contract: every handler validates its request and answers INVALID_ARGUMENT,
// NOT_FOUND or FAILED_PRECONDITION with a message that names the field. Nothing a
// client sends can make the agent write outside its state and data folders.
// Thread-safe: gRPC calls handlers from its own thread pool.
#pragma once

#include "dataset_fetcher.h"
#include "process_launcher.h"
#include "dataset_statistics.h"

#include <atomic>
#include "run_supervisor.h"
#include "storage.h"
#include "stream_guard.h"
#include "scalelab/v1/agent.grpc.pb.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

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
};

class AgentService final : public v1::Agent::Service {
public:
    // Reopens the runs recorded under options.stateDir by an earlier agent process.
    explicit AgentService(AgentOptions options);
    ~AgentService() override;

    // Stops every run and waits for its ranks to exit (agent shutdown).
    void shutdown();

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

    // [A-Za-z0-9_.-]{1,64}, not starting with '.': safe as a single path component.
    static bool isSafeName(const std::string &name);

private:
    grpc::Status authorize(grpc::ServerContext *context) const;
    // authorize(), then the request's size limits (request_limits.h): every handler's first step.
    grpc::Status admit(grpc::ServerContext *context, const google::protobuf::Message &request) const;
    std::vector<v1::Dataset> scanDatasets() const;
    std::shared_ptr<RunSupervisor> findRun(const std::string &runId) const;
    void restoreRuns();
    v1::StorageInfo storage() const;
    void releaseFinishedRuns();
    std::vector<RunOnDisk> runsOnDisk() const;
    bool shuttingDown() const;
    // FAILED_PRECONDITION while an attempt of the run is active here. Caller holds m_mutex.
    grpc::Status refuseWhileActive(const std::string &runId, const char *what) const;

    AgentOptions m_options;
    ProcessLauncher m_launcher;
    mutable std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<RunSupervisor>> m_runs; // latest attempt per run
    std::vector<std::shared_ptr<RunSupervisor>> m_unreleased; // started here, threads not yet joined
    bool m_shuttingDown = false;
    std::unique_ptr<DatasetStatisticsCache> m_statistics;
    std::atomic<int> m_lrFinds { 0 }; // range tests running: each takes a worker slot
    std::unique_ptr<StreamLimits> m_streams;
    mutable std::mutex m_storageMutex;
    mutable v1::StorageInfo m_storage; // guarded by m_storageMutex
    mutable std::optional<std::chrono::steady_clock::time_point> m_storageAt;
};

} // namespace scalelab::agent
