// CUDA implementations of the fused ops (CPU: fusedops_cpu.cpp). Each reads its inputs once
// and writes its output once; row kernels give one thread block per token.
#include "kernels/fusedops.h"

#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <cuda_fp8.h>
#include <tuple>
#include <type_traits>

namespace vireo::kernels {

namespace detail {
void checkRmsNormRopeArgs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin);
void checkRmsNormModulateArgs(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift);
}  // namespace detail

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

// ---- quantize_fp8 and gelu_quantize_fp8 ---------------------------------------------------

// x * (1 / scale), clamped to the finite e4m3 range with NaN kept, as the CPU reference does.
__device__ __forceinline__ float toFp8Range(float v, float inverse)
{
    v *= inverse;
    return v != v ? v : fminf(fmaxf(v, -448.0f), 448.0f);
}

// ATen's CUDA GELU (tanh form) in float, rounded to T as the unfused op writes it.
template <typename T>
__device__ __forceinline__ float geluTanh(float x)
{
    constexpr float kBeta = 0.7978845608028654f;  // sqrt(2) * 2/sqrt(pi) * 0.5
    constexpr float kKappa = 0.044715f;
    const float cube = x * x * x;
    const float inner = kBeta * (x + kKappa * cube);
    return roundTo<T>(0.5f * x * (1.0f + tanhf(inner)));
}

// Eight values quantized with four two-value hardware conversions (round to nearest even,
// saturating: the clamp already bounds the value), packed for one 8-byte store.
__device__ __forceinline__ uint2 packFp8x8(const float (&values)[8], float inverse)
{
    std::uint16_t pairs[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
        pairs[k] = __nv_cvt_float2_to_fp8x2(
            make_float2(toFp8Range(values[2 * k], inverse), toFp8Range(values[2 * k + 1], inverse)), __NV_SATFINITE, __NV_E4M3);
    uint2 packed;
    packed.x = static_cast<unsigned>(pairs[0]) | (static_cast<unsigned>(pairs[1]) << 16);
    packed.y = static_cast<unsigned>(pairs[2]) | (static_cast<unsigned>(pairs[3]) << 16);
    return packed;
}

// Eight values per thread: one 16-byte load of a 16-bit input, one 8-byte store.
template <typename T, bool Gelu>
__global__ void quantizeFp8VecKernel(
    const T* __restrict__ x, const float* __restrict__ scale, std::uint8_t* __restrict__ out, std::int64_t groups)
{
    const float inverse = 1.0f / *scale;
    for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; g < groups;
         g += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const uint4 raw = reinterpret_cast<const uint4*>(x)[g];
        const T* v = reinterpret_cast<const T*>(&raw);
        float values[8];
#pragma unroll
        for (int k = 0; k < 8; ++k)
            values[k] = Gelu ? geluTanh<T>(static_cast<float>(v[k])) : static_cast<float>(v[k]);
        reinterpret_cast<uint2*>(out)[g] = packFp8x8(values, inverse);
    }
}

template <typename T, bool Gelu>
__global__ void quantizeFp8Kernel(
    const T* __restrict__ x, const float* __restrict__ scale, c10::Float8_e4m3fn* __restrict__ out, std::int64_t n)
{
    const float inverse = 1.0f / *scale;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        float v = static_cast<float>(x[i]);
        if constexpr (Gelu)
            v = geluTanh<T>(v);
        out[i] = c10::Float8_e4m3fn(toFp8Range(v, inverse));
    }
}

int streamingGrid(std::int64_t work, int threads)
{
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>((work + threads - 1) / threads, sms * 8)));
}

