// A message's text (protobuf's UTF-8 std::string) as a QString: the one helper core's files
// that read messages share.
#pragma once

#include <QString>

#include <string>

namespace scalelab::core {

inline QString str(const std::string &s)
{
    return QString::fromStdString(s);
}

} // namespace scalelab::core
