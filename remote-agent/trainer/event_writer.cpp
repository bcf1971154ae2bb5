#include "event_writer.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace scalelab::trainer {

std::string EventWriter::escape(std::string_view text)
{
    std::string out;
    out.reserve(text.size() + 2);
    for (char c : text) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += c;
            }
        }
    }
    return out;
}

std::string EventWriter::number(double value)
{
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, value);
    return std::string(buf, result.ptr);
}

void EventWriter::emit(std::string_view type, const Fields &fields)
{
    std::string line = "{\"type\":\"" + escape(type) + "\"";
    for (const auto &f : fields) {
        line += ",\"" + escape(f.key) + "\":";
        if (const auto *i = std::get_if<std::int64_t>(&f.value)) {
            line += std::to_string(*i);
        } else if (const auto *d = std::get_if<double>(&f.value)) {
            if (std::isfinite(*d)) {
                line += number(*d);
            } else {
                line += "null"; // JSON has no NaN; a diverged loss shows as null
            }
        } else if (const auto *b = std::get_if<bool>(&f.value)) {
            line += *b ? "true" : "false";
        } else {
            line += "\"" + escape(std::get<std::string>(f.value)) + "\"";
        }
    }
    line += "}\n";
    std::lock_guard lock(m_mutex);
    const char *p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        const ssize_t n = ::write(m_fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; // the reader is gone; the agent classifies our exit
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

} // namespace scalelab::trainer
