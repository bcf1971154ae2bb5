// The seed CNN of the ScaleLab studies, torch-free view: what callers outside the
// trainer (tests, inventory) may know without including libtorch.
#pragma once

#include <cstdint>
#include <utility>

namespace scalelab::trainer {

// 3 blocks of two 3x3 convs (64/128/256) with BatchNorm + ReLU, 2x2 max-pool and
// dropout (0.25 by default); dense 512 + ReLU + dropout (0.5); dense 10.
inline constexpr std::int64_t kSeedModelParameters = 3'249'994;
// The dropout probabilities unless a run sets them (--block-dropout, --dense-dropout);
// proto/rules/spec_rules.h holds the same for the agent.
inline constexpr double kDefaultBlockDropout = 0.25;
inline constexpr double kDefaultDenseDropout = 0.5;

// Builds the model with libtorch and counts its trainable parameters.
std::int64_t seedModelParameterCount();

// Runs one forward pass on a [batch, 3, 32, 32] input; returns the output's dims
// as {batch, classes}.
std::pair<std::int64_t, std::int64_t> seedModelOutputShape(std::int64_t batch);

} // namespace scalelab::trainer
