#pragma once

// Ideogram-4 behind the family seam: a diffusers folder (text_encoder/, transformer/,
// unconditional_transformer/, vae/, tokenizer/) that makes images.

#include "inference/families/family.h"

namespace vireo::ideogram4 {

const families::ModelFamily& family();

}  // namespace vireo::ideogram4
