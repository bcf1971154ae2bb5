// The learning-rate range test's end of the worker channel, as RunSupervisor is a training
// run's: turns the lr-find worker's events (worker.proto: lr_point, lr_found, error) and
// output into FindLearningRate's replies. Points go out in batches (64, or what came in
// half a second), the result last, with the worker's command line in it. A worker that
// ends without a result, or not with exit code 0, fails the test with its own error, else
// its last output line, else how it ended.
//
//   LrFindSession session(spawn.argv, [&](const v1::LrFindProgress &reply) { ... });
//   const PumpResult ended = pumpWorker(process, session.pump([&] { return cancelled; }));
//   return session.finish(ended);
//
// Thread: one session per range test, used on one thread (the pump's callbacks run on it).
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "worker_pump.h"

#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace scalelab::agent {

class LrFindSession {
public:
    using Send = std::function<void(const v1::LrFindProgress &reply)>;
    LrFindSession(std::vector<std::string> workerCommand, Send send);

    // What follows the worker (worker_pump.h): whole lines only, however long, and every
    // 200 ms the batch of points that is due is sent and `cancelled` asked; true stops it.
    WorkerPump pump(std::function<bool()> cancelled);

    // Once pumpWorker() has returned: CANCELLED when the pump stopped the worker; else the
    // points not yet sent, then the result (OK) or ABORTED with why the test failed.
    grpc::Status finish(const PumpResult &ended);

private:
    void handleEventLine(const std::string &line);
    void sendPoints();

    std::vector<std::string> m_workerCommand;
    Send m_send;
    v1::LrFindProgress m_pending; // points not yet sent
    v1::LrFindProgress m_result;
    bool m_haveResult = false;
    std::string m_workerError; // the worker's own "error" event
    std::string m_lastOutput; // its last non-empty output line, cut at 500 bytes
    std::chrono::steady_clock::time_point m_lastSend = std::chrono::steady_clock::now();
};

} // namespace scalelab::agent
