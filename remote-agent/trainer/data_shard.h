// Which images a rank trains on in an epoch. Std only (in scalelab_trainer_rules), so the
// rule is unit-tested without libtorch (tst_trainer_rules). Any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace scalelab::trainer {

// This rank's share of an epoch: the same seeded permutation on every rank, padded to
// a multiple of the world size (as DistributedSampler), then every world-th index.
inline std::vector<std::int64_t> shardForEpoch(
    std::int64_t size, std::uint64_t seed, int epoch, int rank, int world)
{
    std::vector<std::int64_t> order(std::size_t(size), 0);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed * 1'000'003ULL + std::uint64_t(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    const std::int64_t perRank = (size + world - 1) / world;
    for (std::int64_t i = 0; std::int64_t(order.size()) < perRank * world; ++i)
        order.push_back(order[std::size_t(i)]);
    std::vector<std::int64_t> shard;
    for (std::int64_t i = rank; i < perRank * world; i += world)
        shard.push_back(order[std::size_t(i)]);
    return shard;
}

} // namespace scalelab::trainer
