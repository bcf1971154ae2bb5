#include "placement.h"

#include "core_status.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace scalelab::core {
namespace {

// Workers of this configuration a node could take: now (`free`) or when idle.
int workersFit(const RunConfig &config, const NodeCapacity &node, bool idle)
{
    int fit = idle ? node.cpuCores : node.freeSlots;
    if (config.threadsPerWorker > node.cpuCores)
        return 0;
    if (config.gpusPerWorker > 0) {
        const double gpus = idle ? node.gpus : node.gpus - node.gpusInUse;
        fit = std::min(fit, int(std::floor(gpus / config.gpusPerWorker + 1e-9)));
    }
    return std::max(fit, 0);
}

QString plural(int n, const char *one, const char *many)
{
    return QStringLiteral("%1 %2").arg(n).arg(QLatin1String(n == 1 ? one : many));
}

// Success when the run would fit on the agents once they are idle; else why it cannot,
// even then ("needs 8 GPUs on one node; the largest node has 4").
Status checkFeasible(const RunConfig &config, const QList<NodeCapacity> &reachable)
{
    const double g = config.gpusPerWorker;
    int maxGpus = 0, totalGpus = 0, maxCores = 0, totalFit = 0;
    for (const auto &n : reachable) {
        maxGpus = std::max(maxGpus, n.gpus);
        totalGpus += n.gpus;
        maxCores = std::max(maxCores, n.cpuCores);
        totalFit += workersFit(config, n, true);
    }
    if (totalFit >= config.workers)
        return Status::success();
    if (config.threadsPerWorker > maxCores)
        return Status::failure(QStringLiteral("needs %1 threads per worker; the largest node has %2")
                                   .arg(config.threadsPerWorker)
                                   .arg(plural(maxCores, "core", "cores")));
    if (g > 0 && totalGpus == 0)
        return Status::failure(QStringLiteral("needs %1 GPU per worker; no agent has a GPU").arg(g));
    if (g > 1 && maxGpus < g)
        return Status::failure(
            QStringLiteral("needs %1 GPUs on one node; the largest node has %2").arg(g).arg(maxGpus));
    if (g > 0)
        return Status::failure(QStringLiteral("needs %1 × %2 GPU = %3 GPUs; the agents have %4 in all")
                                   .arg(config.workers)
                                   .arg(g)
                                   .arg(config.workers * g)
                                   .arg(totalGpus));
    return Status::failure(QStringLiteral("needs %1; the agents have %2 in all (one worker per core)")
                               .arg(plural(config.workers, "worker slot", "worker slots"))
                               .arg(totalFit));
}

// How many of `workers` ranks each open node (with the ranks it fits) takes; they fit in all.
QList<int> ranksPerNode(const QList<std::pair<NodeCapacity, int>> &open, int workers, PlacementPolicy policy)
{
    QList<int> take(open.size(), 0);
    int left = workers;
    if (policy == PlacementPolicy::Pack) {
        // Fewest nodes: the largest first (stable, so the order of agents breaks ties).
        QList<int> order(open.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(
            order.begin(), order.end(), [&](int a, int b) { return open[a].second > open[b].second; });
        for (int i : order) {
            take[i] = std::min(left, open[i].second);
            left -= take[i];
        }
        return take;
    }
    // Spread: one at a time, round the nodes in the order of agents.
    while (left > 0)
        for (int i = 0; i < open.size() && left > 0; ++i)
            if (take[i] < open[i].second) {
                ++take[i];
                --left;
            }
    return take;
}

} // namespace

Placement placeRun(const RunConfig &config, const QList<NodeCapacity> &nodes, PlacementPolicy policy,
    bool exclusive, const QString &dataset)
{
    Placement result;
    QList<NodeCapacity> reachable;
    QStringList down;
    for (const auto &n : nodes) {
        if (n.reachable)
            reachable << n;
        else
            down << QStringLiteral("%1: %2").arg(n.agent, n.error);
    }
    if (reachable.isEmpty()) {
        result.reason = nodes.isEmpty()
            ? QStringLiteral("no agent is configured for this study")
            : QStringLiteral("no agent is reachable (%1)").arg(down.join(QLatin1String("; ")));
        return result;
    }
    if (!dataset.isEmpty()) {
        QList<NodeCapacity> holding;
        QStringList elsewhere;
        for (const auto &n : reachable) {
            if (n.datasets.contains(dataset))
                holding << n;
            else
                elsewhere << QStringLiteral("%1 has %2")
                                 .arg(n.agent,
                                     n.datasets.isEmpty() ? QStringLiteral("none")
                                                          : n.datasets.join(QLatin1String(", ")));
        }
        if (holding.isEmpty()) {
            result.reason
                = QStringLiteral("no agent has the data set '%1' (%2): put CIFAR-10 into an agent's "
                                 "data folder, or create a synthetic set there (console: Run tab, "
                                 "New synthetic set; CLI: --synthetic); the run starts once one has it")
                      .arg(dataset, elsewhere.join(QLatin1String("; ")));
            result.infeasible = true;
            return result;
        }
        reachable = holding;
    }
    if (const Status feasible = checkFeasible(config, reachable); !feasible) {
        result.reason = feasible.error();
        result.infeasible = true;
        return result;
    }

    // Capacity now; hosts that run something of the study are skipped when exclusive.
    QList<std::pair<NodeCapacity, int>> open;
    int total = 0;
    for (const auto &n : reachable) {
        if (exclusive && n.busy)
            continue;
        const int fit = workersFit(config, n, false);
        if (fit > 0) {
            open.append({ n, fit });
            total += fit;
        }
    }
    if (total < config.workers) {
        result.reason
            = QStringLiteral("waiting for capacity: needs %1, %2 free now%3")
                  .arg(plural(config.workers, "worker slot", "worker slots"))
                  .arg(total)
                  .arg(exclusive ? QStringLiteral(" (nodes running another run of the study are not shared)")
                                 : QString());
        return result;
    }

    const QList<int> take = ranksPerNode(open, config.workers, policy);
    int rank = 0;
    for (int i = 0; i < open.size(); ++i) {
        if (take[i] == 0)
            continue;
        Portion p;
        p.agent = open[i].first.agent;
        for (int k = 0; k < take[i]; ++k)
            p.ranks << rank++;
        result.portions << p;
    }
    return result;
}

QStringList spreadWaitsFor(
    const Placement &placement, const QList<NodeCapacity> &candidates, int workers, const QStringList &known)
{
    QStringList silent;
    for (const NodeCapacity &n : candidates)
        if (!n.reachable && known.contains(n.agent))
            silent << n.agent;
    if (!placement.ok() || silent.isEmpty())
        return {};
    // Spread puts one rank on each open agent before a second on any: with the silent ones
    // it would be on up to that many more.
    const int could = std::min<int>(workers, int(placement.portions.size() + silent.size()));
    return int(placement.portions.size()) < could ? silent : QStringList {};
}

int microBatchesPerWorker(const RunConfig &config, int world)
{
    const int k = config.batchesPerStep();
    return (k + std::max(1, world) - 1) / std::max(1, world);
}

Placement placeElastic(const RunConfig &config, const QList<NodeCapacity> &nodes, PlacementPolicy policy,
    bool exclusive, const QString &dataset, int most)
{
    Placement none;
    none.reason
        = QStringLiteral("not even %1 of its %2 workers fit now").arg(config.minWorkers).arg(config.workers);
    if (!config.elastic())
        return none;
    RunConfig smaller = config;
    const int largest = most > 0 ? std::min(most, config.workers - 1) : config.workers - 1;
    for (int world = largest; world >= config.minWorkers; --world) {
        smaller.workers = world;
        if (!placeRun(smaller, nodes, policy, exclusive, dataset).ok())
            continue;
        // As fast with fewer: the fewest workers whose step is as short.
        int fewest = world;
        while (fewest - 1 >= config.minWorkers
            && microBatchesPerWorker(config, fewest - 1) == microBatchesPerWorker(config, world))
            --fewest;
        smaller.workers = fewest;
        return placeRun(smaller, nodes, policy, exclusive, dataset);
    }
    return none;
}

} // namespace scalelab::core
