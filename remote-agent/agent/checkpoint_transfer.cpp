#include "checkpoint_transfer.h"

#include "agent_support.h"
#include "checkpoint_layout.h"
#include "file_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace scalelab::agent {

namespace {

grpc::Status internal(const std::string &message)
{
    return { grpc::StatusCode::INTERNAL, message };
}

std::string sizeMismatch(const std::string &name, std::int64_t got, std::int64_t expected)
{
    return "file '" + name + "' is incomplete: " + std::to_string(got) + " of the " + std::to_string(expected)
        + " bytes its manifest announces arrived";
}

} // namespace

fs::path checkpointsOf(const fs::path &runFolder)
{
    return runFolder / "checkpoints";
}

// ---- CheckpointSource ------------------------------------------------------------

grpc::Status CheckpointSource::open(const fs::path &checkpoints, const std::string &runId, int epoch)
{
    std::vector<int> committed;
    for (const auto &folder : common::checkpoint::folders(checkpoints, true))
        if (folder.epoch > 0)
            committed.push_back(folder.epoch);
    const int chosen = epoch == 0 ? (committed.empty() ? 0 : committed.back())
                                  : (std::count(committed.begin(), committed.end(), epoch) ? epoch : 0);
    if (chosen == 0) {
        std::string have;
        for (int e : committed)
            have += (have.empty() ? "" : ", ") + std::to_string(e);
        return { grpc::StatusCode::NOT_FOUND,
            "run_id '" + runId + "' has no committed checkpoint"
                + (epoch > 0 ? " of epoch " + std::to_string(epoch) : std::string())
                + " on this agent (epochs held here: " + (have.empty() ? "none" : have) + ")" };
    }
    m_folder = checkpoints / common::checkpoint::folderName(chosen);
    m_manifest.set_run_id(runId);
    m_manifest.set_epoch(chosen);
    std::ifstream manifest(m_folder / common::checkpoint::kManifest);
    std::ostringstream text;
    text << manifest.rdbuf();
    // WriteCheckpoint (CheckpointSink::begin) refuses a malformed manifest: never send one.
    const auto entries = common::checkpoint::parseManifest(text.str());
    if (!entries)
        return { grpc::StatusCode::DATA_LOSS,
            "the MANIFEST of " + m_folder.string() + " is damaged: " + entries.error() };
    for (const auto &[sum, name] : *entries) {
        std::error_code ec;
        auto file = std::make_unique<std::ifstream>(m_folder / name, std::ios::binary);
        const auto size = fs::file_size(m_folder / name, ec);
        if (!*file || ec)
            return { grpc::StatusCode::DATA_LOSS,
                "checkpoint file " + (m_folder / name).string() + " is missing" };
        auto *f = m_manifest.add_files();
        f->set_name(name);
        f->set_sha256(sum);
        f->set_size(static_cast<std::int64_t>(size));
        m_files.push_back(std::move(file));
    }
    if (m_files.empty())
        return { grpc::StatusCode::DATA_LOSS, "the MANIFEST of " + m_folder.string() + " lists no files" };
    return grpc::Status::OK;
}

bool CheckpointSource::next(v1::CheckpointChunk *chunk, grpc::Status *status)
{
    chunk->Clear();
    if (!m_sentManifest) {
        *chunk->mutable_manifest() = m_manifest;
        m_sentManifest = true;
        return true;
    }
    std::string buffer(static_cast<std::size_t>(kCheckpointChunkBytes), '\0');
    while (m_file < m_files.size()) {
        const auto &entry = m_manifest.files(static_cast<int>(m_file));
        auto &in = *m_files[m_file];
        const std::int64_t want = std::min(kCheckpointChunkBytes, entry.size() - m_offset);
        std::streamsize got = 0;
        if (want > 0) {
            in.read(buffer.data(), want);
            got = in.gcount();
        }
        if (got > 0) {
            m_sha.update(buffer.data(), static_cast<std::size_t>(got));
            chunk->set_file(entry.name());
            chunk->set_offset(m_offset);
            chunk->set_data(buffer.data(), static_cast<std::size_t>(got));
            m_offset += got;
            return true;
        }
        // The end of this file: all of it, and what the trainer committed?
        const std::string digest = m_sha.hexDigest();
        if (m_offset != entry.size() || digest != entry.sha256()) {
            *status = { grpc::StatusCode::DATA_LOSS,
                "checkpoint file " + (m_folder / entry.name()).string()
                    + " no longer matches its sha256 in MANIFEST (changed on disk); this checkpoint "
                      "cannot be trusted" };
            return false;
        }
        m_sha = common::Sha256();
        m_offset = 0;
        ++m_file;
    }
    *status = grpc::Status::OK;
    return false;
}

