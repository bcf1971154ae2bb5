// RunEvent builders the tests share: each sets what its kind of event says about a run's
// progress, and a test adds the fields it checks. Header-only: the protobuf messages are not
// linked into scalelab_test_support, which builds without the app.
#pragma once

#include <scalelab/v1/agent.pb.h>

#include <cstdint>

namespace scalelab::test {

// An attempt started: `epochs` planned, of `stepsPerEpoch` steps, resumed from the checkpoint of
// epoch `resumedFromEpoch` (0: from the start).
inline v1::RunEvent startedEvent(int epochs, std::int64_t stepsPerEpoch, int resumedFromEpoch = 0)
{
    v1::RunEvent event;
    auto *started = event.mutable_started();
    started->mutable_effective()->set_epochs(epochs);
    started->set_steps_per_epoch(stepsPerEpoch);
    started->set_resumed_from_epoch(resumedFromEpoch);
    return event;
}

// Optimizer step `step` (counted over the whole run), in `epoch`, at `loss`.
inline v1::RunEvent stepEvent(int epoch, std::int64_t step, double loss)
{
    v1::RunEvent event;
    auto *s = event.mutable_step();
    s->set_epoch(epoch);
    s->set_step(step);
    s->set_loss(loss);
    return event;
}

// Epoch `epoch` ended, `elapsedSeconds` after training started.
inline v1::RunEvent epochEvent(int epoch, double elapsedSeconds)
{
    v1::RunEvent event;
    auto *m = event.mutable_epoch();
    m->set_epoch(epoch);
    m->set_elapsed_seconds(elapsedSeconds);
    return event;
}

} // namespace scalelab::test
