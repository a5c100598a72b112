#include "inference/models/ltx2/ltx2layers.h"

#include "inference/models/ltx2/ltx2weights.h"

#include <ATen/ATen.h>

#include <numbers>

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
    auto freqs = (grid.unsqueeze(-1) * 2 - 1) * base;       // [B, T, axes, n]
    freqs = freqs.transpose(-1, -2).flatten(2);              // [B, T, n*axes], axes fastest
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
    rope.cos = c.reshape({b, t, heads, -1}).transpose(1, 2);
    rope.sin = s.reshape({b, t, heads, -1}).transpose(1, 2);
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
    // x [B, T, H*2r] viewed as [B, T, H, 2, r]; cos/sin [B, H, T, r] -> [B, T, H, 1, r].
    const auto b = rope.cos.size(0), h = rope.cos.size(1), t = rope.cos.size(2), r = rope.cos.size(3);
    TORCH_CHECK(x.size(-1) == 2 * h * r, "RoPE of ", 2 * h * r, " features applied to ", x.size(-1));
    const auto splitX = x.reshape({x.size(0), t, h, 2, r}).to(at::kFloat);
    const auto c = rope.cos.transpose(1, 2).unsqueeze(-2);
    const auto s = rope.sin.transpose(1, 2).unsqueeze(-2);
    const auto first = splitX.narrow(-2, 0, 1), second = splitX.narrow(-2, 1, 1);
    auto out = splitX * c;
    out.narrow(-2, 0, 1).addcmul_(-s, second);
    out.narrow(-2, 1, 1).addcmul_(s, first);
    (void)b;
    return out.reshape({x.size(0), t, -1}).to(x.scalar_type());
}

Attention Attention::load(WeightTaker& w, const std::string& prefix, std::int64_t heads, bool bias, bool outBias, bool gated)
{
    Attention a;
    a.heads = heads;
    a.toQ = w.linear(prefix + ".to_q", bias);
    a.toK = w.linear(prefix + ".to_k", bias);
    a.toV = w.linear(prefix + ".to_v", bias);
    a.toOut = w.linear(prefix + ".to_out.0", outBias);
    a.normQ = w.tensor(prefix + ".norm_q.weight");
    a.normK = w.tensor(prefix + ".norm_k.weight");
    if (gated)
        a.toGateLogits = w.linear(prefix + ".to_gate_logits", true);
    return a;
}

at::Tensor Attention::operator()(const at::Tensor& x, const at::Tensor* context, const std::optional<at::Tensor>& mask,
                                 const Rope* queryRope, const Rope* keyRope, const at::Tensor* perturbation,
                                 bool allPerturbed) const
{
    const at::Tensor& ctx = context ? *context : x;
    at::Tensor gateLogits;
    if (toGateLogits.defined())
        gateLogits = toGateLogits(x);
    auto value = toV(ctx);
    at::Tensor out;
    if (allPerturbed) {
        out = value;
    } else {
        auto q = nn::rmsNormWeighted(toQ(x), normQ, 1e-6);
        auto k = nn::rmsNormWeighted(toK(ctx), normK, 1e-6);
        if (queryRope) {
            q = applyRope(q, *queryRope);
            k = applyRope(k, keyRope ? *keyRope : *queryRope);
        }
        const auto dtype = q.scalar_type();
        auto qh = q.unflatten(2, {heads, -1}).transpose(1, 2);
        auto kh = k.unflatten(2, {heads, -1}).transpose(1, 2);
        auto vh = value.unflatten(2, {heads, -1}).transpose(1, 2);
        out = nn::attention(qh, kh, vh, mask).transpose(1, 2).flatten(2, 3).to(dtype);
        if (perturbation)
            out = at::lerp(value, out, *perturbation);
    }
    if (gateLogits.defined()) {
        const auto gates = 2.0 * at::sigmoid(gateLogits);
        out = (out.unflatten(2, {heads, -1}) * gates.unsqueeze(-1)).flatten(2, 3);
    }
    return toOut(out);
}

std::int64_t Attention::residentBytes() const
{
    auto bytes = toQ.residentBytes() + toK.residentBytes() + toV.residentBytes() + toOut.residentBytes();
    if (toGateLogits.defined())
        bytes += toGateLogits.residentBytes();
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
    return out(nn::geluTanh(proj(x)));
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

} // namespace vireo::ltx2
