#include "log.h"

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace scalelab::agent {

namespace {
std::atomic<LogLevel> g_level = LogLevel::Info;
std::mutex g_mutex;
} // namespace

void setLogLevel(LogLevel level)
{
    g_level = level;
}

bool parseLogLevel(const std::string &text, LogLevel *level)
{
    if (text == "debug")
        *level = LogLevel::Debug;
    else if (text == "info")
        *level = LogLevel::Info;
    else if (text == "warning")
        *level = LogLevel::Warning;
    else if (text == "error")
        *level = LogLevel::Error;
    else
        return false;
    return true;
}

void logMessage(LogLevel level, const std::string &message)
{
    if (level < g_level)
        return;
    static const char *names[] = { "debug", "info", "warn", "error" };
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm {};
    gmtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    std::lock_guard lock(g_mutex);
    std::fprintf(stderr, "%s %-5s %s\n", stamp, names[static_cast<int>(level)], message.c_str());
    std::fflush(stderr);
}

} // namespace scalelab::agent
