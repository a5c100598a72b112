// CUDA implementations of the fused ops (CPU: fusedops_cpu.cpp). Each reads its inputs once
// and writes its output once; row kernels give one thread block per token.
#include "kernels/fusedops.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>

namespace vireo::kernels {

namespace detail {
void checkRmsNormRopeArgs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin);
void checkRmsNormModulateArgs(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift);
} // namespace detail

namespace {

constexpr int kRowThreads = 256;

// Sum over the thread block; every thread gets the total.
__device__ float blockSum(float value)
{
    __shared__ float partial[32];
    __shared__ float total;
    for (int offset = 16; offset > 0; offset >>= 1)
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        partial[warp] = value;
    __syncthreads();
    if (warp == 0) {
        value = lane < static_cast<int>((blockDim.x + 31) >> 5) ? partial[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1)
            value += __shfl_xor_sync(0xffffffffu, value, offset);
        if (lane == 0)
            total = value;
    }
    __syncthreads();
    return total;
}

template <typename T>
__device__ __forceinline__ float roundTo(float v)
{
    return static_cast<float>(static_cast<T>(v));
}

// ---- quantize_fp8 -------------------------------------------------------------------------

template <typename T>
__global__ void quantizeFp8Kernel(const T* __restrict__ x, const float* __restrict__ scale, c10::Float8_e4m3fn* __restrict__ out,
    std::int64_t n)
{
    const float s = *scale;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        float v = static_cast<float>(x[i]) / s;
        if (!(v != v))
            v = fminf(fmaxf(v, -448.0f), 448.0f);
        out[i] = c10::Float8_e4m3fn(v);
    }
}

at::Tensor quantizeFp8Cuda(const at::Tensor& xIn, const at::Tensor& scale)
{
    TORCH_CHECK(scale.numel() == 1 && scale.scalar_type() == at::kFloat, "quantize_fp8: scale must be one float32 value");
    TORCH_CHECK(xIn.is_cuda() && scale.device() == xIn.device(), "quantize_fp8 (CUDA): x is on ", xIn.device(), " and scale on ",
        scale.device());
    const c10::cuda::CUDAGuard guard(xIn.device());
    const auto x = xIn.contiguous();
    auto out = at::empty(x.sizes(), x.options().dtype(at::kFloat8_e4m3fn));
    const auto n = x.numel();
    if (n == 0)
        return out;
    const int grid = static_cast<int>(std::min<std::int64_t>((n + 255) / 256, 1 << 20));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "quantize_fp8_cuda", [&] {
        quantizeFp8Kernel<scalar_t><<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<scalar_t>(),
            scale.data_ptr<float>(), out.data_ptr<c10::Float8_e4m3fn>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// ---- rms_norm_modulate --------------------------------------------------------------------

struct RowStrides {
    std::int64_t batch, token;
};

template <typename T>
__global__ void rmsNormModulateKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ shift,
    T* __restrict__ out, std::int64_t tokens, std::int64_t channels, RowStrides xs, RowStrides ss, RowStrides hs, float eps)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t b = row / tokens, t = row - b * tokens;
    const T* xr = x + b * xs.batch + t * xs.token;
    const T* sr = scale + b * ss.batch + t * ss.token;
    const T* hr = shift + b * hs.batch + t * hs.token;
    T* orow = out + row * channels;
    float squares = 0.0f;
    for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
        const float v = static_cast<float>(xr[c]);
        squares += v * v;
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
    // Rounded where the unfused ops round: the norm's output and 1 + scale are tensors of T.
    for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
        const float normed = roundTo<T>(static_cast<float>(xr[c]) * rstd);
        const float factor = roundTo<T>(1.0f + static_cast<float>(sr[c]));
        orow[c] = static_cast<T>(static_cast<float>(hr[c]) + normed * factor);
    }
}

RowStrides rowStrides(const at::Tensor& t)
{
    return {t.size(0) == 1 ? 0 : t.stride(0), t.size(1) == 1 ? 0 : t.stride(1)};
}

