// The agent's disk: what its state folder holds, how much room is left, and the rules
// that free it. Runs live in <state>/runs/<run_id>/: attempt folders with their records
// (request.json, placement.json, events.log) and checkpoints/ shared by the attempts,
// holding committed epoch-NNNN folders and, after a crash, unfinished .tmp-* ones.
//
// Retention: a worker keeps the newest K committed checkpoints of its run (RunSpec
// keep_checkpoints). Once a run has SUCCEEDED, the agent's rule applies: keep its final
// checkpoint (the default), keep none, and optionally only for N days (not when its
// attempt ends, for a run paused by stop_after_epochs: the next attempt resumes). A FAILED or
// CANCELLED run keeps its checkpoints, since `study retry` resumes from them, until a
// CollectGarbage that asks for it. Records are never removed here.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "status.h"

#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace scalelab::agent {

struct RetentionPolicy {
    enum class Finished { All, Final, None };
    // A SUCCEEDED run keeps: what its worker kept (the newest keep_checkpoints), only its
    // newest (final) checkpoint, or none.
    Finished finished = Finished::Final;
    double finishedDays = 0; // > 0: ... but only for this many days after it ended
    std::string words() const;
};

// Reads the agent flags `--finished-checkpoints all|final|none` and `--finished-days N`.
common::Result<RetentionPolicy> parseRetention(const std::string &finished, double days);

// A run the agent knows, as garbage collection needs to see it.
struct RunOnDisk {
    std::string runId;
    v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
    std::int64_t endedUnixMs = 0;
    bool active = false; // an attempt is starting or running: never touched
    // It SUCCEEDED before its schedule's end (RunSpec.stop_after_epochs: a tune's trial at a
    // rung): its newest checkpoint is what its next attempt resumes from, never collected.
    bool paused = false;
};

v1::StorageInfo measureStorage(const std::filesystem::path &stateDir, const RetentionPolicy &policy);

// measureStorage, kept for a second: walking every run's folder on each Describe (every
// 2 s per console) is wasteful, so the sizes are a second old at most, while free space is
// asked for every time. Thread-safe.
class StorageGauge {
public:
    StorageGauge(std::filesystem::path stateDir, RetentionPolicy policy);
    v1::StorageInfo read();
    void invalidate(); // the next read() measures again (folders were removed)

private:
    const std::filesystem::path m_stateDir;
    const RetentionPolicy m_policy;
    std::mutex m_mutex;
    v1::StorageInfo m_storage; // guarded by m_mutex
    std::optional<std::chrono::steady_clock::time_point> m_measuredAt;
};

using Removal = v1::CollectGarbageResponse::Removed;

// The .tmp-* folders under the checkpoints/ of `runs` that are not active: what a killed
// worker or an interrupted transfer left. Removes them unless dryRun.
std::vector<Removal> sweepTemporary(
    const std::filesystem::path &stateDir, const std::vector<RunOnDisk> &runs, bool dryRun = false);

// What `request` (its empty fields filled from `policy`) frees among `runs`' committed
// checkpoints; removes it unless request.dry_run(). Temporary folders are swept too.
std::vector<Removal> collectGarbage(const std::filesystem::path &stateDir, const std::vector<RunOnDisk> &runs,
    const v1::CollectGarbageRequest &request, const RetentionPolicy &policy, std::int64_t nowUnixMs);

} // namespace scalelab::agent
