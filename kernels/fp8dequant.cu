// CUDA implementation of vireo::dequantize_fp8 (CPU reference: fp8dequant_cpu.cpp).
#include "kernels/fp8dequant.h"
#include "kernels/fp8dequant_common.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

using detail::ScaleLayout;

template <typename In, typename Out, ScaleLayout Layout>
__global__ void dequantizeFp8Kernel(const In* __restrict__ q, const float* __restrict__ scale, Out* __restrict__ out, std::int64_t rows,
    std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols, std::int64_t scaleCols)
{
    const std::int64_t n = rows * cols;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t r = i / cols;
        float s;
        if constexpr (Layout == ScaleLayout::PerTensor)
            s = scale[0];
        else if constexpr (Layout == ScaleLayout::PerRow)
            s = scale[r];
        else
            s = scale[(r / blockRows) * scaleCols + (i - r * cols) / blockCols];
        out[i] = static_cast<Out>(static_cast<float>(q[i]) * s);
    }
}

template <typename In, typename Out>
void launch(const at::Tensor& q, const at::Tensor& s, at::Tensor& out, const detail::Fp8Geometry& g)
{
    const std::int64_t n = g.rows * g.cols;
    if (n == 0)
        return;
    constexpr int kThreads = 256;
    const int blocks = static_cast<int>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535));
    auto stream = at::cuda::getCurrentCUDAStream();
    const auto* qp = q.data_ptr<In>();
    const auto* sp = s.data_ptr<float>();
    auto* op = out.data_ptr<Out>();
    switch (g.layout) {
    case ScaleLayout::PerTensor:
        dequantizeFp8Kernel<In, Out, ScaleLayout::PerTensor><<<blocks, kThreads, 0, stream>>>(qp, sp, op, g.rows, g.cols, 1, 1, 1);
        break;
    case ScaleLayout::PerRow:
        dequantizeFp8Kernel<In, Out, ScaleLayout::PerRow><<<blocks, kThreads, 0, stream>>>(qp, sp, op, g.rows, g.cols, 1, 1, 1);
        break;
    case ScaleLayout::Block:
        dequantizeFp8Kernel<In, Out, ScaleLayout::Block>
            <<<blocks, kThreads, 0, stream>>>(qp, sp, op, g.rows, g.cols, g.blockRows, g.blockCols, g.scaleCols);
        break;
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void dequantizeInto(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize, at::Tensor& out)
{
    TORCH_CHECK(weight.is_cuda(), "dequantize_fp8 (CUDA): weight must be on a CUDA device");
    TORCH_CHECK(scale.device() == weight.device() && out.device() == weight.device(), "dequantize_fp8 (CUDA): scale is on ", scale.device(),
        " and out on ", out.device(), " but weight is on ", weight.device());
    detail::checkFloatOutput("dequantize_fp8", out.scalar_type());
    TORCH_CHECK(out.is_contiguous() && out.sizes() == weight.sizes(), "dequantize_fp8: out must be contiguous and shaped ", weight.sizes(),
        ", got ", out.sizes());
    const auto g = detail::fp8Geometry(weight, scale, blockSize);
    const c10::cuda::CUDAGuard guard(weight.device());
    const auto q = weight.contiguous();
    const auto s = scale.contiguous();
    AT_DISPATCH_SWITCH(q.scalar_type(), "dequantize_fp8_cuda", AT_DISPATCH_CASE(at::kFloat8_e4m3fn, [&] {
        using In = scalar_t;
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_fp8_cuda_out", [&] { launch<In, scalar_t>(q, s, out, g); });
    }) AT_DISPATCH_CASE(at::kFloat8_e5m2, [&] {
        using In = scalar_t;
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_fp8_cuda_out", [&] { launch<In, scalar_t>(q, s, out, g); });
    }));
}

at::Tensor dequantizeFp8Cuda(const at::Tensor& weight, const at::Tensor& scale, c10::ScalarType dtype, c10::IntArrayRef blockSize)
{
    detail::checkFloatOutput("dequantize_fp8", dtype);
    auto out = at::empty(weight.sizes(), weight.options().dtype(dtype));
    dequantizeInto(weight, scale, blockSize, out);
    return out;
}

at::Tensor& dequantizeFp8CudaOut(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize, at::Tensor& out)
{
    dequantizeInto(weight, scale, blockSize, out);
    return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("dequantize_fp8", &dequantizeFp8Cuda);
    m.impl("dequantize_fp8.out", &dequantizeFp8CudaOut);
}

}  // namespace vireo::kernels
