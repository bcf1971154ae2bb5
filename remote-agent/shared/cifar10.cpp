#include "cifar10.h"

#include "sha256.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;

namespace scalelab::trainer::cifar {
namespace {

using common::Status;

std::string hint()
{
    return " Download cifar-10-binary.tar.gz (the binary version, not the Python one) and "
           "extract it into the data directory, or generate a synthetic set.";
}

// The record count of `path`, or why not: the file is missing, empty or not a whole
// number of records.
common::Result<std::int64_t> recordCount(const fs::path &path)
{
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
        return Status::failure("missing CIFAR-10 file " + path.string() + "." + hint());
    }
    const auto bytes = fs::file_size(path, ec);
    if (ec) {
        return Status::failure("cannot read the size of " + path.string() + ": " + ec.message());
    }
    if (bytes == 0 || bytes % kRecordBytes != 0) {
        return Status::failure(path.string() + " has " + std::to_string(bytes)
            + " bytes, which is not a whole number of 3073-byte records "
              "(1 label byte + 3072 pixel bytes): the file is truncated or "
              "is not CIFAR-10 binary."
            + hint());
    }
    return std::int64_t(bytes / kRecordBytes);
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

common::Result<DatasetSummary> inspectDataset(const std::string &dir)
{
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        return Status::failure("data directory " + dir + " does not exist or is not a folder." + hint());
    }
    DatasetSummary summary;
    summary.directory = resolveDatasetDirectory(dir);
    summary.synthetic = fs::exists(fs::path(summary.directory) / kSyntheticMarker, ec);
    for (Split split : { Split::Train, Split::Test }) {
        for (const auto &name : splitFiles(split)) {
            const auto count = recordCount(fs::path(summary.directory) / name);
            if (!count)
                return Status::failure(count.error());
            (split == Split::Train ? summary.trainImages : summary.testImages) += *count;
        }
    }
    return summary;
}

common::Result<Images> readSplit(const std::string &dir, Split split, std::size_t limit)
{
    const fs::path root = resolveDatasetDirectory(dir);
    Images images;
    for (const auto &name : splitFiles(split)) {
        const fs::path path = root / name;
        const auto count = recordCount(path);
        if (!count)
            return Status::failure(count.error());
        std::ifstream in(path, std::ios::binary);
        std::vector<std::uint8_t> record(kRecordBytes);
        for (std::int64_t i = 0; i < *count; ++i) {
            if (limit > 0 && images.size() >= limit)
                return images;
            if (!in.read(reinterpret_cast<char *>(record.data()), kRecordBytes)) {
                return Status::failure(path.string() + ": read failed at record " + std::to_string(i)
                    + " (file changed while reading?)");
            }
            if (record[0] >= kClasses) {
                return Status::failure(path.string() + ": record " + std::to_string(i) + " has label "
                    + std::to_string(record[0])
                    + ", but CIFAR-10 labels are 0..9: the file is corrupt or "
                      "not CIFAR-10 (CIFAR-100 binary has 2 label bytes).");
            }
            images.labels.push_back(record[0]);
            images.pixels.insert(images.pixels.end(), record.begin() + 1, record.end());
        }
    }
    return images;
}

std::string syntheticKindName(SyntheticKind kind)
{
    return kind == SyntheticKind::Shapes ? "shapes" : "patterns";
}

std::optional<SyntheticKind> parseSyntheticKind(const std::string &name)
{
    if (name == "patterns")
        return SyntheticKind::Patterns;
    if (name == "shapes")
        return SyntheticKind::Shapes;
    return std::nullopt;
}

namespace {

using Rng = std::mt19937_64;
using Record = std::vector<std::uint8_t>;

// One class's pattern: a fixed random 4x4 colour grid, upsampled, with jitter and noise.
class PatternPainter {
public:
    explicit PatternPainter(Rng &rng)
    {
        std::uniform_real_distribution<float> unit(0.15f, 0.85f);
        for (auto &p : m_prototypes)
            for (auto &v : p)
                v = unit(rng);
    }

    void paint(int c, Rng &rng, Record &record)
    {
        const float b = m_brightness(rng);
        const int dx = m_shift(rng), dy = m_shift(rng);
        for (int ch = 0; ch < kChannels; ++ch)
            for (int y = 0; y < kImageSide; ++y)
                for (int x = 0; x < kImageSide; ++x) {
                    const int gy = std::clamp((y + dy) * kGrid / kImageSide, 0, kGrid - 1);
                    const int gx = std::clamp((x + dx) * kGrid / kImageSide, 0, kGrid - 1);
                    const float v = m_prototypes[c][(gy * kGrid + gx) * kChannels + ch] + b + m_noise(rng);
                    record[1 + ch * 1024 + y * kImageSide + x]
                        = static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f));
                }
    }

private:
    static constexpr int kGrid = 4;
    std::array<std::array<float, kGrid * kGrid * kChannels>, kClasses> m_prototypes {};
    std::normal_distribution<float> m_noise { 0.0f, 0.12f };
    std::uniform_real_distribution<float> m_brightness { -0.1f, 0.1f };
    std::uniform_int_distribution<int> m_shift { -3, 3 };
};

