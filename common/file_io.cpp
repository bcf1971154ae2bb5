#include "file_io.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

namespace scalelab::common {

namespace {

// Removes `name` in the folder `parent`: a file or link at once, a folder after what it
// holds. 0 or the first errno met.
int removeAt(int parent, const char *name)
{
    if (::unlinkat(parent, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM) // unlink(2) of a folder: EISDIR on Linux, EPERM by POSIX
        return errno;
    const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno;
    DIR *dir = ::fdopendir(fd);
    if (dir == nullptr) {
        const int error = errno;
        ::close(fd);
        return error;
    }
    int error = 0;
    while (const dirent *entry = ::readdir(dir)) {
        if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0)
            continue;
        if (const int e = removeAt(::dirfd(dir), entry->d_name); e != 0 && error == 0)
            error = e;
    }
    ::closedir(dir);
    if (error != 0)
        return error;
    return ::unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : errno;
}

// Writes all of `size` bytes to `fd`: 0 or the errno.
int writeAllErrno(int fd, const char *data, std::size_t size)
{
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return ENOSPC;
        data += n;
        size -= std::size_t(n);
    }
    return 0;
}

// Writes `bytes` to `file` and fsyncs it: 0 or the errno.
int writeFileSyncedErrno(const std::filesystem::path &file, const std::string &bytes)
{
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return errno;
    int error = writeAllErrno(fd, bytes.data(), bytes.size());
    // Delayed allocation may report a full disk only here.
    if (error == 0 && ::fsync(fd) != 0)
        error = errno;
    if (::close(fd) != 0 && error == 0)
        error = errno;
    return error;
}

common::Status statusOf(int errnum)
{
    return errnum == 0 ? common::Status::success() : errnoStatus(errnum);
}

} // namespace

common::Status errnoStatus(int errnum)
{
    using Code = common::StatusCode;
    Code code = Code::Unknown;
    if (errnum == ENOSPC || errnum == EDQUOT)
        code = Code::ResourceExhausted;
    else if (errnum == ENOENT)
        code = Code::NotFound;
    else if (errnum == EACCES || errnum == EPERM)
        code = Code::PermissionDenied;
    return common::Status::failure(code, std::strerror(errnum));
}

common::Status removeTree(const std::filesystem::path &path)
{
    return statusOf(path.empty() ? 0 : removeAt(AT_FDCWD, path.c_str()));
}

common::Status writeAll(int fd, const char *data, std::size_t size)
{
    return statusOf(writeAllErrno(fd, data, size));
}

common::Status writeFileSynced(const std::filesystem::path &file, const std::string &bytes)
{
    return statusOf(writeFileSyncedErrno(file, bytes));
}

common::Status replaceFileAtomically(const std::filesystem::path &file, const std::string &bytes)
{
    const std::filesystem::path temp = file.string() + ".tmp";
    int error = writeFileSyncedErrno(temp, bytes);
    if (error == 0 && ::rename(temp.c_str(), file.c_str()) != 0)
        error = errno;
    if (error != 0) {
        ::unlink(temp.c_str());
        return common::Status::failure(
            errnoStatus(error).code(), "cannot write " + file.string() + ": " + std::strerror(error));
    }
    syncFolder(file.parent_path());
    return common::Status::success();
}

void syncFolder(const std::filesystem::path &folder)
{
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

} // namespace scalelab::common
