// The records a run leaves under <state>/runs/<run_id>/ (storage.h has the whole layout):
// numbered attempt folders, each with request.json (what started it; written last, so an
// attempt folder without one was never started), placement.json, events.log and, once the
// attempt has ended, outcome.json: its final RunInfo. A listing reads that one small file
// per run instead of replaying the run's event log, so the agent can page through any
// number of finished runs without keeping them in memory.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "status.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace scalelab::agent {

// The whole file, or "" when it cannot be read.
std::string readText(const std::filesystem::path &file);

// `message` as JSON, written atomically (common::replaceFileAtomically): a reader sees the old
// file or the new one, never a torn or empty one.
common::Status writeJsonAtomically(
    const google::protobuf::Message &message, const std::filesystem::path &file);

// The attempt numbers recorded under runs/<run_id> (folders named by a number), newest first.
std::vector<int> attemptsOf(const std::filesystem::path &runPath);

// outcome.json of one attempt folder. readOutcome gives nothing when the file is missing,
// unreadable or not a terminal state.
common::Status writeOutcome(const std::filesystem::path &attemptDir, const v1::RunInfo &info);
std::optional<v1::RunInfo> readOutcome(const std::filesystem::path &attemptDir);

// Run ids (folder names that are safe names) under `runsDir` in byte order, at most `max`
// of those that sort after `after`; `total` gets how many there are in all. Memory is
// O(max), whatever the number of runs.
std::vector<std::string> runIdsPage(
    const std::filesystem::path &runsDir, const std::string &after, std::size_t max, std::int64_t *total);

} // namespace scalelab::agent
