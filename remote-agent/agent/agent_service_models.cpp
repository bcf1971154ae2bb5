// The agent's TorchScript modules: PutModel stores one by its content (model_store.h) once
// the worker has checked it can be trained; runs name it by "sha256:HEX" (resolveModels).
#include "agent_service.h"
#include "log.h"
#include "worker_command.h"
#include "worker_contract.h"
#include "worker_pump.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>

namespace scalelab::agent {

namespace {

// How long the worker may take to load and check a module (a forward and a backward of
// two images): seconds for ResNet-50, far more for anything the agent should not accept.
constexpr auto kModelCheckTimeout = std::chrono::seconds(120);

} // namespace

grpc::Status AgentService::checkModel(const std::filesystem::path &file, v1::StoredModel *cost)
{
    SpawnRequest spawn;
    spawn.argv = { m_options.workerBinary, "check-model", "--model",
        std::string(worker::kModelFilePrefix) + file.string() };
    spawn.extraEnv = { "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1" };
    if (std::string tunables = workerMallocTunables(); !tunables.empty())
        spawn.extraEnv.push_back(std::move(tunables));
    const common::Result<SpawnedProcess> process = m_launcher.spawn(spawn);
    if (!process)
        return { grpc::StatusCode::INTERNAL,
            "could not start the worker to check the module: " + process.error() };
    std::string json, said;
    const auto deadline = std::chrono::steady_clock::now() + kModelCheckTimeout;
    const PumpResult ended = pumpWorker(*process,
        { .eventLine = [](const std::string &) {},
            .outputLine =
                [&](const std::string &line) {
                    if (line.rfind("{", 0) == 0)
                        json = line;
                    else if (line.rfind("scalelab-worker: ", 0) == 0 && said.empty())
                        said = line; // the problem, in words (a usage hint may follow)
                },
            .keepGoing = [&] { return std::chrono::steady_clock::now() < deadline; },
            .checkEvery = std::chrono::milliseconds(500) });
    if (ended.stopped)
        return { grpc::StatusCode::DEADLINE_EXCEEDED,
            "the worker took more than " + std::to_string(kModelCheckTimeout.count())
                + " s to check the module; nothing was stored" };
    const bool passed = WIFEXITED(ended.waitStatus) && WEXITSTATUS(ended.waitStatus) == worker::kExitFinished;
    if (!passed) {
        const std::string prefix = "scalelab-worker: ";
        if (said.rfind(prefix, 0) == 0)
            said = said.substr(prefix.size());
        return { grpc::StatusCode::INVALID_ARGUMENT,
            (said.empty() ? std::string("the worker could not check the module") : said)
                + "; nothing was stored" };
    }
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(json, cost, options).ok())
        return { grpc::StatusCode::INTERNAL,
            "the worker's check printed no cost: '" + json.substr(0, 200) + "'" };
    return grpc::Status::OK;
}

grpc::Status AgentService::PutModel(
    grpc::ServerContext *context, grpc::ServerReader<v1::ModelChunk> *reader, v1::PutModelResponse *response)
{
    if (auto s = authorize(context); !s.ok())
        return s;
    v1::ModelChunk chunk;
    if (!reader->Read(&chunk))
        return { grpc::StatusCode::INVALID_ARGUMENT,
            "the stream held no message: send sha256, size and name first" };
    if (auto stored = m_models.find(chunk.sha256()); stored && stored->size() == chunk.size()) {
        *response->mutable_model() = *stored;
        response->set_already_stored(true);
        return grpc::Status::OK;
    }
    ModelSink sink(m_models);
    if (auto s = sink.begin(chunk); !s.ok())
        return s;
    while (reader->Read(&chunk)) {
        if (context->IsCancelled())
            return { grpc::StatusCode::CANCELLED, "the client went away; nothing was stored" };
        if (!chunk.sha256().empty() || chunk.size() != 0)
            return { grpc::StatusCode::INVALID_ARGUMENT, "only the first message may carry sha256 and size" };
        if (auto s = sink.add(chunk); !s.ok())
            return s;
    }
    if (auto s = sink.finish(); !s.ok())
        return s;
    v1::StoredModel model;
    if (auto s = checkModel(sink.temporaryFile(), &model); !s.ok()) {
        logMessage(LogLevel::Warning, "refused model " + sink.header().sha256() + ": " + s.error_message());
        return s;
    }
    if (auto s = sink.commit(model); !s.ok())
        return s;
    *response->mutable_model() = *m_models.find(sink.header().sha256());
    logMessage(LogLevel::Info,
        "stored model " + sink.header().sha256() + " (" + sink.header().name() + ", "
            + std::to_string(sink.header().size()) + " bytes, " + std::to_string(model.parameters())
            + " parameters)");
    return grpc::Status::OK;
}

grpc::Status AgentService::resolveModels(RunLaunch *launch) const
{
    const v1::RunSpec &spec = launch->request.spec();
    const auto resolve
        = [&](const std::string &field, const std::string &model, std::filesystem::path *file) {
              if (!worker::isModelSha256(model))
                  return grpc::Status::OK;
              if (!m_models.find(model))
                  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "spec." + field + " " + model.substr(0, 19)
                          + "… is not stored on this agent: send the module first (PutModel; scalelab-cli "
                            "and the console "
                            "send it before they start a run)");
              *file = m_models.fileOf(model);
              return grpc::Status::OK;
          };
    if (auto s = resolve("model", spec.model(), &launch->modelFile); !s.ok())
        return s;
    return resolve("initial_weights", spec.initial_weights(), &launch->initialWeightsFile);
}

} // namespace scalelab::agent
