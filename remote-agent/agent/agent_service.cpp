#include "agent_service.h"

#include "request_limits.h"

#include "checkpoint_transfer.h"
#include "cifar10.h"
#include "cpu_features.h"
#include "gpu_monitor.h"
#include "log.h"
#include "node_sampler.h"
#include "process_launcher.h"
#include "worker_channel.h"
#include "worker_command.h"
#include "build_info.h"
#include "start_request.h"
#include "spec_rules.h"

#include <google/protobuf/stubs/common.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <sys/statvfs.h>
#include <csignal>
#include <cstring>
#include <malloc.h>
#include <poll.h>
#include <sys/wait.h>
#include <cmath>
#include <fstream>
#include <netinet/in.h>
#include <set>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

namespace scalelab::agent {

namespace {

grpc::Status invalid(const std::string &message)
{
    return { grpc::StatusCode::INVALID_ARGUMENT, message };
}

grpc::Status precondition(const std::string &message)
{
    return { grpc::StatusCode::FAILED_PRECONDITION, message };
}

int cpuCores()
{
    return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// Constant-time comparison: the time taken does not reveal how much of a guess matched.
bool sameSecret(std::string_view a, std::string_view b)
{
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const std::size_t n = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= x ^ y;
    }
    return diff == 0;
}

std::string hostName()
{
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return host;
}

// A port the kernel reports free right now (the TCPStore binds it moments later).
int freeTcpPort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    sockaddr_in address {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof address;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0
        && ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) == 0)
        port = ntohs(address.sin_port);
    ::close(fd);
    return port;
}

std::string join(const std::vector<std::string> &parts, const std::string &separator)
{
    std::string joined;
    for (const auto &part : parts)
        joined += (joined.empty() ? "" : separator) + part;
    return joined;
}

grpc::Status badRunId(const std::string &field, const std::string &value)
{
    return invalid(badNameMessage(field, value));
}

} // namespace

AgentService::AgentService(AgentOptions options)
    : m_options(std::move(options))
    , m_statistics(std::make_unique<DatasetStatisticsCache>(m_options.stateDir))
    , m_streams(std::make_unique<StreamLimits>(
          m_options.maxStreams, m_options.maxStreamsPerClient, m_options.streamStall))
{
    restoreRuns();
}

namespace {

// The newest attempt of runs/<run_id> whose records can be read (older ones stay on disk:
// a newer attempt whose records are damaged, by a full disk say, does not hide them).
// `problems` gets one line per attempt skipped.
std::shared_ptr<RunSupervisor> openNewestAttempt(
    const std::filesystem::path &runPath, bool closeIfActive, std::vector<std::string> *problems)
{
    for (int attempt : attemptsOf(runPath)) {
        auto run = RunSupervisor::restore(runPath / std::to_string(attempt), closeIfActive);
        if (run)
            return std::move(run).value();
        problems->push_back("attempt " + std::to_string(attempt) + ": " + run.error());
    }
    return nullptr;
}

} // namespace

void AgentService::restoreRuns()
{
    const auto runsDir = m_options.stateDir / "runs";
    std::error_code ec;
    int reopened = 0, interrupted = 0;
    for (const auto &runEntry : std::filesystem::directory_iterator(runsDir, ec)) {
        const std::string runId = runEntry.path().filename().string();
        if (!runEntry.is_directory() || !common::isSafeName(runId))
            continue;
        ++m_recordedRuns;
        // A run that ended is only counted: it is read back from disk when asked for.
        if (const auto attempts = attemptsOf(runEntry.path());
            !attempts.empty() && readOutcome(runEntry.path() / std::to_string(attempts.front())))
            continue;
        std::vector<std::string> problems;
        auto run = openNewestAttempt(runEntry.path(), /*closeIfActive=*/true, &problems);
        if (!problems.empty())
            logMessage(LogLevel::Warning,
                "run " + runId + ": skipped unreadable attempt(s) (" + join(problems, "; ") + ")"
                    + (run ? "; reopened attempt " + std::to_string(run->attempt()) : "; nothing to reopen"));
        if (!run)
            continue;
        ++reopened;
        if (!run->closedOnRestore()) {
            // Ended before there were outcome files: write one, so the next start is quick
            // (best effort: without it the next start reads the event log, as this one did).
            (void)writeOutcome(runEntry.path() / std::to_string(run->attempt()), run->info());
            continue;
        }
        ++interrupted; // the console will ask for these soon: kept at hand (its outcome is written)
        m_runs[runId] = std::move(run);
        keepRecentLocked(runId);
    }
    // No run is active yet: what killed workers left half-written goes now, and so do the
    // checkpoints of finished runs that the retention rule no longer keeps.
    std::int64_t swept = 0;
    const auto removed = collectGarbage(m_options.stateDir, runsOnDisk(), v1::CollectGarbageRequest {},
        m_options.retention,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    for (const auto &r : removed)
        swept += r.bytes();
    if (!removed.empty())
        logMessage(LogLevel::Info,
            "removed " + std::to_string(removed.size()) + " checkpoint folder(s) (unfinished ones, and what "
                + m_options.retention.words() + " does not keep), " + std::to_string(swept / 1'000'000) + " MB");
    if (m_recordedRuns > 0)
        logMessage(LogLevel::Info,
            std::to_string(m_recordedRuns) + " run(s) recorded in " + runsDir.string() + "; "
                + std::to_string(interrupted) + " closed as FAILED (interrupted: active when the agent stopped), "
                + std::to_string(reopened - interrupted) + " older record(s) given an outcome.json");
}

bool AgentService::shuttingDown() const
{
    std::lock_guard lock(m_mutex);
    return m_shuttingDown;
}

AgentService::~AgentService()
{
    shutdown();
}

void AgentService::shutdown()
{
    std::map<std::string, std::shared_ptr<RunSupervisor>> runs;
    {
        std::lock_guard lock(m_mutex);
        m_shuttingDown = true;
        runs = m_runs;
    }
    for (auto &[id, run] : runs)
        run->interrupt(std::chrono::milliseconds(3000));
    for (auto &[id, run] : runs)
        run->waitFinished();
}

grpc::Status AgentService::admit(grpc::ServerContext *context, const google::protobuf::Message &request) const
{
    if (auto s = authorize(context); !s.ok())
        return s;
    if (const std::string problem = checkRequestLimits(request).error(); !problem.empty())
        return invalid(problem);
    return grpc::Status::OK;
}

grpc::Status AgentService::authorize(grpc::ServerContext *context) const
{
    if (m_options.token.empty())
        return grpc::Status::OK;
    const auto &metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    const std::string expected = "Bearer " + m_options.token;
    if (it == metadata.end()
        || !sameSecret(std::string_view(it->second.data(), it->second.size()), expected)) {
        logMessage(LogLevel::Warning,
            "rejected a call from " + context->peer()
                + (it == metadata.end() ? ": no token" : ": wrong token"));
        return { grpc::StatusCode::UNAUTHENTICATED,
            "this agent requires a token: pass the agent's token (authorization: Bearer "
            "<token>), as printed or configured when the agent started" };
    }
    return grpc::Status::OK;
}

namespace {

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
    struct utsname u {};
    if (::uname(&u) == 0)
        name += std::string(name.empty() ? "" : ", ") + u.sysname + " " + u.release + " " + u.machine;
    return name;
}

} // namespace

