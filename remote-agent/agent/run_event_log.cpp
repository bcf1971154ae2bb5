#include "run_event_log.h"

#include "agent_support.h"
#include "file_io.h"
#include "log.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace scalelab::agent {

namespace {

void appendRecord(const v1::RunEvent &event, std::string *bytes)
{
    google::protobuf::io::StringOutputStream stream(bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteVarint32(static_cast<std::uint32_t>(event.ByteSizeLong()));
    event.SerializeWithCachedSizes(&coded);
}

// Parses the record at the start of `bytes` ([varint length][RunEvent]); its size in
// `used`. False when it is torn or corrupt.
bool parseRecord(const std::uint8_t *bytes, std::size_t size, v1::RunEvent *event, std::size_t *used)
{
    google::protobuf::io::CodedInputStream in(bytes, static_cast<int>(std::min<std::size_t>(size, 1u << 30)));
    std::uint32_t length = 0;
    if (!in.ReadVarint32(&length) || in.CurrentPosition() + std::size_t(length) > size)
        return false;
    const auto limit = in.PushLimit(static_cast<int>(length));
    const bool parsed
        = event->ParseFromCodedStream(&in) && in.ConsumedEntireMessage() && in.BytesUntilLimit() == 0;
    in.PopLimit(limit);
    *used = static_cast<std::size_t>(in.CurrentPosition());
    return parsed;
}

} // namespace

RunEventLog::RunEventLog(std::filesystem::path file)
    : m_file(std::move(file))
{
    m_fd = ::open(m_file.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (m_fd < 0) {
        m_opened = common::Status::failure("cannot open " + m_file.string() + ": " + std::strerror(errno));
        return;
    }
    // Index what an earlier agent wrote. A crash can leave the last record torn, and a
    // record out of sequence means the rest cannot be trusted: keep the good prefix and
    // cut the file there.
    std::string bytes;
    {
        char buffer[65536];
        ssize_t n;
        while ((n = ::pread(m_fd, buffer, sizeof buffer, static_cast<off_t>(bytes.size()))) > 0)
            bytes.append(buffer, static_cast<std::size_t>(n));
    }
    std::size_t good = 0;
    while (good < bytes.size()) {
        v1::RunEvent event;
        std::size_t used = 0;
        if (!parseRecord(reinterpret_cast<const std::uint8_t *>(bytes.data()) + good, bytes.size() - good,
                &event, &used)
            || event.seq() != persistedCount() + 1)
            break;
        m_offsets.push_back(static_cast<off_t>(good));
        good += used;
    }
    m_fileSize = static_cast<off_t>(good);
    if (good < bytes.size()) {
        m_dropped = bytes.size() - good;
        if (::ftruncate(m_fd, static_cast<off_t>(good)) != 0)
            m_opened = common::Status::failure(
                "cannot cut the torn end of " + m_file.string() + ": " + std::strerror(errno));
    }
}

RunEventLog::~RunEventLog()
{
    if (m_fd >= 0) {
        if (!m_pending.empty())
            flushPending(true);
        ::fdatasync(m_fd);
        ::close(m_fd);
    }
}

bool RunEventLog::flushPending(bool durable)
{
    if (m_fd < 0 || m_pending.empty())
        return m_pending.empty();
    std::string bytes;
    std::vector<off_t> starts;
    for (const auto &event : m_pending) {
        starts.push_back(m_fileSize + static_cast<off_t>(bytes.size()));
        appendRecord(event, &bytes);
    }
    // One write() per flush: a crash leaves at most a torn last record.
    common::Status written = common::writeAll(m_fd, bytes.data(), bytes.size());
    if (written && durable && ::fdatasync(m_fd) != 0)
        written = common::errnoStatus(errno);
    if (!written) {
        // Cut what part of it was written: the next flush appends whole records after
        // the last good one, so the file never holds a torn record before a good one.
        (void)::ftruncate(m_fd, m_fileSize);
        const std::string why = "cannot write " + m_file.string() + ": " + written.error() + "; "
            + std::to_string(m_pending.size()) + " event(s) kept in memory until it can";
        if (m_writeError.empty())
            logMessage(LogLevel::Warning, why);
        m_writeError = why;
        return false;
    }
    if (!m_writeError.empty())
        logMessage(LogLevel::Info, "writing " + m_file.string() + " works again");
    m_writeError.clear();
    m_offsets.insert(m_offsets.end(), starts.begin(), starts.end());
    m_fileSize += static_cast<off_t>(bytes.size());
    m_pending.clear();
    return true;
}

std::int64_t RunEventLog::append(v1::RunEvent event, bool durable)
{
    std::int64_t seq;
    {
        std::lock_guard lock(m_mutex);
        const bool wasFailing = !m_writeError.empty();
        seq = persistedCount() + static_cast<std::int64_t>(m_pending.size()) + 1;
        event.set_seq(seq);
        event.set_unix_ms(nowUnixMs());
        m_pending.push_back(std::move(event));
        if (!flushPending(durable) && !wasFailing) {
            // Said once, to whoever watches the run: its records are at risk.
            v1::RunEvent notice;
            notice.set_run_id(m_pending.back().run_id());
            notice.set_attempt(m_pending.back().attempt());
            notice.set_rank(-1);
            notice.mutable_log()->set_stream("warning");
            notice.mutable_log()->set_text("the agent " + m_writeError);
            notice.set_seq(++seq);
            notice.set_unix_ms(nowUnixMs());
            m_pending.push_back(std::move(notice));
        }
    }
    m_changed.notify_all();
    return seq;
}

void RunEventLog::close()
{
    {
        std::lock_guard lock(m_mutex);
        m_closed = true;
        // A finished run's log is only read from now on: its descriptor goes (an agent
        // serves thousands of finished runs), and read() opens the file for each batch.
        // Events a full disk left in memory keep it open, for the destructor's last try.
        if (flushPending(true) && m_fd >= 0) {
            ::fdatasync(m_fd);
            ::close(m_fd);
            m_fd = -1;
        }
    }
    m_changed.notify_all();
}

std::int64_t RunEventLog::lastSeq() const
{
    std::lock_guard lock(m_mutex);
    return persistedCount() + static_cast<std::int64_t>(m_pending.size());
}

bool RunEventLog::closed() const
{
    std::lock_guard lock(m_mutex);
    return m_closed;
}

bool RunEventLog::read(
    std::int64_t fromSeq, std::size_t max, std::chrono::milliseconds timeout, std::vector<v1::RunEvent> *out)
{
    fromSeq = std::max<std::int64_t>(fromSeq, 1);
    std::unique_lock lock(m_mutex);
    const auto count = [&] { return persistedCount() + static_cast<std::int64_t>(m_pending.size()); };
    const auto available = [&] { return count() >= fromSeq; };
    if (!available() && !m_closed)
        m_changed.wait_for(lock, timeout, [&] { return available() || m_closed; });
    if (!available())
        return !m_closed;
    const auto most = static_cast<std::int64_t>(std::min<std::size_t>(max, std::size_t(1) << 40));
    const std::int64_t last = std::min<std::int64_t>(count(), fromSeq + most - 1);
    std::int64_t seq = fromSeq;
    if (seq <= persistedCount()) {
        // One pread for the whole range on disk.
        const int fd = m_fd >= 0 ? m_fd : ::open(m_file.c_str(), O_RDONLY | O_CLOEXEC);
        struct CloseAfter {
            int fd;
            bool own;
            ~CloseAfter()
            {
                if (own && fd >= 0)
                    ::close(fd);
            }
        } closeAfter { fd, m_fd < 0 };
        const std::int64_t lastOnDisk = std::min(last, persistedCount());
        const off_t begin = m_offsets[std::size_t(seq - 1)];
        const off_t end = lastOnDisk < persistedCount() ? m_offsets[std::size_t(lastOnDisk)] : m_fileSize;
        std::string bytes(static_cast<std::size_t>(end - begin), '\0');
        std::size_t got = 0;
        while (got < bytes.size()) {
            const ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, begin + off_t(got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += std::size_t(n);
        }
        std::size_t at = 0;
        for (; seq <= lastOnDisk; ++seq) {
            v1::RunEvent event;
            std::size_t used = 0;
            if (at >= got
                || !parseRecord(
                    reinterpret_cast<const std::uint8_t *>(bytes.data()) + at, got - at, &event, &used)) {
                // The file changed under us (it should not): say so rather than skip events.
                logMessage(LogLevel::Error,
                    "cannot read event " + std::to_string(seq) + " back from " + m_file.string());
                return !out->empty() || !m_closed;
            }
            out->push_back(std::move(event));
            at += used;
        }
    }
    for (; seq <= last; ++seq)
        out->push_back(m_pending[std::size_t(seq - persistedCount() - 1)]);
    return true;
}

} // namespace scalelab::agent
