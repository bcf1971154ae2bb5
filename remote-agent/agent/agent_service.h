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
#include "run_records.h"
#include "run_supervisor.h"
#include "safe_name.h"
#include "storage.h"
#include "stream_guard.h"
#include "scalelab/v1/agent.grpc.pb.h"

#include <deque>
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
    // Finished runs kept in memory, the most recently used; the others are read back from
    // disk when asked for, so memory does not grow with the runs an agent has finished.
    std::size_t finishedRunsInMemory = 32;
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

private:
    grpc::Status authorize(grpc::ServerContext *context) const;
    // authorize(), then the request's size limits (request_limits.h): every handler's first step.
    grpc::Status admit(grpc::ServerContext *context, const google::protobuf::Message &request) const;
    std::vector<v1::Dataset> scanDatasets() const;
    // The run's latest attempt: from memory, or read back from its records on disk.
    std::shared_ptr<RunSupervisor> findRun(const std::string &runId);
    std::shared_ptr<RunSupervisor> findRunLocked(const std::string &runId); // m_mutex held
    // The run's RunInfo without keeping it in memory: outcome.json, or its records.
    std::optional<v1::RunInfo> recordedInfo(const std::string &runId);
    // `runId` has just finished or been read back: it is now the newest of the finished
    // runs kept in memory, and the oldest beyond options.finishedRunsInMemory leaves. m_mutex held.
    void keepRecentLocked(const std::string &runId);
    // An attempt refused before its records were written: removed from the table and the disk.
    void forgetUnrecorded(const std::shared_ptr<RunSupervisor> &run);
    void restoreRuns();
    v1::StorageInfo storage() const;
    void releaseFinishedRuns();
    std::vector<RunOnDisk> runsOnDisk();
    bool shuttingDown() const;
    // FAILED_PRECONDITION while an attempt of the run is active here. Caller holds m_mutex.
    grpc::Status refuseWhileActive(const std::string &runId, const char *what) const;

    AgentOptions m_options;
    ProcessLauncher m_launcher;
    mutable std::mutex m_mutex;
    // The runs in memory, latest attempt of each: every active run, and the finished ones
    // used last (at most options.finishedRunsInMemory, oldest first in m_recentFinished).
    // Every other run is only on disk, read back when asked for, so memory does not grow
    // with the number of runs an agent has finished.
    static constexpr int kDefaultRunsPerPage = 100;
    static constexpr int kMaxRunsPerPage = 1000;
    std::map<std::string, std::shared_ptr<RunSupervisor>> m_runs;
    std::deque<std::string> m_recentFinished;
    std::int64_t m_recordedRuns = 0; // run folders under the state folder
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