std::vector<v1::Dataset> AgentService::scanDatasets() const
{
    std::vector<v1::Dataset> found;
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(m_options.dataDir, ec)) {
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

std::shared_ptr<RunSupervisor> AgentService::findRun(const std::string &runId)
{
    std::lock_guard lock(m_mutex);
    return findRunLocked(runId);
}

std::shared_ptr<RunSupervisor> AgentService::findRunLocked(const std::string &runId)
{
    if (const auto it = m_runs.find(runId); it != m_runs.end())
        return it->second;
    // Not active and not finished lately: its records are on disk, if anywhere. Every
    // active run is in m_runs (a start inserts it under this lock before writing its
    // records), so what is read here has ended and is only read.
    const auto runPath = m_options.stateDir / "runs" / runId;
    std::error_code ec;
    if (!common::isSafeName(runId) || !std::filesystem::is_directory(runPath, ec))
        return nullptr;
    std::vector<std::string> problems;
    auto run = openNewestAttempt(runPath, /*closeIfActive=*/false, &problems);
    if (!run)
        return nullptr;
    m_runs[runId] = run;
    keepRecentLocked(runId);
    return run;
}

void AgentService::keepRecentLocked(const std::string &runId)
{
    m_recentFinished.erase(
        std::remove(m_recentFinished.begin(), m_recentFinished.end(), runId), m_recentFinished.end());
    m_recentFinished.push_back(runId);
    while (m_recentFinished.size() > m_options.finishedRunsInMemory) {
        const std::string oldest = m_recentFinished.front();
        m_recentFinished.pop_front();
        const auto it = m_runs.find(oldest);
        if (it != m_runs.end() && it->second->terminal())
            m_runs.erase(it); // a watcher still reading it holds its own reference
    }
}

std::optional<v1::RunInfo> AgentService::recordedInfo(const std::string &runId)
{
    {
        std::lock_guard lock(m_mutex);
        if (const auto it = m_runs.find(runId); it != m_runs.end())
            return it->second->info();
    }
    const auto runPath = m_options.stateDir / "runs" / runId;
    const auto attempts = attemptsOf(runPath);
    if (attempts.empty())
        return std::nullopt;
    if (auto info = readOutcome(runPath / std::to_string(attempts.front())))
        return info;
    // An attempt without an outcome: damaged records (read an older one), or a run that
    // started between the look into m_runs above and now (read as it is).
    std::vector<std::string> problems;
    const auto run = openNewestAttempt(runPath, /*closeIfActive=*/false, &problems);
    if (!run)
        return std::nullopt;
    return run->info();
}
grpc::Status AgentService::Describe(
    grpc::ServerContext *context, const v1::DescribeRequest *, v1::DescribeResponse *response)
{
    if (auto s = authorize(context); !s.ok())
        return s;
    releaseFinishedRuns(); // finished runs' threads, joined as they come
    response->set_hostname(hostName());
    response->set_advertise_address(m_options.advertiseHost);
    response->set_network_interface(m_options.advertiseInterface);
    response->set_network_note(m_options.advertiseHow);
    response->set_network_warning(m_options.networkWarning);
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
    response->set_data_dir(m_options.dataDir.string());
    for (auto &gpu : GpuMonitor::instance().devices())
        *response->add_gpus() = std::move(gpu);
    response->set_gpu_status(GpuMonitor::instance().status());
    for (auto &d : scanDatasets())
        *response->add_datasets() = std::move(d);
    int busyRanks = 0;
    std::lock_guard lock(m_mutex);
    for (const auto &[id, run] : m_runs) { // the active runs and the latest finished ones
        *response->add_runs() = run->info();
        if (!run->terminal())
            busyRanks += response->runs().rbegin()->ranks_size();
    }
    response->set_runs_recorded(m_recordedRuns);
    response->set_free_slots(std::max(0, cpuCores() - busyRanks - m_lrFinds.load()));
    *response->mutable_storage() = storage();
    return grpc::Status::OK;
}

void AgentService::releaseFinishedRuns()
{
    std::vector<std::shared_ptr<RunSupervisor>> finished;
    {
        std::lock_guard lock(m_mutex);
        for (auto it = m_unreleased.begin(); it != m_unreleased.end();) {
            if ((*it)->terminal()) {
                finished.push_back(*it);
                it = m_unreleased.erase(it);
            } else {
                ++it;
            }
        }
    }
    if (finished.empty())
        return;
    for (auto &run : finished)
        run->releaseThreads(); // outside the lock: it waits for the threads to end
    {
        std::lock_guard lock(m_mutex);
        for (auto &run : finished)
            if (const auto it = m_runs.find(run->runId()); it != m_runs.end() && it->second == run)
                keepRecentLocked(run->runId()); // the oldest finished one leaves memory
    }
    // What a run used is free now, but glibc keeps freed pages in each thread's arena;
    // gRPC serves from many threads, so without this an agent's resident memory creeps up
    // with every run although its live heap does not (heaptrack: flat at ~0.5 MB).
    finished.clear();
    ::malloc_trim(0);
}

v1::StorageInfo AgentService::storage() const
{
    // Walking every run's folder on each Describe (every 2 s per console) is wasteful:
    // the sizes are a second old at most; free space is asked for every time.
    std::lock_guard lock(m_storageMutex);
    const auto now = std::chrono::steady_clock::now();
    if (!m_storageAt || now - *m_storageAt > std::chrono::seconds(1)) {
        m_storage = measureStorage(m_options.stateDir, m_options.retention);
        m_storageAt = now;
    } else if (struct statvfs stats {}; ::statvfs(m_options.stateDir.c_str(), &stats) == 0) {
        m_storage.set_free_bytes(std::int64_t(stats.f_bavail) * std::int64_t(stats.f_frsize));
    }
    return m_storage;
}

std::vector<RunOnDisk> AgentService::runsOnDisk()
{
    std::vector<RunOnDisk> runs;
    std::int64_t total = 0;
    for (const auto &id : runIdsPage(m_options.stateDir / "runs", "", std::size_t(-1), &total)) {
        const auto info = recordedInfo(id);
        if (!info)
            continue;
        const bool ended = info->state() == v1::SUCCEEDED || info->state() == v1::FAILED
            || info->state() == v1::CANCELLED;
        const bool paused = info->spec().stop_after_epochs() > 0 && info->spec().stop_after_epochs() < info->spec().epochs();
        runs.push_back(RunOnDisk { id, info->state(), info->ended_unix_ms(), !ended, paused });
    }
    return runs;
}

grpc::Status AgentService::CollectGarbage(
    grpc::ServerContext *context, const v1::CollectGarbageRequest *request, v1::CollectGarbageResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (!request->finished_runs().empty() && request->finished_runs() != "final" && request->finished_runs() != "none")
        return invalid("finished_runs must be \"\" (the agent's rule), \"final\" or \"none\" (got \""
            + request->finished_runs().substr(0, 32) + "\")");
    if (!std::isfinite(request->older_than_days()) || request->older_than_days() < 0
        || request->older_than_days() > 36500)
        return invalid("older_than_days must be between 0 (any age) and 36500");
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const auto removed = collectGarbage(m_options.stateDir, runsOnDisk(), *request, m_options.retention, now);
    std::int64_t bytes = 0;
    for (const auto &r : removed) {
        bytes += r.bytes();
        *response->add_removed() = r;
    }
    response->set_bytes_freed(bytes);
    {
        std::lock_guard lock(m_storageMutex);
        m_storageAt.reset(); // measured again now
    }
    *response->mutable_storage() = storage();
    if (!request->dry_run() && !removed.empty())
        logMessage(LogLevel::Info,
            "garbage collection removed " + std::to_string(removed.size()) + " folder(s), "
                + std::to_string(bytes / 1'000'000) + " MB");
    return grpc::Status::OK;
}

grpc::Status AgentService::StartWorkers(
    grpc::ServerContext *context, const v1::StartWorkersRequest *request, v1::StartWorkersResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    releaseFinishedRuns(); // finished runs' threads, joined as they come
    // --- the request's own fields, then what this node has -------------------
    if (const common::Status checked = checkStartRequest(*request); !checked)
        return invalid(checked.error());
    const auto &spec = request->spec();
    std::map<int, std::vector<int>> gpuAssignment;
    if (spec.gpus_per_worker() > 0) {
        std::vector<int> gpus;
        for (const auto &gpu : GpuMonitor::instance().devices())
            gpus.push_back(gpu.index());
        auto assigned = assignGpus(spec.gpus_per_worker(),
            std::vector<int>(request->ranks().begin(), request->ranks().end()), gpus,
            GpuMonitor::instance().status());
        if (!assigned)
            return precondition(assigned.error());
        gpuAssignment = std::move(assigned.value());
    }
    // On GPUs the worker checks bf16 itself (compute capability 8.0) and says so.
    if (spec.precision() == v1::BF16 && spec.gpus_per_worker() == 0 && !trainer::cpu::hasBf16())
        return precondition("spec.precision BF16 needs a CPU with AVX-512 BF16 or AMX; this node has "
                            "neither. Use FP32");
    // Rendezvous: the agent that hosts rank 0 picks it when the client left it empty.
    v1::Endpoint rendezvous = request->rendezvous();
    if (request->world_size() > 1) {
        if (rendezvous.port() == 0) { // rank 0 is here (checkStartRequest)
            const bool allHere = request->ranks_size() == request->world_size();
            rendezvous.set_host(allHere ? "127.0.0.1" : m_options.advertiseHost);
            rendezvous.set_port(freeTcpPort());
            if (rendezvous.port() == 0)
                return { grpc::StatusCode::RESOURCE_EXHAUSTED, "no free TCP port for the rendezvous" };
        }
    }
    const auto datasets = scanDatasets();
    const auto dataset = std::find_if(
        datasets.begin(), datasets.end(), [&](const auto &d) { return d.name() == spec.dataset(); });
    if (dataset == datasets.end()) {
        std::string names;
        for (const auto &d : datasets)
            names += (names.empty() ? "" : ", ") + d.name() + (d.synthetic() ? " (synthetic)" : "");
        const auto inspected = trainer::cifar::inspectDataset((m_options.dataDir / spec.dataset()).string());
        const std::string why = inspected ? "it is not listed" : inspected.error();
        return precondition("spec.dataset " + shortQuote(spec.dataset()) + " is not usable on this agent: " + why
            + " Data sets here: " + (names.empty() ? "none" : names)
            + ". Fetch CIFAR-10 with FetchDataset, create a synthetic set with "
              "CreateSyntheticDataset, or put CIFAR-10 binary files under "
            + m_options.dataDir.string());
    }
    const int localRanks = request->ranks_size();
    if (spec.threads_per_worker() * localRanks > cpuCores() * 4)
        return invalid("spec.threads_per_worker " + std::to_string(spec.threads_per_worker()) + " x "
            + std::to_string(localRanks) + " ranks oversubscribes this node's " + std::to_string(cpuCores())
            + " cores more than 4 times");

    // --- idempotent start -------------------------------------------------------
    std::shared_ptr<RunSupervisor> run;
    {
        std::lock_guard lock(m_mutex);
        if (m_shuttingDown)
            return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
        if (const auto existing = findRunLocked(request->run_id())) {
            if (existing->attempt() == request->attempt()) {
                // Idempotent only for the same request: a different spec or placement
                // under the same (run, attempt) is a client bug, never silently ignored.
                const auto &was = existing->request();
                const bool same = google::protobuf::util::MessageDifferencer::Equals(was.spec(), request->spec())
                    && was.world_size() == request->world_size()
                    && std::vector<int>(was.ranks().begin(), was.ranks().end())
                        == std::vector<int>(request->ranks().begin(), request->ranks().end());
                if (!same)
                    return { grpc::StatusCode::ALREADY_EXISTS,
                        "run " + request->run_id() + " attempt " + std::to_string(request->attempt())
                            + " already exists on this agent with a different spec, ranks or world size; "
                              "start a new attempt (or a new run id) to change them" };
                response->set_already_running(true);
                *response->mutable_run() = existing->info();
                *response->mutable_rendezvous() = response->run().rendezvous();
                return grpc::Status::OK;
            }
            if (!existing->terminal())
                return precondition("run " + request->run_id() + " attempt "
                    + std::to_string(existing->attempt())
                    + " is still running; stop it before starting attempt "
                    + std::to_string(request->attempt()));
            if (request->attempt() < existing->attempt())
                return precondition("run " + request->run_id() + " already had attempt "
                    + std::to_string(existing->attempt()) + "; a new attempt must have a higher number");
        }
        RunLaunch launch;
        launch.request = *request;
        *launch.request.mutable_rendezvous() = rendezvous;
        launch.dataset = *dataset;
        launch.datasetDir = (m_options.dataDir / dataset->name()).string();
        launch.runDir = m_options.stateDir / "runs" / request->run_id() / std::to_string(request->attempt());
        launch.workerBinary = m_options.workerBinary;
        launch.threadsPerRank = spec.threads_per_worker() > 0 ? spec.threads_per_worker()
                                                              : std::max(1, cpuCores() / localRanks);
        launch.gpus = gpuAssignment;
        launch.retention = m_options.retention;
        // Ranks of a run that spans hosts use the address other hosts reach us at.
        if (request->world_size() > 1 && request->ranks_size() < request->world_size()) {
            launch.bindAddress = m_options.advertiseHost;
            launch.networkInterface = m_options.advertiseInterface;
        }
        std::error_code ec;
        if (!std::filesystem::exists(launch.runDir.parent_path(), ec))
            ++m_recordedRuns;
        std::filesystem::create_directories(launch.runDir, ec);
        if (ec)
            return { grpc::StatusCode::INTERNAL,
                "cannot create " + launch.runDir.string() + ": " + ec.message() };
        run = std::make_shared<RunSupervisor>(std::move(launch));
        m_runs[request->run_id()] = run;
        m_unreleased.push_back(run);
    }
    logMessage(LogLevel::Info,
        "starting run " + request->run_id() + " attempt " + std::to_string(request->attempt())
            + " on data set " + spec.dataset());
    if (const common::Status started = run->start(m_launcher); !started) {
        const std::string &error = started.error();
        logMessage(LogLevel::Error, "run " + request->run_id() + ": " + error);
        if (!run->recorded())
            forgetUnrecorded(run);
        // A full disk is the node's problem, not the run's: the console waits for space.
        if (error.find(std::strerror(ENOSPC)) != std::string::npos || error.find(std::strerror(EDQUOT)) != std::string::npos)
            return { grpc::StatusCode::RESOURCE_EXHAUSTED, "no space left on device: " + error };
        return { grpc::StatusCode::INTERNAL, "could not start the worker: " + error };
    }
    *response->mutable_rendezvous() = rendezvous;
    *response->mutable_run() = run->info();
    return grpc::Status::OK;
}

void AgentService::forgetUnrecorded(const std::shared_ptr<RunSupervisor> &run)
{
    // Nothing of the attempt was recorded: it leaves no folder, and the run is what it was
    // before (an earlier attempt, read back from disk, or nothing).
    std::lock_guard lock(m_mutex);
    if (const auto it = m_runs.find(run->runId()); it != m_runs.end() && it->second == run)
        m_runs.erase(it);
    const auto attemptDir = m_options.stateDir / "runs" / run->runId() / std::to_string(run->attempt());
    std::error_code ec;
    if (std::filesystem::exists(attemptDir / "request.json", ec))
        return;
    std::filesystem::remove_all(attemptDir, ec);
    if (std::filesystem::is_empty(attemptDir.parent_path(), ec) && !ec
        && std::filesystem::remove(attemptDir.parent_path(), ec))
        --m_recordedRuns;
}

grpc::Status AgentService::WatchRun(grpc::ServerContext *context, const v1::WatchRunRequest *request,
    grpc::ServerWriter<v1::RunEvent> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "WatchRun");
    if (!guard.admitted().ok())
        return guard.admitted();
    if (!common::isSafeName(request->run_id()))
        return badRunId("run_id", request->run_id());
    if (request->from_seq() < 0)
        return invalid("from_seq must be 0 or more");
    const auto run = findRun(request->run_id());
    if (!run)
        return { grpc::StatusCode::NOT_FOUND,
            "run_id " + shortQuote(request->run_id()) + " is not known to this agent" };
    std::int64_t next = std::max<std::int64_t>(request->from_seq(), 1);
    std::vector<v1::RunEvent> batch;
    for (;;) {
        if (context->IsCancelled())
            return { grpc::StatusCode::CANCELLED, "the client went away" };
        batch.clear();
        const bool more = run->events().read(next, 256, m_options.heartbeat, &batch);
        if (!more)
            return grpc::Status::OK; // terminal event delivered
        if (batch.empty()) {
            v1::RunEvent heartbeat;
            heartbeat.set_run_id(request->run_id());
            heartbeat.mutable_heartbeat();
            if (!guard.write(writer, heartbeat))
                return { grpc::StatusCode::CANCELLED, "the client went away" };
            continue;
        }
        for (const auto &event : batch)
            if (!guard.write(writer, event))
                return { grpc::StatusCode::CANCELLED, "the client went away" };
        next = batch.back().seq() + 1;
    }
}

