// libFuzzer target: `vireo-cli inspect` end to end on one file (safetensors or GGUF, chosen by
// the magic): ModelSource, the family/quantization report, and both renderings, whose output
// must be valid JSON and free of terminal control characters.
#include "inference/inspect/modelinspector.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace {

std::string scratchFile()
{
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/vireo-fuzz-inspect-" + std::to_string(::getpid()) + ".bin";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const std::string path = scratchFile();
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(data, 1, size, f);
        std::fclose(f);
    }
    auto report = vireo::inspect::inspectPath(path);
    if (!report)
        return 0;
    const auto json = vireo::inspect::toJson(*report);
    if (!nlohmann::json::accept(json))
        __builtin_trap();
    for (const unsigned char c : vireo::inspect::toText(*report))
        if ((c < 0x20 && c != '\n') || c == 0x7F)
            __builtin_trap();
    return 0;
}