template <bool Gelu>
at::Tensor quantizeFp8Launch(const at::Tensor& xIn, const at::Tensor& scale, const char* op)
{
    TORCH_CHECK(scale.numel() == 1 && scale.scalar_type() == at::kFloat, op, ": scale must be one float32 value");
    TORCH_CHECK(xIn.is_cuda() && scale.device() == xIn.device(), op, " (CUDA): x is on ", xIn.device(), " and scale on ", scale.device());
    const c10::cuda::CUDAGuard guard(xIn.device());
    const auto x = xIn.contiguous();
    auto out = at::empty(x.sizes(), x.options().dtype(at::kFloat8_e4m3fn));
    const auto n = x.numel();
    if (n == 0)
        return out;
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "quantize_fp8_cuda", [&] {
        const bool vector = x.element_size() == 2 && n % 8 == 0 && reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0
            && reinterpret_cast<std::uintptr_t>(out.data_ptr()) % 8 == 0;
        if constexpr (sizeof(scalar_t) == 2) {
            if (vector) {
                quantizeFp8VecKernel<scalar_t, Gelu><<<streamingGrid(n / 8, 256), 256, 0, stream>>>(
                    x.data_ptr<scalar_t>(), scale.data_ptr<float>(), static_cast<std::uint8_t*>(out.data_ptr()), n / 8);
                return;
            }
        }
        quantizeFp8Kernel<scalar_t, Gelu><<<streamingGrid(n, 256), 256, 0, stream>>>(
            x.data_ptr<scalar_t>(), scale.data_ptr<float>(), out.data_ptr<c10::Float8_e4m3fn>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

at::Tensor quantizeFp8Cuda(const at::Tensor& x, const at::Tensor& scale)
{
    return quantizeFp8Launch<false>(x, scale, "quantize_fp8");
}

at::Tensor geluQuantizeFp8Cuda(const at::Tensor& x, const at::Tensor& scale)
{
    return quantizeFp8Launch<true>(x, scale, "gelu_quantize_fp8");
}

// ---- rms_norm_modulate --------------------------------------------------------------------

struct RowStrides {
    std::int64_t batch, token;
};

// Where a row of the RMSNorm + modulation kernels goes: a tensor of T, or (Fp8) the
// float8_e4m3fn input of an FP8 GEMM, quantized from the T values exactly as quantizeFp8 of
// the T tensor would be (inverse = 1 / its scale).
template <typename T, bool Fp8>
__device__ __forceinline__ void* outputRow(void* out, std::int64_t row, std::int64_t channels)
{
    if constexpr (Fp8)
        return static_cast<std::uint8_t*>(out) + row * channels;
    else
        return static_cast<T*>(out) + row * channels;
}

__device__ __forceinline__ float quantizeInverse(const float* qscale)
{
    return qscale ? 1.0f / *qscale : 1.0f;
}

// The second pass of the RMSNorm + modulation kernels: shift + normed * (1 + scale) for one
// row, rounded where the unfused ops round (the norm's output and 1 + scale are tensors of T).
template <typename T, bool Fp8>
__device__ __forceinline__ void modulateRow(const T* __restrict__ v, float rstd, const T* __restrict__ sr, const T* __restrict__ hr,
    void* __restrict__ orow, std::int64_t channels, float inverse)
{
    for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
        const float normed = roundTo<T>(static_cast<float>(v[c]) * rstd);
        const float factor = roundTo<T>(1.0f + static_cast<float>(sr[c]));
        const T value = static_cast<T>(static_cast<float>(hr[c]) + normed * factor);
        if constexpr (Fp8)
            static_cast<c10::Float8_e4m3fn*>(orow)[c] = c10::Float8_e4m3fn(toFp8Range(static_cast<float>(value), inverse));
        else
            static_cast<T*>(orow)[c] = value;
    }
}

// The same for the vectorized kernels, from the row values each thread holds in registers.
template <typename T, int VPT, bool Fp8>
__device__ __forceinline__ void modulateHeldRow(const uint4 (&held)[VPT], float rstd, const uint4* __restrict__ sr,
    const uint4* __restrict__ hr, void* __restrict__ orow, int vectors, float inverse)
{
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < vectors) {
            const uint4 sraw = sr[i], hraw = hr[i];
            const T* v = reinterpret_cast<const T*>(&held[k]);
            const T* sv = reinterpret_cast<const T*>(&sraw);
            const T* hv = reinterpret_cast<const T*>(&hraw);
            uint4 result;
            T* o = reinterpret_cast<T*>(&result);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const float normed = roundTo<T>(static_cast<float>(v[e]) * rstd);
                const float factor = roundTo<T>(1.0f + static_cast<float>(sv[e]));
                o[e] = static_cast<T>(static_cast<float>(hv[e]) + normed * factor);
            }
            if constexpr (Fp8) {
                // Eight e4m3 values in one 8-byte store, converted as quantize_fp8 converts them.
                float values[8];
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    values[e] = static_cast<float>(o[e]);
                static_cast<uint2*>(orow)[i] = packFp8x8(values, inverse);
            } else {
                static_cast<uint4*>(orow)[i] = result;
            }
        }
    }
}

