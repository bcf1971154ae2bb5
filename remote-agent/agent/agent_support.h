// Small helpers the agent's files share (one definition each, so that any two of its
// files can be compiled as one unity source).
#pragma once

#include <grpcpp/support/status.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace scalelab::agent {

// Now in the unit of every event and record: milliseconds since the Unix epoch.
inline std::int64_t nowUnixMs()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// A request refused for what it says (the message says what is wrong and how to fix it).
inline grpc::Status invalidArgument(const std::string &message)
{
    return { grpc::StatusCode::INVALID_ARGUMENT, message };
}

// A request this node cannot serve as things are (the message says what is missing).
inline grpc::Status precondition(const std::string &message)
{
    return { grpc::StatusCode::FAILED_PRECONDITION, message };
}

} // namespace scalelab::agent
