// Feeds: the bytes of a study plan file (what `study plan --check`, `study run` and the
// console's Load plan read). Why: plans come from users and other tools; the parser,
// checkShape and checkPlan must answer every input with problems, never crash.
// Checks beyond "no crash": a plan that passes checkPlan survives planToJson ->
// parsePlanJson (what savePlan/loadPlan do) unchanged, and every run it expands to
// is a RunSpec the agent's own rules (checkRunSpec) accept.
#include "fuzz_support.h"

#include "spec_rules.h"
#include "study_plan.h"

#include <google/protobuf/util/message_differencer.h>

#include <QString>

#include <cstdint>

using namespace scalelab;

namespace {

// The number of runs expandPlan makes; expanding is skipped above a bound, as a plan
// of millions of runs is the planner's business, not the parser's.
double runCount(const v1::StudyPlan &plan)
{
    const auto atLeastOne = [](int n) { return double(n > 0 ? n : 1); };
    const auto &g = plan.grid();
    const double grid = atLeastOne(g.workers_size()) * atLeastOne(g.batch_size_size())
        * atLeastOne(g.epochs_size()) * atLeastOne(g.gpus_per_worker_size())
        * atLeastOne(g.threads_per_worker_size()) * atLeastOne(g.precision_size())
        * atLeastOne(g.lr_rule_size());
    return (grid + (plan.baseline().skip() ? 0 : 1)) * std::max(1, plan.repeats());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    const QByteArray json(reinterpret_cast<const char *>(data), static_cast<qsizetype>(size));
    const auto plan = core::parsePlanJson(json);
    fuzz::check(plan.ok() == plan.error().isEmpty(), "parsePlanJson: a plan xor problems");
    if (!plan)
        return 0;
    if (!core::checkPlan(*plan))
        return 0;

    // Saved and loaded again, a valid plan is the same plan and still valid.
    const auto reread = core::parsePlanJson(core::planToJson(*plan));
    fuzz::check(
        reread.ok(), "a valid plan, saved, does not load: " + reread.error().join(u"; ").toStdString());
    fuzz::check(google::protobuf::util::MessageDifferencer::Equals(*plan, *reread),
        "a valid plan changes when saved and loaded");
    fuzz::check(core::checkPlan(*reread).ok(), "a valid plan, saved and loaded, is no longer valid");

    if (runCount(*plan) > 2000)
        return 0;
    const auto runs = core::expandPlan(*plan, QStringLiteral("st-fuzz"));
    fuzz::check(!runs.isEmpty() || plan->baseline().skip(), "a valid plan expands to no runs");
    // What the runner sends each run's agent: with learningRateAuto, after a range test.
    const std::optional<core::FoundLearningRate> found
        = plan->learning_rate_auto() ? std::optional(core::FoundLearningRate { 0.05, 64 }) : std::nullopt;
    for (const auto &run : runs) {
        const v1::RunSpec spec = core::runSpecFor(*plan, run.config, found);
        const rules::SpecStatus accepted = rules::checkRunSpec(spec, { "spec.", false, false });
        fuzz::check(accepted.ok(),
            "checkPlan accepts a plan whose run " + run.runId.toStdString()
                + " the agent refuses: " + (accepted.ok() ? std::string() : accepted.error().front().text()));
        (void)rules::withDefaults(spec);
    }
    return 0;
}
