// What runs are doing, for the agent's Prometheus metrics (agent_metrics.h).
// RunGauges: one attempt now, the latest of each of rank 0's measurements and the attempt's
// counts so far, folded from the events its supervisor records (plain data; the supervisor
// guards its copy). AgentCounters: what every attempt started by this agent process did,
// counted as it happens so that the counts survive the runs leaving memory (thread-safe).
#pragma once

#include "scalelab/v1/agent.pb.h"

#include <atomic>
#include <cstdint>

namespace scalelab::agent {

struct RunGauges {
    v1::RunState state = v1::STARTING;
    std::int64_t endedUnixMs = 0; // when it reached a terminal state; 0 while active
    int attempt = 1;
    int worldSize = 1;
    int epochs = 0; // planned
    std::int64_t stepsPerEpoch = 0; // 0 until rank 0 started training
    std::int64_t globalBatch = 0; // images per optimizer step, over every rank
    bool stalled = false;
    // Rank 0's latest step: the global step number (it goes on from a resumed checkpoint).
    int epoch = 0;
    std::int64_t step = 0;
    double loss = 0;
    double learningRate = 0;
    double gradientNorm = 0;
    double gradientNoiseScale = 0; // B_simple, examples; 0 while not known
    double imagesPerSecond = 0;
    double stepSeconds = 0;
    double exposedAllReduceSeconds = 0;
    // Rank 0's latest evaluation; hasEpoch false until the first epoch ended.
    bool hasEpoch = false;
    double trainAccuracy = 0; // 0..1
    double testAccuracy = 0; // 0..1
    double testLoss = 0;
    // Counts of this attempt: steps and images it trained (not those of the checkpoint it
    // resumed from), checkpoints it committed.
    std::int64_t stepsTrained = 0;
    std::int64_t imagesTrained = 0;
    std::int64_t checkpoints = 0;

    bool active() const { return state != v1::SUCCEEDED && state != v1::FAILED && state != v1::CANCELLED; }

    // Folds one of rank 0's events in (other ranks' events change nothing).
    void observe(const v1::RunEvent &event)
    {
        if (event.rank() != 0)
            return;
        switch (event.kind_case()) {
        case v1::RunEvent::kStarted: {
            const v1::RunStarted &started = event.started();
            worldSize = started.world_size();
            stepsPerEpoch = started.steps_per_epoch();
            globalBatch = started.global_batch();
            if (started.effective().epochs() > 0)
                epochs = started.effective().epochs();
            // Where a resumed attempt goes on from: its first step follows the checkpoint's,
            // in the epoch after it.
            step = std::int64_t(started.resumed_from_epoch()) * stepsPerEpoch;
            epoch = started.resumed_from_epoch() + 1;
            break;
        }
        case v1::RunEvent::kStep: {
            const v1::StepMetrics &s = event.step();
            if (s.step() > step) {
                stepsTrained += s.step() - step;
                imagesTrained += (s.step() - step) * globalBatch;
            }
            step = s.step();
            epoch = s.epoch();
            loss = s.loss();
            learningRate = s.learning_rate();
            gradientNorm = s.grad_norm();
            if (s.gradient_noise().samples() > 0)
                gradientNoiseScale = s.gradient_noise().b_simple();
            imagesPerSecond = s.images_per_second();
            stepSeconds = s.step_seconds();
            exposedAllReduceSeconds = s.exposed_allreduce_seconds();
            break;
        }
        case v1::RunEvent::kEpoch:
            hasEpoch = true;
            trainAccuracy = event.epoch().train_accuracy();
            testAccuracy = event.epoch().test_accuracy();
            testLoss = event.epoch().test_loss();
            break;
        case v1::RunEvent::kCheckpoint:
            ++checkpoints;
            break;
        case v1::RunEvent::kStall:
            stalled = event.stall().stalled();
            break;
        default:
            break;
        }
    }
};

// Counted by the agent that hosts each attempt's rank 0.
struct AgentCounters {
    std::atomic<std::int64_t> attemptsStarted { 0 };
    std::atomic<std::int64_t> retries { 0 }; // attempts started with attempt >= 2
    std::atomic<std::int64_t> succeeded { 0 };
    std::atomic<std::int64_t> failed { 0 };
    std::atomic<std::int64_t> cancelled { 0 };
    std::atomic<std::int64_t> checkpoints { 0 }; // committed by rank 0
};

} // namespace scalelab::agent
