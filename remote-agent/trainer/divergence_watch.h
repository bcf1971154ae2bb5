// When a run has diverged, as the training loop asks after every step. Torch-free (it
// only formats numbers with EventWriter's rule), so it is unit-tested without libtorch
// (tst_trainer_rules). One per run, on the training thread.
#pragma once

#include "event_writer.h"
#include "status.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace scalelab::trainer {

// Says when a run has diverged: a non-finite loss at once, or a loss above `factor` x its
// reference for `steps` steps in a row. The reference is the first loss this process saw,
// and at least ln 10, the loss of a uniform guess over the 10 classes, so a resumed run
// whose loss is already low is not held to a tighter bound than a fresh one.
class DivergenceWatch {
public:
    DivergenceWatch(double factor, int steps)
        : m_factor(factor)
        , m_steps(steps)
    { }

    // Success while the run is healthy, else a failure that says "diverged at step N (...)".
    common::Status observe(std::int64_t step, double loss)
    {
        if (!std::isfinite(loss))
            return common::Status::failure("diverged at step " + std::to_string(step) + " (loss "
                + (std::isnan(loss) ? "nan" : "inf") + "): lower the learning rate or lengthen the warm-up");
        if (m_reference == 0)
            m_reference = std::max(loss, std::log(10.0));
        m_above = loss > m_factor * m_reference ? m_above + 1 : 0;
        if (m_above >= m_steps)
            return common::Status::failure("diverged at step " + std::to_string(step) + " (loss "
                + EventWriter::number(loss) + ", above " + EventWriter::number(m_factor) + " x the starting "
                + EventWriter::number(m_reference) + " for " + std::to_string(m_steps)
                + " steps): lower the learning rate or lengthen the warm-up");
        return common::Status::success();
    }

private:
    double m_factor;
    int m_steps;
    double m_reference = 0;
    int m_above = 0;
};

} // namespace scalelab::trainer
