// Feeds: requests to every RPC of scalelab-agent, through a real gRPC server in this
// process (AgentService over an in-process channel, as scalelab-agent serves it).
// Input: byte 0 picks the RPC (modulo 11, in agent.proto's order); the rest is the
// request message, serialized. For WriteCheckpoint (a client stream) the rest is a
// list of chunks, each a 2-byte little-endian length and a serialized CheckpointChunk.
// Bytes that do not parse as the request are skipped: refusing those is gRPC's work.
// Why: the agent's contract (agent_service.h) is that every handler validates its
// request and refuses a bad one in words; nothing a client sends may crash it.
// Checks: no handler throws (gRPC turns that into UNKNOWN) and every refusal has a
// message.
//
// The agent runs with an empty data folder (so no run ever starts: StartWorkers and
// FindLearningRate stop after their checks, at "no such data set"), /bin/false as its
// worker, a token the client always sends, and a folder "cifar-10" that is not a data
// set (so FetchDataset answers FAILED_PRECONDITION instead of downloading).
// CreateSyntheticDataset's image counts, when valid, are scaled down to at most 50 so
// a set is cheap to write; the set and any checkpoint written are removed after each
// input, so every input meets the same agent.
#include "fuzz_support.h"

#include "agent_service.h"
#include "log.h"

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>

using namespace scalelab;

namespace {

constexpr const char *kToken = "fuzz-token";

struct Agent {
    std::filesystem::path dataDir = fuzz::freshFolder("agent-data");
    std::filesystem::path stateDir = fuzz::freshFolder("agent-state");
    std::unique_ptr<agent::AgentService> service;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<v1::Agent::Stub> stub;

