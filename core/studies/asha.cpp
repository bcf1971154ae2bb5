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
    std::sort(values.begin(), values.end());
    const double n = double(values.size());
    // numpy: quantile = q / 100; virtual index (n − 1)·quantile; the neighbours below and
    // above it; numpy's _lerp, which interpolates from the nearer end.
    const double virtualIndex = (n - 1) * (q / 100.0);
    if (virtualIndex >= n - 1)
        return values.back();
    if (virtualIndex < 0)
        return values.front();
    const double below = std::floor(virtualIndex);
    const double a = values[std::size_t(below)];
    const double b = values[std::size_t(below) + 1];
    const double t = virtualIndex - below;
    const double difference = b - a;
    return t >= 0.5 ? b - difference * (1 - t) : a + difference * t;
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

StopDecision StoppingBracket::onResult(const std::string &trial, double epochs, double value)
{
    StopDecision decision;
    for (Rung &rung : m_rungs) {
        const bool recorded = std::any_of(
            rung.recorded.begin(), rung.recorded.end(), [&](const auto &entry) { return entry.first == trial; });
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
        entries.push_back({ trial, value });
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
    return std::any_of(entries.begin(), entries.end(), [&](const Entry &e) { return e.trial == trial && e.promoted; });
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
