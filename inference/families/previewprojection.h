#pragma once

// Previews of denoising at the cost of a matrix product: a linear map from a model's latent
// channels to RGB, fitted to what the model's own decoder makes of a random latent. Shared by
// the video (LTX-2) and image (Ideogram-4) pipelines and the facade that renders previews.

#include <ATen/core/Tensor.h>

namespace vireo::pipelines {

// latents [C, h, w] as the decoder took them, decoded [3, h * s, w * s] (the decoder's output,
// around [-1, 1]): ridge regression of the decoded picture, area-pooled to the latent grid, on
// the channels plus an offset. Returns [C + 1, 3] float32, the last row the offset.
at::Tensor fitPreviewProjection(const at::Tensor& latents, const at::Tensor& decoded);

// latents [..., C] -> RGB [..., 3] in the decoder's range (not clamped), float32 on the CPU.
at::Tensor projectPreview(const at::Tensor& projection, const at::Tensor& latents);

}  // namespace vireo::pipelines
