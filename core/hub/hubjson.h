#pragma once

// The Hub's JSON answers and the index files a plan reads, parsed as hostile input: every
// field is type- and range-checked and an error names the repo, the file and the field. Pure
// functions over text (no curl, no Qt), so the fuzz targets build them alone.

#include "core/hub/hubtypes.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::hub {

// No file on the Hub comes near 1 PiB; a size above it (or a negative, fractional or 20-digit
// one) is a hostile or broken answer, and sums of real sizes cannot overflow.
inline constexpr std::uint64_t kMaxFileBytes = 1ull << 50;
// Files in one repo listing (the largest model repos hold a few thousand).
inline constexpr std::size_t kMaxListedFiles = 1'000'000;

// A decimal byte count ("Content-Length", "X-Linked-Size"): digits only, at most kMaxFileBytes.
std::optional<std::uint64_t> parseByteCount(std::string_view text);

// Bytes [first, last] of a file of `total` bytes.
struct ByteRange {
    std::uint64_t first = 0, last = 0, total = 0;
};
// "bytes 100-199/1000" -> {100, 199, 1000}; nullopt for anything else ("bytes */1000", a
// range that ends before it starts or past the total, garbage).
std::optional<ByteRange> parseContentRange(std::string_view value);

// GET /api/models/{repo}/revision/{rev}.
HubResult<RepoInfo> parseRepoInfo(std::string_view body, const std::string& repo);

// One page of GET /api/models/{repo}/tree/{commit}?recursive=true: its files are appended to
// `files`; directories are skipped. `seen` holds the paths of earlier pages (a path listed
// twice is refused).
HubResult<void> parseTreePage(std::string_view body, const std::string& repo, std::vector<RepoFile>& files, std::set<std::string>& seen);

// model_index.json: the components that name a [library, class] pair (keys starting with '_'
// and null entries are not components), in file order.
HubResult<std::vector<std::string>> parseModelIndexComponents(std::string_view text, const std::string& repo);

// A *.safetensors.index.json: the shard file names its weight_map points at.
HubResult<std::set<std::string>> parseShardIndex(std::string_view text, const std::string& repo, const std::string& path);

}  // namespace vireo::hub
