// CPU implementations of the fused ops: the torch compositions the model code used before the
// CUDA kernels existed, op for op, so CPU parity with the references is untouched.
#include "kernels/fusedops.h"
#include "base/envswitch.h"

#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

namespace vireo::kernels {

namespace detail {

void checkRmsNormRopeArgs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin)
{
    TORCH_CHECK(x.dim() == 3, "rms_norm_rope: x must be [B, T, C], got ", x.sizes());
    TORCH_CHECK(cos.dim() == 5 && cos.sizes() == sin.sizes() && cos.size(3) == 1,
        "rms_norm_rope: cos and sin must be [B, T, H, 1, r] and alike, got ", cos.sizes(), " and ", sin.sizes());
    TORCH_CHECK(cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat, "rms_norm_rope: cos and sin must be float32");
    TORCH_CHECK(cos.size(1) == x.size(1) && (cos.size(0) == x.size(0) || cos.size(0) == 1), "rms_norm_rope: rope for ", cos.size(0), "x",
        cos.size(1), " tokens applied to ", x.sizes());
    TORCH_CHECK(2 * cos.size(2) * cos.size(4) == x.size(2), "rms_norm_rope: rope of ", 2 * cos.size(2) * cos.size(4),
        " features applied to ", x.size(2));
    TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(2), "rms_norm_rope: weight must be [", x.size(2), "], got ", weight.sizes());
}

void checkRmsNormModulateArgs(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift)
{
    TORCH_CHECK(x.dim() == 3, "rms_norm_modulate: x must be [B, T, C], got ", x.sizes());
    for (const auto* t : {&scale, &shift})
        TORCH_CHECK(t->dim() == 3 && t->size(0) == x.size(0) && (t->size(1) == x.size(1) || t->size(1) == 1) && t->size(2) == x.size(2),
            "rms_norm_modulate: scale and shift must be [", x.size(0), ", ", x.size(1), " or 1, ", x.size(2), "], got ", t->sizes());
}

}  // namespace detail

namespace {

// The torch compositions the fused ops replace, op for op: the CPU implementations, and what
// every device runs when VIREO_FUSED_KERNELS=0 (fusedKernelsEnabled) turns the kernels off.
namespace composed {

at::Tensor quantizeFp8(const at::Tensor& x, const at::Tensor& scale)
{
    TORCH_CHECK(scale.numel() == 1 && scale.scalar_type() == at::kFloat, "quantize_fp8: scale must be one float32 value");
    // Times the float32 reciprocal, as the CUDA kernel does (one division per tensor).
    return (x.to(at::kFloat) * scale.reshape({}).reciprocal()).clamp(-448.0, 448.0).to(at::kFloat8_e4m3fn);
}

at::Tensor geluQuantizeFp8(const at::Tensor& x, const at::Tensor& scale)
{
    return quantizeFp8(at::gelu(x, "tanh"), scale);
}

at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    detail::checkRmsNormModulateArgs(x, scale, shift);
    return at::addcmul(shift, at::rms_norm(x, {x.size(-1)}, std::nullopt, eps), 1 + scale);
}

std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulate(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    detail::checkGatedResidualRmsNormModulateArgs(x, delta, gate, scale, shift);
    auto sum = at::addcmul(x, delta, gate);
    auto normed = rmsNormModulate(sum, scale, shift, eps);
    return {std::move(sum), std::move(normed)};
}

at::Tensor rmsNormModulateFp8(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    return quantizeFp8(rmsNormModulate(x, scale, shift, eps), qscale);
}

std::tuple<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    auto [sum, normed] = gatedResidualRmsNormModulate(x, delta, gate, scale, shift, eps);
    return {std::move(sum), quantizeFp8(normed, qscale)};
}

at::Tensor gateHeads(const at::Tensor& x, const at::Tensor& logits)
{
    detail::checkGateHeadsArgs(x, logits);
    const auto gates = 2.0 * at::sigmoid(logits);
    return (x.unflatten(2, {logits.size(2), -1}) * gates.unsqueeze(-1)).flatten(2, 3);
}

at::Tensor gateHeadsFp8(const at::Tensor& x, const at::Tensor& logits, const at::Tensor& qscale)
{
    return quantizeFp8(gateHeads(x, logits), qscale);
}

