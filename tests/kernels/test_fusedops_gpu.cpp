// The fused CUDA ops against their CPU implementations (the torch compositions they replace).
// Needs a CUDA device (label gpu).
#include "tests/harness/vireotest.h"

#include "kernels/fp8attention.h"
#include "kernels/fusedops.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

using namespace vireo;

namespace {

double maxRel(const at::Tensor& a, const at::Tensor& b)
{
    const auto x = a.cpu().to(at::kDouble), y = b.cpu().to(at::kDouble);
    return (x - y).abs().max().item<double>() / std::max(1e-12, y.abs().max().item<double>());
}

double tolerance(c10::ScalarType dtype)
{
    // float32: rsqrt and summation order; 16-bit: one rounding of the output apart.
    return dtype == at::kFloat ? 1e-5 : dtype == at::kBFloat16 ? 1.6e-2 : 2e-3;
}

}  // namespace

VT_TEST(quantizeFp8IsBitExact)
{
    VT_CHECK_MSG(at::cuda::is_available(), "no CUDA device: run this test on the GPU machine");
    at::manual_seed(3);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        auto x = (at::randn({4097}) * 300).to(dtype);
        x[0] = std::numeric_limits<float>::quiet_NaN();
        x[1] = std::numeric_limits<float>::infinity();
        x[2] = -std::numeric_limits<float>::infinity();
        x[3] = 1e4;
        x[4] = -0.0;
        for (const float s : {1.0f, 0.37f, 17.0f}) {
            const auto scale = at::full({}, s, at::kFloat);
            const auto cpu = kernels::quantizeFp8(x, scale);
            const auto gpu = kernels::quantizeFp8(x.cuda(), scale.cuda()).cpu();
            VT_COMPARE(gpu.scalar_type(), at::kFloat8_e4m3fn);
            VT_CHECK_MSG(at::equal(cpu.view(at::kByte), gpu.view(at::kByte)),
                dtype << " scale " << s << ": " << (cpu.view(at::kByte) != gpu.view(at::kByte)).sum().item<std::int64_t>()
                      << " bytes differ");
        }
    }
}

// GELU rounds through tanh, which the CPU and the GPU evaluate to slightly different floats;
// after rounding to the input dtype a few values land one step apart, so the e4m3 codes may
// differ by one step in a few places.
VT_TEST(geluQuantizeFp8MatchesTheComposition)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(6);
    for (const auto dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
        for (const std::int64_t n : {6144 * 64, 1001}) {
            const auto x = (at::randn({n}) * 3).to(dtype);
            const auto scale = at::full({}, 0.02f, at::kFloat);
            const auto cpu = kernels::geluQuantizeFp8(x, scale);
            const auto gpu = kernels::geluQuantizeFp8(x.cuda(), scale.cuda()).cpu();
            const auto differ = (cpu.view(at::kByte) != gpu.view(at::kByte));
            const auto count = differ.sum().item<std::int64_t>();
            // e4m3 codes as signed magnitudes are monotonic in value: neighbours differ by one.
            auto ordinal = [](const at::Tensor& q) {
                const auto bits = q.view(at::kByte).to(at::kInt);
                return at::where(bits >= 128, -(bits - 128), bits);
            };
            const auto worst = (ordinal(cpu) - ordinal(gpu)).abs().max().item<int>();
            std::printf("   gelu_quantize_fp8 %s n=%lld: %lld codes differ, by at most %d step(s)\n", c10::toString(dtype),
                static_cast<long long>(n), static_cast<long long>(count), worst);
            VT_CHECK_MSG(count <= n / 200 && worst <= 1, dtype << " n " << n << ": " << count << " differ, worst " << worst);
        }
    }
}

VT_TEST(rmsNormModulateMatchesTheComposition)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(4);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const bool perToken : {false, true}) {
            // Odd widths and a scale/shift that are strided views of one modulation tensor.
            for (const std::int64_t c : {4096, 77}) {
                const auto x = at::randn({2, 33, c}).to(dtype);
                const auto mod = (at::randn({2, perToken ? 33 : 1, 3, c}) * 0.3).to(dtype);
                const auto parts = mod.unbind(2);
                const auto cpu = kernels::rmsNormModulate(x, parts[1], parts[0], 1e-6);
                const auto gpu = kernels::rmsNormModulate(x.cuda(), mod.cuda().unbind(2)[1], mod.cuda().unbind(2)[0], 1e-6);
                const auto err = maxRel(gpu, cpu);
                std::printf("   rms_norm_modulate %s per-token %d C=%lld: max rel %.3g\n", c10::toString(dtype), perToken,
                    static_cast<long long>(c), err);
                VT_CHECK_MSG(err <= tolerance(dtype), dtype << " per-token " << perToken << " C " << c << ": " << err);
            }
        }
    }
}