grpc::Status AgentService::StopRun(
    grpc::ServerContext *context, const v1::StopRunRequest *request, v1::StopRunResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (!common::isSafeName(request->run_id()))
        return badRunId("run_id", request->run_id());
    if (request->grace_ms() < 0 || request->grace_ms() > 600'000)
        return invalid("grace_ms must be 0 (the agent's default) to 600000");
    const auto run = findRun(request->run_id());
    if (!run)
        return { grpc::StatusCode::NOT_FOUND,
            "run_id " + shortQuote(request->run_id()) + " is not known to this agent" };
    logMessage(LogLevel::Info, "stopping run " + request->run_id());
    run->stop(request->grace_ms() > 0 ? std::chrono::milliseconds(request->grace_ms()) : m_options.stopGrace);
    response->set_state(run->info().state());
    return grpc::Status::OK;
}

grpc::Status AgentService::ListRuns(
    grpc::ServerContext *context, const v1::ListRunsRequest *request, v1::ListRunsResponse *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (request->page_size() < 0 || request->page_size() > kMaxRunsPerPage)
        return invalid("page_size must be 0 (the default, " + std::to_string(kDefaultRunsPerPage) + ") to "
            + std::to_string(kMaxRunsPerPage) + " (got " + std::to_string(request->page_size()) + ")");
    if (!request->page_token().empty() && !common::isSafeName(request->page_token()))
        return invalid("page_token " + shortQuote(request->page_token())
            + " is not one this agent gave: pass the previous page's next_page_token, or \"\" for the first page");
    releaseFinishedRuns(); // finished runs' threads, joined as they come
    const std::size_t pageSize = request->page_size() > 0 ? request->page_size() : kDefaultRunsPerPage;
    std::int64_t total = 0;
    // One more than the page: whether there is a next page, without a second scan.
    auto ids = runIdsPage(m_options.stateDir / "runs", request->page_token(), pageSize + 1, &total);
    const bool more = ids.size() > pageSize;
    if (more)
        ids.pop_back();
    for (const auto &id : ids)
        if (auto info = recordedInfo(id))
            *response->add_runs() = std::move(*info);
    if (more)
        response->set_next_page_token(ids.back());
    response->set_total(total);
    return grpc::Status::OK;
}

grpc::Status AgentService::CreateSyntheticDataset(
    grpc::ServerContext *context, const v1::CreateSyntheticDatasetRequest *request, v1::Dataset *response)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    if (!common::isSafeName(request->name()))
        return badRunId("name", request->name());
    if (request->train_images() < 5 || request->train_images() > 1'000'000)
        return invalid("train_images must be between 5 and 1000000 (got "
            + std::to_string(request->train_images()) + ")");
    if (request->test_images() < 1 || request->test_images() > 1'000'000)
        return invalid(
            "test_images must be between 1 and 1000000 (got " + std::to_string(request->test_images()) + ")");
    static std::mutex creating; // two clients creating the same set must not interleave
    std::lock_guard lock(creating);
    const auto dir = m_options.dataDir / request->name();
    if (std::filesystem::exists(dir)) {
        const auto summary = trainer::cifar::inspectDataset(dir.string());
        if (summary && summary->synthetic && summary->trainImages == request->train_images()
            && summary->testImages == request->test_images()) {
            response->set_name(request->name());
            response->set_format("cifar10-binary");
            response->set_synthetic(true);
            response->set_train_images(summary->trainImages);
            response->set_test_images(summary->testImages);
            return grpc::Status::OK; // already there: idempotent
        }
        return { grpc::StatusCode::ALREADY_EXISTS,
            "name " + shortQuote(request->name()) + " already exists under " + m_options.dataDir.string()
                + " with different contents; choose another name" };
    }
    const auto kind = trainer::cifar::parseSyntheticKind(request->kind().empty() ? "patterns" : request->kind());
    if (!kind)
        return invalid("kind must be \"patterns\" or \"shapes\" (got \"" + request->kind().substr(0, 64) + "\")");
    if (const common::Status written = trainer::cifar::writeSyntheticDataset(
            dir.string(), request->train_images(), request->test_images(), request->seed(), *kind);
        !written)
        return { grpc::StatusCode::INTERNAL, written.error() };
    logMessage(LogLevel::Info,
        "created SYNTHETIC data set " + request->name() + " (" + trainer::cifar::syntheticKindName(*kind) + ")");
    response->set_synthetic_kind(trainer::cifar::syntheticKindName(*kind));
    response->set_name(request->name());
    response->set_format("cifar10-binary");
    response->set_synthetic(true);
    response->set_train_images(request->train_images());
    response->set_test_images(request->test_images());
    return grpc::Status::OK;
}

