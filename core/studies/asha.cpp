#include "asha.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalelab::core::asha {

double nanPercentile(std::vector<double> values, double q)
{
    std::erase_if(values, [](double v) { return std::isnan(v); });
    if (values.empty())
        return std::numeric_limits<double>::quiet_NaN();
    // −0 before +0: numpy's partition leaves equal zeros in an order of its own; this one
    // is fixed, and gives numpy's +0 where it does (issue 35: {0,0,0,0,−0,−0,0} at 75).
    std::sort(values.begin(), values.end(),
        [](double a, double b) { return a < b || (a == b && std::signbit(a) && !std::signbit(b)); });
    const double n = double(values.size());
    // numpy's _quantile, method "linear", step by step: the virtual index (n − 1)·q/100;
    // _get_indexes (above the top both neighbours are the last value and the previous
    // index is −1; below the bottom both are the first and it is 0); γ = virtual index −
    // previous index; _lerp, from the nearer end. At the top that is x − (x − x)·(1 − γ):
    // NaN for an infinite x, as numpy gives (issue 35: a rung holding only +inf).
    const double virtualIndex = (n - 1) * (q / 100.0);
    double previousIndex = std::floor(virtualIndex);
    std::size_t below = std::size_t(std::max(0.0, previousIndex));
    std::size_t above = below + 1;
    if (virtualIndex >= n - 1) {
        previousIndex = -1;
        below = above = values.size() - 1;
    } else if (virtualIndex < 0) {
        previousIndex = 0;
        below = above = 0;
    }
    const double a = values[below];
    const double b = values[above];
    const double gamma = virtualIndex - previousIndex;
    const double difference = b - a;
    return gamma >= 0.5 ? b - difference * (1 - gamma) : a + difference * gamma;
}

std::vector<double> milestones(double gracePeriod, double maxEpochs, double reductionFactor, int s)
{
    // Python's int() truncates toward zero; a negative count is no rung.
    const double count = std::trunc(std::log(maxEpochs / gracePeriod) / std::log(reductionFactor) - s + 1);
    std::vector<double> out;
    for (int k = 0; k < int(count); ++k)
        out.push_back(gracePeriod * std::pow(reductionFactor, k + s));
    return out;
}

StoppingBracket::StoppingBracket(double gracePeriod, double maxEpochs, double reductionFactor, int s)
    : m_reductionFactor(reductionFactor)
{
    const std::vector<double> ascending = milestones(gracePeriod, maxEpochs, reductionFactor, s);
    for (auto it = ascending.rbegin(); it != ascending.rend(); ++it)
        m_rungs.push_back({ *it, {} });
}

namespace {

std::vector<double> valuesOf(const std::vector<std::pair<std::string, double>> &recorded)
{
    std::vector<double> values;
    values.reserve(recorded.size());
    for (const auto &[trial, value] : recorded)
        values.push_back(value);
    return values;
}

} // namespace

std::optional<double> StoppingBracket::cutoff(double milestone) const
{
    for (const Rung &rung : m_rungs)
        if (rung.milestone == milestone && !rung.recorded.empty())
            return nanPercentile(valuesOf(rung.recorded), (1 - 1 / m_reductionFactor) * 100);
    return std::nullopt;
}

void StoppingBracket::onComplete(const std::string &trial, double epochs, double value)
{
    (void)onResult(trial, epochs, value);
}

StopDecision StoppingBracket::onResult(const std::string &trial, double epochs, double value)
{
    StopDecision decision;
    for (Rung &rung : m_rungs) {
        const bool recorded = std::any_of(rung.recorded.begin(), rung.recorded.end(),
            [&](const auto &entry) { return entry.first == trial; });
        if (epochs < rung.milestone || recorded)
            continue;
        decision.rung = rung.milestone;
        decision.seen = valuesOf(rung.recorded);
        decision.cutoff = cutoff(rung.milestone);
        // NaN on either side compares false: the trial continues.
        decision.stop = decision.cutoff && value < *decision.cutoff;
        rung.recorded.emplace_back(trial, value);
        break;
    }
    return decision;
}

PromotionRungs::PromotionRungs(int rungs, double reductionFactor)
    : m_reductionFactor(reductionFactor)
    , m_rungs(std::size_t(std::max(1, rungs)))
{ }

void PromotionRungs::record(const std::string &trial, int rung, double value)
{
    if (rung < 0 || rung >= int(m_rungs.size()))
        return;
    auto &entries = m_rungs[std::size_t(rung)];
    if (std::none_of(entries.begin(), entries.end(), [&](const Entry &e) { return e.trial == trial; }))
        entries.push_back({ trial, value, m_withdrawn.contains(trial) });
}

std::optional<PromotionRungs::Promotion> PromotionRungs::nextPromotion()
{
    // From the second-highest rung down: a trial at the top rung has nothing to reach.
    for (int k = int(m_rungs.size()) - 2; k >= 0; --k) {
        auto &entries = m_rungs[std::size_t(k)];
        std::vector<std::size_t> order(entries.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        // Best first; NaN last; equal values in recording order.
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            const double x = entries[a].value;
            const double y = entries[b].value;
            if (std::isnan(x) || std::isnan(y))
                return !std::isnan(x) && std::isnan(y);
            return x > y;
        });
        const auto top = std::size_t(std::floor(double(entries.size()) / m_reductionFactor));
        for (std::size_t i = 0; i < top; ++i) {
            Entry &candidate = entries[order[i]];
            if (candidate.promoted || std::isnan(candidate.value))
                continue;
            candidate.promoted = true;
            return Promotion { candidate.trial, k, candidate.value };
        }
    }
    return std::nullopt;
}

bool PromotionRungs::promoted(const std::string &trial, int fromRung) const
{
    if (fromRung < 0 || fromRung >= int(m_rungs.size()))
        return false;
    const auto &entries = m_rungs[std::size_t(fromRung)];
    return std::any_of(
        entries.begin(), entries.end(), [&](const Entry &e) { return e.trial == trial && e.promoted; });
}

bool PromotionRungs::markPromoted(const std::string &trial, int fromRung)
{
    if (fromRung < 0 || fromRung >= int(m_rungs.size()))
        return false;
    for (Entry &e : m_rungs[std::size_t(fromRung)])
        if (e.trial == trial) {
            e.promoted = true;
            return true;
        }
    return false;
}

void PromotionRungs::withdraw(const std::string &trial)
{
    m_withdrawn.insert(trial); // what it records later is never promoted either
    for (auto &entries : m_rungs)
        for (Entry &e : entries)
            if (e.trial == trial)
                e.promoted = true;
}

std::vector<double> PromotionRungs::values(int rung) const
{
    std::vector<double> out;
    if (rung < 0 || rung >= int(m_rungs.size()))
        return out;
    for (const Entry &e : m_rungs[std::size_t(rung)])
        out.push_back(e.value);
    return out;
}

} // namespace scalelab::core::asha
