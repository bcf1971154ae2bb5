// Both ends of the worker channel (proto/scalelab/v1/worker.proto): a rank's command line
// and its event lines, written and read by the same code. Pure functions; std and
// protobuf only, so the agent and the worker (which links no Qt and no gRPC) share them.
#pragma once

#include "scalelab/v1/worker.pb.h"
#include "status.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scalelab::worker {

// The worker's arguments for `launch` (argv[1..]): the command, then every field that is
// set as --option VALUE, in the order of worker.proto's field numbers.
[[nodiscard]] std::vector<std::string> launchArguments(const v1::WorkerLaunch &launch);

// The reverse of launchArguments: COMMAND then --option VALUE or --option=VALUE pairs.
// Fails ("unknown option --x", "--epochs expects a whole number, got 'x'") when the
// arguments do not fit worker.proto.
common::Result<v1::WorkerLaunch> parseLaunchArguments(const std::vector<std::string> &arguments);

// The option of a WorkerLaunch field: "batch_size" -> "--batch-size".
[[nodiscard]] std::string optionName(std::string_view fieldName);

// One event as the worker writes it: protobuf's JSON mapping, proto field names, every
// field printed, on one line ending in '\n'.
[[nodiscard]] std::string eventLine(const v1::WorkerEvent &event);

// One line of the channel, read with the generated code; fails when it is not JSON,
// names a field worker.proto does not have, or carries no event.
common::Result<v1::WorkerEvent> parseEventLine(std::string_view line);

// The shortest decimal text that reads back as exactly `value` (std::to_chars): 1e-07.
[[nodiscard]] std::string exactNumber(double value);

} // namespace scalelab::worker