// ---- CheckpointSink ----------------------------------------------------------------

CheckpointSink::CheckpointSink(fs::path checkpoints)
    : m_checkpoints(std::move(checkpoints))
{ }

CheckpointSink::~CheckpointSink()
{
    if (m_fd >= 0)
        ::close(m_fd);
    if (!m_committed && !m_temp.empty()) {
        std::error_code ec;
        fs::remove_all(m_temp, ec);
    }
}

grpc::Status CheckpointSink::begin(const v1::CheckpointManifest &manifest)
{
    if (manifest.files().empty() || manifest.files_size() > kCheckpointMaxFiles)
        return invalidArgument("manifest.files must list 1 to " + std::to_string(kCheckpointMaxFiles)
            + " files (got " + std::to_string(manifest.files_size()) + ")");
    std::set<std::string> names;
    for (const auto &f : manifest.files()) {
        if (!common::checkpoint::isFileName(f.name()))
            return invalidArgument("manifest.files has the name '" + f.name()
                + "': a checkpoint file name is 1-64 characters from A-Z a-z 0-9 _ - . , not starting "
                  "with '.', without '/' and not MANIFEST");
        if (!names.insert(f.name()).second)
            return invalidArgument("manifest.files lists '" + f.name() + "' twice");
        if (f.size() < 0 || f.size() > kCheckpointMaxFileBytes)
            return invalidArgument("manifest.files '" + f.name() + "' has size " + std::to_string(f.size())
                + ", outside 0.." + std::to_string(kCheckpointMaxFileBytes));
        if (!common::checkpoint::isSha256(f.sha256()))
            return invalidArgument("manifest.files '" + f.name() + "' has sha256 '" + f.sha256()
                + "': expected 64 lower-case hex digits");
    }
    m_manifest = manifest;
    static std::atomic<int> counter { 0 };
    m_temp = m_checkpoints
        / (".upload-" + common::checkpoint::folderName(manifest.epoch()) + "-" + std::to_string(::getpid())
            + "-" + std::to_string(++counter));
    std::error_code ec;
    fs::create_directories(m_checkpoints, ec);
    fs::remove_all(m_temp, ec);
    if (!fs::create_directory(m_temp, ec) || ec)
        return internal("cannot create " + m_temp.string() + ": " + ec.message());
    return grpc::Status::OK;
}

