// CUDA cases the CPU tests cannot reach: attention on views the fused kernels cannot take
// as they are, FP8 linears (tensor-core and dequantize paths, with bias, every dtype),
// fused projections, quantized weights moving between devices. Needs a CUDA device (label gpu).
#include "tests/harness/vireotest.h"

#include "inference/models/nn/layers.h"
#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/InferenceMode.h>

using namespace vireo;
using quant::QuantizedWeight;

namespace {

template <typename T>
T must(Result<T> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
    return std::move(*r);
}

double relNorm(const at::Tensor& a, const at::Tensor& b)
{
    const auto x = a.cpu().to(at::kDouble), y = b.cpu().to(at::kDouble);
    return (x - y).norm().item<double>() / std::max(1e-30, y.norm().item<double>());
}

// The device still runs work after the case before (a kernel fault poisons the context).
bool deviceHealthy()
{
    try {
        return at::ones({1024}, at::kCUDA).sum().item<double>() == 1024.0;
    } catch (const c10::Error&) {
        return false;
    }
}

QuantizedWeight fp8Weight(std::int64_t out, std::int64_t in, bool perRow, bool inputScale)
{
    const auto w = at::randn({out, in}) * 0.05;
    at::Tensor scale = perRow ? w.abs().amax(1) / 448.0 : (w.abs().amax() / 448.0).reshape({});
    const auto q = (w / (perRow ? scale.unsqueeze(1) : scale)).clamp(-448, 448).to(at::kFloat8_e4m3fn);
    std::optional<at::Tensor> is;
    if (inputScale)
        is = at::full({}, 4.0 / 448.0);
    return must(QuantizedWeight::fp8(q, scale, is));
}

}  // namespace

VT_TEST(attentionTakesMisalignedViewsAndTheDeviceSurvives)
{
    VT_CHECK_MSG(at::cuda::is_available(), "no CUDA device: run this test on the GPU machine");
    at::manual_seed(1);
    // q, k, v cut from one fused projection at offsets of an odd number of elements, head
    // sizes the fused kernels only take aligned: what the LTX-2 connectors hand over.
    for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        for (const std::int64_t headDim : {3, 5, 6, 8, 12, 64, 128}) {
            const std::int64_t heads = 2, tokens = 19, inner = heads * headDim;
            const auto fused = at::randn({1, tokens, 3 * inner + 1}).to(dtype);
            auto split = [&](const at::Tensor& f, std::int64_t i) {
                return f.narrow(-1, 1 + i * inner, inner).unflatten(2, {heads, headDim}).transpose(1, 2);
            };
            const auto gpu = fused.cuda();
            VT_CHECK(!nn::attentionOperandAligned(split(gpu, 0)));
            const auto cpuOut =
                nn::attention(split(fused, 0).to(at::kFloat), split(fused, 1).to(at::kFloat), split(fused, 2).to(at::kFloat), std::nullopt);
            const auto mask = at::zeros({1, 1, 1, tokens}).to(dtype).cuda();
            for (const bool masked : {false, true}) {
                const auto out =
                    nn::attention(split(gpu, 0), split(gpu, 1), split(gpu, 2), masked ? std::optional<at::Tensor>(mask) : std::nullopt);
                const auto err = relNorm(out, cpuOut);
                VT_CHECK_MSG(
                    err < (dtype == at::kFloat ? 1e-5 : 2e-2), dtype << " head " << headDim << " masked " << masked << ": " << err);
            }
            VT_CHECK_MSG(deviceHealthy(), "the CUDA context broke after " << dtype << " head " << headDim);
        }
    }
}

