// libFuzzer target: tokenizer.json (+ tokenizer_config.json after a NUL byte) loading, then
// encoding a fixed prompt and a slice of the input itself with the result.
#include "inference/text/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string input(reinterpret_cast<const char*>(data), size);
    const auto nul = input.find('\0');
    const std::string tokenizerJson = input.substr(0, nul);
    const std::string configJson = nul == std::string::npos ? std::string() : input.substr(nul + 1);
    auto t = vireo::text::Tokenizer::fromJson(tokenizerJson, configJson, "fuzz/tokenizer.json");
    if (!t)
        return 0;
    auto e = t->encode("a red fox runs through the snow at night", 64);
    if (e) {
        if (e->ids.size() != 64 || e->attentionMask.size() != 64)
            __builtin_trap();
        for (const auto id : e->ids)
            if (id < 0 || id >= t->vocabSize())
                __builtin_trap();
    }
    (void)t->tokenize(std::string_view(input).substr(0, 256));
    return 0;
}
