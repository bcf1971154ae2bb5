// Fetches the real CIFAR-10 (binary version) into the agent's data directory:
// download (HTTP(S) or file://), MD5 check against the published sum, unpack, inspect.
// Progress goes to a callback; nothing is written outside the data directory, and a
// half-done fetch leaves only hidden ".fetch-*" files that the next fetch replaces.
// Thread-safe: fetches of the same name are serialised.
#pragma once

#include "status.h"

#include "scalelab/v1/agent.pb.h"

#include <filesystem>
#include <functional>
#include <string>

namespace scalelab::agent {

// The official tarball and its published MD5 (https://www.cs.toronto.edu/~kriz/cifar.html).
inline constexpr const char *kCifar10Url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
inline constexpr const char *kCifar10Md5 = "c32a1d4ab5d03f1284b67883e8d87530";

struct FetchSource {
    std::string url = kCifar10Url;
    std::string md5 = kCifar10Md5;
    int stallTimeoutMs = 20'000; // give up when no byte arrives for this long
};

// Returns false to abandon the fetch (the client went away).
using FetchProgressFn = std::function<bool(const v1::FetchProgress &)>;

enum class FetchFailure {
    None,
    Network, // the download failed (no network, refused, stalled)
    Checksum, // downloaded, but not the file we expected
    Conflict, // something unusable is already in the way
    Abandoned, // the progress callback said stop
    Local, // unpacking or writing failed here
};

struct FetchResult {
    FetchFailure failure = FetchFailure::None;
    std::string message; // what went wrong and what to do instead
};

// Puts the data set `name` under `dataDir`. On success fills `dataset`.
FetchResult fetchCifar10(const std::filesystem::path &dataDir, const std::string &name,
    const FetchSource &source, const FetchProgressFn &progress, v1::Dataset *dataset);

// Unpacks the regular files of a .tar.gz into `into` (created). Entries with absolute
// paths, "..", or other than regular files and folders are refused.
common::Status unpackTarGz(const std::filesystem::path &archive, const std::filesystem::path &into,
    const std::function<bool(std::int64_t)> &progress);

} // namespace scalelab::agent