grpc::Status AgentService::WatchNode(grpc::ServerContext *context, const v1::WatchNodeRequest *request,
    grpc::ServerWriter<v1::NodeSample> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "WatchNode");
    if (!guard.admitted().ok())
        return guard.admitted();
    if (request->interval_ms() != 0 && (request->interval_ms() < 100 || request->interval_ms() > 60'000))
        return invalid("interval_ms must be 0 (the agent's default) or 100..60000 (got "
            + std::to_string(request->interval_ms()) + ")");
    const auto interval = request->interval_ms() > 0 ? std::chrono::milliseconds(request->interval_ms())
                                                     : m_options.sampleInterval;
    NodeSampler sampler;
    auto next = std::chrono::steady_clock::now();
    for (;;) {
        next += interval;
        // Sleep in short slices so a cancelled stream or a shutdown ends it promptly.
        while (std::chrono::steady_clock::now() < next) {
            if (context->IsCancelled())
                return { grpc::StatusCode::CANCELLED, "the client went away" };
            if (shuttingDown())
                return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                std::chrono::milliseconds(50), next - std::chrono::steady_clock::now()));
        }
        std::vector<SampledProcess> processes;
        {
            std::lock_guard lock(m_mutex);
            for (const auto &[id, run] : m_runs)
                for (const auto &placement : run->livePlacements())
                    processes.push_back({ id, run->attempt(), placement.rank(), placement.pid() });
        }
        if (!guard.write(writer, sampler.sample(processes)))
            return { grpc::StatusCode::CANCELLED, "the client went away" };
    }
}

