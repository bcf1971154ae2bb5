// TorchScript modules the CLI and the console send to agents (PutModel in agent.proto):
// agents share no storage, so a run of a module the user chose names it by its content
// (RunSpec.model "sha256:HEX") and each agent that hosts a rank is sent the file first,
// unless it already holds it (DescribeResponse.models).
//
//   const auto file = readModelFile(path);                 // size limit, sum
//   if (const Status sent = sendModel(client, *file, &stored); !sent) ...
//   spec.set_model(file->model().toStdString());           // "sha256:HEX"
//
// Blocking calls; any thread. The agent checks the module before it stores it (the
// worker's check-model): a module that cannot be trained comes back INVALID_ARGUMENT in
// the worker's words, and nothing is stored.
#pragma once

#include "agent_client.h"
#include "core_status.h"

#include <QString>

namespace scalelab::core {

struct ModelFile {
    QString path;
    QString name; // the file's name, as the agent lists it
    QString sha256; // lower-case hex of the content
    qint64 size = 0;
    QString model() const { return QStringLiteral("sha256:") + sha256; } // RunSpec.model
};

// Reads `path`: its size (1 byte up to the worker's limit) and its SHA-256; a failure
// says what is wrong with the file in words.
Result<ModelFile> readModelFile(const QString &path);

// Whether `model` (a --model value, a plan's "model") names a file rather than a built-in:
// "file:PATH", a path with a slash, or a name ending in ".pt".
bool namesModelFile(const QString &model);
// The path it names ("file:" removed).
QString modelFilePath(const QString &model);

// What scalelab-worker check-model says of a module's file here (the agent runs the same
// check before it stores one): `problem` in the worker's words, or empty with `summary`
// ("11,173,962 parameters, 44.7 MB of gradient per step, 1.111 GFLOP per image forward").
// Without a worker next to this program, on PATH or in $SCALELAB_WORKER_BIN, nothing is
// checked and the summary says so.
struct CheckedModel {
    QString problem;
    QString summary;
};
CheckedModel checkModelWithWorker(const QString &path);

// Sends `file` to the agent unless it holds it; `stored` is what the agent lists for it,
// `sent` whether bytes went (false: it was there).
Status sendModel(AgentClient *client, const ModelFile &file, v1::StoredModel *stored, bool *sent = nullptr);

} // namespace scalelab::core
