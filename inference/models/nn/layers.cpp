#include "inference/models/nn/layers.h"

#include <ATen/ATen.h>

#include <cmath>

namespace vireo::nn {

at::Tensor Linear::operator()(const at::Tensor& x) const
{
    auto y = weight.linear(x, bias);
    if (!y)
        throw ForwardError(name + ": " + y.error().message);
    return std::move(*y);
}

std::int64_t Linear::residentBytes() const
{
    if (!weight.defined())
        return 0;
    std::int64_t bytes = weight.defined() ? weight.residentBytes() : 0;
    if (bias)
        bytes += bias->numel() * bias->element_size();
    return bytes;
}

at::Tensor rmsNorm(const at::Tensor& x, double eps)
{
    // One fused kernel; it accumulates in float32 like the reference's explicit upcast.
    return at::rms_norm(x, {x.size(-1)}, std::nullopt, eps);
}

at::Tensor modulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift)
{
    return at::addcmul(shift, x, 1 + scale);
}

at::Tensor rmsNormWeighted(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps)
{
    return at::rms_norm(x, {x.size(-1)}, weight, eps);
}

at::Tensor layerNormNoAffine(const at::Tensor& x, double eps)
{
    return at::layer_norm(x, {x.size(-1)}, {}, {}, eps);
}

at::Tensor geluTanh(const at::Tensor& x)
{
    return at::gelu(x, "tanh");
}

at::Tensor timestepFeatures(const at::Tensor& timesteps, std::int64_t dim, double maxPeriod)
{
    TORCH_CHECK(timesteps.dim() == 1, "timestep features expect a 1-D tensor, got ", timesteps.dim(), "-D");
    const auto half = dim / 2;
    // Same op order as the reference so float32 rounding matches.
    auto exponent = at::arange(0, half, at::TensorOptions().dtype(at::kFloat).device(timesteps.device())) * (-std::log(maxPeriod));
    exponent = exponent / static_cast<double>(half);
    const auto freqs = at::exp(exponent);
    const auto args = timesteps.unsqueeze(1).to(at::kFloat) * freqs.unsqueeze(0);
    auto emb = at::cat({at::cos(args), at::sin(args)}, -1);
    if (dim % 2 == 1)
        emb = at::constant_pad_nd(emb, {0, 1, 0, 0});
    return emb;
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& additiveMask, std::int64_t scoreBudgetElements)
{
    TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "attention expects [B,H,T,D], got q ", q.dim(), "-D");
    const auto b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
    const auto perRow = b * h * tk;
    const auto rows = std::max<std::int64_t>(1, scoreBudgetElements / std::max<std::int64_t>(1, perRow));
    if (rows >= tq)
        return at::scaled_dot_product_attention(q, k, v, additiveMask, 0.0, false);
    auto out = at::empty({b, h, tq, v.size(-1)}, q.options());
    for (std::int64_t start = 0; start < tq; start += rows) {
        const auto len = std::min(rows, tq - start);
        std::optional<at::Tensor> mask;
        if (additiveMask && additiveMask->size(-2) != 1)
            mask = additiveMask->narrow(-2, start, len);
        else
            mask = additiveMask;
        out.narrow(2, start, len).copy_(at::scaled_dot_product_attention(q.narrow(2, start, len), k, v, mask, 0.0, false));
    }
    return out;
}

} // namespace vireo::nn
