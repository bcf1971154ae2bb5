// The on-disk form of a run's checkpoints, the one definition the worker (which writes
// them), the agent (which sends and receives them: ReadCheckpoint, WriteCheckpoint) and
// the console (which keeps copies to resume a run elsewhere) share:
//
//   <root>/epoch-NNNN/            one folder per checkpoint, NNNN the epochs completed
//   <root>/epoch-NNNN/MANIFEST    "<sha256>  <name>\n" per file, written last: a folder
//                                 with a MANIFEST is complete; one whose files match it
//                                 is verified
//   <root>/.<anything>            temporary folders of commits in progress (ignored)
//
// A checkpoint is committed by writing its files and then MANIFEST into a temporary
// folder beside it, fsync'ing them and the folder, and renaming it into place.
//
// std only (no torch, Qt, gRPC or protobuf). Free functions, no state: callable from any
// thread; the file system is the only thing shared.
#pragma once

#include "status.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scalelab::common::checkpoint {

inline constexpr std::string_view kManifest = "MANIFEST";

// "epoch-0007" for epoch 7 (at least four digits).
[[nodiscard]] std::string folderName(int epoch);

// The epoch of a folder named "epoch-" + 1 to 9 digits, else nullopt.
[[nodiscard]] std::optional<int> epochOf(std::string_view folderName);

// A name a checkpoint may give one of its files: a safe name (safe_name.h), not MANIFEST.
[[nodiscard]] bool isFileName(std::string_view name);

// 64 lower-case hex digits.
[[nodiscard]] bool isSha256(std::string_view text);

struct Entry {
    std::string sha256;
    std::string name;
    bool operator==(const Entry &) const = default;
};

// The MANIFEST text of `entries`, in their order.
[[nodiscard]] std::string formatManifest(const std::vector<Entry> &entries);

// Parses MANIFEST text: every non-empty line "<sha256> <name>" (any run of blanks
// between), each name a file name and listed once, at least one; or what is wrong, in
// words naming the line.
common::Result<std::vector<Entry>> parseManifest(std::string_view text);

struct Folder {
    int epoch = 0;
    std::filesystem::path path;
    bool operator==(const Folder &) const = default;
};

// The epoch-NNNN folders under `root`, oldest first; with `committedOnly`, only those
// holding a MANIFEST. A missing root has none.
[[nodiscard]] std::vector<Folder> folders(const std::filesystem::path &root, bool committedOnly);

// The entries of the MANIFEST in `dir`, after checking that every file it names is there
// and matches its sum (and its size into `sizes`, when given); or what is wrong ("no
// MANIFEST (never committed)", "model.pt does not match its sha256 in MANIFEST", …).
[[nodiscard]] common::Status verify(const std::filesystem::path &dir, std::vector<Entry> *entries,
    std::vector<std::uint64_t> *sizes = nullptr);

// Writes `entries` as dir/MANIFEST, fsyncs it and then `dir`: the commit's last write
// before the rename. A failure is writeFileSynced's (file_io.h): the system's reason,
// ResourceExhausted when the disk is full.
[[nodiscard]] common::Status writeManifest(
    const std::filesystem::path &dir, const std::vector<Entry> &entries);

// Removes all but the newest `keep` epoch-NNNN folders under `root`, never `except`. Best
// effort, so it reports nothing: a folder it cannot remove stays, and the next prune
// tries it again.
void prune(const std::filesystem::path &root, std::size_t keep, const std::filesystem::path &except = {});

} // namespace scalelab::common::checkpoint
