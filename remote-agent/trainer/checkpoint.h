// Checkpoints of one run: <root>/epoch-NNNN/{model.pt, optimizer.pt, state.pt, MANIFEST}.
// Committed atomically: written into a temporary folder, fsync'ed, renamed into place,
// parent fsync'ed; MANIFEST (sha256 of every file) is written last, so a folder without
// a valid manifest was never committed. Loading verifies the sums and falls back to the
// previous checkpoint when one does not match. Trainer-only (libtorch).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>

namespace scalelab::trainer {

struct CheckpointPosition {
    int epoch = 0; // epochs completed
    std::int64_t step = 0; // optimizer steps completed
};

// Returns the committed folder, or an empty string with `error` set. `device` is where
// the model lives; on a GPU its generator (dropout) is saved with the CPU's.
std::string saveCheckpoint(const std::string &root, const CheckpointPosition &position,
    const torch::Device &device, torch::nn::Module &model, torch::optim::Optimizer &optimizer, int keepLast,
    std::string *error);

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
