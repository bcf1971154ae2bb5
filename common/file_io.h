// Checked writes, for files whose loss or tearing matters (checkpoints, run records).
// Torch-free and Qt-free: the worker and the agent share them.
#pragma once

#include "status.h"

#include <cstddef>
#include <filesystem>
#include <string>

namespace scalelab::common {

// Writes all of `size` bytes to `fd` (retrying short writes and EINTR). 0 when it worked,
// else the errno (ENOSPC when the disk takes no more).
int writeAll(int fd, const char *data, std::size_t size);

// Writes `bytes` to `file` and fsyncs it. 0 or the errno.
int writeFileSynced(const std::filesystem::path &file, const std::string &bytes);

// Replaces `file` with `bytes` atomically: a temporary next to it, fsync'ed, renamed over
// it, the folder fsync'ed. A reader sees the old file or the new one, never a torn or
// empty one. Fails with "cannot write FILE: reason".
common::Status replaceFileAtomically(const std::filesystem::path &file, const std::string &bytes);

// fsync of a folder (after a rename in it), best effort.
void syncFolder(const std::filesystem::path &folder);

// Removes `path` and, for a folder, everything in it; symbolic links are removed, not
// followed. 0 when it is gone (or never was), else the first errno met. What
// std::filesystem::remove_all does, through POSIX calls: PyTorch's wheels export the
// std::filesystem they link statically (pytorch/pytorch#133437), a worker built against
// one calls those copies, and their remove_all jumped to address 0 on a GPU node
// (PyTorch 2.11: SIGSEGV when a checkpoint pruned an older one).
int removeTree(const std::filesystem::path &path);

} // namespace scalelab::common
