// Size limits of what a client sends, checked before a handler uses any of it. Every
// string field of a request is at most kMaxString bytes (names at most kMaxName), every
// repeated field at most kMaxRepeated entries; bytes fields are bounded by the server's
// message size limit alone (checkpoint chunks). A refusal names the field and shows at
// most a short prefix of the value: echoing a large value into the status would itself
// exceed the client's metadata limit, and the client would see RESOURCE_EXHAUSTED
// "received initial metadata size exceeds limit" instead of the reason.
#pragma once

#include "status.h"

#include <google/protobuf/message.h>

#include <string>

namespace scalelab::agent {

inline constexpr std::size_t kMaxString = 4096;
inline constexpr std::size_t kMaxName = 64; // run_id, dataset, name: also checked as names
inline constexpr int kMaxRepeated = 4096;

// Succeeds when every field of `message` (and of the messages inside it) is within the
// limits, else fails with "FIELD is N bytes; at most M (it starts with "...")".
common::Status checkRequestLimits(const google::protobuf::Message &message);

// `value` for a message: itself when short, else its first characters and its length.
std::string shortQuote(const std::string &value, std::size_t keep = 48);

} // namespace scalelab::agent
