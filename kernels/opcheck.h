#pragma once

// Argument checks shared by the CPU and CUDA implementations of an op, so both reject the
// same inputs with the same words.

#include "kernels/ggufblocks.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <utility>

namespace vireo::kernels::detail {

inline void checkFloatOutput(const char* op, c10::ScalarType dtype)
{
    TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, op,
        ": output dtype must be float32, bfloat16 or float16, got ", dtype);
}

inline gguf::BlockTraits checkGgufArgs(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    checkFloatOutput("dequantize_gguf", dtype);
    TORCH_CHECK(blocks.scalar_type() == at::kByte, "dequantize_gguf: blocks must be uint8, got ", blocks.scalar_type());
    const auto traits = gguf::blockTraits(static_cast<int>(ggmlType));
    TORCH_CHECK(traits.elements > 0, "dequantize_gguf: ggml type ", ggmlType, " cannot be dequantized by this build");
    std::int64_t numel = 1;
    for (auto d : shape) {
        TORCH_CHECK(d >= 0, "dequantize_gguf: negative dim in shape ", shape);
        numel *= d;
    }
    TORCH_CHECK(numel % traits.elements == 0, "dequantize_gguf: shape ", shape, " holds ", numel, " elements, not a whole number of ",
        traits.elements, "-element blocks");
    TORCH_CHECK(blocks.numel() == numel / traits.elements * traits.bytes, "dequantize_gguf: ", blocks.numel(),
        " bytes of blocks but shape ", shape, " needs ", numel / traits.elements * traits.bytes);
    return traits;
}

// x [B, T, C] with C = H * D, logits [B, T, H]: one dtype, one device.
inline void checkGateHeadsArgs(const at::Tensor& x, const at::Tensor& logits)
{
    constexpr const char* op = "gate_heads";
    TORCH_CHECK(x.dim() == 3, op, ": x must be [B, T, C], got ", x.sizes());
    checkFloatOutput(op, x.scalar_type());
    TORCH_CHECK(logits.dim() == 3 && logits.size(0) == x.size(0) && logits.size(1) == x.size(1) && logits.size(2) > 0
            && x.size(2) % logits.size(2) == 0,
        op, ": logits must be [", x.size(0), ", ", x.size(1), ", H] with H dividing ", x.size(2), ", got ", logits.sizes());
    TORCH_CHECK(logits.scalar_type() == x.scalar_type(), op, ": logits are ", logits.scalar_type(), " but x is ", x.scalar_type());
    TORCH_CHECK(logits.device() == x.device(), op, ": logits are on ", logits.device(), " but x is on ", x.device());
}

}  // namespace vireo::kernels::detail

namespace vireo::kernels::detail {

inline std::int64_t checkNf4Args(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize,
    c10::IntArrayRef shape, c10::ScalarType dtype)
{
    checkFloatOutput("dequantize_nf4", dtype);
    TORCH_CHECK(packed.scalar_type() == at::kByte, "dequantize_nf4: packed data must be uint8, got ", packed.scalar_type());
    TORCH_CHECK(absmax.scalar_type() == at::kFloat && code.scalar_type() == at::kFloat, "dequantize_nf4: absmax and code must be float32");
    TORCH_CHECK(code.numel() == 16, "dequantize_nf4: the code table must have 16 entries, got ", code.numel());
    TORCH_CHECK(blockSize > 0 && blockSize % 2 == 0, "dequantize_nf4: block size must be a positive even number, got ", blockSize);
    std::int64_t numel = 1;
    for (auto d : shape) {
        TORCH_CHECK(d >= 0, "dequantize_nf4: negative dim in shape ", shape);
        numel *= d;
    }
    TORCH_CHECK(packed.numel() * 2 >= numel && packed.numel() * 2 - numel <= 1, "dequantize_nf4: ", packed.numel(),
        " packed bytes do not hold the ", numel, " values of shape ", shape);
    TORCH_CHECK(absmax.numel() == (numel + blockSize - 1) / blockSize, "dequantize_nf4: ", absmax.numel(), " absmax values for ", numel,
        " values in blocks of ", blockSize);
    TORCH_CHECK(packed.device() == absmax.device() && packed.device() == code.device(),
        "dequantize_nf4: packed, absmax and code must be on one device");
    return numel;
}

}  // namespace vireo::kernels::detail

namespace vireo::kernels::detail {

inline void checkGatedResidualRmsNormModulateArgs(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift)
{
    constexpr const char* op = "gated_residual_rms_norm_modulate";
    TORCH_CHECK(x.dim() == 3, op, ": x must be [B, T, C], got ", x.sizes());
    TORCH_CHECK(delta.sizes() == x.sizes(), op, ": delta must have x's shape ", x.sizes(), ", got ", delta.sizes());
    checkFloatOutput(op, x.scalar_type());
    const std::pair<const char*, const at::Tensor*> operands[] = {{"delta", &delta}, {"gate", &gate}, {"scale", &scale}, {"shift", &shift}};
    for (const auto& [name, t] : operands) {
        TORCH_CHECK(t->dim() == 3 && t->size(0) == x.size(0) && (t->size(1) == x.size(1) || t->size(1) == 1) && t->size(2) == x.size(2), op,
            ": ", name, " must be [", x.size(0), ", ", x.size(1), " or 1, ", x.size(2), "], got ", t->sizes());
        TORCH_CHECK(t->scalar_type() == x.scalar_type(), op, ": ", name, " is ", t->scalar_type(), " but x is ", x.scalar_type());
        TORCH_CHECK(t->device() == x.device(), op, ": ", name, " is on ", t->device(), " but x is on ", x.device());
    }
}

}  // namespace vireo::kernels::detail
