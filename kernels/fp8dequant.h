#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace vireo::kernels {

// Dequantizes a scaled-FP8 weight [out, in...] (float8_e4m3fn or float8_e5m2) to dtype:
//   w = float(q) * scale
// with scale per-tensor (numel 1), per-output-row ([out] or [out, 1]) or block-wise
// ([ceil(out/B0), ceil(in/B1)] over the weight flattened to [out, in]; blockSize = {B0, B1},
// or empty when the grid divides the weight exactly). Runs as the torch op
// vireo::dequantize_fp8 on CPU (the reference) and CUDA. Any other scale shape is an error.
at::Tensor dequantizeFp8(const at::Tensor& weight, const at::Tensor& scale, c10::ScalarType dtype, c10::IntArrayRef blockSize = {});

// The same into a preallocated, contiguous tensor shaped like weight (its dtype is the output's).
at::Tensor& dequantizeFp8Into(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize, at::Tensor& out);

}  // namespace vireo::kernels
