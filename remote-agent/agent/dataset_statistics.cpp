#include "dataset_statistics.h"

#include "log.h"

#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace scalelab::agent {
namespace {

// Sizes and modification times of every file of both splits: changes when the set does.
std::string fingerprint(const std::string &dir)
{
    namespace fs = std::filesystem;
    const fs::path root = trainer::cifar::resolveDatasetDirectory(dir);
    std::string out;
    for (auto split : { trainer::cifar::Split::Train, trainer::cifar::Split::Test })
        for (const auto &name : trainer::cifar::splitFiles(split)) {
            std::error_code ec;
            const auto size = fs::file_size(root / name, ec);
            const auto time = fs::last_write_time(root / name, ec);
            out += name + ":" + std::to_string(ec ? 0 : size) + ":"
                + std::to_string(ec ? 0 : time.time_since_epoch().count()) + ";";
        }
    return out;
}

bool readSaved(
    const std::filesystem::path &path, const std::string &print, trainer::cifar::DatasetStatistics *stats)
{
    std::ifstream in(path);
    std::string savedPrint;
    if (!std::getline(in, savedPrint) || savedPrint != print)
        return false;
    for (int c = 0; c < trainer::cifar::kChannels; ++c)
        in >> stats->mean[c];
    for (int c = 0; c < trainer::cifar::kChannels; ++c)
        in >> stats->std[c];
    in >> stats->images >> stats->contentSha256;
    return static_cast<bool>(in) && stats->contentSha256.size() == 64;
}

// Temporary file, fsync, rename: a crash leaves the old record or the new one.
void save(const std::filesystem::path &path, const std::string &print,
    const trainer::cifar::DatasetStatistics &stats)
{
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    std::ostringstream text;
    text.precision(17);
    text << print << "\n";
    for (double m : stats.mean)
        text << m << " ";
    text << "\n";
    for (double s : stats.std)
        text << s << " ";
    text << "\n" << stats.images << " " << stats.contentSha256 << "\n";
    const std::string body = text.str();
    const auto temporary = path.string() + ".tmp";
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && ::write(fd, body.data(), body.size()) == ssize_t(body.size()) && ::fsync(fd) == 0;
    if (fd >= 0)
        ok = ::close(fd) == 0 && ok;
    if (ok)
        std::filesystem::rename(temporary, path, ec);
    if (!ok || ec) {
        std::filesystem::remove(temporary, ec);
        logMessage(LogLevel::Warning,
            "cannot keep data set statistics in " + path.string()
                + "; they will be measured again after a restart");
    }
}

} // namespace

DatasetStatisticsCache::DatasetStatisticsCache(std::filesystem::path stateDir)
    : m_dir(std::move(stateDir) / "datasets")
{ }

common::Result<trainer::cifar::DatasetStatistics> DatasetStatisticsCache::get(
    const std::string &name, const std::string &dir)
{
    const std::string print = fingerprint(dir);
    std::lock_guard lock(m_mutex); // one measurement per set at a time
    if (auto it = m_known.find(name); it != m_known.end() && it->second.first == print)
        return it->second.second;
    trainer::cifar::DatasetStatistics stats;
    const auto file = m_dir / (name + ".statistics");
    if (!readSaved(file, print, &stats)) {
        auto measured = trainer::cifar::measureDataset(dir);
        if (!measured)
            return common::Status::failure(measured.error());
        stats = *measured;
        logMessage(LogLevel::Info,
            "measured data set " + name + " (" + std::to_string(stats.images) + " training images): mean "
                + std::to_string(stats.mean[0]) + " " + std::to_string(stats.mean[1]) + " "
                + std::to_string(stats.mean[2]) + ", std " + std::to_string(stats.std[0]) + " "
                + std::to_string(stats.std[1]) + " " + std::to_string(stats.std[2]) + ", sha256 "
                + stats.contentSha256.substr(0, 12));
        save(file, print, stats);
    }
    m_known[name] = { print, stats };
    return stats;
}

} // namespace scalelab::agent
