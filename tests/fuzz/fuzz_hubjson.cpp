// libFuzzer target: what the Hub answers (repo info, listing pages, model_index.json, shard
// indexes, byte counts and Content-Range headers). The first byte picks the parser.
#include "core/hub/hubjson.h"

#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

using namespace vireo::hub;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 6) {
    case 0: {
        auto info = parseRepoInfo(text, "fuzz/repo");
        if (info && info->commit.size() != 40)
            __builtin_trap();
        break;
    }
    case 1: {
        std::vector<RepoFile> files;
        std::set<std::string> seen;
        // Two pages from one input: the second sees the first page's paths.
        const auto half = text.size() / 2;
        if (parseTreePage(text.substr(0, half), "fuzz/repo", files, seen))
            (void)parseTreePage(text.substr(half), "fuzz/repo", files, seen);
        for (const auto& f : files)
            if (f.size > kMaxFileBytes || f.gitOid.size() != 40 || (f.lfs() && f.sha256.size() != 64))
                __builtin_trap();
        break;
    }
    case 2: (void)parseModelIndexComponents(text, "fuzz/repo"); break;
    case 3: (void)parseShardIndex(text, "fuzz/repo", "x.safetensors.index.json"); break;
    case 4: {
        const auto n = parseByteCount(text);
        if (n && *n > kMaxFileBytes)
            __builtin_trap();
        break;
    }
    case 5: {
        const auto r = parseContentRange(text);
        if (r && (r->last < r->first || r->last >= r->total))
            __builtin_trap();
        break;
    }
    }
    return 0;
}
