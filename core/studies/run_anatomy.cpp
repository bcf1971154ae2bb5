#include "run_anatomy.h"

#include <algorithm>

namespace scalelab::core {

EpochTimes epochTimesOf(const v1::EpochMetrics &m)
{
    EpochTimes t { m.train_seconds(), m.evaluation_seconds(), {} };
    for (const auto &r : m.ranks())
        t.ranks.append({ r.rank(), r.steps(),
            { r.data_seconds(), r.forward_seconds(), r.backward_seconds(), r.exposed_allreduce_seconds(),
                r.optimizer_seconds() } });
    return t;
}

RunAnatomy anatomyOf(const QMap<int, EpochTimes> &epochs, double checkpointSeconds)
{
    RunAnatomy a;
    a.checkpointSeconds = checkpointSeconds;
    QMap<int, RankTimes> sums;
    for (const EpochTimes &e : epochs) {
        a.trainSeconds += e.trainSeconds;
        a.evaluationSeconds += e.evaluationSeconds;
        for (const RankTimes &r : e.ranks) {
            RankTimes &sum = sums[r.rank];
            if (sum.steps == 0)
                sum = { r.rank, 0, StepTimes::zero() };
            sum.steps += r.steps;
            sum.perStep += r.perStep;
        }
    }
    for (RankTimes r : sums) {
        if (r.steps <= 0)
            continue;
        r.perStep = r.perStep.dividedBy(double(r.steps));
        a.ranks.append(r);
    }
    if (a.ranks.isEmpty())
        return a;
    a.steps = a.ranks.first().steps;
    a.perStep = a.ranks.first().perStep;
    if (a.ranks.size() > 1) {
        // Its own work: everything but the wait for the others.
        QList<double> own;
        for (const RankTimes &r : a.ranks)
            own << r.perStep.data + r.perStep.compute();
        QList<double> sorted = own;
        std::sort(sorted.begin(), sorted.end());
        const double median = sorted.size() % 2
            ? sorted[sorted.size() / 2]
            : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
        const auto slowest = std::max_element(own.begin(), own.end()) - own.begin();
        a.slowestRank = a.ranks[int(slowest)].rank;
        a.slowestLagSeconds = own[int(slowest)] - median;
    }
    return a;
}

RunNetwork networkOf(const v1::NetworkProbe &probe)
{
    RunNetwork n { probe.world_size(), QString::fromStdString(probe.backend()), probe.hosts(), {} };
    for (const auto &sample : probe.samples()) {
        NetworkSample ns { sample.bytes(), {} };
        for (double t : sample.seconds())
            ns.seconds << t;
        n.samples << ns;
    }
    return n;
}

double coreShareOf(const v1::RunStarted &started)
{
    const v1::CoreShare &share = started.core_share();
    if (share.cores() <= 0 || share.threads() <= 0 || started.device().rfind("cuda", 0) == 0)
        return 1;
    // Against one rank alone there: a rank of 1 thread under a quota of half a core shares
    // with nobody (its machine is just slower), two of them share.
    return std::max(1.0, share.threads() / std::max(share.cores(), double(std::max(1, started.threads()))));
}

} // namespace scalelab::core