VT_TEST(gatedResidualRmsNormModulateMatchesTheComposition)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(7);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const bool perToken : {false, true}) {
            // 6144 takes the four-vectors-per-thread path, 120 one warp, 33 the scalar kernel.
            for (const std::int64_t c : {4096, 2048, 6144, 120, 33}) {
                // Rows: gate/scale/shift are rows of one modulation tensor (as the model's) and
                // the vector path may run. Strided: they step over channels and delta is an
                // unaligned slice of a wider tensor, so the kernel gets copies or scalar loads.
                for (const bool strided : {false, true}) {
                    const std::int64_t tokens = 33, modTokens = perToken ? tokens : 1;
                    const auto x = at::randn({2, tokens, c}).to(dtype);
                    const auto wide = at::randn({2, tokens, c + 3}).to(dtype);
                    const auto delta = strided ? wide.narrow(-1, 1, c) : wide.narrow(-1, 0, c).contiguous();
                    const auto modAll = ((strided ? at::randn({2, modTokens, c, 3}) : at::randn({2, modTokens, 3, c})) * 0.3).to(dtype);
                    const int partDim = strided ? 3 : 2;
                    const auto mod = modAll.unbind(partDim), modGpu = modAll.cuda().unbind(partDim);
                    VT_CHECK(strided ? mod[0].stride(-1) == 3 : !mod[0].is_contiguous());
                    const auto [cpuSum, cpuOut] = kernels::gatedResidualRmsNormModulate(x, delta, mod[2], mod[1], mod[0], 1e-6);
                    // The same views, taken on the device copies.
                    const auto deltaGpu = strided ? wide.cuda().narrow(-1, 1, c) : delta.cuda();
                    const auto [gpuSum, gpuOut] =
                        kernels::gatedResidualRmsNormModulate(x.cuda(), deltaGpu, modGpu[2], modGpu[1], modGpu[0], 1e-6);
                    VT_CHECK(gpuSum.is_cuda() && gpuOut.is_cuda() && gpuSum.is_contiguous() && gpuOut.is_contiguous());
                    const auto sumDiffer = (gpuSum.cpu() != cpuSum).sum().item<std::int64_t>();
                    const auto sumErr = maxRel(gpuSum, cpuSum), outErr = maxRel(gpuOut, cpuOut);
                    std::printf("   gated_residual_rms_norm_modulate %s per-token %d C=%lld %s: residual %lld differ (max rel %.3g), "
                                "norm max rel %.3g\n",
                        c10::toString(dtype), perToken, static_cast<long long>(c), strided ? "strided" : "rows",
                        static_cast<long long>(sumDiffer), sumErr, outErr);
                    // The residual is one rounding of x + delta * gate on both sides (a CPU build
                    // that fuses the multiply-add may land one step apart).
                    VT_CHECK_MSG(sumErr <= tolerance(dtype) / 2, dtype << " C " << c << ": residual " << sumErr);
                    VT_CHECK_MSG(outErr <= tolerance(dtype), dtype << " per-token " << perToken << " C " << c << ": " << outErr);
                }
            }
        }
    }
}

