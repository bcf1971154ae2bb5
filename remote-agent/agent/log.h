// Levelled log lines to stderr (or a file): "2026-11-21T22:41:00Z info  message". Thread-safe.
#pragma once

#include <string>

namespace scalelab::agent {

enum class LogLevel { Debug, Info, Warning, Error };

void setLogLevel(LogLevel level);
// Appends to `path` from now on instead of stderr. Returns false (errno set) when it
// cannot be opened.
bool setLogFile(const std::string &path);
bool parseLogLevel(const std::string &text, LogLevel *level);
void logMessage(LogLevel level, const std::string &message);

} // namespace scalelab::agent
