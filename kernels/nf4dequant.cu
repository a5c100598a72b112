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
__global__ void dequantizeNf4Kernel(const std::uint8_t* __restrict__ q, const float* __restrict__ absmax, const float* __restrict__ code,
    Out* __restrict__ out, std::int64_t numel, std::int64_t blockSize)
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

void dequantizeInto(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize, at::Tensor& out)
{
    TORCH_CHECK(packed.is_cuda() && out.device() == packed.device(), "dequantize_nf4 (CUDA): tensors must be on one CUDA device");
    TORCH_CHECK(out.is_contiguous(), "dequantize_nf4: out must be contiguous");
    const auto numel = detail::checkNf4Args(packed, absmax, code, blockSize, out.sizes(), out.scalar_type());
    const c10::cuda::CUDAGuard guard(packed.device());
    const auto p = packed.contiguous();
    const auto a = absmax.contiguous();
    const auto c = code.contiguous();
    if (numel == 0)
        return;
    constexpr int kThreads = 256;
    const int grid = static_cast<int>(std::min<std::int64_t>((numel + kThreads - 1) / kThreads, 65535));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_nf4_cuda", [&] {
        dequantizeNf4Kernel<scalar_t><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            p.data_ptr<std::uint8_t>(), a.data_ptr<float>(), c.data_ptr<float>(), out.data_ptr<scalar_t>(), numel, blockSize);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor dequantizeNf4Cuda(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize,
    c10::IntArrayRef shape, c10::ScalarType dtype)
{
    detail::checkNf4Args(packed, absmax, code, blockSize, shape, dtype);
    auto out = at::empty(shape, packed.options().dtype(dtype));
    dequantizeInto(packed, absmax, code, blockSize, out);
    return out;
}

at::Tensor& dequantizeNf4CudaOut(
    const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize, at::Tensor& out)
{
    dequantizeInto(packed, absmax, code, blockSize, out);
    return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("dequantize_nf4", &dequantizeNf4Cuda);
    m.impl("dequantize_nf4.out", &dequantizeNf4CudaOut);
}

}  // namespace vireo::kernels