grpc::Status AgentService::FetchDataset(grpc::ServerContext *context, const v1::FetchDatasetRequest *request,
    grpc::ServerWriter<v1::FetchProgress> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "FetchDataset");
    if (!guard.admitted().ok())
        return guard.admitted();
    const std::string name = request->name().empty() ? "cifar-10" : request->name();
    if (name != "cifar-10")
        return invalid("name '" + name
            + "' is not a data set this agent can fetch; the only one is 'cifar-10' "
              "(CreateSyntheticDataset makes synthetic ones)");
    logMessage(LogLevel::Info, "fetching " + name + " from " + m_options.cifarSource.url);
    v1::Dataset dataset;
    const auto result = fetchCifar10(
        m_options.dataDir, name, m_options.cifarSource,
        [&](const v1::FetchProgress &progress) { return !context->IsCancelled() && guard.write(writer, progress); },
        &dataset);
    switch (result.failure) {
    case FetchFailure::None: {
        v1::FetchProgress done;
        done.set_phase(v1::FetchProgress::DONE);
        done.set_message("ready: " + (m_options.dataDir / name).string());
        *done.mutable_dataset() = dataset;
        guard.write(writer, done);
        return grpc::Status::OK;
    }
    case FetchFailure::Network:
        logMessage(LogLevel::Warning, result.message);
        return { grpc::StatusCode::UNAVAILABLE, result.message };
    case FetchFailure::Checksum:
        logMessage(LogLevel::Warning, result.message);
        return { grpc::StatusCode::DATA_LOSS, result.message };
    case FetchFailure::Conflict:
        return precondition(result.message);
    case FetchFailure::Abandoned:
        return { grpc::StatusCode::CANCELLED, result.message };
    case FetchFailure::Local:
        break;
    }
    logMessage(LogLevel::Error, result.message);
    return { grpc::StatusCode::INTERNAL, result.message };
}

