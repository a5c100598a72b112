#pragma once

// Attention with FP8 operands on the tensor cores of Hopper and newer, through cuDNN's fused
// FP8 flash attention (built with NVIDIA's cuDNN frontend). With FP8 GEMMs the transformer's
// attention is the largest part left in bf16; this halves the bytes it moves and doubles the
// math rate, at the precision the FP8 GEMMs beside it already have.
//
// Scales, all per tensor and computed on the device (no host synchronisation, so a CUDA graph
// can hold it): q, k and v are quantized with their own amax / 448; the softmax probabilities,
// which cuDNN keeps below 1 before normalising, with 448; the output, a convex combination of
// v's rows and so bounded by v's amax, with v's scale.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace vireo::kernels {

// False when the environment says VIREO_FP8_ATTENTION=0: attention then stays in the compute
// dtype, to tell a fault of this path from any other and to measure what it gains.
bool fp8AttentionEnabled();
// Whether this build has FP8 attention at all (it needs cuDNN's frontend at build time).
bool fp8AttentionBuilt();
// The cuDNN library version this process runs with (cudnnGetVersion: 91000 = 9.10.0); 0 when
// the build does not link cuDNN.
int cudnnVersion();

// Why FP8 attention cannot run on this device, or empty when it can: a build without the cuDNN
// frontend, a device that is not CUDA, a GPU below compute capability 9.0, a cuDNN older than
// 9.1 (or 9.10.0, which NVIDIA's frontend refuses for it).
std::string fp8AttentionUnavailable(c10::Device device);

// softmax(q k^T / sqrt(D)) v per head, without mask, for q [B, Tq, H * D] and k, v [B, Tk, H * D]
// in bfloat16 or float16 (rows may be strided, as views into a fused projection; the last dim
// contiguous), D a multiple of 16 up to 256. Returns [B, Tq, H * D] in q's dtype; or, where
// cuDNN has no engine for this shape (the same answer every time for a shape, found before
// anything runs), an undefined tensor and the reason, naming the shape, in *refusal: the caller
// then runs its other attention and says so. Anything else it cannot take throws a c10::Error.
// Callers check fp8AttentionUnavailable first and report the path they take.
at::Tensor fp8Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads, std::string* refusal = nullptr);

}  // namespace vireo::kernels
