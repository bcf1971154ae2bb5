#include "start_request.h"

#include "request_limits.h"
#include "safe_name.h"
#include "spec_rules.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace scalelab::agent {

std::string badNameMessage(const std::string &field, const std::string &value)
{
    return field + " " + shortQuote(value)
        + " is not valid: use 1-64 characters from A-Z a-z 0-9 _ - . not starting with '.'";
}

bool isHostName(const std::string &host)
{
    return !host.empty() && host.size() <= 253 && host.front() != '-'
        && std::all_of(host.begin(), host.end(), [](char c) {
               return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
                   || c == '-' || c == ':';
           });
}

common::Status checkStartRequest(const v1::StartWorkersRequest &request)
{
    using common::Status;
    if (!common::isSafeName(request.run_id()))
        return Status::failure(badNameMessage("run_id", request.run_id()));
    if (request.attempt() < 1)
        return Status::failure("attempt must be 1 or more (got " + std::to_string(request.attempt()) + ")");
    if (request.world_size() < 1)
        return Status::failure(
            "world_size must be 1 or more (got " + std::to_string(request.world_size()) + ")");
    if (request.ranks().empty())
        return Status::failure("ranks is empty: name the ranks this agent should start");
    std::set<int> seen;
    for (int r : request.ranks()) {
        if (r < 0 || r >= request.world_size())
            return Status::failure("ranks contains " + std::to_string(r)
                + ", outside [0, world_size=" + std::to_string(request.world_size()) + ")");
        if (!seen.insert(r).second)
            return Status::failure("ranks contains " + std::to_string(r) + " twice");
    }
    if (request.world_size() > rules::kMaxWorkers)
        return Status::failure("world_size must be at most " + std::to_string(rules::kMaxWorkers) + " (got "
            + std::to_string(request.world_size()) + ")");
    if (request.spec().batches_per_step() > 0 && request.spec().batches_per_step() < request.world_size())
        return Status::failure("spec.batches_per_step (" + std::to_string(request.spec().batches_per_step())
            + ") must be at least world_size (" + std::to_string(request.world_size())
            + "): each rank takes one micro-batch of a step or more");
    if (request.spec().probe_only() && request.world_size() < 2)
        return Status::failure(
            "spec.probe_only times all-reduces between ranks: world_size must be 2 or more "
            "(got "
            + std::to_string(request.world_size()) + ")");
    // A probe trains nothing: batch and epochs may be left out (what it does set is checked).
    v1::RunSpec spec = request.spec();
    if (spec.probe_only()) {
        spec.set_batch_size(std::max(1, spec.batch_size()));
        spec.set_epochs(std::max(1, spec.epochs()));
    }
    if (const rules::SpecStatus checked = rules::checkRunSpec(spec, { "spec.", false, false }); !checked)
        return Status::failure(rules::joinProblems(checked.error()));
    if (!(request.spec().probe_only() && request.spec().dataset().empty())
        && !common::isSafeName(request.spec().dataset()))
        return Status::failure("spec.dataset " + shortQuote(request.spec().dataset())
            + " is not a data set name (a folder name under the agent's data directory, no slashes)");
    if (request.world_size() > 1) {
        const v1::Endpoint &rendezvous = request.rendezvous();
        if (rendezvous.host().empty() != (rendezvous.port() == 0))
            return Status::failure(
                "rendezvous needs both host and port, or neither (then rank 0's agent picks it)");
        if (rendezvous.port() < 0 || rendezvous.port() > 65535)
            return Status::failure("rendezvous.port must be in 1..65535");
        if (!rendezvous.host().empty() && !isHostName(rendezvous.host()))
            return Status::failure(
                "rendezvous.host " + shortQuote(rendezvous.host()) + " is not a host name or address");
        if (rendezvous.port() == 0 && seen.count(0) == 0)
            return Status::failure("rendezvous is empty but rank 0 is not on this agent: start rank 0 first "
                                   "and pass the rendezvous its agent reported");
    }
    return Status::success();
}

common::Result<std::map<int, std::vector<int>>> assignGpus(double gpusPerWorker,
    const std::vector<int> &ranks, const std::vector<int> &gpus, const std::string &whyNone)
{
    using Assignment = std::map<int, std::vector<int>>;
    Assignment assignment;
    const double g = gpusPerWorker;
    if (!(g > 0))
        return common::Result<Assignment>(std::move(assignment));
    const int local = static_cast<int>(ranks.size());
    // 1e-9: 3 ranks at 1/3 need one GPU, not ceil(1.0000000000000002) = 2.
    const int needed = static_cast<int>(std::ceil(g * local - 1e-9));
    if (needed > static_cast<int>(gpus.size()))
        return common::Result<Assignment>::failure("spec.gpus_per_worker " + rules::exactNumber(g) + " x "
            + std::to_string(local) + " rank(s) needs " + std::to_string(needed)
            + " GPU(s) but this node has " + std::to_string(gpus.size())
            + (gpus.empty() && !whyNone.empty() ? " (" + whyNone + ")" : std::string())
            + "; use 0 for CPU training or place fewer ranks here");
    for (int i = 0; i < local; ++i) {
        auto &assigned = assignment[ranks[static_cast<std::size_t>(i)]];
        if (g >= 1)
            for (int k = 0; k < static_cast<int>(g); ++k)
                assigned.push_back(gpus[static_cast<std::size_t>(i * static_cast<int>(g) + k)]);
        else
            assigned.push_back(gpus[static_cast<std::size_t>(std::floor(i * g))]);
    }
    return common::Result<Assignment>(std::move(assignment));
}

} // namespace scalelab::agent
