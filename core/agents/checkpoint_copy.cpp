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

namespace {

// The files of one ReadCheckpoint stream as they arrive in a temporary folder, each checked
// against the agent's manifest; the first thing wrong ends the stream.
class ReceivedFiles {
public:
    explicit ReceivedFiles(QString dir)
        : m_dir(std::move(dir))
    { }

    // The first chunk holds the manifest; each later one a piece of one file.
    void take(const v1::CheckpointChunk &chunk, qint64 *bytes);
    // Checks the files after the last one that had data, and that one itself.
    void finish();

    const QString &problem() const { return m_problem; }
    const v1::CheckpointManifest &manifest() const { return m_manifest; }

private:
    bool closeFile();
    bool openFile(const std::string &name);

    QString m_dir;
    v1::CheckpointManifest m_manifest;
    QString m_problem; // what was wrong with the stream, once the agent said it was OK
    QFile m_out;
    QCryptographicHash m_sha { QCryptographicHash::Sha256 };
    int m_file = -1; // index in manifest of the file being written
    qint64 m_offset = 0;
    bool m_first = true;
};

// Checks the file just written against the manifest.
bool ReceivedFiles::closeFile()
{
    if (m_file < 0)
        return true;
    const auto &entry = m_manifest.files(m_file);
    if (!m_out.isOpen()) { // empty files get no chunk
        m_out.setFileName(m_dir + QLatin1Char('/') + str(entry.name()));
        m_out.open(QIODevice::WriteOnly | QIODevice::Truncate);
    }
    const bool synced = m_out.flush() && ::fsync(m_out.handle()) == 0;
    m_out.close();
    if (!synced)
        m_problem = QStringLiteral("cannot write %1: %2").arg(m_out.fileName(), m_out.errorString());
    else if (m_offset != entry.size())
        m_problem = QStringLiteral("%1 arrived with %2 of its %3 bytes")
                        .arg(str(entry.name()))
                        .arg(m_offset)
                        .arg(entry.size());
    else if (m_sha.result().toHex() != QByteArray::fromStdString(entry.sha256()))
        m_problem
            = QStringLiteral("%1 does not match its sha256 in the agent's manifest").arg(str(entry.name()));
    m_sha.reset();
    m_offset = 0;
    return m_problem.isEmpty();
}

// Files come in manifest order, each in consecutive chunks: the next file with data is
// `name`, and the ones skipped must be empty (empty files get no chunk).
bool ReceivedFiles::openFile(const std::string &name)
{
    if (!closeFile())
        return false;
    for (++m_file; m_file < m_manifest.files_size() && m_manifest.files(m_file).name() != name; ++m_file)
        if (m_manifest.files(m_file).size() != 0 || !closeFile())
            break;
    if (!m_problem.isEmpty())
        return false;
    if (m_file >= m_manifest.files_size() || m_manifest.files(m_file).name() != name) {
        m_problem = QStringLiteral("the agent sent '%1' out of manifest order").arg(str(name));
        return false;
    }
    m_out.setFileName(m_dir + QLatin1Char('/') + str(name));
    if (!m_out.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        m_problem = QStringLiteral("cannot create %1: %2").arg(m_out.fileName(), m_out.errorString());
        return false;
    }
    return true;
}

void ReceivedFiles::take(const v1::CheckpointChunk &chunk, qint64 *bytes)
{
    if (m_first) {
        m_first = false;
        m_manifest = chunk.manifest();
        if (m_manifest.files().empty())
            m_problem = QStringLiteral("the agent sent no manifest");
        for (const auto &f : m_manifest.files())
            if (!common::checkpoint::isFileName(f.name()))
                m_problem = QStringLiteral("the agent's manifest names the file '%1', which is not a plain "
                                           "file name")
                                .arg(str(f.name()));
    } else if (chunk.has_manifest()) {
        m_problem = QStringLiteral("the agent sent a second manifest");
    }
    if (!m_problem.isEmpty() || chunk.file().empty())
        return;
    if ((m_file < 0 || chunk.file() != m_manifest.files(m_file).name()) && !openFile(chunk.file()))
        return;
    if (chunk.offset() != m_offset) {
        m_problem = QStringLiteral("the agent sent %1 out of order").arg(str(chunk.file()));
        return;
    }
    const QByteArray data = QByteArray::fromRawData(chunk.data().data(), qsizetype(chunk.data().size()));
    if (m_out.write(data) != data.size()) {
        m_problem = QStringLiteral("cannot write %1: %2").arg(m_out.fileName(), m_out.errorString());
        return;
    }
    m_sha.addData(data);
    m_offset += data.size();
    *bytes += data.size();
}

void ReceivedFiles::finish()
{
    if (m_problem.isEmpty() && m_first)
        m_problem = QStringLiteral("the agent sent nothing");
    while (m_problem.isEmpty() && m_file < m_manifest.files_size()) {
        if (!closeFile())
            break;
        ++m_file;
    }
}

// Commits the checked files in `temp` as the run's copy of the manifest's epoch, replacing a
// copy of the same epoch; `final` is where it now is.
Status placeCopy(
    const QString &temp, const QString &runDir, const v1::CheckpointManifest &manifest, QString *final)
{
    if (Status written = writeManifest(temp, manifest); !written)
        return written;
    *final = runDir + QLatin1Char('/') + folderName(manifest.epoch());
    QDir(*final).removeRecursively();
    if (!QDir().rename(temp, *final))
        return Status::failure(
            Status::Code::Internal, QStringLiteral("cannot rename %1 to %2").arg(temp, *final));
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

    ReceivedFiles files(temp);
    v1::CheckpointChunk chunk;
    while (files.problem().isEmpty() && reader->Read(&chunk))
        files.take(chunk, &copy->bytes);
    if (!files.problem().isEmpty())
        context.TryCancel();
    const grpc::Status status = reader->Finish();
    setContext(nullptr);
    if (files.problem().isEmpty() && !status.ok())
        return statusFromGrpc(status, m_client->endpoint());
    files.finish();
    if (!files.problem().isEmpty())
        return Status::failure(Status::Code::DataLoss,
            QStringLiteral("checkpoint of %1 from agent %2 refused: %3")
                .arg(runId, m_client->endpoint(), files.problem()));

    QString final;
    if (Status placed = placeCopy(temp, runDir, files.manifest(), &final); !placed)
        return placed;
    cleanup.dir.clear();
    fsyncPath(runDir);
    if (keep > 0)
        common::checkpoint::prune(fsPath(runDir), std::size_t(keep));
    copy->epoch = files.manifest().epoch();
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
