#include "bearer_token.h"

#include "log.h"

#include <algorithm>
#include <string_view>

namespace scalelab::agent {

namespace {

// Constant-time comparison: the time taken does not reveal how much of a guess matched.
bool sameSecret(std::string_view a, std::string_view b)
{
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const std::size_t n = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= x ^ y;
    }
    return diff == 0;
}

} // namespace

grpc::Status checkBearerToken(grpc::ServerContext *context, const std::string &token)
{
    if (token.empty())
        return grpc::Status::OK;
    const auto &metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    const std::string expected = "Bearer " + token;
    if (it == metadata.end()
        || !sameSecret(std::string_view(it->second.data(), it->second.size()), expected)) {
        logMessage(LogLevel::Warning,
            "rejected a call from " + context->peer()
                + (it == metadata.end() ? ": no token" : ": wrong token"));
        return { grpc::StatusCode::UNAUTHENTICATED,
            "this agent requires a token: pass the agent's token (authorization: Bearer "
            "<token>), as printed or configured when the agent started" };
    }
    return grpc::Status::OK;
}

} // namespace scalelab::agent
