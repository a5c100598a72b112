// libFuzzer target: LTX-2 config.json readers (diffusers transformer and connectors, and the
// config Lightricks embeds in a checkpoint's metadata), then the bounds every loader relies on.
#include "inference/models/ltx2/ltx2config.h"
#include "inference/util/jsonlimits.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace vireo;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 4) {
    case 0:
        if (auto c = ltx2::transformerConfigFromDiffusers(text); c && ltx2::validate(*c, "fuzz")) {
            // A validated config's products are safe to use.
            if (c->dim() <= 0 || c->dim() > ltx2::kMaxChannels || c->layers > ltx2::kMaxBlocks)
                __builtin_trap();
            (void)ltx2::toJson(*c);
        }
        break;
    case 1:
        if (auto c = ltx2::connectorConfigFromDiffusers(text); c && ltx2::validate(*c, "fuzz"))
            (void)ltx2::toJson(*c);
        break;
    case 2:
        if (auto c = ltx2::configsFromLtxCore(text)) {
            (void)ltx2::validate(c->first, "fuzz");
            (void)ltx2::validate(c->second, "fuzz");
        }
        break;
    case 3:
        if (auto j = jsonutil::parseUntrusted(text, "fuzz")) {
            (void)jsonutil::safeDump(*j, 2);
            (void)jsonutil::shortDump(*j);
        }
        break;
    }
    return 0;
}
