// The CPU implementations of the fused ops: the exact torch compositions the model code ran
// before (CPU parity with the references rests on it), and the checks that refuse inputs.
#include "tests/harness/vireotest.h"

#include "kernels/fusedops.h"

#include <ATen/ATen.h>

#include <string>

using namespace vireo;

namespace {

// Relative to the largest reference value, in float64.
double maxRel(const at::Tensor& a, const at::Tensor& b)
{
    const auto x = a.to(at::kDouble), y = b.to(at::kDouble);
    return (x - y).abs().max().item<double>() / std::max(1e-12, y.abs().max().item<double>());
}

std::string errorOf(const std::function<void()>& call)
{
    try {
        call();
    } catch (const c10::Error& e) {
        return e.what_without_backtrace();
    }
    return "(no error)";
}

}  // namespace

VT_TEST(gatedResidualRmsNormModulateIsTheComposition)
{
    at::manual_seed(11);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const bool perToken : {false, true}) {
            for (const std::int64_t c : {4096, 2048, 120, 33}) {
                const auto x = at::randn({2, 5, c}).to(dtype);
                const auto delta = at::randn({2, 5, c}).to(dtype);
                // gate, scale and shift are strided rows of one modulation tensor, as the model's.
                const auto mod = (at::randn({2, perToken ? 5 : 1, 3, c}) * 0.3).to(dtype);
                const auto parts = mod.unbind(2);
                const auto& gate = parts[2];
                const auto& scale = parts[1];
                const auto& shift = parts[0];
                VT_CHECK(!gate.is_contiguous());
                const auto [sum, normed] = kernels::gatedResidualRmsNormModulate(x, delta, gate, scale, shift, 1e-6);
                const auto wantSum = at::addcmul(x, delta, gate);
                const auto wantNormed = at::addcmul(shift, at::rms_norm(wantSum, {c}, std::nullopt, 1e-6), 1 + scale);
                VT_COMPARE(sum.scalar_type(), dtype);
                VT_COMPARE(normed.scalar_type(), dtype);
                VT_CHECK_MSG(at::equal(sum, wantSum), dtype << " per-token " << perToken << " C " << c << ": the residual differs");
                VT_CHECK_MSG(at::equal(normed, wantNormed), dtype << " per-token " << perToken << " C " << c << ": the norm differs");
                // And the composition is the definition: float64 from the rounded residual.
                const auto y = sum.to(at::kDouble);
                const auto rstd = (y.pow(2).mean(-1, true) + 1e-6).rsqrt();
                const auto exact = shift.to(at::kDouble) + y * rstd * (1 + scale.to(at::kDouble));
                const auto sumErr = maxRel(sum, x.to(at::kDouble) + delta.to(at::kDouble) * gate.to(at::kDouble));
                const auto normErr = maxRel(normed, exact);
                std::printf("   %s per-token %d C=%lld: residual max rel %.3g, norm max rel %.3g against float64\n", c10::toString(dtype),
                    perToken, static_cast<long long>(c), sumErr, normErr);
                // float32: rounding only; 16-bit: the residual once, the norm's output, 1 + scale
                // and the result each rounded to 8 (bfloat16) or 11 (float16) bits.
                const double tolerance = dtype == at::kFloat ? 1e-6 : dtype == at::kBFloat16 ? 1.2e-2 : 1.5e-3;
                VT_CHECK_MSG(sumErr <= tolerance && normErr <= tolerance, dtype << " C " << c << ": " << sumErr << ", " << normErr);
            }
        }
    }
}

VT_TEST(gatedResidualRmsNormModulateRefusesWhatItCannotTake)
{
    const auto x = at::randn({2, 3, 8});
    const auto ok = at::randn({2, 1, 8});
    auto call = [&](const at::Tensor& xx, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale) {
        return errorOf([&] { (void)kernels::gatedResidualRmsNormModulate(xx, delta, gate, scale, ok, 1e-6); });
    };
    const struct {
        std::string got, want;
    } cases[] = {
        {call(x.view({6, 8}), x.view({6, 8}), ok, ok), "x must be [B, T, C], got [6, 8]"},
        {call(x, at::randn({2, 3, 9}), ok, ok), "delta must have x's shape [2, 3, 8], got [2, 3, 9]"},
        {call(x, x, at::randn({2, 2, 8}), ok), "gate must be [2, 3 or 1, 8], got [2, 2, 8]"},
        {call(x, x, ok, at::randn({1, 1, 8})), "scale must be [2, 3 or 1, 8], got [1, 1, 8]"},
        {call(x, x, ok.to(at::kBFloat16), ok), "gate is BFloat16 but x is Float"},
        {call(x.to(at::kDouble), x.to(at::kDouble), ok.to(at::kDouble), ok.to(at::kDouble)),
            "dtype must be float32, bfloat16 or float16, got Double"},
    };
    for (const auto& c : cases) {
        VT_CHECK_MSG(c.got.find("gated_residual_rms_norm_modulate: ") != std::string::npos, c.got);
        VT_CHECK_MSG(c.got.find(c.want) != std::string::npos, "expected \"" << c.want << "\", got: " << c.got);
    }
}

