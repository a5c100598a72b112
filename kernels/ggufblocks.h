#pragma once

// Decoders for one ggml quant block, shared by the CPU reference and the CUDA kernel so both
// compute the same float32 expressions in the same order as gguf-py's quants.py (and ggml's
// dequantize_row_*): the results are bit-identical to the Python reference.

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define VIREO_HD __host__ __device__ __forceinline__
#else
#define VIREO_HD inline
#endif

namespace vireo::kernels::gguf {

// ggml type ids (ggml.h).
enum : int {
    kF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ5_0 = 6,
    kQ5_1 = 7,
    kQ8_0 = 8,
    kQ2_K = 10,
    kQ3_K = 11,
    kQ4_K = 12,
    kQ5_K = 13,
    kQ6_K = 14,
    kBF16 = 30
};

struct BlockTraits {
    int elements;
    int bytes;
};

// {0, 0} for a type this module does not dequantize.
constexpr VIREO_HD BlockTraits blockTraits(int type)
{
    switch (type) {
    case kQ4_0: return {32, 18};
    case kQ4_1: return {32, 20};
    case kQ5_0: return {32, 22};
    case kQ5_1: return {32, 24};
    case kQ8_0: return {32, 34};
    case kQ2_K: return {256, 84};
    case kQ3_K: return {256, 110};
    case kQ4_K: return {256, 144};
    case kQ5_K: return {256, 176};
    case kQ6_K: return {256, 210};
    case kF32: return {1, 4};
    case kF16: return {1, 2};
    case kBF16: return {1, 2};
    default: return {0, 0};
    }
}

VIREO_HD float bitsToFloat(std::uint32_t bits)
{
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// IEEE binary16 -> binary32, exact for every input (subnormals, infinities, NaN payloads).
VIREO_HD float halfToFloat(std::uint16_t h)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exponent = (h >> 10) & 0x1Fu;
    std::uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0x1F)
        return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0)
            return bitsToFloat(sign);
        // Renormalize: shift the mantissa up until its leading one reaches bit 10.
        exponent = 113;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            --exponent;
        }
        mantissa &= 0x3FFu;
        return bitsToFloat(sign | (exponent << 23) | (mantissa << 13));
    }
    return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

VIREO_HD float f16At(const std::uint8_t* p)
{
#if defined(__CUDA_ARCH__)
    // The hardware conversion is exact for every finite value and infinity, like halfToFloat
    // (NaN stays NaN; its payload may not).
    return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
#else
    return halfToFloat(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
#endif
}

VIREO_HD std::uint32_t u32At(const std::uint8_t* p)
{
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) | (static_cast<std::uint32_t>(p[2]) << 16)
        | (static_cast<std::uint32_t>(p[3]) << 24);
}

