#pragma once

// vireo-cli generate --again FILE: the arguments that made FILE, read from the recipe inside it.

#include "inference/util/result.h"

#include <string>
#include <vector>

namespace vireo::cli {

// The generate arguments a recipe stands for: the model's files (a catalog or Hub model resolved
// in this machine's cache), the prompt byte for byte, the seed, sizes, schedule, guidance, speed,
// stages, LoRAs with their strengths and the conditions (the copies kept beside FILE first).
// A weight file whose size is no longer the recipe's is an error naming it: other weights make
// another output.
Result<std::vector<std::string>> argumentsFromRecipe(const std::string& file);

} // namespace vireo::cli
