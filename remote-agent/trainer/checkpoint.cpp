#include "checkpoint.h"

#include "checkpoint_layout.h"
#include "file_io.h"
#include "sha256.h"
#include "torch_compat.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <sys/statvfs.h>
#include <unistd.h>
#include <utility>

namespace fs = std::filesystem;

namespace scalelab::trainer {

namespace {

const char *kFiles[] = { "model.pt", "optimizer.pt", "state.pt" };

// Whether the checkpoint in `dir` verifies and holds the three files.
common::Status verify(const fs::path &dir)
{
    std::vector<common::checkpoint::Entry> entries;
    if (common::Status verified = common::checkpoint::verify(dir, &entries); !verified)
        return verified;
    for (const char *name : kFiles)
        if (std::none_of(entries.begin(), entries.end(), [&](const auto &e) { return e.name == name; }))
            return common::Status::failure(std::string("MANIFEST does not list ") + name);
    return {};
}

// The default generator of `device`: the CPU's draws weights, shuffles and CPU dropout,
// a GPU's draws dropout masks there. States are CPU byte tensors.
torch::Tensor generatorState(const torch::Device &device)
{
    auto generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
}

void setGeneratorState(const torch::Device &device, const torch::Tensor &state)
{
    auto generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state.cpu()); // load_from mapped it onto `device`
}

} // namespace

std::optional<std::uint64_t> freeBytes(const std::string &dir)
{
    fs::path probe = dir;
    std::error_code ec;
    while (!probe.empty() && !fs::exists(probe, ec))
        probe = probe.parent_path();
    struct statvfs stats { };
    if (::statvfs(probe.empty() ? "." : probe.c_str(), &stats) != 0)
        return std::nullopt;
    return std::uint64_t(stats.f_bavail) * std::uint64_t(stats.f_frsize);
}

