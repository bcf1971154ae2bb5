#include "checkpoint.h"

#include "sha256.h"
#include "torch_compat.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace scalelab::trainer {

namespace {

const char *kFiles[] = { "model.pt", "optimizer.pt", "state.pt" };

void fsyncPath(const fs::path &path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

std::string folderName(int epoch)
{
    char name[32];
    std::snprintf(name, sizeof name, "epoch-%04d", epoch);
    return name;
}

// Empty when every file's sum matches the manifest, else why not.
std::string verify(const fs::path &dir)
{
    std::ifstream manifest(dir / "MANIFEST");
    if (!manifest)
        return "no MANIFEST (never committed)";
    std::string sum, name;
    int verified = 0;
    while (manifest >> sum >> name) {
        const std::string actual = Sha256::ofFile((dir / name).string());
        if (actual.empty())
            return name + " is missing";
        if (actual != sum)
            return name + " does not match its sha256 in MANIFEST";
        ++verified;
    }
    if (verified != int(std::size(kFiles)))
        return "MANIFEST lists " + std::to_string(verified) + " files, expected "
            + std::to_string(std::size(kFiles));
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

std::string saveCheckpoint(const std::string &root, const CheckpointPosition &position,
    const torch::Device &device, torch::nn::Module &model, torch::optim::Optimizer &optimizer, int keepLast,
    std::string *error)
{
    const fs::path final = fs::path(root) / folderName(position.epoch);
    const fs::path temp
        = fs::path(root) / (".tmp-" + folderName(position.epoch) + "-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::create_directories(root, ec);
    fs::remove_all(temp, ec);
    fs::create_directories(temp, ec);
    if (ec) {
        *error = "cannot create " + temp.string() + ": " + ec.message();
        return {};
    }
    try {
        {
            torch::serialize::OutputArchive archive;
            model.save(archive);
            archive.save_to((temp / "model.pt").string());
        }
        {
            torch::serialize::OutputArchive archive;
            optimizer.save(archive);
            archive.save_to((temp / "optimizer.pt").string());
        }
        {
            torch::serialize::OutputArchive archive;
            archive.write("epoch", torch::tensor(std::int64_t(position.epoch)));
            archive.write("step", torch::tensor(position.step));
            archive.write("cpu_rng", generatorState(torch::kCPU));
            if (device.is_cuda())
                archive.write("cuda_rng", generatorState(device));
            // SGD momentum by parameter position: libtorch keys optimizer state by
            // tensor address, which does not survive a restart.
            const auto &params = optimizer.param_groups().at(0).params();
            for (std::size_t i = 0; i < params.size(); ++i) {
                const auto key = optimizerStateKey(params[i]);
                const auto it = optimizer.state().find(key);
                if (it != optimizer.state().end())
                    archive.write("momentum/" + std::to_string(i),
                        static_cast<torch::optim::SGDParamState &>(*it->second).momentum_buffer());
            }
            archive.save_to((temp / "state.pt").string());
        }
    } catch (const std::exception &e) {
        *error = std::string("writing checkpoint failed: ") + e.what();
        fs::remove_all(temp, ec);
        return {};
    }
    {
        std::ofstream manifest(temp / "MANIFEST");
        for (const char *name : kFiles) {
            fsyncPath(temp / name);
            manifest << Sha256::ofFile((temp / name).string()) << "  " << name << "\n";
        }
    }
    fsyncPath(temp / "MANIFEST");
    fsyncPath(temp);
    fs::remove_all(final, ec); // a re-run of the same epoch replaces it
    fs::rename(temp, final, ec);
    if (ec) {
        *error = "cannot commit " + final.string() + ": " + ec.message();
        return {};
    }
    fsyncPath(root);

    // Keep the newest `keepLast` committed checkpoints.
    std::vector<fs::path> committed;
    for (const auto &entry : fs::directory_iterator(root, ec))
        if (entry.path().filename().string().rfind("epoch-", 0) == 0)
            committed.push_back(entry.path());
    std::sort(committed.begin(), committed.end());
    for (std::size_t i = 0; keepLast > 0 && i + std::size_t(keepLast) < committed.size(); ++i)
        fs::remove_all(committed[i], ec);
    return final.string();
}

std::optional<CheckpointPosition> loadLatestCheckpoint(const std::string &root, const torch::Device &device,
    torch::nn::Module &model, torch::optim::Optimizer &optimizer,
    const std::function<void(const std::string &)> &warn, std::string *loadedFrom)
{
    std::error_code ec;
    std::vector<fs::path> candidates;
    for (const auto &entry : fs::directory_iterator(root, ec))
        if (entry.path().filename().string().rfind("epoch-", 0) == 0)
            candidates.push_back(entry.path());
    std::sort(candidates.rbegin(), candidates.rend());
    for (const auto &dir : candidates) {
        if (const std::string problem = verify(dir); !problem.empty()) {
            warn("checkpoint " + dir.string() + " refused: " + problem);
            continue;
        }
        try {
            torch::serialize::InputArchive modelArchive, optimizerArchive, stateArchive;
            modelArchive.load_from((dir / "model.pt").string(), device);
            model.load(modelArchive);
            optimizerArchive.load_from((dir / "optimizer.pt").string(), device);
            optimizer.load(optimizerArchive);
            stateArchive.load_from((dir / "state.pt").string(), device);
            torch::Tensor epoch, step, rng, deviceRng;
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
            return CheckpointPosition { int(epoch.item<std::int64_t>()), step.item<std::int64_t>() };
        } catch (const std::exception &e) {
            warn("checkpoint " + dir.string() + " refused: " + std::string(e.what()).substr(0, 200));
        }
    }
    return std::nullopt;
}

std::string weightsDigest(torch::nn::Module &model)
{
    Sha256 sha;
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
