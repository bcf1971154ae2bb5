// The names a client may give the agent for things it keeps on disk (run ids, data sets,
// checkpoint files): [A-Za-z0-9_.-]{1,64}, not starting with '.', so each is safe as one
// path component (no "..", no slash, no hidden file).
#pragma once

#include <algorithm>
#include <string_view>

namespace scalelab::common {

inline bool isSafeName(std::string_view name)
{
    if (name.empty() || name.size() > 64 || name.front() == '.')
        return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
            || c == '-' || c == '.';
    });
}

} // namespace scalelab::common
