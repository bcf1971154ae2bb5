// Helpers shared by the libFuzzer targets of tests/fuzz (see README.md there).
// Each target is one LLVMFuzzerTestOneInput; these keep them short and alike.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace scalelab::fuzz {

// A property the code under test promises was broken: print it and abort, so libFuzzer
// records the input as a crash (like an ASan or UBSan report).
[[noreturn]] inline void fail(const std::string &what)
{
    std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

inline void check(bool holds, const std::string &what)
{
    if (!holds)
        fail(what);
}

// A private folder under $TMPDIR for the whole fuzzing process, removed at exit.
inline const std::filesystem::path &scratchRoot()
{
    static const std::filesystem::path root = [] {
        const char *tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/scalelab-fuzz-XXXXXX";
        if (!::mkdtemp(pattern.data()))
            fail("cannot create a scratch folder under $TMPDIR");
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(scratchRoot(), ec);
        });
        return std::filesystem::path(pattern);
    }();
    return root;
}

// An empty folder `name` under the scratch root (emptied when it exists).
inline std::filesystem::path freshFolder(const std::string &name)
{
    const auto dir = scratchRoot() / name;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir);
    return dir;
}

inline void writeFile(const std::filesystem::path &path, std::string_view bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
        fail("cannot write " + path.string());
}

} // namespace scalelab::fuzz