grpc::Status CheckpointSink::closeCurrent()
{
    const auto &entry = m_manifest.files(static_cast<int>(m_file));
    if (m_fd < 0) { // an empty file gets no chunk
        m_fd = ::open((m_temp / entry.name()).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (m_fd < 0)
            return internal(
                "cannot create " + (m_temp / entry.name()).string() + ": " + std::strerror(errno));
    }
    const bool synced = ::fsync(m_fd) == 0;
    ::close(m_fd);
    m_fd = -1;
    if (!synced)
        return internal(
            "cannot write " + (m_temp / entry.name()).string() + " to disk: " + std::strerror(errno));
    if (m_offset != entry.size())
        return invalidArgument(sizeMismatch(entry.name(), m_offset, entry.size()));
    const std::string digest = m_sha.hexDigest();
    if (digest != entry.sha256())
        return { grpc::StatusCode::DATA_LOSS,
            "file '" + entry.name() + "' does not match its sha256 in the manifest (received " + digest
                + ", manifest says " + entry.sha256()
                + "): the checkpoint was corrupted at its source or on the way; nothing was written" };
    m_sha = common::Sha256();
    m_offset = 0;
    ++m_file;
    return grpc::Status::OK;
}

grpc::Status CheckpointSink::add(const v1::CheckpointChunk &chunk)
{
    if (chunk.file().empty()) {
        if (!chunk.data().empty())
            return invalidArgument("a chunk carries data but no file name");
        return grpc::Status::OK;
    }
    if (static_cast<std::int64_t>(chunk.data().size()) > kCheckpointChunkBytes)
        return invalidArgument("a chunk of '" + chunk.file() + "' carries "
            + std::to_string(chunk.data().size()) + " bytes; at most " + std::to_string(kCheckpointChunkBytes)
            + " per chunk");
    const auto &files = m_manifest.files();
    const auto it
        = std::find_if(files.begin(), files.end(), [&](const auto &f) { return f.name() == chunk.file(); });
    if (it == files.end())
        return invalidArgument("file '" + chunk.file() + "' is not in the manifest");
    const auto index = static_cast<std::size_t>(it - files.begin());
    if (index < m_file)
        return invalidArgument(
            "file '" + chunk.file() + "' arrived again after later files; send files in manifest order");
    while (m_file < index) // the files before it are complete (or empty)
        if (auto s = closeCurrent(); !s.ok())
            return s;
    if (chunk.offset() != m_offset)
        return invalidArgument("a chunk of '" + chunk.file() + "' starts at offset "
            + std::to_string(chunk.offset()) + "; expected " + std::to_string(m_offset)
            + " (chunks of a file are consecutive)");
    if (m_offset + static_cast<std::int64_t>(chunk.data().size()) > it->size())
        return invalidArgument("file '" + chunk.file() + "' is larger than the " + std::to_string(it->size())
            + " bytes its manifest announces");
    if (m_fd < 0) {
        m_fd = ::open((m_temp / chunk.file()).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (m_fd < 0)
            return internal(
                "cannot create " + (m_temp / chunk.file()).string() + ": " + std::strerror(errno));
    }
    const char *data = chunk.data().data();
    std::size_t left = chunk.data().size();
    while (left > 0) {
        const ssize_t n = ::write(m_fd, data, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return internal("cannot write " + (m_temp / chunk.file()).string() + ": " + std::strerror(errno));
        data += n;
        left -= static_cast<std::size_t>(n);
    }
    m_sha.update(chunk.data().data(), chunk.data().size());
    m_offset += static_cast<std::int64_t>(chunk.data().size());
    m_bytes += static_cast<std::int64_t>(chunk.data().size());
    return grpc::Status::OK;
}

grpc::Status CheckpointSink::finish()
{
    while (m_file < static_cast<std::size_t>(m_manifest.files_size()))
        if (auto s = closeCurrent(); !s.ok())
            return s;
    // MANIFEST last: its presence means "committed".
    std::vector<common::checkpoint::Entry> entries;
    for (const auto &f : m_manifest.files())
        entries.push_back({ f.sha256(), f.name() });
    if (const common::Status written = common::checkpoint::writeManifest(m_temp, entries); !written)
        return internal(
            "cannot write " + (m_temp / common::checkpoint::kManifest).string() + ": " + written.error());
    return grpc::Status::OK;
}

grpc::Status CheckpointSink::commit(fs::path *committed)
{
    const fs::path final = m_checkpoints / common::checkpoint::folderName(m_manifest.epoch());
    const fs::path replaced = m_temp.string() + ".replaced";
    std::error_code ec;
    // A folder of the same epoch is moved aside first, so some copy is always there.
    if (fs::exists(final, ec)) {
        fs::rename(final, replaced, ec);
        if (ec)
            return internal("cannot replace " + final.string() + ": " + ec.message());
    }
    fs::rename(m_temp, final, ec);
    if (ec)
        return internal("cannot commit " + final.string() + ": " + ec.message());
    m_committed = true;
    common::syncFolder(m_checkpoints);
    fs::remove_all(replaced, ec);
    *committed = final;
    return grpc::Status::OK;
}

} // namespace scalelab::agent
