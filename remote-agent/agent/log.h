// Levelled log lines to stderr: "2026-11-21T22:41:00Z info  message". Thread-safe.
#pragma once

#include <string>

namespace scalelab::agent {

enum class LogLevel { Debug, Info, Warning, Error };

void setLogLevel(LogLevel level);
bool parseLogLevel(const std::string &text, LogLevel *level);
void logMessage(LogLevel level, const std::string &message);

} // namespace scalelab::agent
