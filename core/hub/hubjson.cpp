#include "core/hub/hubjson.h"

#include "inference/util/jsonlimits.h"
#include "inference/util/text.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace vireo::hub {

namespace {

using json = nlohmann::json;

bool isLowerHex(std::string_view s, std::size_t length)
{
    return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

HubError protocol(const std::string& message)
{
    return {HubErrorKind::Protocol, 0, message};
}

// Names from the server go into messages a terminal shows: made safe, and kept short.
std::string shown(std::string_view text)
{
    auto s = terminalSafe(text.substr(0, 200));
    return text.size() > 200 ? s + "..." : s;
}

HubResult<json> parse(std::string_view text, const std::string& what, std::uint64_t maxBytes = 64ull << 20)
{
    jsonutil::JsonLimits limits;
    limits.maxBytes = maxBytes;
    auto parsed = jsonutil::parseUntrusted(text, what, limits);
    if (!parsed)
        return protocol(parsed.error().message);
    return std::move(*parsed);
}

}  // namespace

std::optional<std::uint64_t> parseByteCount(std::string_view text)
{
    if (text.empty() || text.size() > 16)  // 2^50 has 16 digits
        return std::nullopt;
    std::uint64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9')
            return std::nullopt;
        value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (value > kMaxFileBytes)
        return std::nullopt;
    return value;
}

std::optional<ByteRange> parseContentRange(std::string_view value)
{
    if (value.substr(0, 6) != "bytes ")
        return std::nullopt;
    const auto dash = value.find('-', 6);
    const auto slash = value.find('/', 6);
    if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash)
        return std::nullopt;
    const auto first = parseByteCount(value.substr(6, dash - 6));
    const auto last = parseByteCount(value.substr(dash + 1, slash - dash - 1));
    const auto total = parseByteCount(value.substr(slash + 1));
    if (!first || !last || !total || *last < *first || *last >= *total)
        return std::nullopt;
    return ByteRange{*first, *last, *total};
}

HubResult<RepoInfo> parseRepoInfo(std::string_view body, const std::string& repo)
{
    auto parsed = parse(body, repo + ": the Hub's repository info");
    if (!parsed)
        return parsed.error();
    const json& j = *parsed;
    if (!j.is_object())
        return protocol(repo + ": the Hub's repository info is not a JSON object");
    const auto sha = jsonutil::stringOr(j, "sha");
    if (!isLowerHex(sha, 40))
        return protocol(repo + ": the Hub's repository info has no commit (\"sha\" is " + shown(jsonutil::shortDump(j.value("sha", json())))
            + ", expected 40 hex digits)");
    RepoInfo info;
    info.repo = repo;
    info.commit = sha;
    // "gated" is false, "auto" or "manual"; anything else is treated as gated so the probe
    // in makePlan asks before the user presses Start.
    if (const auto it = j.find("gated"); it != j.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()))
        info.gated = it->is_string() ? it->get<std::string>() : std::string("unknown");
    if (const auto it = j.find("private"); it != j.end() && it->is_boolean())
        info.isPrivate = it->get<bool>();
    return info;
}

HubResult<void> parseTreePage(std::string_view body, const std::string& repo, std::vector<RepoFile>& files, std::set<std::string>& seen)
{
    auto parsed = parse(body, repo + ": the file listing");
    if (!parsed)
        return parsed.error();
    const json& page = *parsed;
    if (!page.is_array())
        return protocol(repo + ": the file listing is not a JSON array");
    std::size_t index = 0;
    for (const auto& e : page) {
        const std::string entry = repo + ": entry " + std::to_string(index++) + " of the file listing";
        if (!e.is_object())
            return protocol(entry + " is not a JSON object");
        const auto type = e.find("type");
        if (type == e.end() || !type->is_string())
            return protocol(entry + " has no \"type\"");
        if (*type != "file")
            continue;  // directories; the recursive listing names their files too
        const auto path = e.find("path");
        if (path == e.end() || !path->is_string() || path->get_ref<const std::string&>().empty())
            return protocol(entry + " has no \"path\" string");
        RepoFile f;
        f.path = path->get<std::string>();
        const std::string what = repo + ": the file listing's entry for '" + shown(f.path) + "'";
        const auto size = e.find("size");
        if (size == e.end() || !size->is_number_unsigned() || size->get<std::uint64_t>() > kMaxFileBytes)
            return protocol(what + " has size " + shown(jsonutil::shortDump(size == e.end() ? json() : *size))
                + ", expected a whole number of bytes up to 1 PiB; is HF_ENDPOINT a Hugging Face Hub?");
        f.size = size->get<std::uint64_t>();
        const auto oid = jsonutil::stringOr(e, "oid");
        if (!isLowerHex(oid, 40))
            return protocol(what + " has no git oid (40 hex digits)");
        f.gitOid = oid;
        if (const auto lfs = e.find("lfs"); lfs != e.end() && !lfs->is_null()) {
            const auto sha = lfs->is_object() ? jsonutil::stringOr(*lfs, "oid") : std::string();
            if (!isLowerHex(sha, 64))
                return protocol(what + " has an \"lfs\" record without a SHA-256 (64 hex digits)");
            if (const auto lfsSize = lfs->find("size");
                lfsSize != lfs->end() && !(lfsSize->is_number_unsigned() && lfsSize->get<std::uint64_t>() == f.size))
                return protocol(
                    what + " gives two different sizes (" + std::to_string(f.size) + " and " + shown(jsonutil::shortDump(*lfsSize)) + ")");
            f.sha256 = sha;
        }
        if (!seen.insert(f.path).second)
            return protocol(what + " is listed twice; the listing is inconsistent, try again later");
        if (files.size() >= kMaxListedFiles)
            return protocol(repo + ": the file listing names more than " + std::to_string(kMaxListedFiles) + " files");
        files.push_back(std::move(f));
    }
    return {};
}

HubResult<std::vector<std::string>> parseModelIndexComponents(std::string_view text, const std::string& repo)
{
    auto parsed = parse(text, repo + ": model_index.json", 16ull << 20);
    if (!parsed)
        return parsed.error();
    const json& index = *parsed;
    if (!index.is_object())
        return protocol(repo + ": model_index.json is not a JSON object");
    std::vector<std::string> components;
    for (const auto& [component, value] : index.items()) {
        if (component.empty() || component[0] == '_' || !value.is_array() || value.size() != 2 || value[0].is_null())
            continue;
        components.push_back(component);
    }
    return components;
}

HubResult<std::set<std::string>> parseShardIndex(std::string_view text, const std::string& repo, const std::string& path)
{
    auto parsed = parse(text, repo + ": " + shown(path));
    if (!parsed)
        return parsed.error();
    const json& index = *parsed;
    const auto* weightMap = jsonutil::objectField(index, "weight_map");
    if (!weightMap)
        return protocol(repo + ": " + shown(path) + " has no weight_map");
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : weightMap->items()) {
        if (!shard.is_string())
            return protocol(repo + ": " + shown(path) + ": weight_map entry '" + shown(tensor) + "' is not a file name");
        shards.insert(shard.get<std::string>());
    }
    return shards;
}

}  // namespace vireo::hub
