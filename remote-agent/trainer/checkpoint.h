// Checkpoints of one run: <root>/epoch-NNNN/{model.pt, optimizer.pt, state.pt, MANIFEST}:
// the parameters and buffers; libtorch's archive of the optimizer's parameter groups; the
// position, the random generators and the SGD momentum by parameter position.
// Committed atomically: written into a temporary folder, fsync'ed, renamed into place,
// parent fsync'ed; MANIFEST (sha256 of every file) is written last, so a folder without
// a valid manifest was never committed. Loading verifies the sums and falls back to the
// previous checkpoint when one does not match. Trainer-only (libtorch); called from the
// training loop's thread (rank 0 saves; every rank loads).
#pragma once

#include "checkpoint_layout.h" // common/
#include "status.h" // common/

#include <torch/torch.h>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace scalelab::trainer {

struct CheckpointPosition {
    int epoch = 0; // epochs completed
    std::int64_t step = 0; // optimizer steps completed
    // The run's progress in base-batch steps, AdaScale's sum of gains (lr_rules.h). Unset:
    // a checkpoint written before it was saved; the run then takes its steps as worth the
    // linear rule's (steps x global batch / base batch).
    std::optional<double> progress;
    // The gradient noise scale's moving averages (noise_scale.h's NoiseScaleAverage::state).
    // Unset: a checkpoint written before they were saved; the averages start again.
    std::optional<std::array<double, 4>> noiseAverages;
};

// A checkpoint serialised in memory, not yet on disk: its files and their manifest.
struct CheckpointFiles {
    int epoch = 0;
    std::vector<std::pair<const char *, std::string>> files; // name, bytes
    std::vector<common::checkpoint::Entry> manifest;
    std::uint64_t bytes = 0; // what it takes on disk, MANIFEST included
};

// Serialises checkpoint `position.epoch` in memory (so its size is known before the disk
// is touched). `device` is where the model lives; on a GPU its generator (dropout) is
// saved with the CPU's. Never throws: libtorch's exceptions become the failure.
[[nodiscard]] common::Result<CheckpointFiles> serializeCheckpoint(const CheckpointPosition &position,
    const torch::Device &device, torch::nn::Module &model, torch::optim::Optimizer &optimizer);

// Commits `checkpoint` under `root` and keeps the newest `keepLast` (at least 1): the
// committed folder, or why not. A full file system (or one over quota) is
// ResourceExhausted, its message saying how full; checkpoint.bytes is what it needed.
// Never throws and never aborts: its size is checked against the free space, the files
// written with checked writes; on any failure the temporary folder is removed and the
// checkpoints already committed stay as they were.
[[nodiscard]] common::Result<std::string> commitCheckpoint(
    const std::string &root, const CheckpointFiles &checkpoint, int keepLast);

// Bytes a checkpoint of `model` and `optimizer` takes on disk, estimated from their
// tensors (within a few percent; the archive adds small headers). Lets a run refuse to
// start when a checkpoint cannot fit, instead of failing after an epoch of training.
std::uint64_t estimateCheckpointBytes(torch::nn::Module &model);

// Free bytes for an unprivileged writer in the file system holding `dir` (or its nearest
// existing parent); nullopt when it cannot be told.
std::optional<std::uint64_t> freeBytes(const std::string &dir);

// "no space left on device: the checkpoint needs 37 MB in DIR, 12 MB free"
std::string noSpaceMessage(std::uint64_t needed, const std::string &dir, std::uint64_t available);

// Loads the newest checkpoint whose manifest verifies into model and optimizer, its
// tensors mapped onto `device` whichever device wrote them (so a run resumes on a GPU
// from a CPU checkpoint and the other way round), and restores the CPU generator and,
// on a GPU, the GPU's when the checkpoint has one. `warn` hears about every checkpoint
// skipped and why.
std::optional<CheckpointPosition> loadLatestCheckpoint(const std::string &root, const torch::Device &device,
    torch::nn::Module &model, torch::optim::Optimizer &optimizer,
    const std::function<void(const std::string &)> &warn, std::string *loadedFrom);

// sha256 over the bytes of every parameter and buffer: equal digests = equal weights.
std::string weightsDigest(torch::nn::Module &model);

} // namespace scalelab::trainer