template <typename T, bool Fp8>
__global__ void rmsNormModulateKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ shift,
    void* __restrict__ out, const float* __restrict__ qscale, std::int64_t tokens, std::int64_t channels, RowStrides xs, RowStrides ss,
    RowStrides hs, float eps)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t b = row / tokens, t = row - b * tokens;
    const T* xr = x + b * xs.batch + t * xs.token;
    const T* sr = scale + b * ss.batch + t * ss.token;
    const T* hr = shift + b * hs.batch + t * hs.token;
    void* orow = outputRow<T, Fp8>(out, row, channels);
    float squares = 0.0f;
    for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
        const float v = static_cast<float>(xr[c]);
        squares += v * v;
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
    modulateRow<T, Fp8>(xr, rstd, sr, hr, orow, channels, quantizeInverse(qscale));
}

// The same with 16-bit values moved eight at a time and each row held in registers (one read
// of x): VPT vectors of eight per thread, C = 8 * VPT * blockDim at most.
template <typename T, int VPT, bool Fp8>
__global__ void rmsNormModulateVecKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ shift,
    void* __restrict__ out, const float* __restrict__ qscale, std::int64_t tokens, std::int64_t channels, RowStrides xs, RowStrides ss,
    RowStrides hs, float eps)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t b = row / tokens, t = row - b * tokens;
    const auto* xr = reinterpret_cast<const uint4*>(x + b * xs.batch + t * xs.token);
    const auto* sr = reinterpret_cast<const uint4*>(scale + b * ss.batch + t * ss.token);
    const auto* hr = reinterpret_cast<const uint4*>(shift + b * hs.batch + t * hs.token);
    void* orow = outputRow<T, Fp8>(out, row, channels);
    const int vectors = static_cast<int>(channels / 8);
    uint4 held[VPT];
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < vectors) {
            held[k] = xr[i];
            const T* v = reinterpret_cast<const T*>(&held[k]);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const float f = static_cast<float>(v[e]);
                squares += f * f;
            }
        }
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
    modulateHeldRow<T, VPT, Fp8>(held, rstd, sr, hr, orow, vectors, quantizeInverse(qscale));
}

RowStrides rowStrides(const at::Tensor& t)
{
    return {t.size(0) == 1 ? 0 : t.stride(0), t.size(1) == 1 ? 0 : t.stride(1)};
}

// Whether every row of t starts on a 16-byte boundary.
bool rowsAligned16(const at::Tensor& t)
{
    const auto elementsPer16 = 16 / static_cast<std::int64_t>(t.element_size());
    const auto rs = rowStrides(t);
    return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0 && rs.batch % elementsPer16 == 0 && rs.token % elementsPer16 == 0;
}

// The scale an FP8 output is quantized with: one float32 value on x's device.
void checkQuantizeScale(const at::Tensor& x, const at::Tensor& qscale, const char* op)
{
    TORCH_CHECK(qscale.numel() == 1 && qscale.scalar_type() == at::kFloat, op, ": the quantization scale must be one float32 value");
    TORCH_CHECK(qscale.device() == x.device(), op, ": x is on ", x.device(), " and the quantization scale on ", qscale.device());
}

// Calls run(std::integral_constant<int, VPT>) with the vectors each thread holds (1, 2 or 4).
template <typename Run>
void withVectorsPerThread(std::int64_t vectors, int& threads, Run&& run)
{
    threads = static_cast<int>(std::min<std::int64_t>(kRowThreads, (vectors + 31) / 32 * 32));
    const int perThread = static_cast<int>((vectors + threads - 1) / threads);
    if (perThread == 1)
        run(std::integral_constant<int, 1>{});
    else if (perThread == 2)
        run(std::integral_constant<int, 2>{});
    else
        run(std::integral_constant<int, 4>{});
}

