// Checkpoints leaving and entering an agent (ReadCheckpoint / WriteCheckpoint).
// A run's checkpoints live in runs/<run_id>/checkpoints/ — the folder the worker is
// given as --checkpoint-dir — laid out as common/checkpoint_layout.h says.
//
// CheckpointSource opens one committed checkpoint and hands it out in chunks, hashing
// as it goes. CheckpointSink validates an incoming one (names, sizes, order, sums),
// writes it into a temporary folder beside the run's checkpoints and, on commit(),
// renames it into place; until then nothing the worker looks at changes, and a sink
// destroyed without commit() leaves nothing behind. Neither is thread-safe; one per call.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "sha256.h"

#include <grpcpp/support/status.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace scalelab::agent {

// Data per CheckpointChunk, and the limits a received manifest must keep.
constexpr std::int64_t kCheckpointChunkBytes = 1 << 20;
constexpr int kCheckpointMaxFiles = 32;
constexpr std::int64_t kCheckpointMaxFileBytes = std::int64_t(16) << 30;

// runs/<run_id>/checkpoints for the run folder runs/<run_id>; its layout is
// checkpoint_layout.h's.
std::filesystem::path checkpointsOf(const std::filesystem::path &runFolder);

class CheckpointSource {
public:
    // Opens checkpoint `epoch` (0 = the newest with a MANIFEST) under `checkpoints`.
    // NOT_FOUND when there is none; the files are held open, so the trainer pruning
    // the folder meanwhile does not tear the transfer.
    grpc::Status open(const std::filesystem::path &checkpoints, const std::string &runId, int epoch);
    const v1::CheckpointManifest &manifest() const { return m_manifest; }
    std::filesystem::path folder() const { return m_folder; }
    // Fills the next chunk (the first one carries the manifest). Returns false at the
    // end, or with `status` set to DATA_LOSS when a file does not match its sum.
    bool next(v1::CheckpointChunk *chunk, grpc::Status *status);

private:
    v1::CheckpointManifest m_manifest;
    std::filesystem::path m_folder;
    std::vector<std::unique_ptr<std::ifstream>> m_files;
    std::size_t m_file = 0;
    std::int64_t m_offset = 0;
    common::Sha256 m_sha;
    bool m_sentManifest = false;
};

class CheckpointSink {
public:
    explicit CheckpointSink(std::filesystem::path checkpoints);
    ~CheckpointSink(); // removes the temporary folder unless committed

    // Checks the manifest (run id and epoch are the caller's to check) and creates
    // the temporary folder.
    grpc::Status begin(const v1::CheckpointManifest &manifest);
    grpc::Status add(const v1::CheckpointChunk &chunk);
    // Every file complete and matching its sum; MANIFEST written; all fsync'ed.
    grpc::Status finish();
    // Renames the verified folder into place (replacing one of the same epoch).
    grpc::Status commit(std::filesystem::path *committed);
    std::int64_t bytes() const { return m_bytes; }

private:
    grpc::Status closeCurrent();

    std::filesystem::path m_checkpoints;
    std::filesystem::path m_temp;
    v1::CheckpointManifest m_manifest;
    std::size_t m_file = 0; // index of the file being written
    std::int64_t m_offset = 0;
    std::int64_t m_bytes = 0;
    int m_fd = -1; // the file being written
    common::Sha256 m_sha;
    bool m_open = false;
    bool m_committed = false;
};

} // namespace scalelab::agent
