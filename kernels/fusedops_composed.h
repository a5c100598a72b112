#pragma once

// The torch compositions the fused ops replace, op for op (fusedops_cpu.cpp). They are the
// CPU implementations, and run on CUDA too when VIREO_FUSED_KERNELS=0 turns the fused kernels
// off: a GPU session tells a fault of those kernels from any other without a rebuild, and the
// GPU benchmark measures what the fusion gains against them in the same run.

#include <ATen/core/Tensor.h>

#include <tuple>

namespace vireo::kernels::composed {

// False when the environment says VIREO_FUSED_KERNELS=0 (read once per process).
bool fusedKernelsEnabled();

at::Tensor quantizeFp8(const at::Tensor& x, const at::Tensor& scale);
at::Tensor geluQuantizeFp8(const at::Tensor& x, const at::Tensor& scale);
at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps);
std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulate(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps);
at::Tensor rmsNormModulateFp8(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale);
std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale);
at::Tensor gateHeads(const at::Tensor& x, const at::Tensor& logits);
at::Tensor gateHeadsFp8(const at::Tensor& x, const at::Tensor& logits, const at::Tensor& qscale);
at::Tensor rmsNormRope(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin, double eps);

} // namespace vireo::kernels::composed