// The norms with an FP8 output (the input of an FP8 GEMM with a static input scale) write
// exactly the bytes quantize_fp8 writes for the norms' own output on the device, with a
// scale that fits the values and one that saturates a quarter of them.
VT_TEST(normsQuantizedForFp8AreQuantizeOfTheirOutput)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(9);
    auto bytes = [](const at::Tensor& t) { return t.cpu().view(at::kByte); };
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const bool perToken : {false, true}) {
            for (const std::int64_t c : {4096, 6144, 120, 33}) {
                const std::int64_t tokens = 17;
                const auto x = at::randn({2, tokens, c}, at::kCUDA).to(dtype);
                const auto delta = at::randn({2, tokens, c}, at::kCUDA).to(dtype);
                const auto mod = (at::randn({2, perToken ? tokens : 1, 3, c}, at::kCUDA) * 0.3).to(dtype).unbind(2);
                const auto normed = kernels::rmsNormModulate(x, mod[1], mod[0], 1e-6);
                const auto [sum, gatedNormed] = kernels::gatedResidualRmsNormModulate(x, delta, mod[2], mod[1], mod[0], 1e-6);
                const double amax = normed.abs().max().item<double>();
                for (const double fit : {1.1, 0.25}) {
                    const auto qs = at::full({}, amax * fit / 448.0, at::TensorOptions(at::kFloat).device(at::kCUDA));
                    const auto q = kernels::rmsNormModulateFp8(x, mod[1], mod[0], 1e-6, qs);
                    const auto [qSum, qGated] = kernels::gatedResidualRmsNormModulateFp8(x, delta, mod[2], mod[1], mod[0], 1e-6, qs);
                    VT_CHECK(q.scalar_type() == at::kFloat8_e4m3fn && qGated.scalar_type() == at::kFloat8_e4m3fn && q.is_contiguous());
                    const auto differ = (bytes(q) != bytes(kernels::quantizeFp8(normed, qs))).sum().item<std::int64_t>();
                    const auto gatedDiffer = (bytes(qGated) != bytes(kernels::quantizeFp8(gatedNormed, qs))).sum().item<std::int64_t>();
                    const bool sumSame = at::equal(qSum, sum);
                    // Against the CPU reference: the norm's reduction order may move a value by
                    // one step of x's dtype, and so its byte by one e4m3 step.
                    const auto cpu = kernels::rmsNormModulateFp8(x.cpu(), mod[1].cpu(), mod[0].cpu(), 1e-6, qs.cpu());
                    const double err = maxRel(q.to(at::kFloat) * qs, cpu.to(at::kFloat) * qs.cpu());
                    std::printf("   rms_norm_modulate_fp8 %s per-token %d C=%lld scale x%.2f: %lld / %lld bytes differ from "
                                "quantize_fp8, gated %lld (residual same %d); max rel against the CPU %.3g\n",
                        c10::toString(dtype), perToken, static_cast<long long>(c), fit, static_cast<long long>(differ),
                        static_cast<long long>(q.numel()), static_cast<long long>(gatedDiffer), sumSame, err);
                    VT_CHECK_MSG(differ == 0 && gatedDiffer == 0 && sumSame, dtype << " C " << c << " scale x" << fit);
                    VT_CHECK_MSG(err <= 0.15, dtype << " C " << c << ": " << err);
                }
            }
        }
    }
    // The scale must be one float32 value on x's device.
    const auto x = at::randn({1, 4, 64}, at::kCUDA), mod = at::zeros({1, 1, 64}, at::kCUDA);
    bool threw = false;
    try {
        kernels::rmsNormModulateFp8(x, mod, mod, 1e-6, at::ones({}, at::kFloat));
    } catch (const c10::Error& e) {
        threw = std::string(e.what()).find("quantization scale") != std::string::npos;
    }
    VT_CHECK_MSG(threw, "a quantization scale on the CPU was accepted for a CUDA x");
}

// Gated attention's per-head gates on CUDA against the same composition on CUDA (sigmoid's exp
// is the device's on both sides) and the CPU, as views into one fused projection and as
// contiguous tensors; the FP8 variant writes the bytes quantize_fp8 writes for it.
VT_TEST(gateHeadsMatchesTheComposition)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(13);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const auto& [heads, dim] : {std::pair<std::int64_t, std::int64_t>{32, 128}, {32, 64}, {3, 5}}) {
            // Views into a fused projection whose rows are odd-sized (the scalar kernel) or start
            // on 16 bytes as LTX-2's q/k/v/gate rows do (the vector kernel, for 16-bit types), and
            // contiguous tensors.
            for (const char* layout : {"odd views", "aligned views", "contiguous"}) {
                const bool odd = layout[0] == 'o';
                const auto width = heads * dim + heads, pad = odd ? 1 : (8 - width % 8) % 8;
                const auto fused = (at::randn({2, 37, width + pad}, at::kCUDA) * 2).to(dtype);
                auto x = fused.narrow(-1, 0, heads * dim), logits = fused.narrow(-1, heads * dim, heads);
                const bool views = layout[0] != 'c';
                if (!views) {
                    x = x.contiguous();
                    logits = logits.contiguous();
                }
                const auto ref = (x.unflatten(2, {heads, -1}) * (2.0 * at::sigmoid(logits)).unsqueeze(-1)).flatten(2, 3);
                const auto got = kernels::gateHeads(x, logits);
                const auto differ = (got != ref).sum().item<std::int64_t>();
                const double err = maxRel(got, ref), cpuErr = maxRel(got, kernels::gateHeads(x.cpu(), logits.cpu()));
                const auto qs = at::full({}, ref.abs().max().item<double>() / 448.0, at::TensorOptions(at::kFloat).device(at::kCUDA));
                const auto qDiffer =
                    (kernels::gateHeadsFp8(x, logits, qs).cpu().view(at::kByte) != kernels::quantizeFp8(got, qs).cpu().view(at::kByte))
                        .sum()
                        .item<std::int64_t>();
                std::printf("   gate_heads %s %lldx%lld %s: %lld differ from the CUDA composition (max rel %.3g), CPU max rel %.3g; "
                            "fp8 %lld bytes differ\n",
                    c10::toString(dtype), static_cast<long long>(heads), static_cast<long long>(dim), layout,
                    static_cast<long long>(differ), err, cpuErr, static_cast<long long>(qDiffer));
                VT_CHECK_MSG(err <= tolerance(dtype) / 2 && cpuErr <= tolerance(dtype), dtype << " " << heads << "x" << dim);
                VT_CHECK_MSG(qDiffer == 0, dtype << " " << heads << "x" << dim << ": " << qDiffer << " fp8 bytes differ");
            }
        }
    }
}

