#include "inference/models/nn/layers.h"

#include "inference/util/pathstats.h"

#include "kernels/fusedops.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cctype>
#include <cmath>

namespace vireo::nn {

namespace {

void addLora(const LoraAdapter& lora, const at::Tensor& x, at::Tensor& y)
{
    const auto x2 = x.reshape({-1, x.size(-1)});
    // One GEMM into the stacked rank for every part and LoRA, then one per part.
    const auto h = at::mm(x2.scalar_type() == lora.down.scalar_type() ? x2 : x2.to(lora.down.scalar_type()), lora.down.t());
    if (!y.is_contiguous())
        y = y.contiguous();
    auto y2 = y.view({-1, y.size(-1)});
    for (const auto& s : lora.slices) {
        auto rows = y2.narrow(1, s.rowOffset, s.rows);
        const auto d = at::mm(h.narrow(1, s.rankOffset, s.rank), s.up.t());
        rows.add_(d.scalar_type() == rows.scalar_type() ? d : d.to(rows.scalar_type()));
    }
}

}  // namespace

at::Tensor Linear::operator()(const at::Tensor& x) const
{
    auto y = weight.linear(x, bias);
    if (!y)
        throw ForwardError(
            name + ": " + y.error().message, y.error().code == ErrorCode::InvalidArgument ? ErrorCode::Unsupported : y.error().code);
    if (lora)
        addLora(*lora, x, *y);
    return std::move(*y);
}

std::vector<LinearPart> Linear::computedParts() const
{
    if (!parts.empty())
        return parts;
    if (!weight.defined())
        return {};
    return {LinearPart{name, 0, outFeatures()}};
}

Linear Linear::withWeights(quant::QuantizedWeight w, std::optional<at::Tensor> b) const
{
    Linear out = *this;
    out.weight = std::move(w);
    out.bias = std::move(b);
    return out;
}

Linear Linear::on(c10::Device device, bool nonBlocking) const
{
    if (!defined())
        return *this;
    auto w = weight.to(device, nonBlocking);
    if (!w)
        throw ForwardError(name + ": " + w.error().message, w.error().code);
    return withWeights(std::move(*w), bias ? std::optional<at::Tensor>(bias->to(device, nonBlocking)) : std::nullopt);
}

Linear Linear::pinned() const
{
    if (!defined())
        return *this;
    return withWeights(weight.pinned(), bias ? std::optional<at::Tensor>(pinnedIfCuda(*bias)) : std::nullopt);
}

at::Tensor pinnedIfCuda(const at::Tensor& t)
{
    return t.defined() && at::hasCUDA() ? t.pin_memory() : t;
}

std::int64_t LoraAdapter::bytes() const
{
    std::int64_t n = down.defined() ? down.numel() * down.element_size() : 0;
    for (const auto& s : slices)
        n += s.up.numel() * s.up.element_size();
    return n;
}

std::shared_ptr<const LoraAdapter> buildLoraAdapter(const Linear& layer, const std::vector<const LoraDelta*>& deltas)
{
    if (deltas.empty())
        return nullptr;
    auto adapter = std::make_shared<LoraAdapter>();
    std::vector<at::Tensor> downs;
    std::int64_t rank = 0;
    // Grouped by part, so each slice reads one contiguous rank range.
    for (const auto& part : layer.computedParts()) {
        std::vector<at::Tensor> ups;
        const auto start = rank;
        for (const auto* d : deltas) {
            if (d->target != part.name)
                continue;
            TORCH_CHECK(d->down.dim() == 2 && d->up.dim() == 2 && d->down.size(0) == d->up.size(1), d->target, ": LoRA down ",
                d->down.sizes(), " and up ", d->up.sizes(), " do not pair");
            TORCH_CHECK(d->down.size(1) == layer.inFeatures() && d->up.size(0) == part.rows, d->target, ": LoRA [", d->up.size(0), " x ",
                d->down.size(1), "] does not fit the layer's [", part.rows, " x ", layer.inFeatures(), "]");
            downs.push_back(d->down);
            ups.push_back(d->up);
            rank += d->down.size(0);
        }
        if (!ups.empty())
            adapter->slices.push_back({part.rowOffset, part.rows, start, rank - start, ups.size() == 1 ? ups[0] : at::cat(ups, 1)});
    }
    if (downs.empty())
        return nullptr;
    adapter->down = downs.size() == 1 ? downs[0] : at::cat(downs, 0);
    return adapter;
}

at::Tensor Linear::withGeluTanh(const at::Tensor& x) const
{
    const auto& w = weight.data();
    // A LoRA adds to the pre-activation, which the fused epilogue never exposes.
    const bool epilogue = !lora && x.is_cuda() && weight.representation() == quant::Representation::Dense && bias
        && w.device() == x.device() && w.scalar_type() == x.scalar_type() && bias->scalar_type() == x.scalar_type() && w.dim() == 2
        && x.size(-1) == w.size(1) && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf || x.scalar_type() == at::kFloat);
    if (!epilogue)
        return geluTanh((*this)(x));
    paths::record("GEMM", "dense GEMM");
    // cuBLASLt's GELU epilogue is the tanh form; where it cannot run, ATen applies gelu(tanh).
    auto outShape = x.sizes().vec();
    outShape.back() = w.size(0);
    return at::_addmm_activation(*bias, x.reshape({-1, w.size(1)}), w.t(), 1, 1, true).view(outShape);
}

