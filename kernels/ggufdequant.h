#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace vireo::kernels {

// Dequantizes the raw blocks of one GGUF tensor (uint8, as stored) of ggml type ggmlType
// (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K) into a tensor of the given
// PyTorch-order shape and dtype. Bit-identical to gguf-py's quants.dequantize before the
// final cast. Runs as the torch op vireo::dequantize_gguf on CPU (the reference) and CUDA.
at::Tensor dequantizeGguf(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype);

// The same into a preallocated, contiguous tensor whose shape and dtype give the output's.
at::Tensor& dequantizeGgufInto(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out);

// Whether dequantizeGguf handles this ggml type.
bool ggufTypeSupported(std::int64_t ggmlType);

}  // namespace vireo::kernels
