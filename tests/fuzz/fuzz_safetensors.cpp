// libFuzzer target: the safetensors header validator on arbitrary bytes (the file as mapped).
#include "inference/tensorfile/safetensors.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    auto r = vireo::tensorfile::SafetensorsFile::parse("fuzz.safetensors", reinterpret_cast<const std::byte*>(data), size);
    if (r) {
        // Every accepted tensor must lie inside the input.
        for (const auto& t : r->tensors)
            if (t.offset > size || t.bytes > size - t.offset)
                __builtin_trap();
    }
    return 0;
}