VT_TEST(rmsNormRopeMatchesTheComposition)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(5);
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const auto& [heads, r] : std::vector<std::pair<std::int64_t, std::int64_t>>{{32, 64}, {3, 5}, {2, 1}}) {
            const std::int64_t c = heads * 2 * r, tokens = 37;
            // x is the middle slice of a fused projection, as attention hands it over.
            const auto fused = at::randn({2, tokens, 3 * c + 1}).to(dtype);
            const auto x = fused.narrow(-1, c + 1, c);
            const auto weight = (at::rand({c}) + 0.5).to(dtype);
            const auto angles = at::rand({1, tokens, heads, 1, r}) * 6.0;
            const auto cos = angles.cos(), sin = angles.sin();
            const auto cpu = kernels::rmsNormRope(x, weight, cos, sin, 1e-6);
            const auto gpu = kernels::rmsNormRope(fused.cuda().narrow(-1, c + 1, c), weight.cuda(), cos.cuda(), sin.cuda(), 1e-6);
            VT_CHECK(gpu.is_contiguous());
            const auto err = maxRel(gpu, cpu);
            std::printf("   rms_norm_rope %s %lldx%lld: max rel %.3g\n", c10::toString(dtype), static_cast<long long>(heads),
                static_cast<long long>(2 * r), err);
            VT_CHECK_MSG(err <= tolerance(dtype), dtype << " heads " << heads << " r " << r << ": " << err);
        }
    }
}

VT_TEST(fusedOpsRejectWhatTheyCannotTake)
{
    VT_CHECK(at::cuda::is_available());
    bool threw = false;
    try {
        (void)kernels::rmsNormRope(at::randn({1, 4, 12}, at::kCUDA), at::ones({12}, at::kCUDA), at::ones({1, 4, 2, 1, 4}, at::kCUDA),
            at::ones({1, 4, 2, 1, 4}, at::kCUDA), 1e-6);
    } catch (const c10::Error& e) {
        threw = std::string(e.what()).find("rope of 16 features applied to 12") != std::string::npos;
    }
    VT_CHECK(threw);
    threw = false;
    try {
        (void)kernels::quantizeFp8(at::randn({8}, at::kCUDA), at::ones({}));
    } catch (const c10::Error& e) {
        threw = std::string(e.what()).find("scale on cpu") != std::string::npos;
    }
    VT_CHECK(threw);
    threw = false;
    try {
        const auto x = at::randn({1, 4, 8}, at::kCUDA);
        (void)kernels::gatedResidualRmsNormModulate(x, x, at::ones({1, 1, 8}), x, x, 1e-6);
    } catch (const c10::Error& e) {
        threw = std::string(e.what()).find("gate is on cpu but x is on cuda") != std::string::npos;
    }
    VT_CHECK(threw);
}

