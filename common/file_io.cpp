#include "file_io.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace scalelab::common {

int writeAll(int fd, const char *data, std::size_t size)
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

int writeFileSynced(const std::filesystem::path &file, const std::string &bytes)
{
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return errno;
    int error = writeAll(fd, bytes.data(), bytes.size());
    // Delayed allocation may report a full disk only here.
    if (error == 0 && ::fsync(fd) != 0)
        error = errno;
    if (::close(fd) != 0 && error == 0)
        error = errno;
    return error;
}

common::Status replaceFileAtomically(const std::filesystem::path &file, const std::string &bytes)
{
    const std::filesystem::path temp = file.string() + ".tmp";
    int error = writeFileSynced(temp, bytes);
    if (error == 0 && ::rename(temp.c_str(), file.c_str()) != 0)
        error = errno;
    if (error != 0) {
        ::unlink(temp.c_str());
        return common::Status::failure("cannot write " + file.string() + ": " + std::strerror(error));
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
