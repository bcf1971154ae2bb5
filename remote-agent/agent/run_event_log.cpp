#include "run_event_log.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace scalelab::agent {

namespace {
std::int64_t nowUnixMs()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}
} // namespace

RunEventLog::RunEventLog(std::filesystem::path file)
{
    m_fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (m_fd < 0) {
        m_error = "cannot open " + file.string() + ": " + std::strerror(errno);
        return;
    }
    // Load what an earlier agent wrote. Records are [varint length][RunEvent]; a crash
    // can leave the last one torn, and a record out of sequence means the rest cannot
    // be trusted: keep the good prefix and cut the file there.
    std::string bytes;
    {
        char buffer[65536];
        ssize_t n;
        while ((n = ::pread(m_fd, buffer, sizeof buffer, static_cast<off_t>(bytes.size()))) > 0)
            bytes.append(buffer, static_cast<std::size_t>(n));
    }
    google::protobuf::io::CodedInputStream in(
        reinterpret_cast<const std::uint8_t *>(bytes.data()), static_cast<int>(bytes.size()));
    std::size_t good = 0;
    for (;;) {
        std::uint32_t length = 0;
        if (!in.ReadVarint32(&length) || in.CurrentPosition() + std::size_t(length) > bytes.size())
            break; // the end, or a record cut short
        const auto limit = in.PushLimit(static_cast<int>(length));
        v1::RunEvent event;
        const bool parsed
            = event.ParseFromCodedStream(&in) && in.ConsumedEntireMessage() && in.BytesUntilLimit() == 0;
        in.PopLimit(limit);
        if (!parsed || event.seq() != static_cast<std::int64_t>(m_events.size()) + 1)
            break;
        m_events.push_back(std::move(event));
        good = static_cast<std::size_t>(in.CurrentPosition());
    }
    if (good < bytes.size()) {
        m_dropped = bytes.size() - good;
        if (::ftruncate(m_fd, static_cast<off_t>(good)) != 0)
            m_error = "cannot cut the torn end of " + file.string() + ": " + std::strerror(errno);
    }
}

RunEventLog::~RunEventLog()
{
    if (m_fd >= 0) {
        ::fdatasync(m_fd);
        ::close(m_fd);
    }
}

std::int64_t RunEventLog::append(v1::RunEvent event, bool durable)
{
    std::int64_t seq;
    {
        std::lock_guard lock(m_mutex);
        seq = static_cast<std::int64_t>(m_events.size()) + 1;
        event.set_seq(seq);
        event.set_unix_ms(nowUnixMs());
        if (m_fd >= 0) {
            std::string bytes;
            {
                google::protobuf::io::StringOutputStream stream(&bytes);
                google::protobuf::io::CodedOutputStream coded(&stream);
                coded.WriteVarint32(static_cast<std::uint32_t>(event.ByteSizeLong()));
                event.SerializeWithCachedSizes(&coded);
            }
            // One write() per event: a crash leaves at most a torn last record.
            const char *p = bytes.data();
            std::size_t left = bytes.size();
            while (left > 0) {
                const ssize_t n = ::write(m_fd, p, left);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0)
                    break;
                p += n;
                left -= static_cast<std::size_t>(n);
            }
            if (durable)
                ::fdatasync(m_fd);
        }
        m_events.push_back(std::move(event));
    }
    m_changed.notify_all();
    return seq;
}

void RunEventLog::close()
{
    {
        std::lock_guard lock(m_mutex);
        m_closed = true;
        if (m_fd >= 0)
            ::fdatasync(m_fd);
    }
    m_changed.notify_all();
}

std::int64_t RunEventLog::lastSeq() const
{
    std::lock_guard lock(m_mutex);
    return static_cast<std::int64_t>(m_events.size());
}

bool RunEventLog::closed() const
{
    std::lock_guard lock(m_mutex);
    return m_closed;
}

std::optional<v1::RunEvent> RunEventLog::lastOfKind(v1::RunEvent::KindCase kind) const
{
    std::lock_guard lock(m_mutex);
    for (auto it = m_events.rbegin(); it != m_events.rend(); ++it)
        if (it->kind_case() == kind)
            return *it;
    return std::nullopt;
}

bool RunEventLog::read(
    std::int64_t fromSeq, std::size_t max, std::chrono::milliseconds timeout, std::vector<v1::RunEvent> *out)
{
    fromSeq = std::max<std::int64_t>(fromSeq, 1);
    std::unique_lock lock(m_mutex);
    const auto available = [&] { return static_cast<std::int64_t>(m_events.size()) >= fromSeq; };
    if (!available() && !m_closed)
        m_changed.wait_for(lock, timeout, [&] { return available() || m_closed; });
    if (!available())
        return !m_closed;
    const auto begin = static_cast<std::size_t>(fromSeq - 1);
    const auto end = std::min(m_events.size(), begin + max);
    out->insert(out->end(), m_events.begin() + begin, m_events.begin() + end);
    return true;
}

} // namespace scalelab::agent
