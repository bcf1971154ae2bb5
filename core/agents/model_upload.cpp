#include "model_upload.h"

#include "agent_grpc.h"
#include "worker_contract.h"

#include <QCryptographicHash>
#include <QFile>
#include <QFileInfo>

namespace scalelab::core {

namespace {

constexpr int kUploadTimeoutMs = 10 * 60'000;
constexpr qint64 kChunkBytes = 1 << 20; // the agent's limit per chunk

} // namespace

bool namesModelFile(const QString &model)
{
    return model.startsWith(QLatin1String("file:")) || model.contains(QLatin1Char('/'))
        || model.endsWith(QLatin1String(".pt"));
}

QString modelFilePath(const QString &model)
{
    return model.startsWith(QLatin1String("file:")) ? model.mid(5) : model;
}

Result<ModelFile> readModelFile(const QString &path)
{
    const QFileInfo info(path);
    if (!info.exists())
        return Result<ModelFile>::failure(QStringLiteral("model file %1: no such file").arg(path));
    if (!info.isFile())
        return Result<ModelFile>::failure(QStringLiteral("model file %1: not a regular file").arg(path));
    if (info.size() == 0)
        return Result<ModelFile>::failure(
            QStringLiteral("model file %1 is empty: save the module with torch.jit.script(model).save(path)")
                .arg(path));
    if (info.size() > worker::kMaxModelFileBytes)
        return Result<ModelFile>::failure(
            QStringLiteral("model file %1 has %2 bytes, over the %3 MiB a model may have")
                .arg(path)
                .arg(info.size())
                .arg(worker::kMaxModelFileBytes >> 20));
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return Result<ModelFile>::failure(QStringLiteral("model file %1: %2").arg(path, f.errorString()));
    QCryptographicHash sha(QCryptographicHash::Sha256);
    if (!sha.addData(&f))
        return Result<ModelFile>::failure(QStringLiteral("model file %1: cannot read it").arg(path));
    ModelFile file;
    file.path = info.absoluteFilePath();
    // The agent keeps a plain file name ([A-Za-z0-9_.-]): other characters become '_'.
    for (const QChar c : info.fileName().left(64))
        file.name
            += (c.isLetterOrNumber() && c.unicode() < 128) || c == QLatin1Char('.') || c == QLatin1Char('-')
            ? c
            : QLatin1Char('_');
    if (file.name.startsWith(QLatin1Char('.')))
        file.name[0] = QLatin1Char('_');
    file.sha256 = QString::fromLatin1(sha.result().toHex());
    file.size = info.size();
    return file;
}

Status sendModel(AgentClient *client, const ModelFile &file, v1::StoredModel *stored, bool *sent)
{
    if (sent)
        *sent = false;
    v1::DescribeResponse described;
    if (const Status d = client->describe(&described); !d.ok())
        return d;
    for (const auto &m : described.models())
        if (QString::fromStdString(m.sha256()) == file.sha256 && m.size() == file.size) {
            *stored = m;
            return Status::success();
        }
    QFile f(file.path);
    if (!f.open(QIODevice::ReadOnly))
        return Status::failure(QStringLiteral("model file %1: %2").arg(file.path, f.errorString()));
    grpc::ClientContext context;
    client->connection().prepare(&context, kUploadTimeoutMs);
    v1::PutModelResponse response;
    auto writer = client->connection().stub->PutModel(&context, &response);
    v1::ModelChunk chunk;
    chunk.set_sha256(file.sha256.toStdString());
    chunk.set_size(file.size);
    chunk.set_name(file.name.toStdString());
    bool open = writer->Write(chunk);
    qint64 offset = 0;
    while (open && !f.atEnd()) {
        const QByteArray data = f.read(kChunkBytes);
        if (data.isEmpty())
            break;
        chunk.Clear();
        chunk.set_offset(offset);
        chunk.set_data(data.constData(), std::size_t(data.size()));
        offset += data.size();
        open = writer->Write(chunk);
    }
    if (open)
        writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok())
        return statusFromGrpc(status, client->endpoint());
    *stored = response.model();
    if (sent)
        *sent = !response.already_stored();
    return Status::success();
}

} // namespace scalelab::core
