// The plan the study tests start from (tst_study_plan, tst_study_journal): valid, two worker
// counts, one batch size and epoch count, on the synthetic set.
#pragma once

#include <scalelab/v1/study.pb.h>

namespace scalelab::test {

inline v1::StudyPlan validPlan()
{
    v1::StudyPlan plan;
    plan.set_name("p");
    plan.set_dataset("synthetic");
    plan.mutable_grid()->add_workers(2);
    plan.mutable_grid()->add_workers(4);
    plan.mutable_grid()->add_batch_size(64);
    plan.mutable_grid()->add_epochs(3);
    return plan;
}

} // namespace scalelab::test
