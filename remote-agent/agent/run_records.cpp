#include "run_records.h"

#include "file_io.h"
#include "safe_name.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace scalelab::agent {

std::string readText(const std::filesystem::path &file)
{
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

common::Status writeJsonAtomically(
    const google::protobuf::Message &message, const std::filesystem::path &file)
{
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    if (auto s = google::protobuf::util::MessageToJsonString(message, &json, options); !s.ok())
        return common::Status::failure(
            "cannot encode " + file.filename().string() + ": " + std::string(s.message()));
    return common::replaceFileAtomically(file, json);
}

std::vector<int> attemptsOf(const std::filesystem::path &runPath)
{
    std::vector<int> attempts;
    std::error_code ignored;
    for (const auto &entry : std::filesystem::directory_iterator(runPath, ignored)) {
        const std::string name = entry.path().filename().string();
        if (!name.empty() && name.size() < 9 && std::all_of(name.begin(), name.end(), ::isdigit))
            attempts.push_back(std::stoi(name));
    }
    std::sort(attempts.rbegin(), attempts.rend());
    return attempts;
}

common::Status writeOutcome(const std::filesystem::path &attemptDir, const v1::RunInfo &info)
{
    return writeJsonAtomically(info, attemptDir / "outcome.json");
}

std::optional<v1::RunInfo> readOutcome(const std::filesystem::path &attemptDir)
{
    const std::string json = readText(attemptDir / "outcome.json");
    v1::RunInfo info;
    if (json.empty() || !google::protobuf::util::JsonStringToMessage(json, &info).ok())
        return std::nullopt;
    if (info.state() != v1::SUCCEEDED && info.state() != v1::FAILED && info.state() != v1::CANCELLED)
        return std::nullopt;
    return info;
}

std::vector<std::string> runIdsPage(
    const std::filesystem::path &runsDir, const std::string &after, std::size_t max, std::int64_t *total)
{
    std::set<std::string> page; // the `max` smallest ids after `after`
    std::int64_t count = 0;
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(runsDir, ec)) {
        std::string id = entry.path().filename().string();
        std::error_code ignored;
        if (!common::isSafeName(id) || !entry.is_directory(ignored))
            continue;
        ++count;
        if (id <= after || max == 0)
            continue;
        if (page.size() < max) {
            page.insert(std::move(id));
        } else if (id < *page.rbegin()) {
            page.erase(std::prev(page.end()));
            page.insert(std::move(id));
        }
    }
    if (total)
        *total = count;
    return { page.begin(), page.end() };
}

} // namespace scalelab::agent
