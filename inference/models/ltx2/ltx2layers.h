#pragma once

// Pieces shared by the LTX-2 DiT and its text connectors (diffusers 0.42.1:
// LTX2Attention, LTX2AudioVideoRotaryPosEmbed, LTX2RotaryPosEmbed1d, FeedForward,
// LTX2AdaLayerNormSingle).

#include "inference/models/nn/layers.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <string>

namespace vireo::ltx2 {

class WeightTaker;

struct Rope {
    at::Tensor cos, sin;  // split: [B, T, H, 1, r] (reference layout [B, H, T, r] transposed once); interleaved: [B, T, dim]
    bool split = true;
};

// grid: [B, T, P] positions as fractions of the base size (P axes). The angle of frequency
// j on axis p is theta^(j/(n-1)) * pi/2 * (2 * grid - 1), axes interleaved per frequency,
// front-padded with (cos 1, sin 0) to dim/2.
Rope makeRope(const at::Tensor& grid, std::int64_t dim, double theta, bool doublePrecision, bool split, std::int64_t heads);
at::Tensor applyRope(const at::Tensor& x, const Rope& rope);

struct Attention {
    nn::Linear toQ, toK, toV, toOut, toGateLogits;
    at::Tensor normQ, normK;
    std::int64_t heads = 0;
    bool gated = false;
    // Dense projections that read the same input run as one GEMM: q, k, v (and the gate) for
    // self-attention, k and v for cross-attention. Fewer, larger matmuls are measurably faster.
    nn::Linear fused;
    bool fusedSelf = false;
    // Cross-attention: q and the gate logits read the same queries, so they are one GEMM too
    // (the gate alone is a 32-column GEMM that still reads every query).
    nn::Linear fusedQuery;
    // Unmasked attention of at least kFp8AttentionTokens queries runs with FP8 operands
    // (kernels::fp8Attention); set by the transformer for an FP8 checkpoint on a GPU that takes it.
    bool fp8Attention = false;
    static constexpr std::int64_t kFp8AttentionTokens = 1024;

    static Attention load(
        WeightTaker& w, const std::string& prefix, std::int64_t heads, bool bias, bool outBias, bool gated, bool selfAttention);

    // Every projection (absent ones undefined), for code that maps or visits them all.
    std::array<nn::Linear*, 7> linears();
    std::array<const nn::Linear*, 7> linears() const;

    // x: queries [B, Tq, C]; context: keys/values (self-attention when null). mask is additive
    // and broadcastable to [B, H, Tq, Tk]. perturbation: [B, 1, 1], 0 = replace the attention
    // by the value projection (spatio-temporal guidance); allPerturbed skips q/k entirely.
    at::Tensor operator()(const at::Tensor& x, const at::Tensor* context, const std::optional<at::Tensor>& mask, const Rope* queryRope,
        const Rope* keyRope, const at::Tensor* perturbation = nullptr, bool allPerturbed = false) const;
    // The input scale of the fused self-attention projection when it takes its input
    // quantized by a fused norm (nn::Linear::fp8InputScale); empty otherwise.
    std::optional<at::Tensor> fp8InputScale(const at::Tensor& x) const;
    // Self-attention (no mask) of x given as xq = quantizeFp8(x, *fp8InputScale(x)); dtype is x's.
    at::Tensor onQuantized(const at::Tensor& xq, c10::ScalarType dtype, const Rope* rope, const at::Tensor* perturbation = nullptr,
        bool allPerturbed = false) const;

    // A cross-attention operand: a tensor, or (quantizedFrom set) its FP8 quantization by a
    // fused norm with the scale queryInputScale / contextInputScale gave, and its dtype.
    struct Operand {
        at::Tensor tensor;
        std::optional<c10::ScalarType> quantizedFrom;
    };
    // The FP8 input scales of the single GEMM that reads a cross-attention's queries (q and the
    // gate logits), and of the one that reads its context (k and v); empty where there is none.
    std::optional<at::Tensor> queryInputScale(const at::Tensor& x) const;
    std::optional<at::Tensor> contextInputScale(const at::Tensor& context) const;
    // operator() for a cross-attention whose operands may come quantized.
    at::Tensor cross(
        const Operand& x, const Operand& context, const std::optional<at::Tensor>& mask, const Rope* queryRope, const Rope* keyRope) const;
    std::int64_t residentBytes() const;

private:
    struct Projections {
        at::Tensor query, key, value, gateLogits;
    };
    Projections splitSelf(const at::Tensor& y) const;
    Projections crossProjections(const Operand& x, const Operand& context, bool withQuery) const;
    at::Tensor attend(const Projections& p, const std::optional<at::Tensor>& mask, const Rope* queryRope, const Rope* keyRope,
        const at::Tensor* perturbation, bool allPerturbed) const;
};

struct FeedForward {
    nn::Linear proj, out;  // net.0.proj, net.2 with GELU(tanh) between

    static FeedForward load(WeightTaker& w, const std::string& prefix, bool bias);
    at::Tensor operator()(const at::Tensor& x) const;
    // The same for x quantized with proj.fp8InputScale(x) by a fused norm; the result in dtype.
    at::Tensor onQuantized(const at::Tensor& xq, c10::ScalarType dtype) const;
    std::int64_t residentBytes() const { return proj.residentBytes() + out.residentBytes(); }

private:
    at::Tensor fromHidden(const at::Tensor& hidden) const;
};

// AdaLN-single: timestep -> 256 sinusoid features -> MLP = embedded timestep; then
// linear(silu(embedded)) = k rows of modulation.
struct AdaLayerNormSingle {
    nn::Linear linear1, linear2, linear;

    static AdaLayerNormSingle load(WeightTaker& w, const std::string& prefix);
    // timestep: flat [N]; returns {modulation [N, k*dim], embedded [N, dim]}.
    std::pair<at::Tensor, at::Tensor> operator()(const at::Tensor& timestep, c10::ScalarType dtype) const;
    std::int64_t residentBytes() const { return linear1.residentBytes() + linear2.residentBytes() + linear.residentBytes(); }
};

// diffusers' blend_v / blend_h / blend_t between two tiles of a [B, C, F, H, W] decode: the
// first `extent` entries of b along dim fade in over the last ones of a, in place.
void blendOverlap(const at::Tensor& a, const at::Tensor& b, std::int64_t extent, int dim);

}  // namespace vireo::ltx2