std::optional<at::Tensor> Linear::fp8InputScale(const at::Tensor& x) const
{
    if (!x.is_cuda() || lora || weight.representation() != quant::Representation::Fp8Scaled || !weight.inputScale()
        || weight.matmulPlan(x.device(), x.scalar_type()).path != quant::MatmulPath::Fp8TensorCores)
        return std::nullopt;
    return weight.inputScale()->reshape({});
}

at::Tensor Linear::onQuantized(const at::Tensor& xq, c10::ScalarType dtype) const
{
    auto y = weight.linearQuantizedInput(xq, bias, dtype);
    if (!y)
        throw ForwardError(name + ": " + y.error().message, y.error().code);
    return std::move(*y);
}

std::int64_t Linear::residentBytes() const
{
    if (!weight.defined())
        return 0;
    std::int64_t bytes = weight.defined() ? weight.residentBytes() : 0;
    if (bias)
        bytes += bias->numel() * bias->element_size();
    if (lora)
        bytes += lora->bytes();
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

at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    if (x.dim() == 3 && scale.dim() == 3 && shift.dim() == 3)
        return kernels::rmsNormModulate(x, scale, shift, eps);
    return modulate(rmsNorm(x, eps), scale, shift);
}

std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulate(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    if (x.dim() == 3 && gate.dim() == 3 && scale.dim() == 3 && shift.dim() == 3)
        return kernels::gatedResidualRmsNormModulate(x, delta, gate, scale, shift, eps);
    auto sum = at::addcmul(x, delta, gate);
    auto normed = rmsNormModulate(sum, scale, shift, eps);
    return {std::move(sum), std::move(normed)};
}

at::Tensor rmsNormModulateFp8(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    if (x.dim() == 3 && scale.dim() == 3 && shift.dim() == 3)
        return kernels::rmsNormModulateFp8(x, scale, shift, eps, qscale);
    return kernels::quantizeFp8(rmsNormModulate(x, scale, shift, eps), qscale);
}

std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    if (x.dim() == 3 && gate.dim() == 3 && scale.dim() == 3 && shift.dim() == 3)
        return kernels::gatedResidualRmsNormModulateFp8(x, delta, gate, scale, shift, eps, qscale);
    auto [sum, normed] = gatedResidualRmsNormModulate(x, delta, gate, scale, shift, eps);
    return {std::move(sum), kernels::quantizeFp8(normed, qscale)};
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