// qscale: null for an output of x's dtype, else the scale of a float8_e4m3fn output.
at::Tensor rmsNormModulateLaunch(
    const at::Tensor& xIn, const at::Tensor& scaleIn, const at::Tensor& shiftIn, double eps, const at::Tensor* qscale)
{
    detail::checkRmsNormModulateArgs(xIn, scaleIn, shiftIn);
    TORCH_CHECK(scaleIn.scalar_type() == xIn.scalar_type() && shiftIn.scalar_type() == xIn.scalar_type(),
        "rms_norm_modulate: scale and shift must have x's dtype ", xIn.scalar_type());
    TORCH_CHECK(scaleIn.device() == xIn.device() && shiftIn.device() == xIn.device(), "rms_norm_modulate: tensors on different devices");
    if (qscale)
        checkQuantizeScale(xIn, *qscale, "rms_norm_modulate_fp8");
    const c10::cuda::CUDAGuard guard(xIn.device());
    auto lastContiguous = [](const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); };
    const auto x = lastContiguous(xIn), scale = lastContiguous(scaleIn), shift = lastContiguous(shiftIn);
    auto options = x.options().memory_format(at::MemoryFormat::Contiguous);
    auto out = at::empty(x.sizes(), qscale ? options.dtype(at::kFloat8_e4m3fn) : options);
    const auto rows = x.size(0) * x.size(1);
    if (rows == 0 || x.size(2) == 0)
        return out;
    const auto channels = x.size(2);
    const float* q = qscale ? qscale->data_ptr<float>() : nullptr;
    const bool vector = x.element_size() == 2 && channels % 8 == 0 && channels <= 8 * 4 * kRowThreads && rowsAligned16(x)
        && rowsAligned16(scale) && rowsAligned16(shift);
    const auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm_modulate_cuda", [&] {
        auto launch = [&](auto fp8) {
            constexpr bool Fp8 = decltype(fp8)::value;
            if constexpr (sizeof(scalar_t) == 2) {
                if (vector) {
                    int threads = 0;
                    withVectorsPerThread(channels / 8, threads, [&](auto vpt) {
                        rmsNormModulateVecKernel<scalar_t, decltype(vpt)::value, Fp8><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
                            x.data_ptr<scalar_t>(), scale.data_ptr<scalar_t>(), shift.data_ptr<scalar_t>(), out.data_ptr(), q, x.size(1),
                            channels, rowStrides(x), rowStrides(scale), rowStrides(shift), static_cast<float>(eps));
                    });
                    return;
                }
            }
            rmsNormModulateKernel<scalar_t, Fp8><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x.data_ptr<scalar_t>(),
                scale.data_ptr<scalar_t>(), shift.data_ptr<scalar_t>(), out.data_ptr(), q, x.size(1), channels, rowStrides(x),
                rowStrides(scale), rowStrides(shift), static_cast<float>(eps));
        };
        if (qscale)
            launch(std::true_type{});
        else
            launch(std::false_type{});
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

at::Tensor rmsNormModulateCuda(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    return rmsNormModulateLaunch(x, scale, shift, eps, nullptr);
}

at::Tensor rmsNormModulateFp8Cuda(
    const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    return rmsNormModulateLaunch(x, scale, shift, eps, &qscale);
}

// ---- gated_residual_rms_norm_modulate -----------------------------------------------------

struct GatedRows {
    const void *x, *delta, *gate, *scale, *shift;
    RowStrides xs, ds, gs, ss, hs;
};

// y = x + delta * gate is rounded to T before the norm reads it, as the unfused addcmul writes
// a tensor of T; the norm and the modulation then round as rmsNormModulateKernel does. Each
// thread reads back only the values of y it wrote itself.
template <typename T, bool Fp8>
__global__ void gatedResidualRmsNormModulateKernel(GatedRows in, T* __restrict__ sum, void* __restrict__ out,
    const float* __restrict__ qscale, std::int64_t tokens, std::int64_t channels, float eps)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t b = row / tokens, t = row - b * tokens;
    const T* xr = static_cast<const T*>(in.x) + b * in.xs.batch + t * in.xs.token;
    const T* dr = static_cast<const T*>(in.delta) + b * in.ds.batch + t * in.ds.token;
    const T* gr = static_cast<const T*>(in.gate) + b * in.gs.batch + t * in.gs.token;
    const T* sr = static_cast<const T*>(in.scale) + b * in.ss.batch + t * in.ss.token;
    const T* hr = static_cast<const T*>(in.shift) + b * in.hs.batch + t * in.hs.token;
    T* yrow = sum + row * channels;
    void* orow = outputRow<T, Fp8>(out, row, channels);
    float squares = 0.0f;
    for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
        const T y = static_cast<T>(static_cast<float>(xr[c]) + static_cast<float>(dr[c]) * static_cast<float>(gr[c]));
        yrow[c] = y;
        const float v = static_cast<float>(y);
        squares += v * v;
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
    modulateRow<T, Fp8>(static_cast<const T*>(yrow), rstd, sr, hr, orow, channels, quantizeInverse(qscale));
}