grpc::Status AgentService::refuseWhileActive(const std::string &runId, const char *what) const
{
    const auto it = m_runs.find(runId);
    if (it == m_runs.end() || it->second->terminal())
        return grpc::Status::OK;
    return precondition("run " + runId + " attempt " + std::to_string(it->second->attempt())
        + " is active on this agent; " + what + " only into a run that is not running (stop it first)");
}

grpc::Status AgentService::ReadCheckpoint(grpc::ServerContext *context,
    const v1::ReadCheckpointRequest *request, grpc::ServerWriter<v1::CheckpointChunk> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "ReadCheckpoint");
    if (!guard.admitted().ok())
        return guard.admitted();
    if (!common::isSafeName(request->run_id()))
        return badRunId("run_id", request->run_id());
    if (request->epoch() < 0)
        return invalid("epoch must be 0 (the newest committed checkpoint) or more (got "
            + std::to_string(request->epoch()) + ")");
    CheckpointSource source;
    if (auto s = source.open(checkpointsOf(m_options.stateDir / "runs" / request->run_id()),
            request->run_id(), request->epoch());
        !s.ok())
        return s;
    v1::CheckpointChunk chunk;
    grpc::Status status;
    while (source.next(&chunk, &status)) {
        if (context->IsCancelled() || !guard.write(writer, chunk))
            return { grpc::StatusCode::CANCELLED, "the client went away" };
    }
    if (status.ok())
        logMessage(LogLevel::Info, "sent checkpoint " + source.folder().string());
    else
        logMessage(LogLevel::Warning, status.error_message());
    return status;
}

