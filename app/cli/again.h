#pragma once

// vireo-cli generate --again FILE: what made FILE, read from the recipe inside it.

#include "core/generation/generation.h"

#include <string>

namespace vireo::cli {

struct MadeAgain {
    generation::Ask ask;  // every field the recipe holds (generation::askFromRecipe)
    facade::LoadPlan load;  // the model's files: a catalog or Hub model resolved in this machine's cache
    bool image = false;
};

// The ask and the model's files a recipe stands for. A weight file whose size is no longer the
// recipe's is an error naming it: other weights make another output.
Result<MadeAgain> madeAgain(const std::string& file);

}  // namespace vireo::cli
