// Reads a started worker (process_launcher.h) to its end: its two pipes line by line until
// both close, then reaps it. The one place that drains a worker's pipes, for a run's ranks
// (RunSupervisor, one pump per rank) and for the learning-rate range test (AgentService).
//
//   const PumpResult ended = pumpWorker(process, { .eventLine = ..., .outputLine = ... });
//
// Ownership: the pump takes the process's two read ends and closes them; it reaps the
// child (waitpid), so the pid is not the caller's to wait for afterwards.
// Thread: blocks the calling thread until the worker has exited; the callbacks run on it.
// Any number of pumps may run at once, each on its own thread.
#pragma once

#include "process_launcher.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace scalelab::agent {

struct WorkerPump {
    // Each line of the worker's fd 3 (JSON-line events) and of its stdout and stderr, without
    // the '\n'; both are required. When both pipes have data at once, the output is read first.
    std::function<void(const std::string &line)> eventLine;
    std::function<void(const std::string &line)> outputLine;
    // Asked before every wait for the pipes, and so at least every `checkEvery`: false ends
    // the pumping, kills the worker's process group (SIGKILL to -pid: the child must lead its
    // group, SpawnRequest::processGroup 0) and reaps it. Unset: the pipes alone end it.
    std::function<bool()> keepGoing;
    std::chrono::milliseconds checkEvery { -1 }; // -1 = wait for the pipes without a limit
    std::size_t maxLineBytes = 16 * 1024; // a longer line is cut there; 0 = no limit
    // When a pipe closes on a last line without its '\n': whether that line is handed on.
    bool unterminatedLastLine = true;
};

struct PumpResult {
    int waitStatus = 0; // waitpid's status of the worker
    bool stopped = false; // keepGoing() said false, and the worker was killed
};

// Calls the pump's callbacks until both pipes close (or keepGoing() says stop), then waits
// for the worker to exit. A failing poll() also ends the reading; the worker is then waited for.
PumpResult pumpWorker(const SpawnedProcess &process, const WorkerPump &pump);

} // namespace scalelab::agent
