#include "checkpoint_copy.h"

#include <grpcpp/grpcpp.h>

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include <fcntl.h>
#include <unistd.h>

namespace scalelab::core {

namespace {

constexpr int kTransferTimeoutMs = 10 * 60'000;
constexpr qint64 kChunkBytes = 1 << 20; // the agent's limit per chunk

QString str(const std::string &s)
{
    return QString::fromStdString(s);
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
    return QStringLiteral("epoch-%1").arg(epoch, 4, 10, QLatin1Char('0'));
}

// A file name an agent may send: one path component, nothing hidden, not MANIFEST.
bool isPlainName(const QString &name)
{
    static const QRegularExpression pattern(QStringLiteral("^[A-Za-z0-9_.-]{1,64}$"));
    return pattern.match(name).hasMatch() && !name.startsWith(QLatin1Char('.'))
        && name != QLatin1String("MANIFEST");
}

CallResult localFailure(int code, const QString &message)
{
    return { code, message };
}

// Writes MANIFEST last and fsyncs the folder: after this the copy counts as committed.
bool writeManifest(const QString &dir, const v1::CheckpointManifest &manifest, QString *error)
{
    QByteArray text;
    for (const auto &f : manifest.files())
        text += QByteArray::fromStdString(f.sha256()) + "  " + QByteArray::fromStdString(f.name()) + "\n";
    QFile file(dir + QStringLiteral("/MANIFEST"));
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(text) != text.size()
        || !file.flush() || ::fsync(file.handle()) != 0) {
        *error = QStringLiteral("cannot write %1: %2").arg(file.fileName(), file.errorString());
        return false;
    }
    file.close();
    fsyncPath(dir);
    return true;
}

// Keeps the newest `keep` epoch-NNNN folders under `runDir`.
void prune(const QString &runDir, int keep)
{
    QDir dir(runDir);
    QStringList epochs
        = dir.entryList({ QStringLiteral("epoch-*") }, QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
    while (keep > 0 && epochs.size() > keep)
        QDir(dir.filePath(epochs.takeFirst())).removeRecursively();
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

CallResult CheckpointTransfer::download(
    const QString &runId, int epoch, const QString &root, int keep, CheckpointCopy *copy)
{
    if (!m_client->setupError().isEmpty())
        return m_client->setupFailure();
    const QString runDir = root + QLatin1Char('/') + runId;
    const QString temp
        = runDir + QStringLiteral("/.tmp-%1-%2").arg(epoch).arg(QCoreApplication::applicationPid());
    QDir(temp).removeRecursively();
    if (!QDir().mkpath(temp))
        return localFailure(grpc::StatusCode::INTERNAL, QStringLiteral("cannot create %1").arg(temp));
    struct Cleanup {
        QString dir;
        ~Cleanup()
        {
            if (!dir.isEmpty())
                QDir(dir).removeRecursively();
        }
    } cleanup { temp };

    grpc::ClientContext context;
    m_client->prepare(&context, kTransferTimeoutMs);
    v1::ReadCheckpointRequest request;
    request.set_run_id(runId.toStdString());
    request.set_epoch(epoch);
    setContext(&context);
    auto reader = m_client->stub().ReadCheckpoint(&context, request);

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
                if (!isPlainName(str(f.name())))
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
        return CallResult::fromStatus(status, m_client->endpoint());
    if (problem.isEmpty() && first)
        problem = QStringLiteral("the agent sent nothing");
    // The files after the last one that had data, and that one itself.
    while (problem.isEmpty() && file < manifest.files_size()) {
        if (!closeFile())
            break;
        ++file;
    }
    if (!problem.isEmpty())
        return localFailure(grpc::StatusCode::DATA_LOSS,
            QStringLiteral("checkpoint of %1 from agent %2 refused: %3")
                .arg(runId, m_client->endpoint(), problem));
    QString error;
    if (!writeManifest(temp, manifest, &error))
        return localFailure(grpc::StatusCode::INTERNAL, error);

    const QString final = runDir + QLatin1Char('/') + folderName(manifest.epoch());
    QDir(final).removeRecursively(); // a copy of the same epoch is replaced
    if (!QDir().rename(temp, final))
        return localFailure(
            grpc::StatusCode::INTERNAL, QStringLiteral("cannot rename %1 to %2").arg(temp, final));
    cleanup.dir.clear();
    fsyncPath(runDir);
    prune(runDir, keep);
    copy->epoch = manifest.epoch();
    copy->dir = final;
    return {};
}

QString CheckpointTransfer::verifyCopy(const QString &dir, v1::CheckpointManifest *manifest)
{
    static const QRegularExpression folder(QStringLiteral("^epoch-(\\d{1,8})$"));
    const auto match = folder.match(QFileInfo(dir).fileName());
    if (!match.hasMatch())
        return QStringLiteral("%1 is not a checkpoint folder (epoch-NNNN)").arg(dir);
    QFile file(dir + QStringLiteral("/MANIFEST"));
    if (!file.open(QIODevice::ReadOnly))
        return QStringLiteral("%1 has no MANIFEST (never committed, or removed)").arg(dir);
    manifest->Clear();
    manifest->set_epoch(match.captured(1).toInt());
    for (const QByteArray &line : file.readAll().split('\n')) {
        const QList<QByteArray> fields = line.simplified().split(' ');
        if (line.trimmed().isEmpty())
            continue;
        const QString name = QString::fromUtf8(fields.value(1));
        if (fields.size() != 2 || !isPlainName(name))
            return QStringLiteral("the MANIFEST in %1 has a malformed line").arg(dir);
        QFile f(dir + QLatin1Char('/') + name);
        if (!f.open(QIODevice::ReadOnly))
            return QStringLiteral("%1 is missing").arg(f.fileName());
        QCryptographicHash sha(QCryptographicHash::Sha256);
        sha.addData(&f);
        if (sha.result().toHex() != fields[0])
            return QStringLiteral("%1 does not match its sha256 in MANIFEST").arg(f.fileName());
        auto *entry = manifest->add_files();
        entry->set_name(name.toStdString());
        entry->set_sha256(fields[0].toStdString());
        entry->set_size(f.size());
    }
    if (manifest->files().empty())
        return QStringLiteral("the MANIFEST in %1 lists no files").arg(dir);
    return {};
}

CallResult CheckpointTransfer::upload(
    const QString &runId, const QString &dir, v1::WriteCheckpointResponse *response)
{
    if (!m_client->setupError().isEmpty())
        return m_client->setupFailure();
    v1::CheckpointManifest manifest;
    if (const QString problem = verifyCopy(dir, &manifest); !problem.isEmpty())
        return localFailure(grpc::StatusCode::FAILED_PRECONDITION, problem);
    manifest.set_run_id(runId.toStdString());

    grpc::ClientContext context;
    m_client->prepare(&context, kTransferTimeoutMs);
    setContext(&context);
    auto writer = m_client->stub().WriteCheckpoint(&context, response);
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
            const QByteArray data = f.read(kChunkBytes);
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
    return CallResult::fromStatus(status, m_client->endpoint());
}

} // namespace scalelab::core
