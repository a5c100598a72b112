// CUDA implementation of vireo::dequantize_nf4 (CPU reference: nf4dequant_cpu.cpp).
#include "kernels/nf4dequant.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

template <typename Out>
__global__ void dequantizeNf4Kernel(const std::uint8_t* __restrict__ q, const float* __restrict__ absmax,
    const float* __restrict__ code, Out* __restrict__ out, std::int64_t numel, std::int64_t blockSize)
{
    __shared__ float table[16];
    if (threadIdx.x < 16)
        table[threadIdx.x] = code[threadIdx.x];
    __syncthreads();
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < numel;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::uint8_t byte = q[i / 2];
        const int nibble = (i % 2 == 0) ? (byte >> 4) : (byte & 0xF);
        out[i] = static_cast<Out>(table[nibble] * absmax[i / blockSize]);
    }
}

at::Tensor dequantizeNf4Cuda(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code,
    std::int64_t blockSize, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    TORCH_CHECK(packed.is_cuda(), "dequantize_nf4 (CUDA): tensors must be on a CUDA device");
    const auto numel = detail::checkNf4Args(packed, absmax, code, blockSize, shape, dtype);
    const c10::cuda::CUDAGuard guard(packed.device());
    const auto p = packed.contiguous();
    const auto a = absmax.contiguous();
    const auto c = code.contiguous();
    auto out = at::empty(shape, p.options().dtype(dtype));
    if (numel == 0)
        return out;
    constexpr int kThreads = 256;
    const int grid = static_cast<int>(std::min<std::int64_t>((numel + kThreads - 1) / kThreads, 65535));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "dequantize_nf4_cuda", [&] {
        dequantizeNf4Kernel<scalar_t><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            p.data_ptr<std::uint8_t>(), a.data_ptr<float>(), c.data_ptr<float>(), out.data_ptr<scalar_t>(), numel, blockSize);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("dequantize_nf4", &dequantizeNf4Cuda);
}

} // namespace vireo::kernels