// FP8 attention against two references: float32 attention of its own rounding (q, k, v and the
// probabilities rounded to e4m3 with the scales the kernel uses), which it must follow closely,
// and float32 attention of the unrounded operands, from which that rounding alone puts it about
// 8% (relative L2) on random operands. A wrong scale, layout or head split is off by the whole
// output instead.
VT_TEST(fp8AttentionIsCloseToFullPrecision)
{
    VT_CHECK(at::cuda::is_available());
    const auto* props = at::cuda::getCurrentDeviceProperties();
    const auto why = kernels::fp8AttentionUnavailable(c10::Device(c10::kCUDA, 0));
    if (props->major < 9) {
        VT_CHECK(!why.empty());
        std::printf("fp8 attention not run: %s\n", why.c_str());
        return;
    }
    VT_CHECK_MSG(why.empty(), why);  // Hopper and the staged cuDNN frontend: it must run
    at::manual_seed(21);
    struct Case {
        std::int64_t b, heads, tq, tk, d;
        bool views;  // q, k, v as views into one fused projection, rows strided
        bool mayRefuse;  // a length cuDNN may have no FP8 engine for (the caller then runs bf16)
    };
    for (const auto& c : {Case{1, 32, 6144, 6144, 128, true, false}, Case{2, 4, 256, 256, 64, false, false},
             Case{1, 3, 1000, 1000, 128, true, true}, Case{1, 8, 1024, 77, 64, false, true}}) {
        for (const auto dtype : {at::kBFloat16, at::kHalf}) {
            const auto opts = at::TensorOptions().dtype(dtype).device(at::kCUDA);
            const auto width = c.heads * c.d;
            at::Tensor q, k, v;
            if (c.views && c.tq == c.tk) {
                const auto fused = at::randn({c.b, c.tq, 3 * width + c.heads}, opts);
                q = fused.narrow(-1, 0, width);
                k = fused.narrow(-1, width, width) * 2;  // a different amax per operand
                v = fused.narrow(-1, 2 * width, width);
            } else {
                q = at::randn({c.b, c.tq, width}, opts);
                k = at::randn({c.b, c.tk, width}, opts) * 0.5;
                v = at::randn({c.b, c.tk, width}, opts) * 3;
            }
            std::string refusal;
            const auto got = kernels::fp8Attention(q, k, v, c.heads, &refusal);
            if (!got.defined()) {
                VT_CHECK_MSG(c.mayRefuse && refusal.find(std::to_string(c.tq) + " queries") != std::string::npos, refusal);
                std::printf("fp8 attention refused, as the caller is told: %s\n", refusal.c_str());
                continue;
            }
            VT_COMPARE(got.sizes().vec(), (std::vector<std::int64_t>{c.b, c.tq, width}));
            VT_COMPARE(got.scalar_type(), dtype);
            auto heads = [&](const at::Tensor& x) { return x.to(at::kFloat).unflatten(2, {c.heads, c.d}).transpose(1, 2); };
            auto rounded = [](const at::Tensor& x, const at::Tensor& descale) {
                return kernels::quantizeFp8(x.contiguous(), descale).to(at::kFloat) * descale;
            };
            auto amaxScale = [](const at::Tensor& x) { return (x.abs().max().to(at::kFloat) / 448.0).clamp_min(1e-12).reshape({1}); };
            const auto sv = amaxScale(v);
            const auto qr = heads(rounded(q, amaxScale(q))), kr = heads(rounded(k, amaxScale(k))), vr = heads(rounded(v, sv));
            const auto scores = at::matmul(qr, kr.transpose(-1, -2)) / std::sqrt(static_cast<double>(c.d));
            const auto p = (scores - std::get<0>(scores.max(-1, true))).exp();
            const auto pr = rounded(p, at::full({1}, 1.0 / 448.0, p.options()));
            const auto emulated = rounded((at::matmul(pr, vr) / p.sum(-1, true)).transpose(1, 2).flatten(2, 3), sv);
            const auto exact = at::scaled_dot_product_attention(heads(q), heads(k), heads(v)).transpose(1, 2).flatten(2, 3);
            auto relL2 = [&](const at::Tensor& want) { return ((got.to(at::kFloat) - want).norm() / want.norm()).item<double>(); };
            const double toOwnRounding = relL2(emulated), toExact = relL2(exact);
            VT_CHECK_MSG(toOwnRounding < 3e-2 && toExact < 0.15 && std::isfinite(toExact),
                c.b << "x" << c.heads << " heads " << c.tq << "x" << c.tk << " d" << c.d << " " << dtype << ": relative L2 "
                    << toOwnRounding << " from its own rounding, " << toExact << " from exact attention");
            std::printf("fp8 attention %ldx%ld heads %ldx%ld d%ld %s: relative L2 %.3e from its rounding, %.3e from exact\n",
                static_cast<long>(c.b), static_cast<long>(c.heads), static_cast<long>(c.tq), static_cast<long>(c.tk),
                static_cast<long>(c.d), c10::toString(dtype), toOwnRounding, toExact);
        }
    }
    // What it cannot take is refused with the shape, not run.
    const auto odd = at::randn({1, 64, 4 * 24}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
    bool refused = false;
    try {
        (void)kernels::fp8Attention(odd, odd, odd, 4);
    } catch (const c10::Error& e) {
        refused = std::string(e.what()).find("head size 24") != std::string::npos;
    }
    VT_CHECK(refused);
}

VT_MAIN("TestFusedOpsGpu")