namespace {

// PyTorch's fused CUDA attention kernels (memory-efficient, flash) load 16 bytes at a time and
// take a view's base pointer and strides on trust: a view into a fused q/k/v projection at an
// offset that is not a multiple of 16 bytes makes them read misaligned addresses, which
// poisons the whole CUDA context. Such views are copied into fresh storage first.
bool alignedForFusedAttention(const at::Tensor& t)
{
    const auto elementsPer16 = 16 / static_cast<std::int64_t>(t.element_size());
    if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 != 0 || t.stride(-1) != 1)
        return false;
    for (std::int64_t d = 0; d + 1 < t.dim(); ++d)
        if (t.size(d) > 1 && t.stride(d) % elementsPer16 != 0)
            return false;
    return true;
}

at::Tensor fusedAttentionOperand(const at::Tensor& t)
{
    if (!t.is_cuda() || alignedForFusedAttention(t))
        return t;
    return t.clone(at::MemoryFormat::Contiguous);
}

}  // namespace

namespace {
std::atomic<AttentionKernel> g_attentionKernel{AttentionKernel::Default};
}

std::string_view attentionKernelName(AttentionKernel kernel)
{
    switch (kernel) {
    case AttentionKernel::Default: return "default";
    case AttentionKernel::FlashV3: return "flash3";
    case AttentionKernel::Flash: return "flash";
    case AttentionKernel::Cudnn: return "cudnn";
    case AttentionKernel::Efficient: return "efficient";
    }
    return "?";
}

std::optional<AttentionKernel> parseAttentionKernel(std::string_view name)
{
    std::string lower(name);
    for (auto& ch : lower)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (auto k :
        {AttentionKernel::Default, AttentionKernel::FlashV3, AttentionKernel::Flash, AttentionKernel::Cudnn, AttentionKernel::Efficient})
        if (lower == attentionKernelName(k))
            return k;
    return std::nullopt;
}

void setAttentionKernel(AttentionKernel kernel)
{
    using B = at::SDPBackend;
    auto order = [](std::initializer_list<B> backends) {
        std::vector<std::int64_t> ids;
        for (auto b : backends)
            ids.push_back(static_cast<std::int64_t>(b));
        return ids;
    };
    auto& ctx = at::globalContext();
    ctx.setSDPUseFA3(kernel == AttentionKernel::FlashV3);
    switch (kernel) {
    case AttentionKernel::Default:
    case AttentionKernel::FlashV3:
    case AttentionKernel::Flash:
        ctx.setSDPPriorityOrder(order({B::flash_attention, B::efficient_attention, B::math, B::cudnn_attention, B::overrideable}));
        break;
    case AttentionKernel::Cudnn:
        ctx.setSDPPriorityOrder(order({B::cudnn_attention, B::flash_attention, B::efficient_attention, B::math, B::overrideable}));
        break;
    case AttentionKernel::Efficient:
        ctx.setSDPPriorityOrder(order({B::efficient_attention, B::flash_attention, B::math, B::cudnn_attention, B::overrideable}));
        break;
    }
    g_attentionKernel = kernel;
}

AttentionKernel attentionKernel()
{
    return g_attentionKernel;
}

bool attentionOperandAligned(const at::Tensor& t)
{
    return alignedForFusedAttention(t);
}

at::Tensor attention(const at::Tensor& qIn, const at::Tensor& kIn, const at::Tensor& vIn, const std::optional<at::Tensor>& additiveMask,
    std::int64_t scoreBudgetElements)
{
    TORCH_CHECK(qIn.dim() == 4 && kIn.dim() == 4 && vIn.dim() == 4, "attention expects [B,H,T,D], got q ", qIn.dim(), "-D");
    const auto q = fusedAttentionOperand(qIn), k = fusedAttentionOperand(kIn), v = fusedAttentionOperand(vIn);
    const auto b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
    if (paths::active()) {
        const auto t = q.scalar_type();
        paths::record("attention",
            std::string(t == at::kFloat  ? "f32"
                    : t == at::kBFloat16 ? "bf16"
                    : t == at::kHalf     ? "f16"
                                         : c10::toString(t))
                + " SDPA");
    }
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
        out.narrow(2, start, len)
            .copy_(at::scaled_dot_product_attention(fusedAttentionOperand(q.narrow(2, start, len)), k, v, mask, 0.0, false));
    }
    return out;
}

}  // namespace vireo::nn
