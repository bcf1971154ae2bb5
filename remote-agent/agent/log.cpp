#include "log.h"

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace scalelab::agent {

namespace {
std::atomic<LogLevel> g_level = LogLevel::Info;
std::mutex g_logMutex;
std::FILE *g_file = nullptr; // null = stderr
} // namespace

bool setLogFile(const std::string &path)
{
    std::FILE *file = std::fopen(path.c_str(), "ae"); // append, close-on-exec
    if (!file)
        return false;
    std::lock_guard lock(g_logMutex);
    if (g_file)
        std::fclose(g_file);
    g_file = file;
    return true;
}

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
    std::lock_guard lock(g_logMutex);
    std::FILE *out = g_file ? g_file : stderr;
    std::fprintf(out, "%s %-5s %s\n", stamp, names[static_cast<int>(level)], message.c_str());
    std::fflush(out);
}

} // namespace scalelab::agent