grpc::Status AgentService::WriteCheckpoint(grpc::ServerContext *context,
    grpc::ServerReader<v1::CheckpointChunk> *reader, v1::WriteCheckpointResponse *response)
{
    if (auto s = authorize(context); !s.ok())
        return s;
    v1::CheckpointChunk chunk;
    if (!reader->Read(&chunk))
        return invalid("the stream held no message: send the manifest first");
    if (!chunk.has_manifest())
        return invalid("the first message must carry the manifest (run_id, epoch, files)");
    if (const std::string problem = checkRequestLimits(chunk.manifest()).error(); !problem.empty())
        return invalid("manifest." + problem);
    const v1::CheckpointManifest manifest = chunk.manifest();
    if (!common::isSafeName(manifest.run_id()))
        return badRunId("manifest.run_id", manifest.run_id());
    if (manifest.epoch() < 1)
        return invalid("manifest.epoch must be 1 or more (got " + std::to_string(manifest.epoch()) + ")");
    {
        std::lock_guard lock(m_mutex);
        if (m_shuttingDown)
            return { grpc::StatusCode::UNAVAILABLE, "the agent is shutting down" };
        if (auto s = refuseWhileActive(manifest.run_id(), "a checkpoint can be written"); !s.ok())
            return s;
    }
    CheckpointSink sink(checkpointsOf(m_options.stateDir / "runs" / manifest.run_id()));
    if (auto s = sink.begin(manifest); !s.ok())
        return s;
    bool first = true;
    do {
        if (context->IsCancelled())
            return { grpc::StatusCode::CANCELLED, "the client went away; nothing was written" };
        if (!first && chunk.has_manifest())
            return invalid("only the first message may carry a manifest");
        first = false;
        if (auto s = sink.add(chunk); !s.ok())
            return s;
    } while (reader->Read(&chunk));
    if (auto s = sink.finish(); !s.ok())
        return s;
    std::filesystem::path committed;
    {
        // Checked again where StartWorkers checks too: a worker never sees a checkpoint
        // folder change under it.
        std::lock_guard lock(m_mutex);
        if (auto s = refuseWhileActive(manifest.run_id(), "a checkpoint can be written"); !s.ok())
            return s;
        if (auto s = sink.commit(&committed); !s.ok())
            return s;
    }
    logMessage(LogLevel::Info,
        "received checkpoint of run " + manifest.run_id() + " epoch " + std::to_string(manifest.epoch())
            + " (" + std::to_string(sink.bytes()) + " bytes) into " + committed.string());
    response->set_run_id(manifest.run_id());
    response->set_epoch(manifest.epoch());
    response->set_bytes(sink.bytes());
    response->set_path(committed.string());
    return grpc::Status::OK;
}

