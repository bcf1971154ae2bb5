// CIFAR-10 binary format: reading, validating and generating synthetic sets.
//
// Contract: torch-free and Qt-free, so the agent (inventory) and the tests use it
// without pulling in libtorch. A split is a list of files of 3073-byte records:
// 1 label byte (0..9) followed by 3072 pixel bytes (1024 red, 1024 green, 1024 blue,
// row-major 32x32). Train = data_batch_1..5.bin, test = test_batch.bin.
// Every function reports problems as a message a person can act on; none throws.
#pragma once

#include "status.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scalelab::trainer::cifar {

inline constexpr int kImageSide = 32;
inline constexpr int kChannels = 3;
inline constexpr std::size_t kPixelBytes = kImageSide * kImageSide * kChannels; // 3072
inline constexpr std::size_t kRecordBytes = 1 + kPixelBytes; // 3073
inline constexpr int kClasses = 10;
// Name of the marker file that flags a generated (not real) data set.
inline constexpr const char *kSyntheticMarker = "SYNTHETIC";

enum class Split { Train, Test };

struct Images {
    std::vector<std::uint8_t> labels; // size() images
    std::vector<std::uint8_t> pixels; // size() * kPixelBytes, CHW per image
    std::size_t size() const { return labels.size(); }
};

struct DatasetSummary {
    std::string directory; // the folder holding the .bin files
    bool synthetic = false;
    std::int64_t trainImages = 0;
    std::int64_t testImages = 0;
};

// The folder that holds the .bin files: `dir` itself, or `dir/cifar-10-batches-bin`
// (the layout of the official tarball).
std::string resolveDatasetDirectory(const std::string &dir);

// The files of one split, relative to the resolved directory.
std::vector<std::string> splitFiles(Split split);

// Checks every file of both splits by size only (cheap) and counts records.
common::Result<DatasetSummary> inspectDataset(const std::string &dir);

// Reads one split fully and validates labels. `limit` > 0 keeps the first `limit` images.
common::Result<Images> readSplit(const std::string &dir, Split split, std::size_t limit);

// What a generated set looks like.
//  - Patterns: each class is a fixed random low-frequency colour pattern; samples add
//    brightness jitter, a shift and noise. Easy: the seed CNN reaches ~100 % in an epoch,
//    so it shows that training runs, not that a recipe learns.
//  - Shapes: each class is a shape or texture (disc, ring, square, frame, triangle, plus,
//    cross, horizontal or vertical stripes, checkerboard) drawn at a random size and place,
//    in random colours on a random gradient, with a distractor blob and noise. Colours and
//    places carry no class information, so a linear model on pixels stays near chance
//    while a CNN must learn shape: harder than Patterns, closer to real images.
enum class SyntheticKind { Patterns, Shapes };

// "patterns" / "shapes"; parseSyntheticKind returns nullopt for anything else.
std::string syntheticKindName(SyntheticKind kind);
std::optional<SyntheticKind> parseSyntheticKind(const std::string &name);

// Writes a synthetic set in exactly the CIFAR-10 binary layout, plus the SYNTHETIC
// marker (which names the kind) and a batches.meta.txt.
common::Status writeSyntheticDataset(const std::string &dir, std::int64_t trainImages,
    std::int64_t testImages, std::uint64_t seed, SyntheticKind kind = SyntheticKind::Patterns);

// Per-channel statistics of a split's pixels, scaled to [0, 1] (what a trainer subtracts and
// divides by), and a SHA-256 over the content of every file of both splits in order, so two
// copies of a data set can be told equal or not.
struct DatasetStatistics {
    double mean[kChannels] = {};
    double std[kChannels] = {};
    std::int64_t images = 0; // training images measured
    std::string contentSha256;
};

// Reads every file of the data set once. Never throws.
common::Result<DatasetStatistics> measureDataset(const std::string &dir);

// Statistics of images already in memory (the first `count` of `images`).
DatasetStatistics channelStatistics(const Images &images);

} // namespace scalelab::trainer::cifar
