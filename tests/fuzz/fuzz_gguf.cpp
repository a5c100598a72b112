// libFuzzer target: the GGUF v2/v3 parser on arbitrary bytes (the file as mapped).
#include "inference/tensorfile/gguf.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    auto r = vireo::tensorfile::GgufFile::parse("fuzz.gguf", reinterpret_cast<const std::byte*>(data), size);
    if (r) {
        for (const auto& t : r->tensors)
            if (t.offset > size || t.bytes > size - t.offset)
                __builtin_trap();
        (void)r->architecture();
    }
    return 0;
}
