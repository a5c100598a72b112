#include "inference/models/ltx2/ltx2layers.h"

#include "inference/util/pathstats.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/util/log.h"
#include "kernels/fp8attention.h"
#include "kernels/fusedops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <numbers>
#include <set>
#include <string>

namespace vireo::ltx2 {

Rope makeRope(const at::Tensor& grid, std::int64_t dim, double theta, bool doublePrecision, bool split, std::int64_t heads)
{
    TORCH_CHECK(grid.dim() == 3, "RoPE grid must be [B, T, axes], got ", grid.dim(), "-D");
    const auto axes = grid.size(2);
    const auto n = dim / (2 * axes);
    const auto options = grid.options().dtype(doublePrecision ? at::kDouble : at::kFloat);
    // Same op order as the reference: theta ** linspace in (optionally) double, times pi, / 2,
    // then float32.
    const auto powIndices = at::pow(theta, at::linspace(0.0, 1.0, n, options));
    const auto base = (powIndices * std::numbers::pi / 2.0).to(at::kFloat);
    auto freqs = (grid.unsqueeze(-1) * 2 - 1) * base;  // [B, T, axes, n]
    freqs = freqs.transpose(-1, -2).flatten(2);  // [B, T, n*axes], axes fastest
    Rope rope;
    rope.split = split;
    if (!split) {
        auto c = freqs.cos().repeat_interleave(2, -1);
        auto s = freqs.sin().repeat_interleave(2, -1);
        const auto pad = dim % (2 * axes);
        if (pad != 0) {
            c = at::cat({at::ones_like(c.narrow(-1, 0, pad)), c}, -1);
            s = at::cat({at::zeros_like(s.narrow(-1, 0, pad)), s}, -1);
        }
        rope.cos = c;
        rope.sin = s;
        return rope;
    }
    auto c = freqs.cos();
    auto s = freqs.sin();
    const auto pad = dim / 2 - freqs.size(-1);
    if (pad != 0) {
        c = at::cat({at::ones_like(c.narrow(-1, 0, pad)), c}, -1);
        s = at::cat({at::zeros_like(s.narrow(-1, 0, pad)), s}, -1);
    }
    const auto b = c.size(0), t = c.size(1);
    TORCH_CHECK(c.size(-1) % heads == 0, "RoPE of dim ", dim, " does not split into ", heads, " heads");
    rope.cos = c.reshape({b, t, heads, 1, -1}).contiguous();
    rope.sin = s.reshape({b, t, heads, 1, -1}).contiguous();
    return rope;
}

at::Tensor applyRope(const at::Tensor& x, const Rope& rope)
{
    if (!rope.split) {
        const auto pairs = x.unflatten(2, {-1, 2});
        const auto real = pairs.select(-1, 0), imag = pairs.select(-1, 1);
        const auto rotated = at::stack({-imag, real}, -1).flatten(2);
        return (x.to(at::kFloat) * rope.cos + rotated.to(at::kFloat) * rope.sin).to(x.scalar_type());
    }
    // x [B, T, H*2r] viewed as [B, T, H, 2, r]: out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin.
    const auto t = rope.cos.size(1), h = rope.cos.size(2), r = rope.cos.size(4);
    TORCH_CHECK(x.size(-1) == 2 * h * r, "RoPE of ", 2 * h * r, " features applied to ", x.size(-1));
    const auto splitX = x.reshape({x.size(0), t, h, 2, r}).to(at::kFloat);
    const auto first = splitX.narrow(-2, 0, 1), second = splitX.narrow(-2, 1, 1);
    auto out = splitX * rope.cos;
    out.narrow(-2, 0, 1).addcmul_(rope.sin, second, -1);
    out.narrow(-2, 1, 1).addcmul_(rope.sin, first);
    return out.reshape({x.size(0), t, -1}).to(x.scalar_type());
}

namespace {

// Said once per shape cuDNN refuses (a resolution it has no FP8 engine for): that attention
// then runs in the compute dtype, and the log says so.
void warnFp8AttentionRefused(const std::string& refusal, c10::ScalarType dtype)
{
    static std::mutex mutex;
    static std::set<std::string> said;
    std::lock_guard lock(mutex);
    if (said.insert(refusal).second)
        log::warn("LTX-2 attention: " + refusal + "; that attention runs in " + std::string(c10::toString(dtype)) + " instead");
}

// The q/k RMSNorm followed by the rotary embedding; the split layout (every real LTX-2
// checkpoint) runs as one fused op.
at::Tensor normAndRope(const at::Tensor& x, const at::Tensor& weight, const Rope* rope)
{
    if (rope && rope->split && x.dim() == 3 && weight.defined())
        return kernels::rmsNormRope(x, weight, rope->cos, rope->sin, 1e-6);
    auto normed = nn::rmsNormWeighted(x, weight, 1e-6);
    return rope ? applyRope(normed, *rope) : normed;
}

}  // namespace

namespace {

// One Linear computing the rows of several that read the same input: dense weights of one
// dtype, or scaled FP8 with per-tensor or per-row scales (as one GEMM with row-wise scales).
// Empty when any part lacks a bias or the weights do not fuse; the parts are left as they are.
std::optional<nn::Linear> fuseProjections(const std::string& name, const std::vector<nn::Linear*>& parts)
{
    std::vector<const quant::QuantizedWeight*> weights;
    std::vector<at::Tensor> biases;
    for (const auto* l : parts) {
        if (!l->defined() || !l->bias)
            return std::nullopt;
        weights.push_back(&l->weight);
        biases.push_back(*l->bias);
    }
    auto weight = quant::QuantizedWeight::fuseRows(weights);
    if (!weight)
        return std::nullopt;
    nn::Linear fused;
    fused.name = name;
    fused.weight = std::move(*weight);
    fused.bias = at::cat(biases, 0);
    // The projections it computes, so a LoRA aimed at one lands on its rows.
    std::int64_t offset = 0;
    for (const auto* l : parts) {
        fused.parts.push_back({l->name, offset, l->outFeatures()});
        offset += l->outFeatures();
    }
    return fused;
}

// The separate copy is no longer needed; its shape stays known through the fused one.
void dropWeights(nn::Linear& l)
{
    l = nn::Linear{l.name, quant::QuantizedWeight(), std::nullopt, {}, nullptr};
}

}  // namespace

Attention Attention::load(
    WeightTaker& w, const std::string& prefix, std::int64_t heads, bool bias, bool outBias, bool gated, bool selfAttention)
{
    Attention a;
    a.heads = heads;
    a.gated = gated;
    a.toQ = w.linear(prefix + ".to_q", bias);
    a.toK = w.linear(prefix + ".to_k", bias);
    a.toV = w.linear(prefix + ".to_v", bias);
    a.toOut = w.linear(prefix + ".to_out.0", outBias);
    a.normQ = w.tensor(prefix + ".norm_q.weight");
    a.normK = w.tensor(prefix + ".norm_k.weight");
    if (gated)
        a.toGateLogits = w.linear(prefix + ".to_gate_logits", true);
    if (selfAttention) {
        std::vector<nn::Linear*> parts{&a.toQ, &a.toK, &a.toV};
        if (gated)
            parts.push_back(&a.toGateLogits);
        if (auto fused = fuseProjections(prefix + ".to_qkv", parts)) {
            a.fused = std::move(*fused);
            a.fusedSelf = true;
            for (auto* l : parts)
                dropWeights(*l);
        }
        return a;
    }
    if (auto fused = fuseProjections(prefix + ".to_kv", {&a.toK, &a.toV})) {
        a.fused = std::move(*fused);
        dropWeights(a.toK);
        dropWeights(a.toV);
    }
    if (gated) {
        if (auto fused = fuseProjections(prefix + ".to_q_gate", {&a.toQ, &a.toGateLogits})) {
            a.fusedQuery = std::move(*fused);
            dropWeights(a.toQ);
            dropWeights(a.toGateLogits);
        }
    }
    return a;
}

std::array<nn::Linear*, 7> Attention::linears()
{
    return {&toQ, &toK, &toV, &toOut, &toGateLogits, &fused, &fusedQuery};
}
std::array<const nn::Linear*, 7> Attention::linears() const
{
    return {&toQ, &toK, &toV, &toOut, &toGateLogits, &fused, &fusedQuery};
}

at::Tensor Attention::operator()(const at::Tensor& x, const at::Tensor* context, const std::optional<at::Tensor>& mask,
    const Rope* queryRope, const Rope* keyRope, const at::Tensor* perturbation, bool allPerturbed) const
{
    Projections p;
    if (fused.defined() && fusedSelf && !context) {
        p = splitSelf(fused(x));
    } else {
        TORCH_CHECK(!fusedSelf, "fused self-attention projections used as cross-attention");
        p = crossProjections({x, std::nullopt}, {context ? *context : x, std::nullopt}, !allPerturbed);
    }
    return attend(p, mask, queryRope, keyRope, perturbation, allPerturbed);
}

std::optional<at::Tensor> Attention::fp8InputScale(const at::Tensor& x) const
{
    if (!fused.defined() || !fusedSelf)
        return std::nullopt;
    return fused.fp8InputScale(x);
}

at::Tensor Attention::onQuantized(
    const at::Tensor& xq, c10::ScalarType dtype, const Rope* rope, const at::Tensor* perturbation, bool allPerturbed) const
{
    TORCH_CHECK(fused.defined() && fusedSelf, "a quantized input reaches only fused self-attention projections");
    return attend(splitSelf(fused.onQuantized(xq, dtype)), std::nullopt, rope, nullptr, perturbation, allPerturbed);
}

std::optional<at::Tensor> Attention::queryInputScale(const at::Tensor& x) const
{
    if (fusedSelf)
        return std::nullopt;
    if (fusedQuery.defined())
        return fusedQuery.fp8InputScale(x);
    // Without the fusion a gated query feeds two GEMMs, which one quantized input cannot serve.
    return gated ? std::nullopt : toQ.fp8InputScale(x);
}

std::optional<at::Tensor> Attention::contextInputScale(const at::Tensor& context) const
{
    if (fusedSelf || !fused.defined())
        return std::nullopt;
    return fused.fp8InputScale(context);
}

at::Tensor Attention::cross(
    const Operand& x, const Operand& context, const std::optional<at::Tensor>& mask, const Rope* queryRope, const Rope* keyRope) const
{
    TORCH_CHECK(!fusedSelf, "fused self-attention projections used as cross-attention");
    return attend(crossProjections(x, context, true), mask, queryRope, keyRope, nullptr, false);
}

Attention::Projections Attention::crossProjections(const Operand& x, const Operand& context, bool withQuery) const
{
    auto apply = [](const nn::Linear& l, const Operand& in) {
        return in.quantizedFrom ? l.onQuantized(in.tensor, *in.quantizedFrom) : l(in.tensor);
    };
    Projections p;
    if (fused.defined()) {
        const auto y = apply(fused, context);
        const auto kvInner = normK.size(0);
        p.key = y.narrow(-1, 0, kvInner);
        p.value = y.narrow(-1, kvInner, kvInner);
    } else {
        TORCH_CHECK(!context.quantizedFrom, "a quantized context reaches only fused key/value projections");
        p.value = toV(context.tensor);
        if (withQuery)
            p.key = toK(context.tensor);
    }
    if (fusedQuery.defined()) {
        // Rows: q, then one gate logit per head. allPerturbed needs only the gate.
        const auto y = apply(fusedQuery, x);
        const auto inner = normQ.size(0);
        if (withQuery)
            p.query = y.narrow(-1, 0, inner);
        p.gateLogits = y.narrow(-1, inner, heads);
    } else {
        TORCH_CHECK(!x.quantizedFrom || !gated, "a quantized query reaches only one GEMM");
        if (withQuery)
            p.query = apply(toQ, x);
        if (gated)
            p.gateLogits = toGateLogits(x.tensor);
    }
    return p;
}

Attention::Projections Attention::splitSelf(const at::Tensor& y) const
{
    Projections p;
    const auto inner = normQ.size(0), kvInner = normK.size(0);
    p.query = y.narrow(-1, 0, inner);
    p.key = y.narrow(-1, inner, kvInner);
    p.value = y.narrow(-1, inner + kvInner, kvInner);
    if (gated)
        p.gateLogits = y.narrow(-1, inner + 2 * kvInner, heads);
    return p;
}

at::Tensor Attention::attend(const Projections& p, const std::optional<at::Tensor>& mask, const Rope* queryRope, const Rope* keyRope,
    const at::Tensor* perturbation, bool allPerturbed) const
{
    at::Tensor out;
    if (allPerturbed) {
        out = p.value;
    } else {
        auto q = normAndRope(p.query, normQ, queryRope);
        auto k = normAndRope(p.key, normK, queryRope ? (keyRope ? keyRope : queryRope) : nullptr);
        const auto dtype = q.scalar_type();
        if (fp8Attention && !mask && q.is_cuda() && q.size(1) >= kFp8AttentionTokens) {
            std::string refusal;
            out = kernels::fp8Attention(q, k, p.value, heads, &refusal);
            if (out.defined()) {
                paths::record("attention", "FP8 flash attention (cuDNN)");
            } else {
                warnFp8AttentionRefused(refusal, dtype);
                paths::recordFallback("attention",
                    std::string(dtype == at::kBFloat16 ? "bf16"
                            : dtype == at::kHalf       ? "f16"
                                                       : "f32")
                        + " SDPA",
                    refusal);
            }
        }
        if (!out.defined()) {
            auto qh = q.unflatten(2, {heads, -1}).transpose(1, 2);
            auto kh = k.unflatten(2, {heads, -1}).transpose(1, 2);
            auto vh = p.value.unflatten(2, {heads, -1}).transpose(1, 2);
            out = nn::attention(qh, kh, vh, mask).transpose(1, 2).flatten(2, 3).to(dtype);
        }
        if (perturbation)
            out = at::lerp(p.value, out, *perturbation);
    }
    if (p.gateLogits.defined()) {
        // One pass on CUDA, straight into the output GEMM's FP8 input where it takes one.
        if (const auto scale = toOut.fp8InputScale(out))
            return toOut.onQuantized(kernels::gateHeadsFp8(out, p.gateLogits, *scale), out.scalar_type());
        out = kernels::gateHeads(out, p.gateLogits);
    }
    return toOut(out);
}

std::int64_t Attention::residentBytes() const
{
    std::int64_t bytes = 0;
    for (const auto* l : linears())
        bytes += l->residentBytes();
    for (const auto* t : {&normQ, &normK})
        if (t->defined())
            bytes += t->numel() * t->element_size();
    return bytes;
}

FeedForward FeedForward::load(WeightTaker& w, const std::string& prefix, bool bias)
{
    return FeedForward{w.linear(prefix + ".net.0.proj", bias), w.linear(prefix + ".net.2", bias)};
}

at::Tensor FeedForward::operator()(const at::Tensor& x) const
{
    // GELU in the projection's epilogue unless the hidden activation goes on quantized.
    if (out.fp8InputScale(x))
        return fromHidden(proj(x));
    return out(proj.withGeluTanh(x));
}

at::Tensor FeedForward::onQuantized(const at::Tensor& xq, c10::ScalarType dtype) const
{
    return fromHidden(proj.onQuantized(xq, dtype));
}

at::Tensor FeedForward::fromHidden(const at::Tensor& hidden) const
{
    // With an FP8 output projection that has a calibrated input scale, GELU and the
    // quantization of the hidden activation (the layer's widest tensor) are one pass.
    if (const auto scale = out.fp8InputScale(hidden))
        return out.onQuantized(kernels::geluQuantizeFp8(hidden, *scale), hidden.scalar_type());
    return out(nn::geluTanh(hidden));
}

AdaLayerNormSingle AdaLayerNormSingle::load(WeightTaker& w, const std::string& prefix)
{
    return AdaLayerNormSingle{w.linear(prefix + ".emb.timestep_embedder.linear_1", true),
        w.linear(prefix + ".emb.timestep_embedder.linear_2", true), w.linear(prefix + ".linear", true)};
}

std::pair<at::Tensor, at::Tensor> AdaLayerNormSingle::operator()(const at::Tensor& timestep, c10::ScalarType dtype) const
{
    const auto features = nn::timestepFeatures(timestep, 256).to(dtype);
    auto embedded = linear2(at::silu(linear1(features)));
    auto modulation = linear(at::silu(embedded));
    return {modulation, embedded};
}

void blendOverlap(const at::Tensor& a, const at::Tensor& b, std::int64_t extent, int dim)
{
    const auto e = std::min({a.size(dim), b.size(dim), extent});
    if (e <= 0)
        return;
    std::vector<std::int64_t> view(static_cast<std::size_t>(b.dim()), 1);
    view[static_cast<std::size_t>(dim)] = e;
    const auto w = (at::arange(e, b.options().dtype(at::kFloat)) / static_cast<double>(e)).view(view).to(b.scalar_type());
    auto head = b.narrow(dim, 0, e);
    head.copy_(a.narrow(dim, a.size(dim) - e, e) * (1 - w) + head * w);
}

}  // namespace vireo::ltx2