at::Tensor rmsNormRope(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin, double eps)
{
    detail::checkRmsNormRopeArgs(x, weight, cos, sin);
    const auto q = at::rms_norm(x, {x.size(-1)}, weight, eps);
    const auto b = x.size(0), t = cos.size(1), h = cos.size(2), r = cos.size(4);
    const auto split = q.reshape({b, t, h, 2, r}).to(at::kFloat);
    const auto first = split.narrow(-2, 0, 1), second = split.narrow(-2, 1, 1);
    auto out = split * cos;
    out.narrow(-2, 0, 1).addcmul_(sin, second, -1);
    out.narrow(-2, 1, 1).addcmul_(sin, first);
    return out.reshape({b, t, -1}).to(x.scalar_type());
}

}  // namespace composed

}  // namespace

bool fusedKernelsEnabled()
{
    static const bool enabled = env::flag("VIREO_FUSED_KERNELS");
    return enabled;
}

at::Tensor quantizeFp8(const at::Tensor& x, const at::Tensor& scale)
{
    if (!fusedKernelsEnabled())
        return composed::quantizeFp8(x, scale);
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("vireo::quantize_fp8", "").typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return op.call(x, scale);
}

at::Tensor geluQuantizeFp8(const at::Tensor& x, const at::Tensor& scale)
{
    if (!fusedKernelsEnabled())
        return composed::geluQuantizeFp8(x, scale);
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::gelu_quantize_fp8", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return op.call(x, scale);
}

at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    if (!fusedKernelsEnabled())
        return composed::rmsNormModulate(x, scale, shift, eps);
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::rms_norm_modulate", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>();
    return op.call(x, scale, shift, eps);
}

std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulate(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    if (!fusedKernelsEnabled()) {
        auto [sum, out] = composed::gatedResidualRmsNormModulate(x, delta, gate, scale, shift, eps);
        return {std::move(sum), std::move(out)};
    }
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::gated_residual_rms_norm_modulate", "")
                               .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   const at::Tensor&, const at::Tensor&, double)>();
    auto [sum, normed] = op.call(x, delta, gate, scale, shift, eps);
    return {std::move(sum), std::move(normed)};
}

at::Tensor rmsNormModulateFp8(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    if (!fusedKernelsEnabled())
        return composed::rmsNormModulateFp8(x, scale, shift, eps, qscale);
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::rms_norm_modulate_fp8", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, const at::Tensor&)>();
    return op.call(x, scale, shift, eps, qscale);
}

std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
{
    if (!fusedKernelsEnabled()) {
        auto [sum, out] = composed::gatedResidualRmsNormModulateFp8(x, delta, gate, scale, shift, eps, qscale);
        return {std::move(sum), std::move(out)};
    }
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::gated_residual_rms_norm_modulate_fp8", "")
                               .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   const at::Tensor&, const at::Tensor&, double, const at::Tensor&)>();
    auto [sum, quantized] = op.call(x, delta, gate, scale, shift, eps, qscale);
    return {std::move(sum), std::move(quantized)};
}

at::Tensor gateHeads(const at::Tensor& x, const at::Tensor& logits)
{
    if (!fusedKernelsEnabled())
        return composed::gateHeads(x, logits);
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("vireo::gate_heads", "").typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return op.call(x, logits);
}

at::Tensor gateHeadsFp8(const at::Tensor& x, const at::Tensor& logits, const at::Tensor& qscale)
{
    if (!fusedKernelsEnabled())
        return composed::gateHeadsFp8(x, logits, qscale);
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::gate_heads_fp8", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
    return op.call(x, logits, qscale);
}

at::Tensor rmsNormRope(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& cos, const at::Tensor& sin, double eps)
{
    if (!fusedKernelsEnabled())
        return composed::rmsNormRope(x, weight, cos, sin, eps);
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::rms_norm_rope", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>();
    return op.call(x, weight, cos, sin, eps);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("quantize_fp8", &composed::quantizeFp8);
    m.impl("gelu_quantize_fp8", &composed::geluQuantizeFp8);
    m.impl("rms_norm_modulate", &composed::rmsNormModulate);
    m.impl("gated_residual_rms_norm_modulate", &composed::gatedResidualRmsNormModulate);
    m.impl("rms_norm_modulate_fp8", &composed::rmsNormModulateFp8);
    m.impl("gated_residual_rms_norm_modulate_fp8", &composed::gatedResidualRmsNormModulateFp8);
    m.impl("gate_heads", &composed::gateHeads);
    m.impl("gate_heads_fp8", &composed::gateHeadsFp8);
    m.impl("rms_norm_rope", &composed::rmsNormRope);
}

}  // namespace vireo::kernels
