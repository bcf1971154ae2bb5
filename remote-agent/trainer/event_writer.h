// Writes worker events as JSON lines to a file descriptor (the agent's pipe, or stdout
// when the worker runs standalone). One write() per event so lines never interleave.
// Thread-safe. Torch-free and Qt-free.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace scalelab::trainer {

class EventWriter {
public:
    using Value = std::variant<std::int64_t, double, bool, std::string>;
    struct Field {
        std::string_view key;
        Value value;
    };
    using Fields = std::vector<Field>;

    explicit EventWriter(int fd)
        : m_fd(fd)
    { }

    // {"type": type, key: value, ...}
    void emit(std::string_view type, const Fields &fields);

    static std::string escape(std::string_view text);

    // The shortest decimal text that reads back as exactly `value` (std::to_chars), so a
    // number passed through an event or a command line arrives unchanged: 1e-07, 1.25e-05.
    static std::string number(double value);

private:
    int m_fd;
    std::mutex m_mutex;
};

} // namespace scalelab::trainer
