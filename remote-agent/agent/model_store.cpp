#include "model_store.h"

#include "agent_support.h"
#include "file_io.h"
#include "safe_name.h"
#include "worker_contract.h"

#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace scalelab::agent {

namespace fs = std::filesystem;

namespace {

bool isHexSum(const std::string &text)
{
    return worker::isModelSha256(std::string(worker::kModelSha256Prefix) + text);
}

std::string hexOf(const std::string &model)
{
    const std::string prefix(worker::kModelSha256Prefix);
    if (model.rfind(prefix, 0) == 0)
        return model.substr(prefix.size());
    return model;
}

} // namespace

ModelStore::ModelStore(fs::path stateDir)
    : m_folder(std::move(stateDir) / "models")
{ }

fs::path ModelStore::fileOf(const std::string &model) const
{
    const std::string hex = hexOf(model);
    return isHexSum(hex) ? m_folder / (hex + ".pt") : fs::path();
}

std::optional<v1::StoredModel> ModelStore::find(const std::string &sha256) const
{
    const std::string hex = hexOf(sha256);
    if (!isHexSum(hex))
        return std::nullopt;
    std::error_code error;
    const auto size = fs::file_size(m_folder / (hex + ".pt"), error);
    if (error)
        return std::nullopt;
    v1::StoredModel model;
    std::ifstream in(m_folder / (hex + ".json"));
    std::stringstream json;
    json << in.rdbuf();
    // The description is best effort (written after the module): the sum and size are facts.
    if (!google::protobuf::util::JsonStringToMessage(json.str(), &model).ok())
        model.Clear();
    model.set_sha256(hex);
    model.set_size(std::int64_t(size));
    return model;
}

std::vector<v1::StoredModel> ModelStore::list() const
{
    std::vector<v1::StoredModel> models;
    std::error_code error;
    for (const auto &entry : fs::directory_iterator(m_folder, error)) {
        const fs::path path = entry.path();
        if (path.extension() == ".pt")
            if (auto model = find(path.stem().string()))
                models.push_back(*model);
    }
    std::sort(models.begin(), models.end(),
        [](const v1::StoredModel &a, const v1::StoredModel &b) { return a.sha256() < b.sha256(); });
    return models;
}

void ModelStore::sweep() const
{
    std::error_code error;
    for (const auto &entry : fs::directory_iterator(m_folder, error))
        if (entry.path().filename().string().rfind(".tmp-", 0) == 0)
            fs::remove(entry.path(), error);
}

ModelSink::ModelSink(const ModelStore &store)
    : m_store(store)
{ }

ModelSink::~ModelSink()
{
    if (m_fd >= 0)
        ::close(m_fd);
    if (!m_committed && !m_temp.empty()) {
        std::error_code error;
        fs::remove(m_temp, error);
    }
}

grpc::Status ModelSink::begin(const v1::ModelChunk &first)
{
    if (!isHexSum(first.sha256()))
        return invalidArgument(
            "sha256 must be the module's SHA-256 in 64 lower-case hexadecimal digits (got '"
            + first.sha256().substr(0, 80) + "')");
    if (first.size() <= 0 || first.size() > worker::kMaxModelFileBytes)
        return invalidArgument("size must be 1 byte up to " + std::to_string(worker::kMaxModelFileBytes >> 20)
            + " MiB, the most a model may have (got " + std::to_string(first.size()) + ")");
    if (!first.name().empty() && !common::isSafeName(first.name()))
        return invalidArgument("name must be a plain file name, [A-Za-z0-9_.-]{1,64} (got '"
            + first.name().substr(0, 80) + "')");
    m_header = first;
    m_header.clear_data();
    std::error_code error;
    fs::create_directories(m_store.folder(), error);
    if (error)
        return { grpc::StatusCode::INTERNAL,
            "cannot create " + m_store.folder().string() + ": " + error.message() };
    static std::atomic<int> counter { 0 };
    m_temp = m_store.folder()
        / (".tmp-" + first.sha256().substr(0, 16) + "-" + std::to_string(::getpid()) + "-"
            + std::to_string(++counter));
    m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (m_fd < 0)
        return { grpc::StatusCode::INTERNAL,
            "cannot write " + m_temp.string() + ": " + std::strerror(errno) };
    return add(first);
}

grpc::Status ModelSink::add(const v1::ModelChunk &chunk)
{
    if (chunk.data().empty())
        return grpc::Status::OK;
    if (chunk.offset() != m_received)
        return invalidArgument("chunks must come in order: offset " + std::to_string(chunk.offset())
            + ", expected " + std::to_string(m_received));
    if (std::int64_t(chunk.data().size()) > kModelChunkBytes)
        return invalidArgument("a chunk may carry at most 1 MiB of data");
    if (m_received + std::int64_t(chunk.data().size()) > m_header.size())
        return invalidArgument(
            "more bytes than the size announced (" + std::to_string(m_header.size()) + ")");
    if (const common::Status written = common::writeAll(m_fd, chunk.data().data(), chunk.data().size());
        !written)
        return { grpc::StatusCode::RESOURCE_EXHAUSTED,
            "cannot write " + m_temp.string() + ": " + written.error() };
    m_sha.update(chunk.data().data(), chunk.data().size());
    m_received += std::int64_t(chunk.data().size());
    return grpc::Status::OK;
}

grpc::Status ModelSink::finish()
{
    if (m_received != m_header.size())
        return invalidArgument("the stream ended after " + std::to_string(m_received) + " of "
            + std::to_string(m_header.size()) + " bytes; nothing was stored");
    if (const std::string sum = m_sha.hexDigest(); sum != m_header.sha256())
        return { grpc::StatusCode::DATA_LOSS,
            "the bytes received have SHA-256 " + sum + ", not " + m_header.sha256()
                + "; nothing was stored" };
    if (::fsync(m_fd) != 0)
        return { grpc::StatusCode::INTERNAL,
            "cannot fsync " + m_temp.string() + ": " + std::strerror(errno) };
    ::close(m_fd);
    m_fd = -1;
    return grpc::Status::OK;
}

grpc::Status ModelSink::commit(v1::StoredModel description)
{
    description.set_sha256(m_header.sha256());
    description.set_size(m_header.size());
    description.set_name(m_header.name());
    std::string json;
    // Fails only for text that is not UTF-8 (the name came in a message, its other fields from
    // the worker's JSON): refused rather than stored without a description.
    if (const auto printed = google::protobuf::util::MessageToJsonString(description, &json); !printed.ok())
        return { grpc::StatusCode::INTERNAL,
            "cannot describe the model as JSON: " + std::string(printed.message()) };
    const fs::path file = m_store.folder() / (m_header.sha256() + ".pt");
    if (const auto written
        = common::replaceFileAtomically(m_store.folder() / (m_header.sha256() + ".json"), json);
        !written)
        return { grpc::StatusCode::INTERNAL, written.error() };
    std::error_code error;
    fs::rename(m_temp, file, error);
    if (error)
        return { grpc::StatusCode::INTERNAL, "cannot store " + file.string() + ": " + error.message() };
    common::syncFolder(m_store.folder());
    m_committed = true;
    return grpc::Status::OK;
}

} // namespace scalelab::agent