// 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (ggml get_scale_min_k4).
VIREO_HD void scaleMinK4(int j, const std::uint8_t* q, int& scale, int& min)
{
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Writes blockTraits(type).elements floats of one block.
VIREO_HD void decodeBlock(int type, const std::uint8_t* b, float* y)
{
    switch (type) {
    case kF32: y[0] = bitsToFloat(u32At(b)); return;
    case kF16: y[0] = f16At(b); return;
    case kBF16: y[0] = bitsToFloat(static_cast<std::uint32_t>(b[0] | (b[1] << 8)) << 16); return;
    case kQ8_0: {
        const float d = f16At(b);
        for (int i = 0; i < 32; ++i)
            y[i] = static_cast<float>(static_cast<std::int8_t>(b[2 + i])) * d;
        return;
    }
    case kQ4_0: {
        const float d = f16At(b);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * static_cast<float>((b[2 + j] & 0xF) - 8);
            y[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
        }
        return;
    }
    case kQ4_1: {
        const float d = f16At(b), m = f16At(b + 2);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * static_cast<float>(b[4 + j] & 0xF) + m;
            y[j + 16] = d * static_cast<float>(b[4 + j] >> 4) + m;
        }
        return;
    }
    case kQ5_0: {
        const float d = f16At(b);
        const std::uint32_t qh = u32At(b + 2);
        for (int j = 0; j < 16; ++j) {
            const int lo = (b[6 + j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
            const int hi = (b[6 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
            y[j] = d * static_cast<float>(lo - 16);
            y[j + 16] = d * static_cast<float>(hi - 16);
        }
        return;
    }
    case kQ5_1: {
        const float d = f16At(b), m = f16At(b + 2);
        const std::uint32_t qh = u32At(b + 4);
        for (int j = 0; j < 16; ++j) {
            const int lo = (b[8 + j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
            const int hi = (b[8 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
            y[j] = d * static_cast<float>(lo) + m;
            y[j + 16] = d * static_cast<float>(hi) + m;
        }
        return;
    }
    case kQ2_K: {
        // Written as fixed 16-element runs so the compiler vectorizes the inner loops.
        const std::uint8_t* scales = b;
        const std::uint8_t* qs = b + 16;
        const float d = f16At(b + 80), dmin = f16At(b + 82);
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int half = 0; half < 2; ++half) {
                    const int s = scales[h * 8 + j * 2 + half];
                    const float dl = d * static_cast<float>(s & 0xF);
                    const float ml = dmin * static_cast<float>(s >> 4);
                    const std::uint8_t* q = qs + h * 32 + half * 16;
                    float* out = y + h * 128 + j * 32 + half * 16;
                    for (int l = 0; l < 16; ++l)
                        out[l] = dl * static_cast<float>((q[l] >> (2 * j)) & 3) - ml;
                }
        return;
    }
    case kQ3_K: {
        const std::uint8_t* hmask = b;
        const std::uint8_t* qs = b + 32;
        const std::uint8_t* sc = b + 96;
        const float d = f16At(b + 108);
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int half = 0; half < 2; ++half) {
                    const int is = h * 8 + j * 2 + half;
                    const int low4 = is < 8 ? (sc[is] & 0xF) : (sc[is - 8] >> 4);
                    const int high2 = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
                    const float dl = d * static_cast<float>((low4 | (high2 << 4)) - 32);
                    const std::uint8_t* q = qs + h * 32 + half * 16;
                    const std::uint8_t* m = hmask + half * 16;
                    const int bit = 4 * h + j;
                    float* out = y + h * 128 + j * 32 + half * 16;
                    for (int l = 0; l < 16; ++l) {
                        const int v = ((q[l] >> (2 * j)) & 3) - (((m[l] >> bit) & 1) ? 0 : 4);
                        out[l] = dl * static_cast<float>(v);
                    }
                }
        return;
    }
    case kQ4_K:
    case kQ5_K: {
        const float d = f16At(b), dmin = f16At(b + 2);
        const std::uint8_t* sc = b + 4;
        const std::uint8_t* qh = b + 16;
        const std::uint8_t* qs = type == kQ4_K ? b + 16 : b + 48;
        for (int sub = 0; sub < 8; ++sub) {
            int s, m;
            scaleMinK4(sub, sc, s, m);
            const float dl = d * static_cast<float>(s);
            const float ml = dmin * static_cast<float>(m);
            const int c = sub / 2;
            for (int l = 0; l < 32; ++l) {
                const std::uint8_t byte = qs[c * 32 + l];
                int q = (sub & 1) ? (byte >> 4) : (byte & 0xF);
                if (type == kQ5_K)
                    q |= ((qh[l] >> sub) & 1) << 4;
                y[sub * 32 + l] = dl * static_cast<float>(q) - ml;
            }
        }
        return;
    }
    case kQ6_K: {
        const std::uint8_t* ql = b;
        const std::uint8_t* qh = b + 128;
        const std::int8_t* scales = reinterpret_cast<const std::int8_t*>(b + 192);
        const float d = f16At(b + 208);
        for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 4; ++k)
                for (int half = 0; half < 2; ++half) {
                    const float dl = d * static_cast<float>(scales[h * 8 + k * 2 + half]);
                    const std::uint8_t* lo = ql + h * 64 + ((k & 1) ? 32 : 0) + half * 16;
                    const std::uint8_t* hi = qh + h * 32 + half * 16;
                    const int lowShift = k >= 2 ? 4 : 0;
                    float* out = y + h * 128 + k * 32 + half * 16;
                    for (int l = 0; l < 16; ++l) {
                        const int q = ((lo[l] >> lowShift) & 0xF) | (((hi[l] >> (2 * k)) & 3) << 4);
                        out[l] = dl * static_cast<float>(q - 32);
                    }
                }
        return;
    }
    default: return;
    }
}

// Element i of one block: the same float32 expression decodeBlock computes for y[i], so a
// kernel can give each thread a few consecutive outputs instead of a whole block (a whole
// 256-element block per thread lives in local memory and caps a GPU at a few percent of its
// bandwidth). Checked against decodeBlock for every type and index by test_quant.
VIREO_HD float decodeElement(int type, const std::uint8_t* b, int i)
{
    switch (type) {
    case kF32: return bitsToFloat(u32At(b));
    case kF16: return f16At(b);
    case kBF16: return bitsToFloat(static_cast<std::uint32_t>(b[0] | (b[1] << 8)) << 16);
    case kQ8_0: return static_cast<float>(static_cast<std::int8_t>(b[2 + i])) * f16At(b);
    case kQ4_0: {
        const int j = i & 15;
        const int q = i < 16 ? (b[2 + j] & 0xF) : (b[2 + j] >> 4);
        return f16At(b) * static_cast<float>(q - 8);
    }
    case kQ4_1: {
        const int j = i & 15;
        const int q = i < 16 ? (b[4 + j] & 0xF) : (b[4 + j] >> 4);
        return f16At(b) * static_cast<float>(q) + f16At(b + 2);
    }
    case kQ5_0: {
        const int j = i & 15;
        const std::uint32_t qh = u32At(b + 2);
        const int q = i < 16 ? ((b[6 + j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4))
                             : ((b[6 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4));
        return f16At(b) * static_cast<float>(q - 16);
    }
    case kQ5_1: {
        const int j = i & 15;
        const std::uint32_t qh = u32At(b + 4);
        const int q = i < 16 ? ((b[8 + j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4))
                             : ((b[8 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4));
        return f16At(b) * static_cast<float>(q) + f16At(b + 2);
    }
    case kQ2_K: {
        const int h = i >> 7, j = (i >> 5) & 3, half = (i >> 4) & 1, l = i & 15;
        const int s = b[h * 8 + j * 2 + half];
        const float dl = f16At(b + 80) * static_cast<float>(s & 0xF);
        const float ml = f16At(b + 82) * static_cast<float>(s >> 4);
        const int q = (b[16 + h * 32 + half * 16 + l] >> (2 * j)) & 3;
        return dl * static_cast<float>(q) - ml;
    }
    case kQ3_K: {
        const int h = i >> 7, j = (i >> 5) & 3, half = (i >> 4) & 1, l = i & 15;
        const std::uint8_t* sc = b + 96;
        const int is = h * 8 + j * 2 + half;
        const int low4 = is < 8 ? (sc[is] & 0xF) : (sc[is - 8] >> 4);
        const int high2 = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
        const float dl = f16At(b + 108) * static_cast<float>((low4 | (high2 << 4)) - 32);
        const int q = b[32 + h * 32 + half * 16 + l];
        const int m = b[half * 16 + l];
        const int v = ((q >> (2 * j)) & 3) - (((m >> (4 * h + j)) & 1) ? 0 : 4);
        return dl * static_cast<float>(v);
    }
    case kQ4_K:
    case kQ5_K: {
        const int sub = i >> 5, l = i & 31;
        int s, m;
        scaleMinK4(sub, b + 4, s, m);
        const float dl = f16At(b) * static_cast<float>(s);
        const float ml = f16At(b + 2) * static_cast<float>(m);
        const std::uint8_t byte = (type == kQ4_K ? b + 16 : b + 48)[(sub / 2) * 32 + l];
        int q = (sub & 1) ? (byte >> 4) : (byte & 0xF);
        if (type == kQ5_K)
            q |= ((b[16 + l] >> sub) & 1) << 4;
        return dl * static_cast<float>(q) - ml;
    }
    case kQ6_K: {
        const int h = i >> 7, k = (i >> 5) & 3, half = (i >> 4) & 1, l = i & 15;
        const float dl = f16At(b + 208) * static_cast<float>(static_cast<std::int8_t>(b[192 + h * 8 + k * 2 + half]));
        const int lo = b[h * 64 + ((k & 1) ? 32 : 0) + half * 16 + l];
        const int hi = b[128 + h * 32 + half * 16 + l];
        const int q = ((lo >> (k >= 2 ? 4 : 0)) & 0xF) | (((hi >> (2 * k)) & 3) << 4);
        return dl * static_cast<float>(q - 32);
    }
    default: return 0.0f;
    }
}

// Eight consecutive elements y[o..o+7] of one block (o a multiple of 8, inside the block), with
// the block's scales decoded once: what each GPU thread computes. The same float32 expressions
// as decodeBlock; test_quant checks every type and offset against it.
VIREO_HD void decodeRun8(int type, const std::uint8_t* b, int o, float* y)
{
    switch (type) {
    case kQ8_0: {
        const float d = f16At(b);
        for (int k = 0; k < 8; ++k)
            y[k] = static_cast<float>(static_cast<std::int8_t>(b[2 + o + k])) * d;
        return;
    }
    case kQ4_0:
    case kQ4_1: {
        const bool one = type == kQ4_1;
        const float d = f16At(b), m = one ? f16At(b + 2) : 0.0f;
        const std::uint8_t* qs = b + (one ? 4 : 2) + (o & 15);
        const bool high = o >= 16;
        for (int k = 0; k < 8; ++k) {
            const int q = high ? (qs[k] >> 4) : (qs[k] & 0xF);
            y[k] = one ? d * static_cast<float>(q) + m : d * static_cast<float>(q - 8);
        }
        return;
    }
    case kQ5_0:
    case kQ5_1: {
        const bool one = type == kQ5_1;
        const float d = f16At(b), m = one ? f16At(b + 2) : 0.0f;
        const std::uint32_t qh = u32At(b + (one ? 4 : 2));
        const std::uint8_t* qs = b + (one ? 8 : 6);
        const int j0 = o & 15;
        const bool high = o >= 16;
        for (int k = 0; k < 8; ++k) {
            const int j = j0 + k;
            const int q = high ? ((qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4))
                               : ((qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4));
            y[k] = one ? d * static_cast<float>(q) + m : d * static_cast<float>(q - 16);
        }
        return;
    }
    case kQ2_K: {
        const int h = o >> 7, j = (o >> 5) & 3, half = (o >> 4) & 1, l0 = o & 15;
        const int s = b[h * 8 + j * 2 + half];
        const float dl = f16At(b + 80) * static_cast<float>(s & 0xF);
        const float ml = f16At(b + 82) * static_cast<float>(s >> 4);
        const std::uint8_t* q = b + 16 + h * 32 + half * 16 + l0;
        for (int k = 0; k < 8; ++k)
            y[k] = dl * static_cast<float>((q[k] >> (2 * j)) & 3) - ml;
        return;
    }
    case kQ3_K: {
        const int h = o >> 7, j = (o >> 5) & 3, half = (o >> 4) & 1, l0 = o & 15;
        const std::uint8_t* sc = b + 96;
        const int is = h * 8 + j * 2 + half;
        const int low4 = is < 8 ? (sc[is] & 0xF) : (sc[is - 8] >> 4);
        const int high2 = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
        const float dl = f16At(b + 108) * static_cast<float>((low4 | (high2 << 4)) - 32);
        const std::uint8_t* q = b + 32 + h * 32 + half * 16 + l0;
        const std::uint8_t* m = b + half * 16 + l0;
        const int bit = 4 * h + j;
        for (int k = 0; k < 8; ++k) {
            const int v = ((q[k] >> (2 * j)) & 3) - (((m[k] >> bit) & 1) ? 0 : 4);
            y[k] = dl * static_cast<float>(v);
        }
        return;
    }
    case kQ4_K:
    case kQ5_K: {
        const int sub = o >> 5, l0 = o & 31;
        int s, m;
        scaleMinK4(sub, b + 4, s, m);
        const float dl = f16At(b) * static_cast<float>(s);
        const float ml = f16At(b + 2) * static_cast<float>(m);
        const std::uint8_t* qs = (type == kQ4_K ? b + 16 : b + 48) + (sub / 2) * 32 + l0;
        const std::uint8_t* qh = b + 16 + l0;
        for (int k = 0; k < 8; ++k) {
            int q = (sub & 1) ? (qs[k] >> 4) : (qs[k] & 0xF);
            if (type == kQ5_K)
                q |= ((qh[k] >> sub) & 1) << 4;
            y[k] = dl * static_cast<float>(q) - ml;
        }
        return;
    }
    case kQ6_K: {
        const int h = o >> 7, kk = (o >> 5) & 3, half = (o >> 4) & 1, l0 = o & 15;
        const float dl = f16At(b + 208) * static_cast<float>(static_cast<std::int8_t>(b[192 + h * 8 + kk * 2 + half]));
        const std::uint8_t* lo = b + h * 64 + ((kk & 1) ? 32 : 0) + half * 16 + l0;
        const std::uint8_t* hi = b + 128 + h * 32 + half * 16 + l0;
        const int lowShift = kk >= 2 ? 4 : 0;
        for (int k = 0; k < 8; ++k) {
            const int q = ((lo[k] >> lowShift) & 0xF) | (((hi[k] >> (2 * kk)) & 3) << 4);
            y[k] = dl * static_cast<float>(q - 32);
        }
        return;
    }
    default:
        for (int k = 0; k < 8; ++k)
            y[k] = decodeElement(type, b, o + k);
        return;
    }
}

}  // namespace vireo::kernels::gguf
