#include "storage.h"

#include "checkpoint_transfer.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace fs = std::filesystem;

namespace scalelab::agent {

namespace {

std::int64_t bytesUnder(const fs::path &path)
{
    std::error_code ec;
    if (fs::is_regular_file(path, ec))
        return std::int64_t(fs::file_size(path, ec));
    std::int64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code sizeError;
        if (it->is_regular_file(sizeError)) {
            const auto size = it->file_size(sizeError);
            if (!sizeError)
                total += std::int64_t(size);
        }
    }
    return total;
}

bool startsWith(const std::string &s, const char *prefix)
{
    return s.rfind(prefix, 0) == 0;
}

// Committed checkpoint folders of one run, oldest first.
std::vector<fs::path> committed(const fs::path &checkpoints)
{
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto &entry : fs::directory_iterator(checkpoints, ec))
        if (startsWith(entry.path().filename().string(), "epoch-"))
            found.push_back(entry.path());
    std::sort(found.begin(), found.end());
    return found;
}

void remove(const fs::path &path, const std::string &runId, const std::string &why, bool dryRun,
    std::vector<Removal> *removed)
{
    Removal r;
    r.set_run_id(runId);
    r.set_path(path.string());
    r.set_bytes(bytesUnder(path));
    r.set_why(why);
    if (!dryRun) {
        std::error_code ec;
        fs::remove_all(path, ec);
        if (ec)
            r.set_why(why + " (NOT removed: " + ec.message() + ")");
    }
    removed->push_back(std::move(r));
}

std::string days(double d)
{
    std::ostringstream out;
    out << d;
    return out.str();
}

} // namespace

std::string RetentionPolicy::words() const
{
    std::string text = finished == Finished::All ? "finished runs keep the checkpoints their worker kept"
        : finished == Finished::Final            ? "finished runs keep their final checkpoint"
                                                 : "finished runs keep none";
    if (finished != Finished::None && finishedDays > 0)
        text += " for " + days(finishedDays) + " days";
    return text + "; FAILED and CANCELLED runs keep theirs for a retry";
}

common::Result<RetentionPolicy> parseRetention(const std::string &finished, double finishedDays)
{
    RetentionPolicy policy;
    if (finished == "final" || finished.empty()) {
        policy.finished = RetentionPolicy::Finished::Final;
    } else if (finished == "none") {
        policy.finished = RetentionPolicy::Finished::None;
    } else if (finished == "all") {
        policy.finished = RetentionPolicy::Finished::All;
    } else {
        return common::Status::failure(
            "--finished-checkpoints must be 'all', 'final' or 'none' (got '" + finished.substr(0, 32) + "')");
    }
    if (!std::isfinite(finishedDays) || finishedDays < 0 || finishedDays > 36500) {
        return common::Status::failure("--finished-days must be between 0 (keep forever) and 36500");
    }
    policy.finishedDays = finishedDays;
    return policy;
}

v1::StorageInfo measureStorage(const fs::path &stateDir, const RetentionPolicy &policy)
{
    v1::StorageInfo info;
    info.set_state_dir(stateDir.string());
    struct statvfs stats { };
    if (::statvfs(stateDir.c_str(), &stats) == 0) {
        info.set_free_bytes(std::int64_t(stats.f_bavail) * std::int64_t(stats.f_frsize));
        info.set_total_bytes(std::int64_t(stats.f_blocks) * std::int64_t(stats.f_frsize));
    }
    std::error_code ec;
    for (const auto &run : fs::directory_iterator(stateDir / "runs", ec)) {
        std::error_code ignored;
        if (!run.is_directory(ignored))
            continue;
        bool anyCheckpoint = false;
        for (const auto &entry : fs::directory_iterator(run.path(), ignored)) {
            if (entry.path().filename() != checkpointsOf(run.path()).filename()) {
                info.set_record_bytes(info.record_bytes() + bytesUnder(entry.path()));
                continue;
            }
            for (const auto &c : fs::directory_iterator(entry.path(), ignored)) {
                const std::string name = c.path().filename().string();
                const std::int64_t bytes = bytesUnder(c.path());
                if (startsWith(name, "epoch-")) {
                    info.set_checkpoint_bytes(info.checkpoint_bytes() + bytes);
                    anyCheckpoint = true;
                } else if (startsWith(name, ".tmp-")) {
                    info.set_temporary_bytes(info.temporary_bytes() + bytes);
                }
            }
        }
        if (anyCheckpoint)
            info.set_runs_with_checkpoints(info.runs_with_checkpoints() + 1);
    }
    info.set_retention(policy.words());
    return info;
}