// The FP8-output variants are quantize_fp8 of the norms' output, and refuse a scale that is
// not one float32 value.
VT_TEST(normsQuantizedForFp8AreQuantizeOfTheirOutput)
{
    at::manual_seed(11);
    auto bytes = [](const at::Tensor& t) { return t.view(at::kByte); };
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        const auto x = at::randn({2, 5, 48}).to(dtype), delta = at::randn({2, 5, 48}).to(dtype);
        const auto mod = (at::randn({2, 1, 3, 48}) * 0.3).to(dtype).unbind(2);
        const auto qs = at::full({}, 0.004, at::kFloat);
        const auto q = kernels::rmsNormModulateFp8(x, mod[1], mod[0], 1e-6, qs);
        const auto [sum, qGated] = kernels::gatedResidualRmsNormModulateFp8(x, delta, mod[2], mod[1], mod[0], 1e-6, qs);
        const auto [refSum, refGated] = kernels::gatedResidualRmsNormModulate(x, delta, mod[2], mod[1], mod[0], 1e-6);
        VT_CHECK(q.scalar_type() == at::kFloat8_e4m3fn && qGated.scalar_type() == at::kFloat8_e4m3fn);
        VT_CHECK(at::equal(bytes(q), bytes(kernels::quantizeFp8(kernels::rmsNormModulate(x, mod[1], mod[0], 1e-6), qs))));
        VT_CHECK(at::equal(bytes(qGated), bytes(kernels::quantizeFp8(refGated, qs))) && at::equal(sum, refSum));
        // Some values saturate at this scale: the clamp is part of what is compared.
        VT_CHECK((q.to(at::kFloat).abs() == 448).any().item<bool>());
    }
    const auto x = at::randn({1, 2, 8}), mod = at::zeros({1, 1, 8});
    const auto got = errorOf([&] { (void)kernels::rmsNormModulateFp8(x, mod, mod, 1e-6, at::ones({2}, at::kFloat)); });
    VT_CHECK_MSG(got.find("scale must be one float32 value") != std::string::npos, got);
}

// Gated attention's per-head gates: exactly the composition the attention ran before, strided
// views included, and its FP8 variant is quantize_fp8 of it.
VT_TEST(gateHeadsIsTheComposition)
{
    at::manual_seed(12);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        // Both as views into one fused projection, as the attention has them.
        const auto fused = (at::randn({2, 5, 4 * 16 + 4 + 3}) * 2).to(dtype);
        const auto x = fused.narrow(-1, 0, 64), logits = fused.narrow(-1, 64, 4);
        const auto ref = (x.unflatten(2, {4, -1}) * (2.0 * at::sigmoid(logits)).unsqueeze(-1)).flatten(2, 3);
        const auto got = kernels::gateHeads(x, logits);
        VT_CHECK(at::equal(got, ref));
        const auto qs = at::full({}, 0.002, at::kFloat);
        VT_CHECK(at::equal(kernels::gateHeadsFp8(x, logits, qs).view(at::kByte), kernels::quantizeFp8(ref, qs).view(at::kByte)));
    }
    const auto x = at::randn({2, 3, 12});
    const struct {
        std::string got, want;
    } cases[] = {
        {errorOf([&] {
             (void)kernels::gateHeads(x, at::randn({2, 3, 5}));
         }),
            "logits must be [2, 3, H] with H dividing 12, got [2, 3, 5]"},
        {errorOf([&] {
             (void)kernels::gateHeads(x.view({6, 12}), at::randn({2, 3, 4}));
         }),
            "x must be [B, T, C], got [6, 12]"},
        {errorOf([&] {
             (void)kernels::gateHeads(x, at::randn({2, 3, 4}).to(at::kHalf));
         }),
            "logits are Half but x is Float"},
    };
    for (const auto& c : cases)
        VT_CHECK_MSG(c.got.find("gate_heads: " + c.want) != std::string::npos, "expected \"" << c.want << "\", got: " << c.got);
}

VT_MAIN("TestFusedOps")
