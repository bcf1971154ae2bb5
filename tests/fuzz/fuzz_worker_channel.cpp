// Feeds: both ends of the worker channel (proto/worker/worker_channel.h). Why: the agent
// reads every line a worker writes on its event pipe (a worker that crashed mid-line, or
// a program that is not our worker at all, writes anything), and the worker reads the
// command line it is given. Neither may crash, and whatever they accept must write back
// to the same message: the agent records what it parsed, and a rank's options must
// survive the trip through argv unchanged.
//
// Input: byte 0 even = an event line (the rest, as is); odd = a command line (the rest,
// split at NUL bytes into arguments).
#include "worker_channel.h"

#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace scalelab;

namespace {

bool sameMessage(const google::protobuf::Message &a, const google::protobuf::Message &b)
{
    google::protobuf::util::DefaultFieldComparator comparator;
    comparator.set_treat_nan_as_equal(true);
    google::protobuf::util::MessageDifferencer differencer;
    differencer.set_field_comparator(&comparator);
    return differencer.Compare(a, b);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    if (size == 0)
        return 0;
    const std::string rest(reinterpret_cast<const char *>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        const auto event = worker::parseEventLine(rest);
        if (!event) {
            if (event.error().empty())
                std::abort(); // a refusal always says why
            return 0;
        }
        const std::string line = worker::eventLine(*event);
        const auto again = worker::parseEventLine(line);
        // Compared as messages: a map (RunStarted.software) has no order, and its JSON may
        // list the same entries in another order after a round trip; NaN equals NaN here.
        if (!again || !sameMessage(*event, *again))
            std::abort();
        return 0;
    }
    std::vector<std::string> arguments;
    std::size_t begin = 0;
    while (begin <= rest.size()) {
        const std::size_t nul = rest.find('\0', begin);
        arguments.push_back(rest.substr(begin, nul == std::string::npos ? std::string::npos : nul - begin));
        if (nul == std::string::npos)
            break;
        begin = nul + 1;
    }
    const auto launch = worker::parseLaunchArguments(arguments);
    if (!launch) {
        if (launch.error().empty())
            std::abort();
        return 0;
    }
    const auto written = worker::launchArguments(*launch);
    const auto again = worker::parseLaunchArguments(written);
    if (!again || worker::launchArguments(*again) != written)
        std::abort();
    return 0;
}
