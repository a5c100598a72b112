#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace vireo::kernels {

// Dequantizes bitsandbytes 4-bit blockwise data: packed uint8 (two codes per byte, high
// nibble first), absmax float32 [ceil(n / blockSize)] (already de-nested), code float32 [16]
// (the NF4 or FP4 table). w[i] = code[nibble(i)] * absmax[i / blockSize], cast to dtype.
// Runs as the torch op vireo::dequantize_nf4 on CPU (the reference) and CUDA.
at::Tensor dequantizeNf4(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize,
    c10::IntArrayRef shape, c10::ScalarType dtype);

// The same into a preallocated, contiguous tensor whose shape and dtype give the output's.
at::Tensor& dequantizeNf4Into(
    const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize, at::Tensor& out);

}  // namespace vireo::kernels