at::Tensor rmsNormModulateCuda(const at::Tensor& xIn, const at::Tensor& scaleIn, const at::Tensor& shiftIn, double eps)
{
    detail::checkRmsNormModulateArgs(xIn, scaleIn, shiftIn);
    TORCH_CHECK(scaleIn.scalar_type() == xIn.scalar_type() && shiftIn.scalar_type() == xIn.scalar_type(),
        "rms_norm_modulate: scale and shift must have x's dtype ", xIn.scalar_type());
    TORCH_CHECK(scaleIn.device() == xIn.device() && shiftIn.device() == xIn.device(), "rms_norm_modulate: tensors on different devices");
    const c10::cuda::CUDAGuard guard(xIn.device());
    auto lastContiguous = [](const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); };
    const auto x = lastContiguous(xIn), scale = lastContiguous(scaleIn), shift = lastContiguous(shiftIn);
    auto out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    const auto rows = x.size(0) * x.size(1);
    if (rows == 0 || x.size(2) == 0)
        return out;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm_modulate_cuda", [&] {
        rmsNormModulateKernel<scalar_t><<<static_cast<unsigned>(rows), kRowThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), scale.data_ptr<scalar_t>(), shift.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), x.size(1),
            x.size(2), rowStrides(x), rowStrides(scale), rowStrides(shift), static_cast<float>(eps));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

// ---- rms_norm_rope ------------------------------------------------------------------------

template <typename T, typename W>
__global__ void rmsNormRopeKernel(const T* __restrict__ x, const W* __restrict__ weight, const float* __restrict__ cos,
    const float* __restrict__ sin, T* __restrict__ out, std::int64_t tokens, std::int64_t channels, std::int64_t r, RowStrides xs,
    std::int64_t ropeBatchStride, float eps)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t b = row / tokens, t = row - b * tokens;
    const T* xr = x + b * xs.batch + t * xs.token;
    const std::int64_t halfChannels = channels / 2;
    const float* cr = cos + b * ropeBatchStride + t * halfChannels;
    const float* sr = sin + b * ropeBatchStride + t * halfChannels;
    T* orow = out + row * channels;
    float squares = 0.0f;
    for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
        const float v = static_cast<float>(xr[c]);
        squares += v * v;
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
    for (std::int64_t p = threadIdx.x; p < halfChannels; p += blockDim.x) {
        const std::int64_t head = p / r, j = p - head * r;
        const std::int64_t i1 = head * 2 * r + j, i2 = i1 + r;
        // The normalized value is a tensor of T in the unfused ops; the rotation is float32.
        const float a = roundTo<T>(static_cast<float>(xr[i1]) * rstd * static_cast<float>(weight[i1]));
        const float bv = roundTo<T>(static_cast<float>(xr[i2]) * rstd * static_cast<float>(weight[i2]));
        const float c = cr[p], s = sr[p];
        orow[i1] = static_cast<T>(a * c - s * bv);
        orow[i2] = static_cast<T>(bv * c + s * a);
    }
}

at::Tensor rmsNormRopeCuda(const at::Tensor& xIn, const at::Tensor& weightIn, const at::Tensor& cosIn, const at::Tensor& sinIn, double eps)
{
    detail::checkRmsNormRopeArgs(xIn, weightIn, cosIn, sinIn);
    TORCH_CHECK(weightIn.device() == xIn.device() && cosIn.device() == xIn.device() && sinIn.device() == xIn.device(),
        "rms_norm_rope: tensors on different devices");
    const c10::cuda::CUDAGuard guard(xIn.device());
    const auto x = xIn.stride(-1) == 1 ? xIn : xIn.contiguous();
    const auto weight = weightIn.contiguous(), cos = cosIn.contiguous(), sin = sinIn.contiguous();
    auto out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    const auto rows = x.size(0) * x.size(1);
    if (rows == 0 || x.size(2) == 0)
        return out;
    const std::int64_t ropeBatchStride = cos.size(0) == 1 ? 0 : cos.stride(0);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm_rope_cuda", [&] {
        using T = scalar_t;
        AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "rms_norm_rope_cuda_weight", [&] {
            rmsNormRopeKernel<T, scalar_t><<<static_cast<unsigned>(rows), kRowThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                x.data_ptr<T>(), weight.data_ptr<scalar_t>(), cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<T>(), x.size(1),
                x.size(2), cos.size(4), rowStrides(x), ropeBatchStride, static_cast<float>(eps));
        });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("quantize_fp8", &quantizeFp8Cuda);
    m.impl("rms_norm_modulate", &rmsNormModulateCuda);
    m.impl("rms_norm_rope", &rmsNormRopeCuda);
}

} // namespace vireo::kernels