VT_TEST(fp8LinearWithBiasInEveryDtype)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(2);
    // The capability gate's answer for this GPU: Ada and newer, unless VIREO_FP8_TENSOR_CORES=0
    // forces the dequantize path (as gpu-check's Ampere run does on a Hopper).
    const bool fp8Cores = !capability::fp8GemmBlocker(deviceCaps(c10::Device(at::kCUDA, 0)), capability::Dtype::BF16, pathSwitches());
    for (const bool perRow : {false, true}) {
        for (const bool inputScale : {false, true}) {
            auto w = fp8Weight(96, 64, perRow, inputScale);
            const auto bias = at::randn({96});
            const auto x = at::randn({5, 7, 64});
            const auto dense = must(w.dequantize(at::kFloat));
            const auto reference = at::linear(x.to(at::kDouble), dense.to(at::kDouble), bias.to(at::kDouble));
            const auto wCuda = must(w.to(c10::Device(at::kCUDA)));
            for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
                const auto plan = wCuda.matmulPlan(c10::Device(at::kCUDA), dtype);
                const bool tensorCores = dtype != at::kFloat && fp8Cores;
                VT_COMPARE(plan.path == quant::MatmulPath::Fp8TensorCores, tensorCores);
                const auto y = must(wCuda.linear(x.to(dtype).cuda(), bias.to(dtype).cuda()));
                VT_COMPARE(y.scalar_type(), dtype);
                VT_COMPARE(y.sizes().vec(), (std::vector<std::int64_t>{5, 7, 96}));
                // The tensor-core path quantizes activations to e4m3 (3 mantissa bits).
                const double tol = tensorCores ? 6e-2 : dtype == at::kFloat ? 1e-5 : 1e-2;
                const auto err = relNorm(y, reference);
                std::printf("   fp8 %s%s %s via %s: rel %.3g\n", perRow ? "per-row" : "per-tensor", inputScale ? " +input scale" : "",
                    c10::toString(dtype), std::string(quant::matmulPathName(plan.path)).c_str(), err);
                VT_CHECK_MSG(err < tol, "per-row " << perRow << " input scale " << inputScale << " " << dtype << ": " << err);
            }
        }
    }
}

VT_TEST(loraOnCudaLayersInEveryPath)
{
    // The adapter on the device's GEMM paths: a dense bf16 layer (and its GELU epilogue,
    // which gives way), an FP8 tensor-core layer, and fused FP8 q/k/v rows.
    VT_CHECK(at::cuda::is_available());
    c10::InferenceMode guard;
    at::manual_seed(5);
    const auto cuda = c10::Device(at::kCUDA);
    auto check = [&](const char* what, nn::Linear layer, const at::Tensor& dense, double tol) {
        const auto in = layer.inFeatures();
        std::vector<nn::LoraDelta> deltas;
        std::vector<const nn::LoraDelta*> pointers;
        for (const auto& part : layer.computedParts())
            deltas.push_back({part.name, (at::randn({16, in}) * 0.1).to(cuda, at::kBFloat16),
                (at::randn({part.rows, 16}) * 0.1).to(cuda, at::kBFloat16)});
        for (const auto& d : deltas)
            pointers.push_back(&d);
        layer.lora = nn::buildLoraAdapter(layer, pointers);
        const auto x = at::randn({3, 40, in});
        auto w = dense.to(at::kDouble).clone();
        for (std::size_t i = 0; i < deltas.size(); ++i) {
            const auto& p = layer.computedParts()[i];
            w.narrow(0, p.rowOffset, p.rows).add_(at::mm(deltas[i].up.cpu().to(at::kDouble), deltas[i].down.cpu().to(at::kDouble)));
        }
        const auto reference = at::linear(x.to(at::kDouble), w, layer.bias ? layer.bias->cpu().to(at::kDouble) : at::Tensor());
        const auto y = layer(x.to(cuda, at::kBFloat16));
        const auto err = relNorm(y, reference);
        const auto gelu = relNorm(layer.withGeluTanh(x.to(cuda, at::kBFloat16)), at::gelu(reference, "tanh"));
        std::printf("   LoRA on %s: rel %.3g, with GELU %.3g\n", what, err, gelu);
        VT_CHECK_MSG(err < tol && gelu < tol, what << ": " << err << " / " << gelu);
    };
    {
        const auto dense = at::randn({256, 128}) * 0.05;
        nn::Linear layer{
            "ff.net.0.proj", QuantizedWeight::dense(dense.to(cuda, at::kBFloat16)), at::randn({256}).to(cuda, at::kBFloat16), {}, nullptr};
        check("dense bf16", layer, dense.to(at::kBFloat16).to(at::kFloat), 2e-2);
    }
    {
        auto w = must(fp8Weight(256, 128, true, false).to(cuda));
        const auto dense = must(w.dequantize(at::kFloat)).cpu();
        nn::Linear layer{"ff.net.2", w, at::randn({256}).to(cuda, at::kBFloat16), {}, nullptr};
        check("fp8 tensor cores", layer, dense, 6e-2);
    }
    {
        std::vector<QuantizedWeight> parts{must(fp8Weight(128, 128, false, false).to(cuda)),
            must(fp8Weight(64, 128, false, false).to(cuda)), must(fp8Weight(64, 128, true, false).to(cuda))};
        const auto fused = must(QuantizedWeight::fuseRows({&parts[0], &parts[1], &parts[2]}));
        nn::Linear layer{"attn1.to_qkv", fused, at::randn({256}).to(cuda, at::kBFloat16), {}, nullptr};
        layer.parts = {{"attn1.to_q", 0, 128}, {"attn1.to_k", 128, 64}, {"attn1.to_v", 192, 64}};
        check("fused fp8 q/k/v", layer, must(fused.dequantize(at::kFloat)).cpu(), 6e-2);
    }
    VT_CHECK(deviceHealthy());
}