    Agent()
    {
        agent::setLogLevel(agent::LogLevel::Error);
        std::filesystem::create_directories(dataDir / "cifar-10");
        agent::AgentOptions options;
        options.dataDir = dataDir;
        options.stateDir = stateDir;
        options.workerBinary = "/bin/false";
        options.token = kToken;
        options.heartbeat = std::chrono::milliseconds(10);
        options.cifarSource.url = "file:///nonexistent/cifar-10-binary.tar.gz";
        service = std::make_unique<agent::AgentService>(options);
        grpc::ServerBuilder builder;
        builder.RegisterService(service.get());
        server = builder.BuildAndStart();
        stub = v1::Agent::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
    }
};

Agent &theAgent()
{
    static Agent *agent = new Agent; // lives to the process's end: handlers may still run at exit
    return *agent;
}

void prepare(grpc::ClientContext *context, std::chrono::milliseconds deadline)
{
    context->AddMetadata("authorization", std::string("Bearer ") + kToken);
    context->set_deadline(std::chrono::system_clock::now() + deadline);
}

void checkAnswer(const grpc::Status &status, const char *rpc)
{
    fuzz::check(status.error_code() != grpc::StatusCode::UNKNOWN,
        std::string(rpc) + " threw (UNKNOWN): " + status.error_message());
    fuzz::check(
        status.ok() || !status.error_message().empty(), std::string(rpc) + " refused without a message");
}

template <typename Request> bool parse(std::string_view bytes, Request *request)
{
    return request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// A unary call: call, check.
template <typename Response, typename Request, typename Call>
void call(const Request &request, const char *rpc, Call call)
{
    grpc::ClientContext context;
    prepare(&context, std::chrono::seconds(10));
    Response response;
    checkAnswer(call(&context, request, &response), rpc);
}

// A unary call with the request the input holds.
template <typename Request, typename Response, typename Call>
void unary(std::string_view bytes, const char *rpc, Call rpcCall)
{
    Request request;
    if (parse(bytes, &request))
        call<Response>(request, rpc, rpcCall);
}

// A server-streaming call, read to its end (or its deadline).
template <typename Request, typename Item, typename Start>
void streaming(std::string_view bytes, const char *rpc, std::chrono::milliseconds deadline, Start start)
{
    Request request;
    if (!parse(bytes, &request))
        return;
    grpc::ClientContext context;
    prepare(&context, deadline);
    auto reader = start(&context, request);
    Item item;
    while (reader->Read(&item)) { }
    const grpc::Status status = reader->Finish();
    if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
        checkAnswer(status, rpc);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    google::protobuf::SetLogHandler(nullptr); // not a line per string field of invalid UTF-8
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    if (size == 0)
        return 0;
    Agent &agent = theAgent();
    auto &stub = *agent.stub;
    const std::string_view body(reinterpret_cast<const char *>(data) + 1, size - 1);
    switch (data[0] % 11) {
    case 0:
        unary<v1::DescribeRequest, v1::DescribeResponse>(
            body, "Describe", [&](auto *c, const auto &q, auto *r) { return stub.Describe(c, q, r); });
        break;
    case 1:
        unary<v1::StartWorkersRequest, v1::StartWorkersResponse>(body, "StartWorkers",
            [&](auto *c, const auto &q, auto *r) { return stub.StartWorkers(c, q, r); });
        break;
    case 2: // no run exists: the checks, then NOT_FOUND
        streaming<v1::WatchRunRequest, v1::RunEvent>(body, "WatchRun", std::chrono::seconds(10),
            [&](auto *c, const auto &q) { return stub.WatchRun(c, q); });
        break;
    case 3:
        unary<v1::StopRunRequest, v1::StopRunResponse>(
            body, "StopRun", [&](auto *c, const auto &q, auto *r) { return stub.StopRun(c, q, r); });
        break;
    case 4:
        unary<v1::ListRunsRequest, v1::ListRunsResponse>(
            body, "ListRuns", [&](auto *c, const auto &q, auto *r) { return stub.ListRuns(c, q, r); });
        break;
    case 5: {
        v1::CreateSyntheticDatasetRequest request;
        if (!parse(body, &request))
            break;
        const auto scaled = [](std::int64_t n, std::int64_t low) {
            return n >= low && n <= 1'000'000 ? low + n % (51 - low) : n;
        };
        request.set_train_images(scaled(request.train_images(), 5));
        request.set_test_images(scaled(request.test_images(), 1));
        call<v1::Dataset>(request, "CreateSyntheticDataset",
            [&](auto *c, const auto &q, auto *r) { return stub.CreateSyntheticDataset(c, q, r); });
        if (common::isSafeName(request.name()) && request.name() != "cifar-10") {
            std::error_code ec;
            std::filesystem::remove_all(agent.dataDir / request.name(), ec);
        }
        break;
    }
    case 6: // a valid request streams samples until the deadline: keep it short
        streaming<v1::WatchNodeRequest, v1::NodeSample>(body, "WatchNode", std::chrono::milliseconds(5),
            [&](auto *c, const auto &q) { return stub.WatchNode(c, q); });
        break;
    case 7:
        streaming<v1::FetchDatasetRequest, v1::FetchProgress>(body, "FetchDataset", std::chrono::seconds(10),
            [&](auto *c, const auto &q) { return stub.FetchDataset(c, q); });
        break;
    case 8:
        streaming<v1::ReadCheckpointRequest, v1::CheckpointChunk>(body, "ReadCheckpoint",
            std::chrono::seconds(10), [&](auto *c, const auto &q) { return stub.ReadCheckpoint(c, q); });
        break;
    case 9: {
        std::vector<v1::CheckpointChunk> chunks;
        for (std::string_view rest = body; rest.size() >= 2;) {
            const std::size_t length = std::uint8_t(rest[0]) | std::size_t(std::uint8_t(rest[1])) << 8;
            rest.remove_prefix(2);
            v1::CheckpointChunk chunk;
            if (!parse(rest.substr(0, length), &chunk))
                return 0;
            chunks.push_back(std::move(chunk));
            rest.remove_prefix(std::min(length, rest.size()));
        }
        grpc::ClientContext context;
        prepare(&context, std::chrono::seconds(10));
        v1::WriteCheckpointResponse response;
        auto writer = stub.WriteCheckpoint(&context, &response);
        for (const auto &chunk : chunks)
            if (!writer->Write(chunk))
                break;
        writer->WritesDone();
        checkAnswer(writer->Finish(), "WriteCheckpoint");
        std::error_code ec;
        std::filesystem::remove_all(agent.stateDir / "runs", ec);
        break;
    }
    case 10:
        streaming<v1::FindLearningRateRequest, v1::LrFindProgress>(body, "FindLearningRate",
            std::chrono::seconds(10), [&](auto *c, const auto &q) { return stub.FindLearningRate(c, q); });
        break;
    }
    return 0;
}
