#pragma once

// Fused elementwise ops of the transformer forward. Each is one pass over its tensors on CUDA
// where the torch composition it replaces makes three to eight; the CPU implementation is
// that composition itself, so CPU results are unchanged and a GPU test compares the two.

#include <ATen/core/Tensor.h>

#include <utility>

namespace vireo::kernels {

// False when the environment says VIREO_FUSED_KERNELS=0: the ops below then run the torch
// compositions they replace on every device, to tell a fault of the CUDA kernels from any other
// and to measure what they gain, without a rebuild.
bool fusedKernelsEnabled();

// float8_e4m3fn(clamp(float(x) * (1 / scale), -448, 448)); scale is a float32 scalar tensor on
// x's device. NaN stays NaN.
at::Tensor quantizeFp8(const at::Tensor& x, const at::Tensor& scale);
// quantizeFp8(gelu(x, tanh)) in one pass: the FFN's hidden activation straight into an FP8 GEMM.
at::Tensor geluQuantizeFp8(const at::Tensor& x, const at::Tensor& scale);

// shift + rms_norm(x) * (1 + scale) over the last dim (AdaLN after an RMSNorm without
// weight). x [B, T, C]; scale and shift [B, T or 1, C] in x's dtype, any strides.
at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps);
// The gated residual add of a sublayer and the next norm of the stream in one pass:
// (y, rmsNormModulate(y, scale, shift, eps)) with y = x + delta * gate in x's dtype. x and
// delta [B, T, C]; gate, scale and shift [B, T or 1, C]; one floating dtype (float32, bfloat16
// or float16) and one device for all.
std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulate(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift, double eps);
// The same two with the normed output quantized for an FP8 GEMM with a static input scale:
// quantizeFp8(rmsNormModulate(...), qscale) in one pass (qscale: one float32 value on x's
// device), so the GEMM's input is written once, as one byte per value.
at::Tensor rmsNormModulateFp8(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale);
std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale);

// The per-head output gates of gated attention: x * 2 sigmoid(logits) with one gate per head,
// rounded as the unfused ops round. x [B, T, H * D] (last dim contiguous, rows may be
// strided), logits [B, T, H] (the same); one dtype, one device.
at::Tensor gateHeads(const at::Tensor& x, const at::Tensor& logits);
// The same quantized for the output projection's FP8 GEMM: quantizeFp8(gateHeads(...), qscale).
at::Tensor gateHeadsFp8(const at::Tensor& x, const at::Tensor& logits, const at::Tensor& qscale);

// Split-layout rotary embedding of rms_norm(x, weight): x [B, T, C] (C = H * 2r, last dim
// contiguous, rows may be strided, as a view into a fused projection), weight [C],
// cos/sin float32 [B or 1, T, H, 1, r]. Each head's halves (a, b) become
// (a cos - b sin, b cos + a sin). Returns a contiguous [B, T, C] in x's dtype.
at::Tensor rmsNormRope(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin, double eps);

}  // namespace vireo::kernels
