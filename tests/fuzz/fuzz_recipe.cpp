// libFuzzer target: a recipe as it arrives inside an output file (MP4 tag, PNG text chunk) or
// the gallery's database, from whoever made that file. A recipe that loads must survive its
// own round trip unchanged (what the gallery stores is what "Generate again" reads back), and
// the text helpers must keep their promises: valid UTF-8 out, no control characters, cuts at
// character boundaries within the limit.
#include "core/output/recipe.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

using vireo::output::Recipe;

namespace {

bool strictUtf8(const std::string& s)
{
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string input(reinterpret_cast<const char*>(data), size);

    const auto clean = vireo::output::sanitizedText(input);
    if (!strictUtf8(clean))
        __builtin_trap();
    for (const char c : clean)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7F)
            __builtin_trap();
    const auto cut = vireo::output::truncatedUtf8(clean, size % 97);
    if (cut.size() > size % 97 || !strictUtf8(cut))
        __builtin_trap();

    auto first = Recipe::fromJson(input);
    if (!first)
        return 0;
    const auto once = first->toJson();
    auto second = Recipe::fromJson(once);
    if (!second)
        __builtin_trap();
    if (second->toJson() != once)
        __builtin_trap();
    return 0;
}
