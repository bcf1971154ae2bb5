// gRPC behind AgentClient, private to core/agents (and the tests and benchmarks that call
// the agent's stub themselves): nothing above core/agents includes it, so the console
// and the CLI see Status codes, never gRPC's.
//
//   grpc::ClientContext context;
//   client.connection().prepare(&context, timeoutMs); // token and deadline
//   const grpc::Status status = client.connection().stub->StopRun(&context, request, &response);
//   return statusFromGrpc(status, client.endpoint()); // a core::Status with the same code
//
// Thread: as AgentClient (gRPC stubs may be used from several threads).
#pragma once

#include "agent_client.h"
#include "scalelab/v1/agent.grpc.pb.h"

#include <QString>

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace scalelab::core {

// Status::Code is gRPC's code, number for number: statusFromGrpc converts by value.
static_assert(int(Status::Code::Ok) == grpc::StatusCode::OK);
static_assert(int(Status::Code::Cancelled) == grpc::StatusCode::CANCELLED);
static_assert(int(Status::Code::Unknown) == grpc::StatusCode::UNKNOWN);
static_assert(int(Status::Code::InvalidArgument) == grpc::StatusCode::INVALID_ARGUMENT);
static_assert(int(Status::Code::DeadlineExceeded) == grpc::StatusCode::DEADLINE_EXCEEDED);
static_assert(int(Status::Code::NotFound) == grpc::StatusCode::NOT_FOUND);
static_assert(int(Status::Code::AlreadyExists) == grpc::StatusCode::ALREADY_EXISTS);
static_assert(int(Status::Code::PermissionDenied) == grpc::StatusCode::PERMISSION_DENIED);
static_assert(int(Status::Code::ResourceExhausted) == grpc::StatusCode::RESOURCE_EXHAUSTED);
static_assert(int(Status::Code::FailedPrecondition) == grpc::StatusCode::FAILED_PRECONDITION);
static_assert(int(Status::Code::Aborted) == grpc::StatusCode::ABORTED);
static_assert(int(Status::Code::OutOfRange) == grpc::StatusCode::OUT_OF_RANGE);
static_assert(int(Status::Code::Unimplemented) == grpc::StatusCode::UNIMPLEMENTED);
static_assert(int(Status::Code::Internal) == grpc::StatusCode::INTERNAL);
static_assert(int(Status::Code::Unavailable) == grpc::StatusCode::UNAVAILABLE);
static_assert(int(Status::Code::DataLoss) == grpc::StatusCode::DATA_LOSS);
static_assert(int(Status::Code::Unauthenticated) == grpc::StatusCode::UNAUTHENTICATED);

// A gRPC call's status as core's, with the same code and a message a person can act on
// ("cannot reach the agent at ENDPOINT (...). Is scalelab-agent running there ...?").
// `tls`: how the call was made, so that a failed TLS handshake (or TLS on one side only)
// is said as such, with what to set; null = not known, a hint on either side. The code
// stays Unavailable; gRPC's own words end the message, in parentheses.
Status statusFromGrpc(const grpc::Status &status, const QString &endpoint, const AgentTls *tls = nullptr);

struct AgentClient::Connection {
    std::string token; // sent as "authorization: Bearer TOKEN"; empty = none
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Agent::Stub> stub;

    // For unary calls and bounded streams (checkpoint transfer): token and deadline.
    void prepare(grpc::ClientContext *context, int timeoutMs) const;
    // For long streams (RunWatch, NodeMonitor): the token, no deadline.
    void prepareStream(grpc::ClientContext *context) const;
};

} // namespace scalelab::core
