#include "checkpoint_copy.h"

#include "agent_grpc.h"
#include "checkpoint_layout.h"
#include "qt_text.h"

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace scalelab::core {

namespace {

constexpr int kTransferTimeoutMs = 10 * 60'000;
constexpr qint64 kCheckpointChunkBytes = 1 << 20; // the agent's limit per chunk (checkpoint_transfer.h)

std::filesystem::path fsPath(const QString &path)
{
    return std::filesystem::path(QFile::encodeName(path).toStdString());
}

void fsyncPath(const QString &path)
{
    const int fd = ::open(QFile::encodeName(path).constData(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

QString folderName(int epoch)
{
    return str(common::checkpoint::folderName(epoch));
}

// Writes MANIFEST last and fsyncs the folder: after this the copy counts as committed.
Status writeManifest(const QString &dir, const v1::CheckpointManifest &manifest)
{
    std::vector<common::checkpoint::Entry> entries;
    for (const auto &f : manifest.files())
        entries.push_back({ f.sha256(), f.name() });
    if (const common::Status written = common::checkpoint::writeManifest(fsPath(dir), entries); !written)
        return Status::failure(Status::Code::Internal,
            QStringLiteral("cannot write %1/MANIFEST: %2")
                .arg(dir, QString::fromLocal8Bit(written.error().c_str())));
    return Status::success();
}

} // namespace

CheckpointTransfer::CheckpointTransfer(AgentClient *client)
    : m_client(client)
{ }

void CheckpointTransfer::setContext(grpc::ClientContext *context)
{
    std::lock_guard lock(m_mutex);
    m_context = context;
    if (context && m_cancelled)
        context->TryCancel();
}

void CheckpointTransfer::cancel()
{
    m_cancelled = true;
    std::lock_guard lock(m_mutex);
    if (m_context)
        m_context->TryCancel();
}

Status CheckpointTransfer::download(
    const QString &runId, int epoch, const QString &root, int keep, CheckpointCopy *copy)
{
    if (Status ready = m_client->setup(); !ready.ok())
        return ready;
    const QString runDir = root + QLatin1Char('/') + runId;
    const QString temp
        = runDir + QStringLiteral("/.tmp-%1-%2").arg(epoch).arg(QCoreApplication::applicationPid());
    QDir(temp).removeRecursively();
    if (!QDir().mkpath(temp))
        return Status::failure(Status::Code::Internal, QStringLiteral("cannot create %1").arg(temp));
    struct Cleanup {
        QString dir;
        ~Cleanup()
        {
            if (!dir.isEmpty())
                QDir(dir).removeRecursively();
        }
    } cleanup { temp };

    grpc::ClientContext context;
    m_client->connection().prepare(&context, kTransferTimeoutMs);
    v1::ReadCheckpointRequest request;
    request.set_run_id(runId.toStdString());
    request.set_epoch(epoch);
    setContext(&context);
    auto reader = m_client->connection().stub->ReadCheckpoint(&context, request);

    v1::CheckpointManifest manifest;
    QString problem; // what was wrong with the stream, once the agent said it was OK
    QFile out;
    QCryptographicHash sha(QCryptographicHash::Sha256);
    int file = -1; // index in manifest of the file being written
    qint64 offset = 0;
    auto closeFile = [&]() -> bool { // checks the file just written against the manifest
        if (file < 0)
            return true;
        const auto &entry = manifest.files(file);
        if (!out.isOpen()) { // empty files get no chunk
            out.setFileName(temp + QLatin1Char('/') + str(entry.name()));
            out.open(QIODevice::WriteOnly | QIODevice::Truncate);
        }
        const bool synced = out.flush() && ::fsync(out.handle()) == 0;
        out.close();
        if (!synced)
            problem = QStringLiteral("cannot write %1: %2").arg(out.fileName(), out.errorString());
        else if (offset != entry.size())
            problem = QStringLiteral("%1 arrived with %2 of its %3 bytes")
                          .arg(str(entry.name()))
                          .arg(offset)
                          .arg(entry.size());
        else if (sha.result().toHex() != QByteArray::fromStdString(entry.sha256()))
            problem = QStringLiteral("%1 does not match its sha256 in the agent's manifest")
                          .arg(str(entry.name()));
        sha.reset();
        offset = 0;
        return problem.isEmpty();
    };

    v1::CheckpointChunk chunk;
    bool first = true;
    while (problem.isEmpty() && reader->Read(&chunk)) {
        if (first) {
            first = false;
            manifest = chunk.manifest();
            if (manifest.files().empty())
                problem = QStringLiteral("the agent sent no manifest");
            for (const auto &f : manifest.files())
                if (!common::checkpoint::isFileName(f.name()))
                    problem = QStringLiteral("the agent's manifest names the file '%1', which is not a plain "
                                             "file name")
                                  .arg(str(f.name()));
        } else if (chunk.has_manifest()) {
            problem = QStringLiteral("the agent sent a second manifest");
        }
        if (!problem.isEmpty() || chunk.file().empty())
            continue;
        // Files come in manifest order, each in consecutive chunks.
        if (file < 0 || chunk.file() != manifest.files(file).name()) {
            if (!closeFile())
                continue;
            // Empty files get no chunk: the ones skipped must be empty.
            for (++file; file < manifest.files_size() && manifest.files(file).name() != chunk.file(); ++file)
                if (manifest.files(file).size() != 0 || !closeFile())
                    break;
            if (!problem.isEmpty())
                continue;
            if (file >= manifest.files_size() || manifest.files(file).name() != chunk.file()) {
                problem = QStringLiteral("the agent sent '%1' out of manifest order").arg(str(chunk.file()));
                continue;
            }
            out.setFileName(temp + QLatin1Char('/') + str(chunk.file()));
            if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
                problem = QStringLiteral("cannot create %1: %2").arg(out.fileName(), out.errorString());
                continue;
            }
        }
        if (chunk.offset() != offset) {
            problem = QStringLiteral("the agent sent %1 out of order").arg(str(chunk.file()));
            continue;
        }
        const QByteArray data = QByteArray::fromRawData(chunk.data().data(), qsizetype(chunk.data().size()));
        if (out.write(data) != data.size()) {
            problem = QStringLiteral("cannot write %1: %2").arg(out.fileName(), out.errorString());
            continue;
        }
        sha.addData(data);
        offset += data.size();
        copy->bytes += data.size();
    }
    if (!problem.isEmpty())
        context.TryCancel();
    const grpc::Status status = reader->Finish();
    setContext(nullptr);
    if (problem.isEmpty() && !status.ok())
        return statusFromGrpc(status, m_client->endpoint());
    if (problem.isEmpty() && first)
        problem = QStringLiteral("the agent sent nothing");
    // The files after the last one that had data, and that one itself.
    while (problem.isEmpty() && file < manifest.files_size()) {
        if (!closeFile())
            break;
        ++file;
    }
    if (!problem.isEmpty())
        return Status::failure(Status::Code::DataLoss,
            QStringLiteral("checkpoint of %1 from agent %2 refused: %3")
                .arg(runId, m_client->endpoint(), problem));
    if (Status written = writeManifest(temp, manifest); !written)
        return written;

    const QString final = runDir + QLatin1Char('/') + folderName(manifest.epoch());
    QDir(final).removeRecursively(); // a copy of the same epoch is replaced
    if (!QDir().rename(temp, final))
        return Status::failure(
            Status::Code::Internal, QStringLiteral("cannot rename %1 to %2").arg(temp, final));
    cleanup.dir.clear();
    fsyncPath(runDir);
    if (keep > 0)
        common::checkpoint::prune(fsPath(runDir), std::size_t(keep));
    copy->epoch = manifest.epoch();
    copy->dir = final;
    return Status::success();
}

Status CheckpointTransfer::verifyCopy(const QString &dir, v1::CheckpointManifest *manifest)
{
    const auto epoch = common::checkpoint::epochOf(QFileInfo(dir).fileName().toStdString());
    if (!epoch)
        return Status::failure(QStringLiteral("%1 is not a checkpoint folder (epoch-NNNN)").arg(dir));
    std::vector<common::checkpoint::Entry> entries;
    std::vector<std::uint64_t> sizes;
    if (const common::Status verified = common::checkpoint::verify(fsPath(dir), &entries, &sizes); !verified)
        return Status::failure(
            QStringLiteral("the checkpoint copy in %1 cannot be used: %2").arg(dir, str(verified.error())));
    manifest->Clear();
    manifest->set_epoch(*epoch);
    for (std::size_t i = 0; i < entries.size(); ++i) {
        auto *entry = manifest->add_files();
        entry->set_name(entries[i].name);
        entry->set_sha256(entries[i].sha256);
        entry->set_size(qint64(sizes[i]));
    }
    return Status::success();
}

Status CheckpointTransfer::upload(
    const QString &runId, const QString &dir, v1::WriteCheckpointResponse *response)
{
    if (Status ready = m_client->setup(); !ready.ok())
        return ready;
    v1::CheckpointManifest manifest;
    if (const Status verified = verifyCopy(dir, &manifest); !verified)
        return Status::failure(Status::Code::FailedPrecondition, verified.error());
    manifest.set_run_id(runId.toStdString());

    grpc::ClientContext context;
    m_client->connection().prepare(&context, kTransferTimeoutMs);
    setContext(&context);
    auto writer = m_client->connection().stub->WriteCheckpoint(&context, response);
    v1::CheckpointChunk chunk;
    *chunk.mutable_manifest() = manifest;
    bool open = writer->Write(chunk);
    for (int i = 0; open && i < manifest.files_size(); ++i) {
        QFile f(dir + QLatin1Char('/') + str(manifest.files(i).name()));
        if (!f.open(QIODevice::ReadOnly)) {
            context.TryCancel();
            break;
        }
        qint64 offset = 0;
        while (open && !f.atEnd()) {
            const QByteArray data = f.read(kCheckpointChunkBytes);
            if (data.isEmpty())
                break;
            chunk.Clear();
            chunk.set_file(manifest.files(i).name());
            chunk.set_offset(offset);
            chunk.set_data(data.constData(), std::size_t(data.size()));
            offset += data.size();
            open = writer->Write(chunk);
        }
    }
    if (open)
        writer->WritesDone();
    const grpc::Status status = writer->Finish();
    setContext(nullptr);
    return statusFromGrpc(status, m_client->endpoint());
}

} // namespace scalelab::core
