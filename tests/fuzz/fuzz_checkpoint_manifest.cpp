// Feeds: a run's checkpoints folder made from the input: a folder "epoch-<digits>", its
// MANIFEST text ("<sha256>  <name>" per line) and the contents of two files it may
// name. Why: MANIFESTs are read back from disk by the agent (ReadCheckpoint, through
// CheckpointSource) and by the console (CheckpointTransfer::verifyCopy before a
// retry resumes from its copy); a damaged or hostile one must be refused in words.
// Checks: a checkpoint either side accepts has files that match their sums, and
// CheckpointSource hands out exactly the bytes it announced.
//
// Input (FuzzedDataProvider): the folder's digits, the epoch asked for, the MANIFEST,
// then model.pt and state.pt. A flag byte can replace the MANIFEST's sums by the real
// sums of the files, so the fuzzer reaches the reading of accepted checkpoints.
#include "fuzz_support.h"

#include "checkpoint_copy.h"
#include "checkpoint_transfer.h"
#include "sha256.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <QString>

#include <map>

using namespace scalelab;

namespace {

std::string sha256Of(const std::string &bytes)
{
    common::Sha256 sha;
    sha.update(bytes.data(), bytes.size());
    return sha.hexDigest();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    FuzzedDataProvider in(data, size);
    const auto flags = in.ConsumeIntegral<std::uint8_t>();
    const std::string digits = in.ConsumeRandomLengthString(12);
    const int epoch = in.ConsumeIntegralInRange(-1, 12);
    std::string manifest = in.ConsumeRandomLengthString(600);
    const std::string model = in.ConsumeRandomLengthString(3000);
    const std::string state = in.ConsumeRemainingBytesAsString();
    if (flags & 1) // a MANIFEST the files match: the sums of this input's files
        manifest = sha256Of(model) + "  model.pt\n" + (flags & 2 ? sha256Of(state) + "  state.pt\n" : "")
            + manifest;

    const auto checkpoints = fuzz::freshFolder("run") / "checkpoints";
    if (digits.find('/') != std::string::npos || digits.find('\0') != std::string::npos)
        return 0; // not a folder name the file system can hold
    const auto folder = checkpoints / ("epoch-" + digits);
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec)
        return 0;
    fuzz::writeFile(folder / "MANIFEST", manifest);
    fuzz::writeFile(folder / "model.pt", model);
    fuzz::writeFile(folder / "state.pt", state);

    // The agent: ReadCheckpoint's source, read to its end.
    agent::CheckpointSource source;
    const grpc::Status opened = source.open(checkpoints, "run-1", epoch);
    fuzz::check(
        opened.ok() || !opened.error_message().empty(), "CheckpointSource::open refused without a message");
    if (opened.ok()) {
        v1::CheckpointChunk chunk;
        grpc::Status status;
        std::map<std::string, std::string> received;
        bool first = true;
        while (source.next(&chunk, &status)) {
            fuzz::check(first == chunk.has_manifest(),
                "CheckpointSource: the manifest is not (only) the first chunk");
            first = false;
            auto &bytes = received[chunk.file()];
            fuzz::check(
                chunk.offset() == std::int64_t(bytes.size()), "CheckpointSource: chunks not consecutive");
            bytes += chunk.data();
        }
        if (status.ok())
            for (const auto &f : source.manifest().files()) {
                fuzz::check(
                    received[f.name()].size() == std::size_t(f.size()), "CheckpointSource: size differs");
                fuzz::check(sha256Of(received[f.name()]) == f.sha256(),
                    "CheckpointSource sent a file not matching its sum");
            }
    }

    // The console: the check a copy passes before a retry resumes from it.
    v1::CheckpointManifest verified;
    const core::Status copyOk
        = core::CheckpointTransfer::verifyCopy(QString::fromStdString(folder.string()), &verified);
    if (copyOk)
        for (const auto &f : verified.files()) {
            std::ifstream file(folder / f.name(), std::ios::binary);
            const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
            fuzz::check(sha256Of(bytes) == f.sha256(), "verifyCopy accepted a file not matching its sum");
        }
    return 0;
}