StorageGauge::StorageGauge(std::filesystem::path stateDir, RetentionPolicy policy)
    : m_stateDir(std::move(stateDir))
    , m_policy(std::move(policy))
{ }

v1::StorageInfo StorageGauge::read()
{
    std::lock_guard lock(m_mutex);
    const auto now = std::chrono::steady_clock::now();
    if (!m_measuredAt || now - *m_measuredAt > std::chrono::seconds(1)) {
        m_storage = measureStorage(m_stateDir, m_policy);
        m_measuredAt = now;
    } else if (struct statvfs stats {}; ::statvfs(m_stateDir.c_str(), &stats) == 0) {
        m_storage.set_free_bytes(std::int64_t(stats.f_bavail) * std::int64_t(stats.f_frsize));
    }
    return m_storage;
}

void StorageGauge::invalidate()
{
    std::lock_guard lock(m_mutex);
    m_measuredAt.reset();
}

std::vector<Removal> sweepTemporary(const fs::path &stateDir, const std::vector<RunOnDisk> &runs, bool dryRun)
{
    std::vector<Removal> removed;
    for (const auto &run : runs) {
        if (run.active)
            continue;
        std::error_code ec;
        for (const auto &c : fs::directory_iterator(checkpointsOf(stateDir / "runs" / run.runId), ec))
            if (startsWith(c.path().filename().string(), ".tmp-"))
                remove(c.path(), run.runId, "unfinished checkpoint folder (its writer is gone)", dryRun,
                    &removed);
    }
    return removed;
}

std::vector<Removal> collectGarbage(const fs::path &stateDir, const std::vector<RunOnDisk> &runs,
    const v1::CollectGarbageRequest &request, const RetentionPolicy &policy, std::int64_t nowUnixMs)
{
    std::vector<Removal> removed = sweepTemporary(stateDir, runs, request.dry_run());
    RetentionPolicy::Finished rule = policy.finished;
    if (request.finished_runs() == "final")
        rule = RetentionPolicy::Finished::Final;
    else if (request.finished_runs() == "none")
        rule = RetentionPolicy::Finished::None;
    const double ageMs = request.older_than_days() * 86'400'000.0;
    for (const auto &run : runs) {
        if (run.active || run.endedUnixMs <= 0 || run.paused)
            continue; // a paused run resumes from its checkpoints
        if (ageMs > 0 && double(nowUnixMs - run.endedUnixMs) < ageMs)
            continue; // not old enough for what was asked
        const auto found = committed(checkpointsOf(stateDir / "runs" / run.runId));
        if (run.state == v1::SUCCEEDED) {
            const bool expired = policy.finishedDays > 0
                && double(nowUnixMs - run.endedUnixMs) >= policy.finishedDays * 86'400'000.0;
            const std::size_t keep = expired || rule == RetentionPolicy::Finished::None ? 0
                : rule == RetentionPolicy::Finished::Final                              ? 1
                                                                                        : found.size();
            for (std::size_t i = 0; i + keep < found.size(); ++i)
                remove(found[i], run.runId,
                    i + 1 == found.size() ? (expired ? "final checkpoint of a run that SUCCEEDED over "
                                + days(policy.finishedDays) + " days ago"
                                                     : "final checkpoint of a run that SUCCEEDED")
                                          : "older checkpoint of a run that SUCCEEDED",
                    request.dry_run(), &removed);
        } else if ((run.state == v1::FAILED || run.state == v1::CANCELLED) && request.include_failed()) {
            for (const auto &dir : found)
                remove(dir, run.runId,
                    "checkpoint of a " + v1::RunState_Name(run.state) + " run (a retry starts from epoch 0)",
                    request.dry_run(), &removed);
        }
    }
    return removed;
}

} // namespace scalelab::agent
