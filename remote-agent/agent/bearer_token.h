// The agent's authentication: with a token configured (SCALELAB_AGENT_TOKEN or --token-file), every call must
// carry the metadata "authorization: Bearer <token>". The comparison takes the same time however much of a
// guess matches; a refused call is logged with the caller's address, and is answered UNAUTHENTICATED with a
// message that says what to pass (never the token). Stateless; safe from any thread.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>

namespace scalelab::agent {

// OK when `token` is empty (no authentication: the agent listens on loopback only) or the
// call carries it; else UNAUTHENTICATED.
grpc::Status checkBearerToken(grpc::ServerContext *context, const std::string &token);

} // namespace scalelab::agent
