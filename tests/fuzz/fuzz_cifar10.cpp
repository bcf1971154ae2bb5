// Feeds: a CIFAR-10 binary data set folder made from the input (the agent's data folder
// holds whatever a user unpacked there). Why: inspectDataset runs on every Describe,
// readSplit and measureDataset on every new set; truncated files, bad labels, a nested
// cifar-10-batches-bin and missing files must end in a message, never a crash.
//
// Input: byte 0 = layout flags (bit 0 nested folder, bit 1 SYNTHETIC marker, bit 2 raw
// file sizes), byte 1 = the read limit; then per file (data_batch_1..5, test_batch):
// raw mode: a length-prefixed blob taken as the file; record mode: a record count (0 =
// no file, 1..3) and per record a label byte and pixel bytes (the rest zero), so most
// inputs are a whole number of 3073-byte records and reach the label check.
#include "fuzz_support.h"

#include "cifar10.h"

#include <fuzzer/FuzzedDataProvider.h>

using namespace scalelab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    FuzzedDataProvider in(data, size);
    const auto flags = in.ConsumeIntegral<std::uint8_t>();
    const std::size_t limit = in.ConsumeIntegral<std::uint8_t>() % 8;
    const auto dir = fuzz::freshFolder("cifar");
    const auto files = (flags & 1) ? dir / "cifar-10-batches-bin" : dir;
    std::filesystem::create_directories(files);
    if (flags & 2)
        fuzz::writeFile(files / trainer::cifar::kSyntheticMarker, "SYNTHETIC (kind shapes, seed 1)\n");

    std::int64_t records[2] = {}; // what was written per split: train, test
    bool whole = true; // every file present and a whole number of records
    for (trainer::cifar::Split split : { trainer::cifar::Split::Train, trainer::cifar::Split::Test })
        for (const auto &name : trainer::cifar::splitFiles(split)) {
            std::string bytes;
            if (flags & 4) {
                bytes = in.ConsumeRandomLengthString(8000);
            } else {
                const int count = in.ConsumeIntegralInRange(0, 3);
                for (int r = 0; r < count; ++r) {
                    std::string record(trainer::cifar::kRecordBytes, '\0');
                    const std::string head = in.ConsumeRandomLengthString(16);
                    record.replace(0, std::min(head.size(), record.size()), head.substr(0, record.size()));
                    bytes += record;
                }
                if (count == 0) {
                    whole = false;
                    continue; // the file is missing
                }
            }
            fuzz::writeFile(files / name, bytes);
            whole = whole && !bytes.empty() && bytes.size() % trainer::cifar::kRecordBytes == 0;
            records[split == trainer::cifar::Split::Train ? 0 : 1]
                += std::int64_t(bytes.size() / trainer::cifar::kRecordBytes);
        }

    const auto summary = trainer::cifar::inspectDataset(dir.string());
    fuzz::check(summary.ok() == whole, "inspectDataset: accepted a broken set, or refused a whole one");
    fuzz::check(summary || !summary.error().empty(), "inspectDataset refused without saying why");
    if (summary) {
        fuzz::check(summary->trainImages == records[0] && summary->testImages == records[1],
            "inspectDataset counted the wrong number of records");
        fuzz::check(summary->synthetic == bool(flags & 2), "inspectDataset: SYNTHETIC marker misread");
    }
    for (trainer::cifar::Split split : { trainer::cifar::Split::Train, trainer::cifar::Split::Test }) {
        const auto images = trainer::cifar::readSplit(dir.string(), split, limit);
        if (!images) {
            fuzz::check(!images.error().empty(), "readSplit refused without saying why");
            continue;
        }
        fuzz::check(images->pixels.size() == images->size() * trainer::cifar::kPixelBytes,
            "readSplit: pixels do not match labels");
        fuzz::check(limit == 0 || images->size() <= limit, "readSplit read past its limit");
        for (auto label : images->labels)
            fuzz::check(label < trainer::cifar::kClasses, "readSplit returned a label outside 0..9");
        (void)trainer::cifar::channelStatistics(*images);
    }
    if (const auto measured = trainer::cifar::measureDataset(dir.string()); !measured)
        fuzz::check(!measured.error().empty(), "measureDataset refused without saying why");
    return 0;
}
