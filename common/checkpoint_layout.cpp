#include "checkpoint_layout.h"

#include "file_io.h"
#include "safe_name.h"
#include "sha256.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace scalelab::common::checkpoint {

std::string folderName(int epoch)
{
    char name[32];
    std::snprintf(name, sizeof name, "epoch-%04d", epoch);
    return name;
}

std::optional<int> epochOf(std::string_view folderName)
{
    constexpr std::string_view prefix = "epoch-";
    if (folderName.substr(0, prefix.size()) != prefix)
        return std::nullopt;
    const std::string_view digits = folderName.substr(prefix.size());
    // At most 9 digits: every such number fits an int.
    if (digits.empty() || digits.size() > 9
        || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    int epoch = 0;
    for (char c : digits)
        epoch = epoch * 10 + (c - '0');
    return epoch;
}

bool isFileName(std::string_view name)
{
    return isSafeName(name) && name != kManifest;
}

bool isSha256(std::string_view text)
{
    return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
}

std::string formatManifest(const std::vector<Entry> &entries)
{
    std::string text;
    for (const Entry &e : entries)
        text += e.sha256 + "  " + e.name + "\n";
    return text;
}

common::Result<std::vector<Entry>> parseManifest(std::string_view text)
{
    using common::Status;
    std::vector<Entry> entries;
    std::set<std::string> names;
    std::istringstream lines { std::string(text) };
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
        std::istringstream fields(line);
        std::string sum, name, extra;
        if (!(fields >> sum))
            continue; // a blank line
        const std::string where = "MANIFEST line " + std::to_string(number) + ": ";
        if (!(fields >> name) || (fields >> extra))
            return Status::failure(where + "expected \"<sha256>  <file name>\"");
        if (!isSha256(sum))
            return Status::failure(
                where + "'" + sum.substr(0, 80) + "' is not a sha256 (64 lower-case hex digits)");
        if (!isFileName(name))
            return Status::failure(where + "'" + name.substr(0, 80)
                + "' is not a checkpoint file name (1-64 of A-Z a-z 0-9 _ - ., not starting with '.', not "
                  "MANIFEST)");
        if (!names.insert(name).second)
            return Status::failure(where + name + " is listed twice");
        entries.push_back({ sum, name });
    }
    if (entries.empty())
        return Status::failure("MANIFEST lists no files");
    return entries;
}

std::vector<Folder> folders(const fs::path &root, bool committedOnly)
{
    std::vector<Folder> found;
    std::error_code ec;
    for (const auto &entry : fs::directory_iterator(root, ec)) {
        const auto epoch = epochOf(entry.path().filename().string());
        if (!epoch || !entry.is_directory(ec))
            continue;
        if (committedOnly && !fs::is_regular_file(entry.path() / kManifest, ec))
            continue;
        found.push_back({ *epoch, entry.path() });
    }
    std::sort(found.begin(), found.end(), [](const Folder &a, const Folder &b) { return a.epoch < b.epoch; });
    return found;
}

common::Status verify(const fs::path &dir, std::vector<Entry> *entries, std::vector<std::uint64_t> *sizes)
{
    using common::Status;
    entries->clear();
    if (sizes)
        sizes->clear();
    std::ifstream in(dir / kManifest);
    if (!in)
        return Status::failure("no MANIFEST (never committed)");
    std::ostringstream text;
    text << in.rdbuf();
    auto listed = parseManifest(text.str());
    if (!listed)
        return Status::failure(listed.error());
    for (const Entry &e : *listed) {
        std::error_code ec;
        const auto size = fs::file_size(dir / e.name, ec);
        const std::string actual = ec ? std::string() : Sha256::ofFile((dir / e.name).string());
        if (actual.empty())
            return Status::failure(e.name + " is missing");
        if (actual != e.sha256)
            return Status::failure(e.name + " does not match its sha256 in MANIFEST");
        if (sizes)
            sizes->push_back(size);
    }
    *entries = std::move(listed).value();
    return Status::success();
}

common::Status writeManifest(const fs::path &dir, const std::vector<Entry> &entries)
{
    if (common::Status written = common::writeFileSynced(dir / kManifest, formatManifest(entries)); !written)
        return written;
    common::syncFolder(dir);
    return common::Status::success();
}

void prune(const fs::path &root, std::size_t keep, const fs::path &except)
{
    std::vector<Folder> all = folders(root, false);
    std::erase_if(all, [&](const Folder &f) { return !except.empty() && f.path == except; });
    for (std::size_t i = 0; i + keep < all.size(); ++i)
        (void)removeTree(all[i].path); // best effort: what stays is pruned next time
}

} // namespace scalelab::common::checkpoint