grpc::Status AgentService::FindLearningRate(grpc::ServerContext *context, const v1::FindLearningRateRequest *request,
    grpc::ServerWriter<v1::LrFindProgress> *writer)
{
    if (auto s = admit(context, *request); !s.ok())
        return s;
    StreamGuard guard(*m_streams, context, "FindLearningRate");
    if (!guard.admitted().ok())
        return guard.admitted();
    v1::RunSpec spec = request->spec();
    spec.set_epochs(1); // not used by the test; keeps the shared rules happy
    spec.clear_learning_rate();
    spec.clear_warmup_epochs();
    if (const auto problems = rules::checkRunSpec(spec, { "spec.", false, false }); !problems.empty()) {
        std::string text;
        for (const auto &problem : problems)
            text += (text.empty() ? "" : "; ") + problem.text();
        return invalid(text);
    }
    const double minLr = request->min_lr() == 0 ? 1e-5 : request->min_lr();
    const double maxLr = request->max_lr() == 0 ? 10.0 : request->max_lr();
    const int steps = request->steps() == 0 ? 200 : request->steps();
    if (!(minLr > 0) || !std::isfinite(minLr) || !(maxLr > minLr) || !std::isfinite(maxLr) || maxLr > 1000)
        return invalid("min_lr and max_lr must be finite with 0 < min_lr < max_lr <= 1000 (0 = 1e-5 and 10)");
    if (steps < 10 || steps > 100000)
        return invalid("steps must be 0 (200) or 10..100000 (got " + std::to_string(steps) + ")");
    if (spec.gpus_per_worker() > 0)
        return invalid("spec.gpus_per_worker: the range test runs on the CPU here; use 0");
    const auto datasets = scanDatasets();
    const auto dataset = std::find_if(
        datasets.begin(), datasets.end(), [&](const auto &d) { return d.name() == spec.dataset(); });
    if (dataset == datasets.end())
        return precondition("spec.dataset '" + spec.dataset().substr(0, 64) + "' is not a data set on this agent");

    RunLaunch launch; // the worker's options are built as for a run, then turned into lr-find's
    launch.request.mutable_spec()->CopyFrom(spec);
    launch.request.set_world_size(1);
    launch.dataset = *dataset;
    launch.datasetDir = (m_options.dataDir / dataset->name()).string();
    launch.workerBinary = m_options.workerBinary;
    launch.threadsPerRank = spec.threads_per_worker() > 0 ? spec.threads_per_worker() : cpuCores();
    SpawnRequest spawn;
    spawn.argv = workerCommand(launch, lrFindLaunch(launch, minLr, maxLr, steps));
    const std::string threads = std::to_string(launch.threadsPerRank);
    spawn.extraEnv = { "OMP_NUM_THREADS=" + threads, "OPENBLAS_NUM_THREADS=" + threads, "CUDA_VISIBLE_DEVICES=" };
    const SpawnedProcess process = m_launcher.spawn(spawn);
    if (process.pid < 0)
        return { grpc::StatusCode::INTERNAL, "could not start the worker: " + process.error };
    ++m_lrFinds;
    logMessage(LogLevel::Info, "learning-rate range test on " + spec.dataset() + " (batch "
            + std::to_string(spec.batch_size()) + ", " + std::to_string(steps) + " steps)");

    // Events and output until both pipes close, or the client goes away.
    v1::LrFindProgress pending, result;
    std::string events, output, lastOutput, workerError;
    bool eventsOpen = true, outputOpen = process.outputFd >= 0, cancelled = false, haveResult = false;
    auto lastSend = std::chrono::steady_clock::now();
    const auto flush = [&] {
        if (pending.points_size() == 0)
            return;
        guard.write(writer, pending);
        pending.Clear();
        lastSend = std::chrono::steady_clock::now();
    };
    const auto handleLine = [&](const std::string &line) {
        const auto event = worker::parseEventLine(line);
        if (!event) {
            logMessage(LogLevel::Warning, "learning-rate range test: unparseable worker event (" + event.error() + ")");
            return;
        }
        if (event->has_lr_point()) {
            *pending.add_points() = event->lr_point();
        } else if (event->has_lr_found()) {
            *result.mutable_result() = event->lr_found();
            result.mutable_result()->mutable_worker_command()->Add(spawn.argv.begin(), spawn.argv.end());
            haveResult = true;
        } else if (event->has_error()) {
            workerError = event->error().message();
        }
    };
    while (eventsOpen || outputOpen) {
        if (context->IsCancelled()) {
            cancelled = true;
            break;
        }
        pollfd fds[2] = { { eventsOpen ? process.eventFd : -1, POLLIN, 0 }, { outputOpen ? process.outputFd : -1, POLLIN, 0 } };
        if (::poll(fds, 2, 200) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buffer[8192];
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n <= 0) {
                (i == 0 ? eventsOpen : outputOpen) = false;
                continue;
            }
            std::string &text = i == 0 ? events : output;
            text.append(buffer, std::size_t(n));
            for (std::size_t end; (end = text.find('\n')) != std::string::npos; text.erase(0, end + 1)) {
                const std::string line = text.substr(0, end);
                if (i == 0)
                    handleLine(line);
                else if (!line.empty())
                    lastOutput = line.substr(0, 500);
            }
        }
        if (pending.points_size() >= 64 || std::chrono::steady_clock::now() - lastSend > std::chrono::milliseconds(500))
            flush();
    }
    if (cancelled)
        ::kill(-process.pid, SIGKILL);
    int status = 0;
    while (::waitpid(process.pid, &status, 0) < 0 && errno == EINTR) { }
    for (int fd : { process.eventFd, process.outputFd })
        if (fd >= 0)
            ::close(fd);
    --m_lrFinds;
    if (cancelled)
        return { grpc::StatusCode::CANCELLED, "the client went away; the range test was stopped" };
    flush();
    if (!haveResult || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const std::string why = !workerError.empty() ? workerError
            : !lastOutput.empty()                     ? lastOutput
            : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                  : "exit code " + std::to_string(WEXITSTATUS(status));
        return { grpc::StatusCode::ABORTED, "the learning-rate range test failed: " + why };
    }
    guard.write(writer, result);
    return grpc::Status::OK;
}

} // namespace scalelab::agent
