// TorchScript modules an agent holds, by content (PutModel; RunSpec.model "sha256:HEX").
// Under the state folder:
//
//   models/HEX.pt     the module, exactly as sent (its SHA-256 is HEX)
//   models/HEX.json   what the worker measured when it checked it (StoredModel as JSON)
//   models/.tmp-*     a module being received; swept at start
//
// ModelStore answers what is stored; ModelSink receives one module: it checks the first
// message (a sum, a size within worker::kMaxModelFileBytes, a safe name), writes the bytes
// in order into a temporary file, verifies size and sum, and commit() renames it into place
// (fsync'ed) with its description. A sink destroyed without commit() leaves nothing.
// ModelStore is safe from any thread (the file system is the state; a rename is atomic);
// a sink belongs to one call.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "sha256.h"

#include <grpcpp/support/status.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace scalelab::agent {

constexpr std::int64_t kModelChunkBytes = 1 << 20;

class ModelStore {
public:
    explicit ModelStore(std::filesystem::path stateDir);

    std::filesystem::path folder() const { return m_folder; }
    // models/HEX.pt for "sha256:HEX" or "HEX"; empty when `model` names no sum.
    std::filesystem::path fileOf(const std::string &model) const;
    // The stored module with that sum (its description), or nullopt.
    std::optional<v1::StoredModel> find(const std::string &sha256) const;
    std::vector<v1::StoredModel> list() const;
    // Removes what an interrupted PutModel left (models/.tmp-*); at start.
    void sweep() const;

private:
    std::filesystem::path m_folder;
};

class ModelSink {
public:
    explicit ModelSink(const ModelStore &store);
    ~ModelSink(); // removes the temporary file unless committed
    ModelSink(const ModelSink &) = delete;
    ModelSink &operator=(const ModelSink &) = delete;

    // Checks the first message's sha256, size and name, and opens the temporary file.
    grpc::Status begin(const v1::ModelChunk &first);
    grpc::Status add(const v1::ModelChunk &chunk);
    // Every byte there, the sum matching, fsync'ed.
    grpc::Status finish();
    std::filesystem::path temporaryFile() const { return m_temp; }
    // Renames the verified module into place, with `description` (sha256, size and name
    // are filled in here) beside it.
    grpc::Status commit(v1::StoredModel description);
    const v1::ModelChunk &header() const { return m_header; }

private:
    const ModelStore &m_store;
    v1::ModelChunk m_header; // the first message, without data
    std::filesystem::path m_temp;
    int m_fd = -1;
    std::int64_t m_received = 0;
    common::Sha256 m_sha;
    bool m_committed = false;
};

} // namespace scalelab::agent
