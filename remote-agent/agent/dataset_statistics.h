// Per-data-set normalisation and content checksum, measured once and kept.
#pragma once

#include "cifar10.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace scalelab::agent {

// Measures a data set's per-channel statistics and checksum (trainer::cifar::measureDataset) the
// first time it is asked for, and again only when the set's files change (size or
// modification time). Results are kept in memory and under `stateDir`/datasets/, so an
// agent restart does not read every image again. Thread-safe.
class DatasetStatisticsCache {
public:
    explicit DatasetStatisticsCache(std::filesystem::path stateDir);

    // Fails (saying why) when the set cannot be read.
    common::Result<trainer::cifar::DatasetStatistics> get(const std::string &name, const std::string &dir);

private:
    std::filesystem::path m_dir;
    std::mutex m_mutex;
    std::map<std::string, std::pair<std::string, trainer::cifar::DatasetStatistics>>
        m_known; // name -> (fingerprint, stats)
};

} // namespace scalelab::agent
