// Feeds: the bytes of a run's events.log as an earlier agent left it (killed mid-write,
// disk full, bit rot). Why: the agent reopens every run's log at start; a torn or
// corrupt tail must be cut, never crash it or lose the good records before it.
// Checks: the loaded events are numbered 1..n; the file is cut to exactly their bytes;
// reopening finds the same n and nothing to drop; an append after reopening is n + 1
// and survives another reopen.
#include "fuzz_support.h"

#include "run_event_log.h"

#include <google/protobuf/stubs/logging.h>

using namespace scalelab;

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    google::protobuf::SetLogHandler(nullptr); // not a line per string field of invalid UTF-8
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    const auto path = fuzz::freshFolder("events") / "events.log";
    fuzz::writeFile(path, std::string_view(reinterpret_cast<const char *>(data), size));

    std::int64_t loaded = 0;
    std::vector<v1::RunEvent> events;
    {
        agent::RunEventLog log(path);
        fuzz::check(log.opened().ok(), "RunEventLog: " + log.opened().error());
        loaded = log.lastSeq();
        fuzz::check(log.droppedOnOpen() <= size, "RunEventLog dropped more bytes than the file had");
        fuzz::check(std::filesystem::file_size(path) == size - log.droppedOnOpen(),
            "RunEventLog did not cut the file to its good records");
        fuzz::check(log.read(1, std::size_t(loaded) + 1, std::chrono::milliseconds(0), &events),
            "RunEventLog::read of a log still open said the reader is done");
        fuzz::check(std::int64_t(events.size()) == loaded, "RunEventLog::read missed loaded events");
        for (std::size_t i = 0; i < events.size(); ++i)
            fuzz::check(
                events[i].seq() == std::int64_t(i) + 1, "RunEventLog loaded an event out of sequence");
        v1::RunEvent next;
        next.mutable_log()->set_text("appended after reopening");
        fuzz::check(
            log.append(next) == loaded + 1, "RunEventLog::append after reopening broke the numbering");
    }
    agent::RunEventLog again(path);
    fuzz::check(again.droppedOnOpen() == 0, "RunEventLog dropped bytes of a log it had cut and appended to");
    fuzz::check(again.lastSeq() == loaded + 1, "RunEventLog lost events across a reopen");
    std::vector<v1::RunEvent> reread;
    again.read(1, std::size_t(loaded) + 1, std::chrono::milliseconds(0), &reread);
    for (std::size_t i = 0; i < events.size(); ++i)
        fuzz::check(
            events[i].SerializeAsString() == reread[i].SerializeAsString(), // NaN != NaN: compare bytes
            "RunEventLog: an event changed across a reopen");
    return 0;
}