// 16-bit values eight at a time, y held in registers between the sum of squares and the
// modulation: VPT vectors of eight per thread, C = 8 * VPT * blockDim at most.
template <typename T, int VPT, bool Fp8>
__global__ void gatedResidualRmsNormModulateVecKernel(GatedRows in, T* __restrict__ sum, void* __restrict__ out,
    const float* __restrict__ qscale, std::int64_t tokens, std::int64_t channels, float eps)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t b = row / tokens, t = row - b * tokens;
    const auto* xr = reinterpret_cast<const uint4*>(static_cast<const T*>(in.x) + b * in.xs.batch + t * in.xs.token);
    const auto* dr = reinterpret_cast<const uint4*>(static_cast<const T*>(in.delta) + b * in.ds.batch + t * in.ds.token);
    const auto* gr = reinterpret_cast<const uint4*>(static_cast<const T*>(in.gate) + b * in.gs.batch + t * in.gs.token);
    const auto* sr = reinterpret_cast<const uint4*>(static_cast<const T*>(in.scale) + b * in.ss.batch + t * in.ss.token);
    const auto* hr = reinterpret_cast<const uint4*>(static_cast<const T*>(in.shift) + b * in.hs.batch + t * in.hs.token);
    auto* yrow = reinterpret_cast<uint4*>(sum + row * channels);
    void* orow = outputRow<T, Fp8>(out, row, channels);
    const int vectors = static_cast<int>(channels / 8);
    uint4 held[VPT];
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < vectors) {
            const uint4 xraw = xr[i], draw = dr[i], graw = gr[i];
            const T* xv = reinterpret_cast<const T*>(&xraw);
            const T* dv = reinterpret_cast<const T*>(&draw);
            const T* gv = reinterpret_cast<const T*>(&graw);
            T* y = reinterpret_cast<T*>(&held[k]);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                y[e] = static_cast<T>(static_cast<float>(xv[e]) + static_cast<float>(dv[e]) * static_cast<float>(gv[e]));
                const float f = static_cast<float>(y[e]);
                squares += f * f;
            }
            yrow[i] = held[k];
        }
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
    modulateHeldRow<T, VPT, Fp8>(held, rstd, sr, hr, orow, vectors, quantizeInverse(qscale));
}

std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulateLaunch(const at::Tensor& xIn, const at::Tensor& deltaIn,
    const at::Tensor& gateIn, const at::Tensor& scaleIn, const at::Tensor& shiftIn, double eps, const at::Tensor* qscale)
{
    detail::checkGatedResidualRmsNormModulateArgs(xIn, deltaIn, gateIn, scaleIn, shiftIn);
    if (qscale)
        checkQuantizeScale(xIn, *qscale, "gated_residual_rms_norm_modulate_fp8");
    const c10::cuda::CUDAGuard guard(xIn.device());
    auto lastContiguous = [](const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); };
    const auto x = lastContiguous(xIn), delta = lastContiguous(deltaIn), gate = lastContiguous(gateIn);
    const auto scale = lastContiguous(scaleIn), shift = lastContiguous(shiftIn);
    const auto options = x.options().memory_format(at::MemoryFormat::Contiguous);
    auto sum = at::empty(x.sizes(), options);
    auto out = at::empty(x.sizes(), qscale ? options.dtype(at::kFloat8_e4m3fn) : options);
    const auto rows = x.size(0) * x.size(1), channels = x.size(2);
    if (rows == 0 || channels == 0)
        return {sum, out};
    const GatedRows in{x.data_ptr(), delta.data_ptr(), gate.data_ptr(), scale.data_ptr(), shift.data_ptr(), rowStrides(x),
        rowStrides(delta), rowStrides(gate), rowStrides(scale), rowStrides(shift)};
    const float* q = qscale ? qscale->data_ptr<float>() : nullptr;
    const bool vector = x.element_size() == 2 && channels % 8 == 0 && channels <= 8 * 4 * kRowThreads && rowsAligned16(x)
        && rowsAligned16(delta) && rowsAligned16(gate) && rowsAligned16(scale) && rowsAligned16(shift);
    const auto stream = at::cuda::getCurrentCUDAStream();
    auto launch = [&](auto zero, auto fp8) {
        using T = decltype(zero);
        constexpr bool Fp8 = decltype(fp8)::value;
        if constexpr (sizeof(T) == 2) {
            if (vector) {
                int threads = 0;
                withVectorsPerThread(channels / 8, threads, [&](auto vpt) {
                    gatedResidualRmsNormModulateVecKernel<T, decltype(vpt)::value, Fp8>
                        <<<static_cast<unsigned>(rows), threads, 0, stream>>>(
                            in, sum.data_ptr<T>(), out.data_ptr(), q, x.size(1), channels, static_cast<float>(eps));
                });
                return;
            }
        }
        gatedResidualRmsNormModulateKernel<T, Fp8><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
            in, sum.data_ptr<T>(), out.data_ptr(), q, x.size(1), channels, static_cast<float>(eps));
    };
    auto withOutput = [&](auto zero) {
        if (qscale)
            launch(zero, std::true_type{});
        else
            launch(zero, std::false_type{});
    };
    // The dtype check above admits exactly these three.
    if (x.scalar_type() == at::kFloat)
        withOutput(float{});
    else if (x.scalar_type() == at::kBFloat16)
        withOutput(at::BFloat16{});
    else
        withOutput(at::Half{});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {sum, out};
}