VT_TEST(fusedFp8RowsEqualSeparateLinears)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(3);
    for (const bool inputScales : {false, true}) {
        std::vector<QuantizedWeight> parts{
            fp8Weight(64, 128, false, inputScales), fp8Weight(64, 128, false, inputScales), fp8Weight(32, 128, true, inputScales)};
        std::vector<const QuantizedWeight*> pointers;
        for (auto& p : parts) {
            p = must(p.to(c10::Device(at::kCUDA)));
            pointers.push_back(&p);
        }
        const auto fused = must(QuantizedWeight::fuseRows(pointers));
        VT_COMPARE(fused.shape(), (std::vector<std::int64_t>{160, 128}));
        const auto x = at::randn({33, 128}, at::kCUDA).to(at::kBFloat16);
        std::vector<at::Tensor> separate;
        for (const auto& p : parts)
            separate.push_back(must(p.linear(x)));
        const auto err = relNorm(must(fused.linear(x)), at::cat(separate, -1));
        std::printf("   fused fp8 rows (input scales %d): rel %.3g\n", inputScales, err);
        VT_CHECK_MSG(err < 3e-2, err);
        VT_CHECK(must(fused.dequantize())
                     .cpu()
                     .equal(at::cat({must(parts[0].dequantize()), must(parts[1].dequantize()), must(parts[2].dequantize())}).cpu()));
    }
}

VT_TEST(quantizedWeightsMadeInInferenceModeMoveBothWays)
{
    VT_CHECK(at::cuda::is_available());
    c10::InferenceMode guard;
    at::manual_seed(4);
    std::vector<std::pair<std::string, QuantizedWeight>> weights;
    weights.emplace_back("dense", QuantizedWeight::dense(at::randn({32, 64})));
    weights.emplace_back("fp8 per-row", fp8Weight(32, 64, true, true));
    weights.emplace_back("gguf Q8_0", must(QuantizedWeight::gguf(at::randint(0, 120, {32 * 2 * 34}, at::kByte), 8, {32, 64})));
    weights.emplace_back("nf4",
        must(QuantizedWeight::nf4(
            at::randint(0, 256, {1024}, at::kByte), at::rand({32}), at::linspace(-1, 1, 16), 64, {32, 64}, at::kBFloat16)));
    weights.emplace_back("int8", must(QuantizedWeight::quantizeInt8(at::randn({32, 64}))));
    const auto x = at::randn({3, 64});
    for (const auto& [name, w] : weights) {
        const auto before = must(w.dequantize());
        const auto onGpu = must(w.to(c10::Device(at::kCUDA)));
        VT_CHECK(onGpu.device().is_cuda());
        VT_CHECK_MSG(must(onGpu.dequantize()).cpu().equal(before), name);
        const auto back = must(onGpu.to(c10::Device(at::kCPU)));
        VT_CHECK_MSG(must(back.dequantize()).equal(before), name);
        // A weight left on the CPU serves a CUDA input: the result is on the input's device.
        const auto y = must(w.linear(x.cuda()));
        VT_CHECK(y.is_cuda());
        VT_CHECK_MSG(relNorm(y, must(w.linear(x))) < 1e-5, name);
    }
}

VT_MAIN("TestCudaLayers")
