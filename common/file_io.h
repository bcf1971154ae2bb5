// Checked writes, for files whose loss or tearing matters (checkpoints, run records).
// Torch-free and Qt-free: the worker and the agent share them.
#pragma once

#include "status.h"

#include <cstddef>
#include <filesystem>
#include <string>

namespace scalelab::common {

// A failed system call's errno as a Status. The message is the system's reason alone
// ("No space left on device"), for the caller to put after what it was doing; the code
// says what kind: ResourceExhausted for ENOSPC and EDQUOT (the disk is full or over
// quota), NotFound for ENOENT, PermissionDenied for EACCES and EPERM, else Unknown.
common::Status errnoStatus(int errnum);

// Writes all of `size` bytes to `fd` (retrying short writes and EINTR); a failure is
// errnoStatus's (ResourceExhausted when the disk takes no more).
[[nodiscard]] common::Status writeAll(int fd, const char *data, std::size_t size);

// Writes `bytes` to `file` and fsyncs it; a failure is errnoStatus's (the reason alone:
// the caller names the file).
[[nodiscard]] common::Status writeFileSynced(const std::filesystem::path &file, const std::string &bytes);

// Replaces `file` with `bytes` atomically: a temporary next to it, fsync'ed, renamed over
// it, the folder fsync'ed. A reader sees the old file or the new one, never a torn or
// empty one. Fails with "cannot write FILE: reason".
[[nodiscard]] common::Status replaceFileAtomically(
    const std::filesystem::path &file, const std::string &bytes);

// fsync of a folder (after a rename in it), best effort: it reports nothing, as a
// failure there leaves nothing for the caller to do (the rename is done either way).
void syncFolder(const std::filesystem::path &folder);

// Removes `path` and, for a folder, everything in it; symbolic links are removed, not
// followed. Ok when it is gone (or never was), else errnoStatus of the first errno met.
// What std::filesystem::remove_all does, through POSIX calls: PyTorch's wheels export the
// std::filesystem they link statically (pytorch/pytorch#133437), a worker built against
// one calls those copies, and their remove_all jumped to address 0 on a GPU node
// (PyTorch 2.11: SIGSEGV when a checkpoint pruned an older one).
[[nodiscard]] common::Status removeTree(const std::filesystem::path &path);

} // namespace scalelab::common