std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulateCuda(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    return gatedResidualRmsNormModulateLaunch(x, delta, gate, scale, shift, eps, nullptr);
}

std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8Cuda(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    return gatedResidualRmsNormModulateLaunch(x, delta, gate, scale, shift, eps, &qscale);
}

// ---- gate_heads ---------------------------------------------------------------------------

// One element per thread step (float32, and layouts the vector kernel cannot take): its head's
// gate 2 sigmoid(logit) rounded to T as the unfused sigmoid and product are, then x * gate
// rounded to T (and quantized for an FP8 output).
template <typename T, bool Fp8>
__global__ void gateHeadsKernel(const T* __restrict__ x, const T* __restrict__ logits, void* __restrict__ out,
    const float* __restrict__ qscale, std::int64_t tokens, std::int64_t channels, std::int64_t headDim, RowStrides xs, RowStrides ls,
    std::int64_t n)
{
    const float inverse = quantizeInverse(qscale);
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t row = i / channels, c = i - row * channels;
        const std::int64_t b = row / tokens, t = row - b * tokens;
        const float logit = static_cast<float>(logits[b * ls.batch + t * ls.token + c / headDim]);
        const float gate = roundTo<T>(2.0f * roundTo<T>(1.0f / (1.0f + expf(-logit))));
        const T value = static_cast<T>(static_cast<float>(x[b * xs.batch + t * xs.token + c]) * gate);
        if constexpr (Fp8)
            static_cast<c10::Float8_e4m3fn*>(out)[i] = c10::Float8_e4m3fn(toFp8Range(static_cast<float>(value), inverse));
        else
            static_cast<T*>(out)[i] = value;
    }
}

// Eight channels of one head per thread step (headDim is a multiple of 8 and rows start on 16
// bytes): one 16-byte load, one logit, one 16-byte (or, for FP8, 8-byte) store; the same
// rounding as gateHeadsKernel, and for FP8 the conversion quantize_fp8 makes (packFp8x8).
template <typename T, bool Fp8>
__global__ void gateHeadsVecKernel(const T* __restrict__ x, const T* __restrict__ logits, void* __restrict__ out,
    const float* __restrict__ qscale, std::int64_t tokens, std::int64_t channels, std::int64_t headDim, RowStrides xs, RowStrides ls,
    std::int64_t groups)
{
    const float inverse = quantizeInverse(qscale);
    const std::int64_t perRow = channels / 8;
    for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; g < groups;
         g += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t row = g / perRow, c = (g - row * perRow) * 8;
        const std::int64_t b = row / tokens, t = row - b * tokens;
        const float logit = static_cast<float>(logits[b * ls.batch + t * ls.token + c / headDim]);
        const float gate = roundTo<T>(2.0f * roundTo<T>(1.0f / (1.0f + expf(-logit))));
        const uint4 raw = *reinterpret_cast<const uint4*>(x + b * xs.batch + t * xs.token + c);
        const T* v = reinterpret_cast<const T*>(&raw);
        if constexpr (Fp8) {
            float values[8];
#pragma unroll
            for (int k = 0; k < 8; ++k)
                values[k] = roundTo<T>(static_cast<float>(v[k]) * gate);
            reinterpret_cast<uint2*>(out)[g] = packFp8x8(values, inverse);
        } else {
            uint4 result;
            T* r = reinterpret_cast<T*>(&result);
#pragma unroll
            for (int k = 0; k < 8; ++k)
                r[k] = static_cast<T>(static_cast<float>(v[k]) * gate);
            reinterpret_cast<uint4*>(out)[g] = result;
        }
    }
}