std::string noSpaceMessage(std::uint64_t needed, const std::string &dir, std::uint64_t available)
{
    const auto mb = [](std::uint64_t bytes) { return std::to_string((bytes + 999'999) / 1'000'000) + " MB"; };
    return "no space left on device: the checkpoint needs " + mb(needed) + " in " + dir + ", "
        + std::to_string(available / 1'000'000) + " MB free";
}

std::uint64_t estimateCheckpointBytes(torch::nn::Module &model)
{
    std::uint64_t bytes = 0;
    for (const auto &p : model.parameters())
        bytes += std::uint64_t(p.numel()) * p.element_size();
    std::uint64_t buffers = 0;
    for (const auto &b : model.buffers())
        buffers += std::uint64_t(b.numel()) * b.element_size();
    // model.pt holds parameters and buffers, state.pt one momentum buffer per parameter;
    // optimizer.pt and the headers are small.
    return 2 * bytes + buffers + (1u << 20);
}

namespace {

// libtorch's file writer throws from its destructor when the disk fills mid-write,
// which ends the process (std::terminate, "unexpected pos"). Serialising into memory
// cannot fail that way, and tells the size before the disk is touched.
std::string serialized(torch::serialize::OutputArchive &archive)
{
    std::ostringstream out;
    archive.save_to(out);
    return std::move(out).str();
}

} // namespace

common::Result<CheckpointFiles> serializeCheckpoint(const CheckpointPosition &position,
    const torch::Device &device, torch::nn::Module &model, torch::optim::Optimizer &optimizer)
{
    CheckpointFiles checkpoint;
    checkpoint.epoch = position.epoch;
    auto &files = checkpoint.files;
    try {
        {
            torch::serialize::OutputArchive archive;
            model.save(archive);
            files.emplace_back(kFiles[0], serialized(archive));
        }
        {
            // libtorch's archive of the parameter groups (learning rate, momentum, weight
            // decay), without the per-parameter state: the momentum goes to state.pt by
            // position. libtorch keys that state by tensor address, written as text that
            // versions read differently (1.x writes "0x55d0...", 2.x reads it with stoull,
            // which gives 0 for every key), so a checkpoint of one version would lose its
            // momentum in the other; and stored in both files it doubled the checkpoint.
            torch::serialize::OutputArchive archive;
            auto state = std::exchange(optimizer.state(), {});
            try {
                optimizer.save(archive);
            } catch (...) {
                optimizer.state() = std::move(state);
                throw;
            }
            optimizer.state() = std::move(state);
            files.emplace_back(kFiles[1], serialized(archive));
        }
        {
            torch::serialize::OutputArchive archive;
            archive.write("epoch", torch::tensor(std::int64_t(position.epoch)));
            archive.write("step", torch::tensor(position.step));
            if (position.progress)
                archive.write("progress", torch::tensor(*position.progress, torch::kDouble));
            if (position.noiseAverages)
                archive.write("noise_averages",
                    torch::tensor(
                        std::vector<double>(position.noiseAverages->begin(), position.noiseAverages->end()),
                        torch::kDouble));
            archive.write("cpu_rng", generatorState(torch::kCPU));
            if (device.is_cuda())
                archive.write("cuda_rng", generatorState(device));
            // SGD momentum by parameter position (see optimizer.pt above).
            const auto &params = optimizer.param_groups().at(0).params();
            for (std::size_t i = 0; i < params.size(); ++i) {
                const auto key = optimizerStateKey(params[i]);
                const auto it = optimizer.state().find(key);
                if (it != optimizer.state().end())
                    archive.write("momentum/" + std::to_string(i),
                        static_cast<torch::optim::SGDParamState &>(*it->second).momentum_buffer());
            }
            files.emplace_back(kFiles[2], serialized(archive));
        }
    } catch (const std::exception &e) {
        return common::Status::failure(std::string("serialising the checkpoint failed: ") + e.what());
    }
    for (const auto &[name, bytes] : files) {
        checkpoint.manifest.push_back({ common::Sha256::ofBytes(bytes.data(), bytes.size()), name });
        checkpoint.bytes += bytes.size();
    }
    checkpoint.bytes += common::checkpoint::formatManifest(checkpoint.manifest).size();
    return checkpoint;
}

common::Result<std::string> commitCheckpoint(
    const std::string &root, const CheckpointFiles &checkpoint, int keepLast)
{
    const std::string folder = common::checkpoint::folderName(checkpoint.epoch);
    const fs::path final = fs::path(root) / folder;
    const fs::path temp = fs::path(root) / (".tmp-" + folder + "-" + std::to_string(::getpid()));
    const std::uint64_t needed = checkpoint.bytes;
    const auto noSpace = [&](const std::string &message) {
        return common::Status::failure(common::StatusCode::ResourceExhausted, message);
    };

    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) {
        const std::string message = "cannot create " + root + ": " + ec.message();
        return ec == std::errc::no_space_on_device ? noSpace(message) : common::Status::failure(message);
    }
    // Checkpoints that the commit would prune go first, to make room: the newest
    // keepLast - 1 stay, so a verified one survives whatever happens next. So does a
    // leftover temporary folder of this epoch.
    const std::size_t keep = std::size_t(std::max(1, keepLast));
    common::checkpoint::prune(root, std::max<std::size_t>(1, keep - 1), final);
    (void)common::removeTree(temp); // best effort: a leftover that stays fails the write below
    // An existing folder of the same epoch (a re-run) is replaced: its space is reusable.
    std::uint64_t replaced = 0;
    // A checkpoint folder holds files only. (Not recursive_directory_iterator: see
    // common::removeTree on the std::filesystem that PyTorch's wheels export.)
    for (const auto &entry : fs::directory_iterator(final, ec))
        if (entry.is_regular_file(ec))
            replaced += entry.file_size(ec);
    if (const auto available = freeBytes(root); available && *available + replaced < needed + (1u << 20))
        return noSpace(noSpaceMessage(needed, root, *available + replaced));
    // `what` failed, the disk full when `full`: the temporary folder goes.
    const auto failed = [&](const std::string &what, bool full) {
        (void)common::removeTree(temp); // best effort: the failure to report is `what`
        if (full)
            return noSpace(noSpaceMessage(needed, root, freeBytes(root).value_or(0)) + " (" + what + ")");
        return common::Status::failure(what);
    };
    const auto isFull = [](const std::error_code &error) {
        return error == std::errc::no_space_on_device || error.value() == EDQUOT;
    };
    if (!fs::create_directories(temp, ec))
        return failed("cannot create " + temp.string() + ": " + ec.message(), isFull(ec));
    for (const auto &[name, bytes] : checkpoint.files)
        if (const common::Status written = common::writeFileSynced(temp / name, bytes); !written)
            return failed("writing " + (temp / name).string() + " failed: " + written.error(),
                written.isResourceExhausted());
    // MANIFEST last: a folder with one is complete and verified.
    if (const common::Status written = common::checkpoint::writeManifest(temp, checkpoint.manifest); !written)
        return failed("writing " + (temp / "MANIFEST").string() + " failed: " + written.error(),
            written.isResourceExhausted());
    // A re-run of the same epoch replaces it; one that stays fails the rename below.
    (void)common::removeTree(final);
    fs::rename(temp, final, ec);
    if (ec)
        return failed("cannot commit " + final.string() + ": " + ec.message(), isFull(ec));
    common::syncFolder(root);
    common::checkpoint::prune(root, keep);
    return final.string();
}

std::optional<CheckpointPosition> loadLatestCheckpoint(const std::string &root, const torch::Device &device,
    torch::nn::Module &model, torch::optim::Optimizer &optimizer,
    const std::function<void(const std::string &)> &warn, std::string *loadedFrom)
{
    // Newest first, committed or not: one without a MANIFEST is refused in words.
    std::vector<common::checkpoint::Folder> candidates = common::checkpoint::folders(root, false);
    std::reverse(candidates.begin(), candidates.end());
    for (const auto &candidate : candidates) {
        const fs::path &dir = candidate.path;
        if (const common::Status verified = verify(dir); !verified) {
            warn("checkpoint " + dir.string() + " refused: " + verified.error());
            continue;
        }
        try {
            torch::serialize::InputArchive modelArchive, optimizerArchive, stateArchive;
            modelArchive.load_from((dir / "model.pt").string(), device);
            model.load(modelArchive);
            // The parameter groups; checkpoints written before 2026-11-27 hold the momentum
            // there too, which another libtorch version may map onto the wrong parameters:
            // state.pt's alone counts.
            optimizerArchive.load_from((dir / "optimizer.pt").string(), device);
            optimizer.load(optimizerArchive);
            optimizer.state().clear();
            stateArchive.load_from((dir / "state.pt").string(), device);
            torch::Tensor epoch, step, progress, noiseAverages, rng, deviceRng;
            stateArchive.read("epoch", epoch);
            stateArchive.read("step", step);
            stateArchive.read("cpu_rng", rng);
            setGeneratorState(torch::kCPU, rng);
            // A checkpoint written on the CPU has no GPU generator: dropout on the GPU
            // then continues from the seed's, not from where the run stopped.
            if (device.is_cuda() && stateArchive.try_read("cuda_rng", deviceRng))
                setGeneratorState(device, deviceRng);
            const auto &params = optimizer.param_groups().at(0).params();
            for (std::size_t i = 0; i < params.size(); ++i) {
                torch::Tensor momentum;
                if (!stateArchive.try_read("momentum/" + std::to_string(i), momentum))
                    continue; // no step taken yet for this parameter
                auto state = std::make_unique<torch::optim::SGDParamState>();
                state->momentum_buffer(momentum);
                optimizer.state()[optimizerStateKey(params[i])] = std::move(state);
            }
            *loadedFrom = dir.string();
            CheckpointPosition position;
            position.epoch = int(epoch.item<std::int64_t>());
            position.step = step.item<std::int64_t>();
            if (stateArchive.try_read("progress", progress)) // older checkpoints have none
                position.progress = progress.item<double>();
            if (stateArchive.try_read("noise_averages", noiseAverages) && noiseAverages.numel() == 4) {
                const torch::Tensor values = noiseAverages.to(torch::kCPU, torch::kDouble).contiguous();
                position.noiseAverages = std::array<double, 4> {};
                std::copy_n(values.data_ptr<double>(), 4, position.noiseAverages->begin());
            }
            return position;
        } catch (const std::exception &e) {
            warn("checkpoint " + dir.string() + " refused: " + std::string(e.what()).substr(0, 200));
        }
    }
    return std::nullopt;
}

std::string weightsDigest(torch::nn::Module &model)
{
    common::Sha256 sha;
    auto add = [&](const torch::Tensor &t) {
        const auto c = t.detach().contiguous().cpu();
        sha.update(c.data_ptr(), c.numel() * c.element_size());
    };
    for (const auto &p : model.parameters())
        add(p);
    for (const auto &b : model.buffers())
        add(b);
    return sha.hexDigest();
}

} // namespace scalelab::trainer
