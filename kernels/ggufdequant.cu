// CUDA implementation of vireo::dequantize_gguf: one thread per block, the same decoder as
// the CPU reference (ggufblocks.h). Built with --fmad=false so no multiply-add is fused and
// results stay bit-identical to the reference.
#include "kernels/ggufdequant.h"
#include "kernels/ggufblocks.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

template <typename Out>
__global__ void dequantizeGgufKernel(const std::uint8_t* __restrict__ in, Out* __restrict__ out, std::int64_t nBlocks,
    int type, int blockElements, int blockBytes)
{
    float tmp[256];
    for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < nBlocks;
         b += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        gguf::decodeBlock(type, in + b * blockBytes, tmp);
        Out* dst = out + b * blockElements;
        for (int i = 0; i < blockElements; ++i)
            dst[i] = static_cast<Out>(tmp[i]);
    }
}

void dequantizeInto(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out)
{
    TORCH_CHECK(blocks.is_cuda() && out.device() == blocks.device(), "dequantize_gguf (CUDA): blocks and out must be on one CUDA device");
    TORCH_CHECK(out.is_contiguous(), "dequantize_gguf: out must be contiguous");
    const auto traits = detail::checkGgufArgs(blocks, ggmlType, out.sizes(), out.scalar_type());
    const c10::cuda::CUDAGuard guard(blocks.device());
    const auto in = blocks.contiguous();
    const std::int64_t nBlocks = in.numel() / traits.bytes;
    if (nBlocks == 0)
        return;
    constexpr int kThreads = 128;
    const int grid = static_cast<int>(std::min<std::int64_t>((nBlocks + kThreads - 1) / kThreads, 65535));
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_gguf_cuda", [&] {
        dequantizeGgufKernel<scalar_t><<<grid, kThreads, 0, stream>>>(in.data_ptr<std::uint8_t>(), out.data_ptr<scalar_t>(),
            nBlocks, static_cast<int>(ggmlType), traits.elements, traits.bytes);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor dequantizeGgufCuda(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    detail::checkGgufArgs(blocks, ggmlType, shape, dtype);
    auto out = at::empty(shape, blocks.options().dtype(dtype));
    dequantizeInto(blocks, ggmlType, out);
    return out;
}

at::Tensor& dequantizeGgufCudaOut(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out)
{
    dequantizeInto(blocks, ggmlType, out);
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("dequantize_gguf", &dequantizeGgufCuda);
    m.impl("dequantize_gguf.out", &dequantizeGgufCudaOut);
}

} // namespace vireo::kernels