at::Tensor gateHeadsLaunch(const at::Tensor& xIn, const at::Tensor& logitsIn, const at::Tensor* qscale)
{
    detail::checkGateHeadsArgs(xIn, logitsIn);
    if (qscale)
        checkQuantizeScale(xIn, *qscale, "gate_heads_fp8");
    const c10::cuda::CUDAGuard guard(xIn.device());
    auto lastContiguous = [](const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); };
    const auto x = lastContiguous(xIn), logits = lastContiguous(logitsIn);
    auto options = x.options().memory_format(at::MemoryFormat::Contiguous);
    auto out = at::empty(x.sizes(), qscale ? options.dtype(at::kFloat8_e4m3fn) : options);
    const auto n = x.numel();
    if (n == 0)
        return out;
    const float* q = qscale ? qscale->data_ptr<float>() : nullptr;
    const auto stream = at::cuda::getCurrentCUDAStream();
    const auto channels = x.size(2), headDim = channels / logits.size(2);
    const bool vector = x.element_size() == 2 && channels % 8 == 0 && headDim % 8 == 0 && rowsAligned16(x);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "gate_heads_cuda", [&] {
        auto launch = [&](auto fp8) {
            constexpr bool Fp8 = decltype(fp8)::value;
            if constexpr (sizeof(scalar_t) == 2) {
                if (vector) {
                    gateHeadsVecKernel<scalar_t, Fp8><<<streamingGrid(n / 8, 256), 256, 0, stream>>>(x.data_ptr<scalar_t>(),
                        logits.data_ptr<scalar_t>(), out.data_ptr(), q, x.size(1), channels, headDim, rowStrides(x), rowStrides(logits),
                        n / 8);
                    return;
                }
            }
            gateHeadsKernel<scalar_t, Fp8><<<streamingGrid(n, 256), 256, 0, stream>>>(x.data_ptr<scalar_t>(), logits.data_ptr<scalar_t>(),
                out.data_ptr(), q, x.size(1), channels, headDim, rowStrides(x), rowStrides(logits), n);
        };
        if (qscale)
            launch(std::true_type{});
        else
            launch(std::false_type{});
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

at::Tensor gateHeadsCuda(const at::Tensor& x, const at::Tensor& logits)
{
    return gateHeadsLaunch(x, logits, nullptr);
}

at::Tensor gateHeadsFp8Cuda(const at::Tensor& x, const at::Tensor& logits, const at::Tensor& qscale)
{
    return gateHeadsLaunch(x, logits, &qscale);
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

// Vector form: a group is eight consecutive pairs of one head (r % 8 == 0), so a thread loads
// 16 bytes from each half of the head, the matching 32 bytes of cos and sin, and keeps its
// groups in registers (GPT groups per thread) between the sum of squares and the rotation.
template <typename T, int GPT>
__global__ void rmsNormRopeVecKernel(const T* __restrict__ x, const T* __restrict__ weight, const float* __restrict__ cos,
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
    const int groups = static_cast<int>(halfChannels / 8);
    uint4 first[GPT], second[GPT];
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < GPT; ++k) {
        const int g = threadIdx.x + k * blockDim.x;
        if (g < groups) {
            const std::int64_t p = static_cast<std::int64_t>(g) * 8, head = p / r, j = p - head * r;
            const std::int64_t i1 = head * 2 * r + j;
            first[k] = *reinterpret_cast<const uint4*>(xr + i1);
            second[k] = *reinterpret_cast<const uint4*>(xr + i1 + r);
            const T* a = reinterpret_cast<const T*>(&first[k]);
            const T* c = reinterpret_cast<const T*>(&second[k]);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const float fa = static_cast<float>(a[e]), fc = static_cast<float>(c[e]);
                squares += fa * fa + fc * fc;
            }
        }
    }
    const float rstd = rsqrtf(blockSum(squares) / static_cast<float>(channels) + eps);
#pragma unroll
    for (int k = 0; k < GPT; ++k) {
        const int g = threadIdx.x + k * blockDim.x;
        if (g < groups) {
            const std::int64_t p = static_cast<std::int64_t>(g) * 8, head = p / r, j = p - head * r;
            const std::int64_t i1 = head * 2 * r + j;
            const uint4 w1raw = *reinterpret_cast<const uint4*>(weight + i1), w2raw = *reinterpret_cast<const uint4*>(weight + i1 + r);
            const float4 c0 = *reinterpret_cast<const float4*>(cr + p), c1 = *reinterpret_cast<const float4*>(cr + p + 4);
            const float4 s0 = *reinterpret_cast<const float4*>(sr + p), s1 = *reinterpret_cast<const float4*>(sr + p + 4);
            const float cv[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
            const float sv[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
            const T* a = reinterpret_cast<const T*>(&first[k]);
            const T* c = reinterpret_cast<const T*>(&second[k]);
            const T* w1 = reinterpret_cast<const T*>(&w1raw);
            const T* w2 = reinterpret_cast<const T*>(&w2raw);
            uint4 o1raw, o2raw;
            T* o1 = reinterpret_cast<T*>(&o1raw);
            T* o2 = reinterpret_cast<T*>(&o2raw);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const float na = roundTo<T>(static_cast<float>(a[e]) * rstd * static_cast<float>(w1[e]));
                const float nb = roundTo<T>(static_cast<float>(c[e]) * rstd * static_cast<float>(w2[e]));
                o1[e] = static_cast<T>(na * cv[e] - sv[e] * nb);
                o2[e] = static_cast<T>(nb * cv[e] + sv[e] * na);
            }
            *reinterpret_cast<uint4*>(orow + i1) = o1raw;
            *reinterpret_cast<uint4*>(orow + i1 + r) = o2raw;
        }
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
    const auto r = cos.size(4);
    const auto groups = x.size(2) / 16;
    const bool vector = x.element_size() == 2 && weight.scalar_type() == x.scalar_type() && r % 8 == 0 && rowsAligned16(x)
        && reinterpret_cast<std::uintptr_t>(weight.data_ptr()) % 16 == 0 && reinterpret_cast<std::uintptr_t>(cos.data_ptr()) % 16 == 0
        && reinterpret_cast<std::uintptr_t>(sin.data_ptr()) % 16 == 0 && groups <= 4 * kRowThreads;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm_rope_cuda", [&] {
        using T = scalar_t;
        if constexpr (sizeof(T) == 2) {
            if (vector) {
                const int threads = static_cast<int>(std::min<std::int64_t>(kRowThreads, (groups + 31) / 32 * 32));
                const int perThread = static_cast<int>((groups + threads - 1) / threads);
                auto launch = [&](auto gpt) {
                    rmsNormRopeVecKernel<T, decltype(gpt)::value>
                        <<<static_cast<unsigned>(rows), threads, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<T>(),
                            weight.data_ptr<T>(), cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<T>(), x.size(1), x.size(2), r,
                            rowStrides(x), ropeBatchStride, static_cast<float>(eps));
                };
                if (perThread == 1)
                    launch(std::integral_constant<int, 1>{});
                else if (perThread == 2)
                    launch(std::integral_constant<int, 2>{});
                else
                    launch(std::integral_constant<int, 4>{});
                return;
            }
        }
        AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "rms_norm_rope_cuda_weight", [&] {
            rmsNormRopeKernel<T, scalar_t><<<static_cast<unsigned>(rows), kRowThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                x.data_ptr<T>(), weight.data_ptr<scalar_t>(), cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<T>(), x.size(1),
                x.size(2), cos.size(4), rowStrides(x), ropeBatchStride, static_cast<float>(eps));
        });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(vireo, CUDA, m)
{
    m.impl("quantize_fp8", &quantizeFp8Cuda);
    m.impl("gelu_quantize_fp8", &geluQuantizeFp8Cuda);
    m.impl("rms_norm_modulate", &rmsNormModulateCuda);
    m.impl("gated_residual_rms_norm_modulate", &gatedResidualRmsNormModulateCuda);
    m.impl("rms_norm_modulate_fp8", &rmsNormModulateFp8Cuda);
    m.impl("gated_residual_rms_norm_modulate_fp8", &gatedResidualRmsNormModulateFp8Cuda);
    m.impl("gate_heads", &gateHeadsCuda);
    m.impl("gate_heads_fp8", &gateHeadsFp8Cuda);
    m.impl("rms_norm_rope", &rmsNormRopeCuda);
}

}  // namespace vireo::kernels
