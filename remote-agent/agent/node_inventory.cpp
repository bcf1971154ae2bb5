#include "node_inventory.h"

#include "build_info.h"
#include "cifar10.h"
#include "gpu_monitor.h"
#include "safe_name.h"

#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <fstream>
#include <sys/utsname.h>
#include <unistd.h>

namespace scalelab::agent {

namespace {

std::string hostName()
{
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return host;
}

// The kind named in a synthetic set's marker ("... (kind shapes, seed ..."), "patterns" for
// sets written before there were kinds.
std::string syntheticKindOf(const std::string &directory)
{
    std::ifstream marker(std::filesystem::path(directory) / trainer::cifar::kSyntheticMarker);
    std::string text((std::istreambuf_iterator<char>(marker)), std::istreambuf_iterator<char>());
    const auto at = text.find("(kind ");
    if (at == std::string::npos)
        return "patterns";
    const auto end = text.find_first_of(",)", at + 6);
    return text.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

std::string firstLineStartingWith(const char *path, const std::string &prefix)
{
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0)
            return line.substr(prefix.size());
    return {};
}

std::string cpuModel()
{
    std::string model = firstLineStartingWith("/proc/cpuinfo", "model name");
    if (const auto colon = model.find(':'); colon != std::string::npos)
        model = model.substr(colon + 1);
    while (!model.empty() && model.front() == ' ')
        model.erase(model.begin());
    return model.empty() ? "unknown" : model;
}

std::string operatingSystem()
{
    std::string name = firstLineStartingWith("/etc/os-release", "PRETTY_NAME=");
    name.erase(std::remove(name.begin(), name.end(), '"'), name.end());
    struct utsname u { };
    if (::uname(&u) == 0)
        name += std::string(name.empty() ? "" : ", ") + u.sysname + " " + u.release + " " + u.machine;
    return name;
}

} // namespace

int cpuCores()
{
    return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

NodeInventory::NodeInventory(std::filesystem::path dataDir, const std::filesystem::path &stateDir)
    : m_dataDir(std::move(dataDir))
    , m_statistics(std::make_unique<DatasetStatisticsCache>(stateDir))
{ }

std::vector<v1::Dataset> NodeInventory::datasets() const
{
    std::vector<v1::Dataset> found;
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(m_dataDir, ec)) {
        if (!entry.is_directory() || !common::isSafeName(entry.path().filename().string()))
            continue;
        const auto summary = trainer::cifar::inspectDataset(entry.path().string());
        if (!summary)
            continue; // not a data set (or a broken one; training would say why)
        v1::Dataset d;
        d.set_name(entry.path().filename().string());
        d.set_format("cifar10-binary");
        d.set_synthetic(summary->synthetic);
        d.set_train_images(summary->trainImages);
        d.set_test_images(summary->testImages);
        if (summary->synthetic)
            d.set_synthetic_kind(syntheticKindOf(summary->directory));
        if (const auto stats = m_statistics->get(d.name(), entry.path().string())) {
            for (int c = 0; c < trainer::cifar::kChannels; ++c) {
                d.add_channel_mean(stats->mean[c]);
                d.add_channel_std(stats->std[c]);
            }
            d.set_content_sha256(stats->contentSha256);
        }
        found.push_back(std::move(d));
    }
    std::sort(found.begin(), found.end(), [](const auto &a, const auto &b) { return a.name() < b.name(); });
    return found;
}

void NodeInventory::describe(v1::DescribeResponse *response) const
{
    response->set_hostname(hostName());
    response->set_agent_version(SCALELAB_VERSION);
    response->set_cpu_model(cpuModel());
    auto &software = *response->mutable_software();
    software["scalelab"] = SCALELAB_VERSION;
    software["git_commit"] = common::gitCommit();
    software["grpc"] = grpc::Version();
    software["protobuf"] = google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
#if defined(__clang__)
    software["compiler"] = "clang " __clang_version__;
#else
    software["compiler"] = "gcc " __VERSION__;
#endif
    software["os"] = operatingSystem();
    response->set_cpu_cores(cpuCores());
    response->set_memory_bytes(static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE));
    response->set_data_dir(m_dataDir.string());
    for (auto &gpu : GpuMonitor::instance().devices())
        *response->add_gpus() = std::move(gpu);
    response->set_gpu_status(GpuMonitor::instance().status());
    for (auto &d : datasets())
        *response->add_datasets() = std::move(d);
}

} // namespace scalelab::agent
