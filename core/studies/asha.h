// Asynchronous successive halving (ASHA), the decisions alone: no runs, no journal, no
// clock. A tune feeds it each trial's metric after each completed epoch, in the order the
// results were recorded, and journals what it answers; replaying the same results gives
// the same answers, bit for bit.
//
// Two variants (issue 18):
//  - stopping, as Ray Tune's ASHAScheduler (ray/tune/schedulers/async_hyperband.py): at a
//    rung, a result is compared with the (1 − 1/η) quantile of the values already recorded
//    there (numpy.nanpercentile, linear), and the trial stops when strictly below it;
//  - promotion, as Li et al., "A System for Massively Parallel Hyperparameter Tuning"
//    (MLSys 2020), Algorithm 2: trials pause at a rung and the best 1/η of a rung are
//    promoted to the next one, resumed from their checkpoints.
//
// Values are "higher is better": callers negate a metric to be minimised (mode min), as
// Ray does. std only; plain values, not thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace scalelab::core::asha {

// numpy.nanpercentile(values, q) with numpy's default method ("linear", numpy ≥ 1.22),
// bit for bit: NaN values ignored; NaN when none is left, and NaN where numpy's arithmetic
// gives it (a set of one infinite value). q in [0, 100]. Of equal zeros, −0 sorts first.
[[nodiscard]] double nanPercentile(std::vector<double> values, double q);

// The rungs' milestones (completed epochs) of bracket `s`, ascending: grace·η^(k+s) for
// k < int(log(maxEpochs / grace) / log(η) − s + 1), as Ray computes them.
[[nodiscard]] std::vector<double> milestones(
    double gracePeriod, double maxEpochs, double reductionFactor, int s);

struct StopDecision {
    bool stop = false;
    // The milestone the result was judged and recorded at; nullopt when it is at no new
    // rung (between rungs, or at the rung where the trial was already recorded).
    std::optional<double> rung;
    std::optional<double> cutoff; // nullopt: the rung was empty; NaN: it held only NaN
    std::vector<double> seen; // the values recorded at the rung before this one, in order
};

// One bracket of the stopping variant (Ray's _Bracket).
class StoppingBracket {
public:
    StoppingBracket(double gracePeriod, double maxEpochs, double reductionFactor, int s = 0);

    // A result of `trial` after `epochs` completed epochs. Judged at the highest rung it
    // has reached and is not yet recorded at; recorded there whatever the answer.
    StopDecision onResult(const std::string &trial, double epochs, double value);

    // The trial ended (stopped by this rule, or trained to the end) with this last result:
    // Ray's on_trial_complete, which passes it to on_result once more, so a trial that
    // skipped a milestone is recorded there too. Decides nothing.
    void onComplete(const std::string &trial, double epochs, double value);

    // The cutoff a new result at `milestone` would face now (nullopt: an empty rung).
    [[nodiscard]] std::optional<double> cutoff(double milestone) const;

private:
    struct Rung {
        double milestone;
        std::vector<std::pair<std::string, double>> recorded; // in recording order
    };
    double m_reductionFactor;
    std::vector<Rung> m_rungs; // highest milestone first, as Ray walks them
};

// The promotion variant's rungs (Algorithm 2's get_job). Rung 0 holds every trial's
// result at the first milestone; rung k + 1 only trials promoted from rung k.
class PromotionRungs {
public:
    PromotionRungs(int rungs, double reductionFactor);

    // A trial paused at `rung` (0-based) with `value`. A trial is recorded once per rung.
    void record(const std::string &trial, int rung, double value);

    struct Promotion {
        std::string trial;
        int fromRung = 0; // it resumes to reach rung fromRung + 1
        double value = 0; // its value at fromRung
    };
    // What to run next: the best trial not yet promoted among the top ⌊n/η⌋ of the
    // highest rung that has one (rungs searched from the top, as in Algorithm 2), or
    // nullopt, meaning "start a new trial". Ties go to the trial recorded first; NaN
    // values rank last and are never promoted. Marks the trial promoted.
    std::optional<Promotion> nextPromotion();

    [[nodiscard]] bool promoted(const std::string &trial, int fromRung) const;
    // Marks a promotion decided before (a journal replayed): false when the trial was
    // not recorded at that rung.
    bool markPromoted(const std::string &trial, int fromRung);
    // The trial left its rungs (continued by hand, or cancelled): never promoted again, also
    // from a rung it is recorded at later; its values still count in the rungs' sizes and ranks.
    void withdraw(const std::string &trial);
    // The values recorded at `rung`, in recording order.
    [[nodiscard]] std::vector<double> values(int rung) const;

private:
    double m_reductionFactor;
    struct Entry {
        std::string trial;
        double value;
        bool promoted = false;
    };
    std::vector<std::vector<Entry>> m_rungs;
    std::set<std::string> m_withdrawn;
};

} // namespace scalelab::core::asha
