#pragma once

// LTX-2 (2.0 and 2.3) behind the family seam: a diffusers folder, a Lightricks single file, or a
// GGUF transformer with its companions; video with audio, conditions, two stages, LoRAs.

#include "inference/families/family.h"

namespace vireo::ltx2 {

const families::ModelFamily& family();

}  // namespace vireo::ltx2
