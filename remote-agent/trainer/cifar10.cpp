#include "cifar10.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;

namespace scalelab::cifar {
namespace {

void setError(std::string *error, std::string message)
{
    if (error)
        *error = std::move(message);
}

std::string hint()
{
    return " Download cifar-10-binary.tar.gz (the binary version, not the Python one) and "
           "extract it into the data directory, or generate a synthetic set.";
}

// Returns the record count of `path`, or nullopt with a message when the file is
// missing, empty or not a whole number of records.
std::optional<std::int64_t> recordCount(const fs::path &path, std::string *error)
{
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
        setError(error, "missing CIFAR-10 file " + path.string() + "." + hint());
        return std::nullopt;
    }
    const auto bytes = fs::file_size(path, ec);
    if (ec) {
        setError(error, "cannot read the size of " + path.string() + ": " + ec.message());
        return std::nullopt;
    }
    if (bytes == 0 || bytes % kRecordBytes != 0) {
        setError(error,
            path.string() + " has " + std::to_string(bytes)
                + " bytes, which is not a whole number of 3073-byte records "
                  "(1 label byte + 3072 pixel bytes): the file is truncated or "
                  "is not CIFAR-10 binary."
                + hint());
        return std::nullopt;
    }
    return static_cast<std::int64_t>(bytes / kRecordBytes);
}

} // namespace

std::string resolveDatasetDirectory(const std::string &dir)
{
    const fs::path nested = fs::path(dir) / "cifar-10-batches-bin";
    std::error_code ec;
    if (fs::is_directory(nested, ec))
        return nested.string();
    return dir;
}

std::vector<std::string> splitFiles(Split split)
{
    if (split == Split::Test)
        return { "test_batch.bin" };
    return { "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
        "data_batch_5.bin" };
}

std::optional<DatasetSummary> inspectDataset(const std::string &dir, std::string *error)
{
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        setError(error, "data directory " + dir + " does not exist or is not a folder." + hint());
        return std::nullopt;
    }
    DatasetSummary summary;
    summary.directory = resolveDatasetDirectory(dir);
    summary.synthetic = fs::exists(fs::path(summary.directory) / kSyntheticMarker, ec);
    for (Split split : { Split::Train, Split::Test }) {
        for (const auto &name : splitFiles(split)) {
            const auto count = recordCount(fs::path(summary.directory) / name, error);
            if (!count)
                return std::nullopt;
            (split == Split::Train ? summary.trainImages : summary.testImages) += *count;
        }
    }
    return summary;
}

std::optional<Images> readSplit(const std::string &dir, Split split, std::size_t limit, std::string *error)
{
    const fs::path root = resolveDatasetDirectory(dir);
    Images images;
    for (const auto &name : splitFiles(split)) {
        const fs::path path = root / name;
        const auto count = recordCount(path, error);
        if (!count)
            return std::nullopt;
        std::ifstream in(path, std::ios::binary);
        std::vector<std::uint8_t> record(kRecordBytes);
        for (std::int64_t i = 0; i < *count; ++i) {
            if (limit > 0 && images.size() >= limit)
                return images;
            if (!in.read(reinterpret_cast<char *>(record.data()), kRecordBytes)) {
                setError(error,
                    path.string() + ": read failed at record " + std::to_string(i)
                        + " (file changed while reading?)");
                return std::nullopt;
            }
            if (record[0] >= kClasses) {
                setError(error,
                    path.string() + ": record " + std::to_string(i) + " has label "
                        + std::to_string(record[0])
                        + ", but CIFAR-10 labels are 0..9: the file is corrupt or "
                          "not CIFAR-10 (CIFAR-100 binary has 2 label bytes).");
                return std::nullopt;
            }
            images.labels.push_back(record[0]);
            images.pixels.insert(images.pixels.end(), record.begin() + 1, record.end());
        }
    }
    return images;
}

bool writeSyntheticDataset(const std::string &dir, std::int64_t trainImages, std::int64_t testImages,
    std::uint64_t seed, std::string *error)
{
    if (trainImages <= 0 || testImages <= 0) {
        setError(error, "a synthetic data set needs at least one train and one test image");
        return false;
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        setError(error, "cannot create " + dir + ": " + ec.message());
        return false;
    }
    std::mt19937_64 rng(seed);
    // One 4x4 colour grid per class, upsampled to 32x32: a pattern a CNN learns fast
    // but that noise, jitter and shifts keep from being trivially separable.
    constexpr int kGrid = 4;
    std::array<std::array<float, kGrid * kGrid * kChannels>, kClasses> prototypes {};
    std::uniform_real_distribution<float> unit(0.15f, 0.85f);
    for (auto &p : prototypes)
        for (auto &v : p)
            v = unit(rng);

    auto writeSplit = [&](const fs::path &path, std::int64_t count) {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        std::normal_distribution<float> noise(0.0f, 0.12f);
        std::uniform_real_distribution<float> brightness(-0.1f, 0.1f);
        std::uniform_int_distribution<int> shift(-3, 3);
        std::uniform_int_distribution<int> label(0, kClasses - 1);
        std::vector<std::uint8_t> record(kRecordBytes);
        for (std::int64_t i = 0; i < count; ++i) {
            const int c = label(rng);
            const float b = brightness(rng);
            const int dx = shift(rng), dy = shift(rng);
            record[0] = static_cast<std::uint8_t>(c);
            for (int ch = 0; ch < kChannels; ++ch)
                for (int y = 0; y < kImageSide; ++y)
                    for (int x = 0; x < kImageSide; ++x) {
                        const int gy = std::clamp((y + dy) * kGrid / kImageSide, 0, kGrid - 1);
                        const int gx = std::clamp((x + dx) * kGrid / kImageSide, 0, kGrid - 1);
                        const float v = prototypes[c][(gy * kGrid + gx) * kChannels + ch] + b + noise(rng);
                        record[1 + ch * 1024 + y * kImageSide + x]
                            = static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f));
                    }
            out.write(reinterpret_cast<const char *>(record.data()), kRecordBytes);
        }
        out.flush();
        return static_cast<bool>(out);
    };

    // Spread train images over the five train files like the real set (never empty).
    const auto trainNames = splitFiles(Split::Train);
    const auto files = static_cast<std::int64_t>(trainNames.size());
    if (trainImages < files) {
        setError(error,
            "a synthetic set needs at least " + std::to_string(files)
                + " train images (one per data_batch file)");
        return false;
    }
    for (std::int64_t f = 0; f < files; ++f) {
        const std::int64_t n = trainImages / files + (f < trainImages % files ? 1 : 0);
        if (!writeSplit(fs::path(dir) / trainNames[f], n)) {
            setError(error, "cannot write " + (fs::path(dir) / trainNames[f]).string());
            return false;
        }
    }
    if (!writeSplit(fs::path(dir) / "test_batch.bin", testImages)) {
        setError(error, "cannot write " + (fs::path(dir) / "test_batch.bin").string());
        return false;
    }
    std::ofstream(fs::path(dir) / "batches.meta.txt")
        << "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n";
    std::ofstream(fs::path(dir) / kSyntheticMarker)
        << "SYNTHETIC data generated by ScaleLab (seed " << seed << ", " << trainImages << " train / "
        << testImages << " test images). Not CIFAR-10: accuracies on it say nothing about real data.\n";
    return true;
}

} // namespace scalelab::cifar