// Whether the point (u, v), in the shape's own frame ([-1, 1] across its box), is inside
// the shape of class c.
bool insideShape(int c, float u, float v)
{
    const float au = std::fabs(u), av = std::fabs(v);
    const bool inBox = au <= 0.9f && av <= 0.9f;
    const auto band = [](float t) { return int(std::floor((t + 1.0f) * 2.5f)) % 2 == 0; };
    switch (c) {
    case 0:
        return u * u + v * v <= 1.0f; // disc
    case 1: { // ring
        const float r2 = u * u + v * v;
        return r2 <= 1.0f && r2 >= 0.3f;
    }
    case 2:
        return au <= 0.8f && av <= 0.8f; // square
    case 3:
        return std::max(au, av) <= 0.9f && std::max(au, av) >= 0.55f; // frame
    case 4:
        return v >= -0.9f && v <= 0.9f && au <= (v + 0.9f) / 1.8f * 0.95f; // triangle, apex up
    case 5:
        return (au <= 0.28f && av <= 0.95f) || (av <= 0.28f && au <= 0.95f); // plus
    case 6:
        return inBox && (std::fabs(u - v) <= 0.38f || std::fabs(u + v) <= 0.38f); // cross
    case 7:
        return inBox && band(v); // horizontal stripes
    case 8:
        return inBox && band(u); // vertical stripes
    default:
        return inBox && (band(u) != band(v)); // checkerboard
    }
}

float luma(const std::array<float, 3> &rgb)
{
    return 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
}

// A shape or texture per class, in random colours, size and place (see SyntheticKind).
class ShapePainter {
public:
    void paint(int c, Rng &rng, Record &record)
    {
        std::uniform_real_distribution<float> unit(0.0f, 1.0f);
        const auto colour = [&] { return std::array<float, 3> { unit(rng), unit(rng), unit(rng) }; };
        // A darker background and a lighter shape, hues at random: the colours say
        // nothing about the class, the contrast makes the shape visible.
        std::array<float, 3> background = colour(), foreground = colour();
        for (int tries = 0; tries < 64 && luma(background) > 0.4f; ++tries)
            background = colour();
        for (int tries = 0; tries < 64 && luma(foreground) < 0.6f; ++tries)
            foreground = colour();
        // A gentle gradient across the background, in a random direction.
        const float gradientAngle = unit(rng) * 6.2831853f;
        const float gradient = 0.25f * unit(rng);
        const float gx = std::cos(gradientAngle) * gradient / kImageSide;
        const float gy = std::sin(gradientAngle) * gradient / kImageSide;
        const float radius = 6.0f + 6.0f * unit(rng);
        const float cx = radius * 0.7f + unit(rng) * (kImageSide - 1.4f * radius);
        const float cy = radius * 0.7f + unit(rng) * (kImageSide - 1.4f * radius);
        // A distractor: a small blob of a third colour, in half the images.
        const bool blob = unit(rng) < 0.5f;
        const auto blobColour = colour();
        const float bx = unit(rng) * kImageSide, by = unit(rng) * kImageSide;
        const float br = 1.5f + 1.5f * unit(rng);
        std::normal_distribution<float> noise(0.0f, 0.06f);

        for (int y = 0; y < kImageSide; ++y)
            for (int x = 0; x < kImageSide; ++x) {
                // Coverage from a 3x3 supersample, so edges are smooth as in photographs.
                int covered = 0;
                for (int sy = 0; sy < 3; ++sy)
                    for (int sx = 0; sx < 3; ++sx) {
                        const float px = float(x) + (float(sx) + 0.5f) / 3.0f;
                        const float py = float(y) + (float(sy) + 0.5f) / 3.0f;
                        covered += insideShape(c, (px - cx) / radius, (py - cy) / radius) ? 1 : 0;
                    }
                const float coverage = float(covered) / 9.0f;
                const float dxb = float(x) + 0.5f - bx, dyb = float(y) + 0.5f - by;
                const bool inBlob = blob && dxb * dxb + dyb * dyb <= br * br;
                const float shade = gx * (float(x) - 16.0f) + gy * (float(y) - 16.0f);
                for (int ch = 0; ch < kChannels; ++ch) {
                    float v = background[ch] + shade;
                    v = v * (1.0f - coverage) + foreground[ch] * coverage;
                    if (inBlob)
                        v = blobColour[ch];
                    v += noise(rng);
                    record[1 + ch * 1024 + y * kImageSide + x]
                        = static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f));
                }
            }
    }
};

} // namespace

