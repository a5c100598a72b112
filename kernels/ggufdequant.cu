// CUDA implementation of vireo::dequantize_gguf: a few consecutive elements per thread, each
// through the element form of the CPU reference's decoder (ggufblocks.h). Built with
// --fmad=false so no multiply-add is fused and results stay bit-identical to the reference.
#include "kernels/ggufdequant.h"
#include "kernels/ggufblocks.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <type_traits>

namespace vireo::kernels {

namespace {

// Each thread writes kRun consecutive outputs (one 16-byte store for 16-bit outputs), so a
// warp covers 256 contiguous values and every block's bytes are read by a handful of
// neighbouring threads through the cache. Scales are re-derived per element: integer work is
// cheap next to the bandwidth this reaches (a thread per whole block, with its 1 KiB of
// floats in local memory, reached a few percent of it).
constexpr int kRun = 8;

template <typename Out>
struct alignas(16) Run {
    Out v[kRun];
};

// Type is a template argument so each instantiation is straight-line decoding.
template <typename Out, int Type>
__global__ void dequantizeGgufKernel(const std::uint8_t* __restrict__ in, Out* __restrict__ out, std::int64_t numel, bool vectorStore)
{
    constexpr int blockElements = gguf::blockTraits(Type).elements;
    constexpr int blockBytes = gguf::blockTraits(Type).bytes;
    const std::int64_t runs = (numel + kRun - 1) / kRun;
    for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < runs;
         r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t first = r * kRun;
        Run<Out> run;
        if constexpr (blockElements >= kRun) {
            // Quant blocks hold 32 or 256 values: a run never straddles two of them.
            const std::int64_t block = first / blockElements;
            const std::uint8_t* b = in + block * blockBytes;
            float values[kRun];
            gguf::decodeRun8(Type, b, static_cast<int>(first - block * blockElements), values);
#pragma unroll
            for (int k = 0; k < kRun; ++k)
                run.v[k] = static_cast<Out>(values[k]);
        } else {
#pragma unroll
            for (int k = 0; k < kRun; ++k)
                run.v[k] = static_cast<Out>(first + k < numel ? gguf::decodeElement(Type, in + (first + k) * blockBytes, 0) : 0.0f);
        }
        if (vectorStore && first + kRun <= numel) {
            *reinterpret_cast<Run<Out>*>(out + first) = run;
        } else {
            for (int k = 0; k < kRun && first + k < numel; ++k)
                out[first + k] = run.v[k];
        }
    }
}

void dequantizeInto(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out)
{
    TORCH_CHECK(blocks.is_cuda() && out.device() == blocks.device(), "dequantize_gguf (CUDA): blocks and out must be on one CUDA device");
    TORCH_CHECK(out.is_contiguous(), "dequantize_gguf: out must be contiguous");
    detail::checkGgufArgs(blocks, ggmlType, out.sizes(), out.scalar_type());
    const c10::cuda::CUDAGuard guard(blocks.device());
    const auto in = blocks.contiguous();
    const std::int64_t numel = out.numel();
    if (numel == 0)
        return;
    constexpr int kThreads = 256;
    const std::int64_t runs = (numel + kRun - 1) / kRun;
    const int grid = static_cast<int>(std::min<std::int64_t>((runs + kThreads - 1) / kThreads, 1 << 20));
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_gguf_cuda", [&] {
        const bool vectorStore = reinterpret_cast<std::uintptr_t>(out.data_ptr()) % alignof(Run<scalar_t>) == 0;
        const auto* src = in.data_ptr<std::uint8_t>();
        auto* dst = out.data_ptr<scalar_t>();
        auto launch = [&](auto type) {
            dequantizeGgufKernel<scalar_t, decltype(type)::value><<<grid, kThreads, 0, stream>>>(src, dst, numel, vectorStore);
        };
        namespace g = gguf;
        switch (static_cast<int>(ggmlType)) {
        case g::kF32: launch(std::integral_constant<int, g::kF32>{}); break;
        case g::kF16: launch(std::integral_constant<int, g::kF16>{}); break;
        case g::kBF16: launch(std::integral_constant<int, g::kBF16>{}); break;
        case g::kQ4_0: launch(std::integral_constant<int, g::kQ4_0>{}); break;
        case g::kQ4_1: launch(std::integral_constant<int, g::kQ4_1>{}); break;
        case g::kQ5_0: launch(std::integral_constant<int, g::kQ5_0>{}); break;
        case g::kQ5_1: launch(std::integral_constant<int, g::kQ5_1>{}); break;
        case g::kQ8_0: launch(std::integral_constant<int, g::kQ8_0>{}); break;
        case g::kQ2_K: launch(std::integral_constant<int, g::kQ2_K>{}); break;
        case g::kQ3_K: launch(std::integral_constant<int, g::kQ3_K>{}); break;
        case g::kQ4_K: launch(std::integral_constant<int, g::kQ4_K>{}); break;
        case g::kQ5_K: launch(std::integral_constant<int, g::kQ5_K>{}); break;
        case g::kQ6_K: launch(std::integral_constant<int, g::kQ6_K>{}); break;
        default: TORCH_CHECK(false, "dequantize_gguf (CUDA): ggml type ", ggmlType, " has no kernel");
        }
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

}  // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("dequantize_gguf", &dequantizeGgufCuda);
    m.impl("dequantize_gguf.out", &dequantizeGgufCudaOut);
}

}  // namespace vireo::kernels
