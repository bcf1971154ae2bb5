#include "model_upload.h"

#include "agent_grpc.h"
#include "worker_contract.h"

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QProcess>
#include <QStandardPaths>

namespace scalelab::core {

namespace {

constexpr int kUploadTimeoutMs = 10 * 60'000;
constexpr qint64 kModelChunkBytes = 1 << 20; // the agent's limit per chunk (model_store.h)

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

CheckedModel checkModelWithWorker(const QString &path)
{
    QString worker = QString::fromLocal8Bit(qgetenv("SCALELAB_WORKER_BIN"));
    if (worker.isEmpty()) {
        const QString sibling = QCoreApplication::applicationDirPath() + QStringLiteral("/scalelab-worker");
        worker = QFileInfo(sibling).isExecutable()
            ? sibling
            : QStandardPaths::findExecutable(QStringLiteral("scalelab-worker"));
    }
    if (worker.isEmpty())
        return { {},
            QStringLiteral("not checked here (no scalelab-worker next to this program, on PATH or in "
                           "$SCALELAB_WORKER_BIN); the agent checks it before it stores it") };
    QProcess p;
    p.start(
        worker, { QStringLiteral("check-model"), QStringLiteral("--model"), QStringLiteral("file:") + path });
    if (!p.waitForFinished(120'000)) {
        p.kill();
        p.waitForFinished(5000);
        return { QStringLiteral("the worker's check did not finish in 120 s"), {} };
    }
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        QString said = QString::fromUtf8(p.readAllStandardError()).section(QLatin1Char('\n'), 0, 0);
        said.remove(QStringLiteral("scalelab-worker: "));
        return { said.isEmpty() ? QStringLiteral("the worker's check failed") : said, {} };
    }
    const QJsonObject cost = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
    QLocale grouped = QLocale::c();
    grouped.setNumberOptions({});
    return { {},
        QStringLiteral("%1 parameters, %2 of gradient per step, %3 GFLOP per image forward")
            .arg(grouped.toString(cost.value(QLatin1String("parameters")).toInteger()))
            .arg(cost.value(QLatin1String("gradient_bytes")).toDouble() >= 1e6
                    ? QStringLiteral("%1 MB").arg(
                        cost.value(QLatin1String("gradient_bytes")).toDouble() / 1e6, 0, 'f', 1)
                    : QStringLiteral("%1 kB").arg(
                        cost.value(QLatin1String("gradient_bytes")).toDouble() / 1e3, 0, 'f', 1))
            .arg(cost.value(QLatin1String("forward_flops_per_image")).toDouble() / 1e9, 0, 'f', 3) };
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
        const QByteArray data = f.read(kModelChunkBytes);
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