Status writeSyntheticDataset(const std::string &dir, std::int64_t trainImages, std::int64_t testImages,
    std::uint64_t seed, SyntheticKind kind)
{
    if (trainImages <= 0 || testImages <= 0) {
        return Status::failure("a synthetic data set needs at least one train and one test image");
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return Status::failure("cannot create " + dir + ": " + ec.message());
    }
    Rng rng(seed);
    PatternPainter patterns(rng);
    ShapePainter shapes;

    auto writeSplit = [&](const fs::path &path, std::int64_t count) {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        std::uniform_int_distribution<int> label(0, kClasses - 1);
        Record record(kRecordBytes);
        for (std::int64_t i = 0; i < count; ++i) {
            const int c = label(rng);
            record[0] = static_cast<std::uint8_t>(c);
            if (kind == SyntheticKind::Shapes)
                shapes.paint(c, rng, record);
            else
                patterns.paint(c, rng, record);
            out.write(reinterpret_cast<const char *>(record.data()), kRecordBytes);
        }
        out.flush();
        return static_cast<bool>(out);
    };

    // Spread train images over the five train files like the real set (never empty).
    const auto trainNames = splitFiles(Split::Train);
    const auto files = static_cast<std::int64_t>(trainNames.size());
    if (trainImages < files) {
        return Status::failure("a synthetic set needs at least " + std::to_string(files)
            + " train images (one per data_batch file)");
    }
    for (std::int64_t f = 0; f < files; ++f) {
        const std::int64_t n = trainImages / files + (f < trainImages % files ? 1 : 0);
        if (!writeSplit(fs::path(dir) / trainNames[f], n)) {
            return Status::failure("cannot write " + (fs::path(dir) / trainNames[f]).string());
        }
    }
    if (!writeSplit(fs::path(dir) / "test_batch.bin", testImages)) {
        return Status::failure("cannot write " + (fs::path(dir) / "test_batch.bin").string());
    }
    if (kind == SyntheticKind::Shapes)
        std::ofstream(fs::path(dir) / "batches.meta.txt")
            << "disc\nring\nsquare\nframe\ntriangle\nplus\ncross\nhstripes\nvstripes\nchecker\n";
    else
        std::ofstream(fs::path(dir) / "batches.meta.txt")
            << "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n";
    std::ofstream(fs::path(dir) / kSyntheticMarker)
        << "SYNTHETIC data generated by ScaleLab (kind " << syntheticKindName(kind) << ", seed " << seed
        << ", " << trainImages << " train / " << testImages
        << " test images). Not CIFAR-10: accuracies on it say nothing about real data.\n";
    return Status::success();
}

DatasetStatistics channelStatistics(const Images &images)
{
    DatasetStatistics stats;
    double sum[kChannels] = {}, squares[kChannels] = {};
    const std::size_t count = images.size();
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint8_t *p = images.pixels.data() + i * kPixelBytes;
        for (int ch = 0; ch < kChannels; ++ch) {
            std::uint64_t s = 0, q = 0; // exact per image: 1024 x 255^2 fits easily
            for (int k = 0; k < kImageSide * kImageSide; ++k) {
                const std::uint32_t v = p[ch * kImageSide * kImageSide + k];
                s += v;
                q += v * v;
            }
            sum[ch] += double(s);
            squares[ch] += double(q);
        }
    }
    const double n = double(count) * kImageSide * kImageSide;
    for (int ch = 0; ch < kChannels; ++ch) {
        if (n == 0) {
            stats.mean[ch] = 0.5;
            stats.std[ch] = 0.25;
            continue;
        }
        const double mean = sum[ch] / n;
        const double variance = std::max(0.0, squares[ch] / n - mean * mean);
        stats.mean[ch] = mean / 255.0;
        // A constant channel would divide by zero; such a set is degenerate, not an error.
        stats.std[ch] = std::max(std::sqrt(variance) / 255.0, 1e-3);
    }
    stats.images = std::int64_t(count);
    return stats;
}

common::Result<DatasetStatistics> measureDataset(const std::string &dir)
{
    const auto summary = inspectDataset(dir);
    if (!summary)
        return Status::failure(summary.error());
    const auto train = readSplit(dir, Split::Train, 0);
    if (!train)
        return Status::failure(train.error());
    DatasetStatistics stats = channelStatistics(*train);
    common::Sha256 digest;
    std::vector<char> buffer(1 << 20);
    for (Split split : { Split::Train, Split::Test })
        for (const auto &name : splitFiles(split)) {
            const fs::path path = fs::path(summary->directory) / name;
            std::ifstream in(path, std::ios::binary);
            while (in) {
                in.read(buffer.data(), std::streamsize(buffer.size()));
                digest.update(buffer.data(), std::size_t(in.gcount()));
            }
            if (!in.eof()) {
                return Status::failure("cannot read " + path.string() + " while computing its checksum");
            }
        }
    stats.contentSha256 = digest.hexDigest();
    return stats;
}

} // namespace scalelab::trainer::cifar
