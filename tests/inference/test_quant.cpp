// Quantized weights: bit-exact dequantization against the references (gguf-py for every
// GGUF type, an independent NumPy NF4 decoder, torch's float8 casts times scales), linear
// layers against the dense reference, and the failures peer tools are known for.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/quant/quantizer.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorview.h"
#include "kernels/ggufblocks.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cstring>

using namespace vireo;
using namespace vireo::quant;

namespace {

tensorfile::ModelSource open(const std::filesystem::path& path)
{
    auto source = tensorfile::ModelSource::open(path);
    if (!source)
        throw std::runtime_error(source.error().message);
    return std::move(*source);
}

std::filesystem::path quantFixtures()
{
    return test::envPath("VIREO_FIXTURES_ROOT") / "quant";
}

at::Tensor tensor(const tensorfile::Checkpoint& cp, const std::string& name)
{
    auto t = tensorfile::readTensor(cp, *cp.find(name));
    if (!t)
        throw std::runtime_error(t.error().message);
    return *t;
}

// Bitwise: -0.0 and +0.0 differ, infinities must match.
bool bitEqual(const at::Tensor& a, const at::Tensor& b)
{
    const auto x = a.contiguous(), y = b.contiguous();
    return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

QuantizedWeight must(Result<QuantizedWeight> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
    return std::move(*r);
}

at::Tensor must(Result<at::Tensor> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
    return std::move(*r);
}

}  // namespace

VT_TEST(ggufTypesMatchGgufPyBitExactly)
{
    auto source = open(quantFixtures() / "gguf_blocks.safetensors");
    const auto& cp = source.checkpoints.front();
    int types = 0;
    for (const auto& [key, value] : cp.metadata) {
        if (key.size() < 10 || key.substr(key.size() - 10) != ".ggml_type")
            continue;
        const auto type = key.substr(0, key.size() - 10);
        const auto shapeText = cp.metadata.at(type + ".shape");
        const std::vector<std::int64_t> shape{std::stoll(shapeText), std::stoll(shapeText.substr(shapeText.find(',') + 1))};
        const auto w = must(QuantizedWeight::gguf(tensor(cp, type + ".blocks"), std::stoll(value), shape));
        const auto expected = tensor(cp, type + ".expected");
        const auto got = must(w.dequantize(at::kFloat));
        VT_CHECK_MSG(bitEqual(got, expected),
            type << ": differs from gguf.quants.dequantize, max abs diff "
                 << (got - expected).abs().nan_to_num(0, 0, 0).max().item<float>());
        // Narrower outputs are the float32 result cast once.
        VT_CHECK_MSG(bitEqual(must(w.dequantize(at::kBFloat16)), expected.to(at::kBFloat16)), type << " as bf16");
        VT_CHECK_MSG(bitEqual(must(w.dequantize(at::kHalf)), expected.to(at::kHalf)), type << " as f16");
        ++types;
    }
    VT_COMPARE(types, 12);
}

// The GPU kernel decodes eight elements at a time; each must be the very float the whole-block
// decoder (bit-exact against gguf-py above) writes, for every type and index.
VT_TEST(ggufElementDecoderEqualsTheBlockDecoder)
{
    std::uint32_t state = 12345;
    auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return static_cast<std::uint8_t>(state >> 24);
    };
    namespace g = kernels::gguf;
    int typesChecked = 0;
    for (int type :
        {g::kF32, g::kF16, g::kBF16, g::kQ4_0, g::kQ4_1, g::kQ5_0, g::kQ5_1, g::kQ8_0, g::kQ2_K, g::kQ3_K, g::kQ4_K, g::kQ5_K, g::kQ6_K}) {
        const auto traits = g::blockTraits(type);
        VT_CHECK(traits.elements > 0);
        std::vector<std::uint8_t> block(static_cast<std::size_t>(traits.bytes));
        float whole[256];
        int mismatches = 0;
        for (int trial = 0; trial < 200; ++trial) {
            for (auto& byte : block)
                byte = next();
            g::decodeBlock(type, block.data(), whole);
            for (int i = 0; i < traits.elements; ++i) {
                const float one = g::decodeElement(type, block.data(), i);
                mismatches += std::memcmp(&one, &whole[i], sizeof(float)) != 0;
            }
            if (traits.elements >= 8) {
                for (int o = 0; o < traits.elements; o += 8) {
                    float run[8];
                    g::decodeRun8(type, block.data(), o, run);
                    mismatches += std::memcmp(run, &whole[o], sizeof run) != 0;
                }
            }
        }
        VT_CHECK_MSG(mismatches == 0, "ggml type " << type << ": " << mismatches << " elements differ");
        ++typesChecked;
    }
    VT_COMPARE(typesChecked, 13);
}

VT_TEST(ggufFileWeightsLoadInTheirStoredForm)
{
    // The tensor-file fixture: every GGUF type loaded through the checkpoint, compared with the
    // gguf-py reference values the fixture script stored.
    const auto dir = test::envPath("VIREO_FIXTURES_ROOT") / "tensorfiles";
    const auto manifest = nlohmann::json::parse(test::readText(dir / "manifest.json"));
    const auto expectedBytes = test::readAll(dir / "expected.bin");
    auto source = open(dir / "gguf_v3_all_types.gguf");
    const auto& cp = source.checkpoints.front();
    int checked = 0;
    for (const auto& file : manifest["files"]) {
        if (file["path"] != "gguf_v3_all_types.gguf")
            continue;
        for (const auto& t : file["tensors"]) {
            if (!t.contains("dequant_offset"))
                continue;
            const auto w = must(loadWeight(cp, t["name"].get<std::string>()));
            const auto got = must(w.dequantize(at::kFloat)).contiguous();
            VT_COMPARE(static_cast<std::uint64_t>(got.nbytes()), t["dequant_nbytes"].get<std::uint64_t>());
            VT_CHECK_MSG(std::memcmp(got.data_ptr(), expectedBytes.data() + t["dequant_offset"].get<std::size_t>(), got.nbytes()) == 0,
                t["name"] << " (" << t["type"] << ") differs from gguf-py");
            if (t["type"] != "F16" && t["type"] != "BF16")
                VT_COMPARE(w.representation(), Representation::Gguf);
            ++checked;
        }
    }
    VT_CHECK(checked >= 12);
}

VT_TEST(nf4MatchesTheReferenceDecoder)
{
    auto source = open(quantFixtures() / "nf4.safetensors");
    const auto& cp = source.checkpoints.front();
    for (const char* layer : {"L", "M"}) {
        const auto w = must(loadWeight(cp, std::string(layer) + ".weight"));
        VT_COMPARE(w.representation(), Representation::Nf4);
        VT_COMPARE(w.shape(), (std::vector<std::int64_t>{48, 80}));
        VT_CHECK_MSG(bitEqual(must(w.dequantize(at::kFloat)), tensor(cp, std::string(layer) + ".expected")), layer);
    }
    const auto nested = must(loadWeight(cp, "L.weight"));
    VT_CHECK(bitEqual(nested.scale(), tensor(cp, "L.expected_absmax")));
}

VT_TEST(fp8LinearMatchesTheDenseReference)
{
    auto source = open(quantFixtures() / "fp8_linear.safetensors");
    const auto& cp = source.checkpoints.front();
    const auto x = tensor(cp, "x");
    for (const char* layer : {"pt", "pr", "bk"}) {
        const std::string l = layer;
        const auto w = must(loadWeight(cp, l + ".weight"));
        VT_COMPARE(w.representation(), Representation::Fp8Scaled);
        VT_CHECK_MSG(bitEqual(must(w.dequantize(at::kFloat)), tensor(cp, l + ".dequant")), l << " dequant");
        const auto y = must(w.linear(x, tensor(cp, l + ".bias")));
        const auto err = (y - tensor(cp, l + ".expected")).abs().max().item<float>();
        std::printf("   %s linear max abs error %.3g\n", layer, err);
        VT_CHECK_MSG(err <= 1e-4f, l << " linear error " << err);
    }
}

VT_TEST(everyRepresentationRunsALinearOnCpu)
{
    at::manual_seed(3);
    const auto dense = at::randn({64, 256});
    const auto x = at::randn({3, 7, 256});
    const auto reference = at::linear(x, dense);
    const auto int8 = must(QuantizedWeight::quantizeInt8(dense));
    VT_COMPARE(int8.representation(), Representation::Int8);
    const auto y = must(int8.linear(x));
    VT_COMPARE(y.sizes().vec(), (std::vector<std::int64_t>{3, 7, 64}));
    const auto deq = must(int8.dequantize());
    VT_CHECK(at::allclose(y, at::linear(x, deq), 1e-4, 1e-4));
    // Round to nearest: no element is off by more than half a step of its row's scale.
    VT_CHECK(((deq - dense).abs() <= int8.scale().unsqueeze(1) * 0.5001).all().item<bool>());
    const auto bf16 = QuantizedWeight::dense(dense.to(at::kBFloat16));
    const auto yb = must(bf16.linear(x.to(at::kBFloat16)));
    VT_COMPARE(yb.scalar_type(), at::kBFloat16);
    VT_CHECK(at::allclose(yb.to(at::kFloat), reference, 0.1, 0.1));
}

VT_TEST(seedInferenceModeWeightsCanBeMovedCopiedAndDetached)
{
    QuantizedWeight w;
    {
        c10::InferenceMode guard;
        w = must(QuantizedWeight::fp8(at::randn({16, 32}).to(at::kFloat8_e4m3fn), at::rand({16}) + 0.5, at::ones({})));
    }
    VT_CHECK(w.data().is_inference());
    const auto moved = must(w.to(c10::Device(c10::kCPU)));
    const auto copy = moved.data().clone().detach();
    VT_CHECK(copy.defined());
    const auto y = must(w.linear(at::randn({2, 32})));
    VT_COMPARE(y.size(1), 16);
    VT_CHECK(must(w.dequantize(at::kBFloat16)).device().is_cpu());
}

VT_TEST(seedCpuWeightIsFullyUsableOnCpu)
{
    const auto w = must(QuantizedWeight::fp8(at::randn({8, 16}).to(at::kFloat8_e5m2), at::ones({8, 1})));
    const auto deq = must(w.dequantize());
    VT_CHECK(deq.device().is_cpu());
    VT_CHECK((deq + deq).equal(deq * 2));
    VT_CHECK(at::allclose(must(w.linear(at::eye(16))), deq.t()));
}

VT_TEST(seedScalesThatDoNotBroadcastFailLoudly)
{
    const auto conv = at::randn({6, 4, 3}).to(at::kFloat8_e4m3fn);
    auto perChannel = QuantizedWeight::fp8(conv, at::rand({6, 1, 1}) + 0.5);
    VT_CHECK(perChannel.ok());
    const auto deq = must(perChannel->dequantize());
    VT_CHECK(at::equal(deq, conv.to(at::kFloat) * perChannel->scale().view({6, 1, 1})));
    for (const auto& bad : {at::ones({4}), at::ones({6, 4, 3, 1}), at::ones({1, 4, 1})}) {
        auto r = QuantizedWeight::fp8(conv, bad);
        VT_CHECK_MSG(!r.ok(), "scale " << bad.sizes() << " accepted for a [6,4,3] weight");
    }
    auto uneven = QuantizedWeight::fp8(at::randn({37, 70}).to(at::kFloat8_e4m3fn), at::ones({3, 5}));
    VT_CHECK(!uneven.ok() && uneven.error().message.find("block size must be given") != std::string::npos);
    VT_CHECK(QuantizedWeight::fp8(at::randn({37, 70}).to(at::kFloat8_e4m3fn), at::ones({3, 5}), {}, {16, 16}).ok());
}

VT_TEST(seedErrorsNameTheOperationAndRepresentation)
{
    const auto w = must(QuantizedWeight::gguf(at::zeros({18}, at::kByte), 2, {32}));
    auto r = w.linear(at::randn({1, 32}));
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(r.error().message.find("linear on a gguf Q4_0 weight") == 0, r.error().message);
    auto d = w.dequantize(at::kInt);
    VT_CHECK(!d.ok() && d.error().message.find("dequantize on a gguf Q4_0") == 0);
    auto unsupported = QuantizedWeight::gguf(at::zeros({66}, at::kByte), 16, {256});
    VT_CHECK(!unsupported.ok() && unsupported.error().message.find("IQ2_XXS") != std::string::npos);
}

VT_TEST(seedQuantizeOnLoadReportsEverythingAndNeverHalfApplies)
{
    std::vector<std::pair<std::string, QuantizedWeight>> weights{
        {"blocks.0.linear.weight", QuantizedWeight::dense(at::randn({64, 128}))},
        {"blocks.0.linear.bias", QuantizedWeight::dense(at::randn({64}))},
        {"blocks.0.small.weight", QuantizedWeight::dense(at::randn({4, 4}))},
        {"blocks.0.ids", QuantizedWeight::dense(at::arange(8192).reshape({64, 128}))},
    };
    auto report = quantizeWeights(weights, {});
    VT_CHECK(report.ok());
    VT_COMPARE(report->quantized.size(), std::size_t{1});
    VT_COMPARE(report->skipped.size(), std::size_t{3});
    VT_CHECK(report->bytesAfter < report->bytesBefore);
    VT_COMPARE(weights[0].second.representation(), Representation::Int8);
    std::printf("   %s\n", report->summary().c_str());

    // Same recipe again: a no-op, reported as such.
    auto again = quantizeWeights(weights, {});
    VT_CHECK(again.ok() && again->quantized.empty());
    VT_CHECK(again->skipped.front().second.find("already int8") == 0);

    // A weight that cannot be quantized fails the call and nothing changes.
    auto bad = at::randn({64, 128});
    bad[3][5] = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::pair<std::string, QuantizedWeight>> withNaN{
        {"good.weight", QuantizedWeight::dense(at::randn({64, 128}))}, {"bad.weight", QuantizedWeight::dense(bad)}};
    auto failed = quantizeWeights(withNaN, {});
    VT_CHECK(!failed.ok() && failed.error().message.find("bad.weight") != std::string::npos);
    VT_COMPARE(withNaN[0].second.representation(), Representation::Dense);
    auto allowed = quantizeWeights(withNaN, {}, /*allowFailures=*/true);
    VT_CHECK(allowed.ok() && allowed->failed.size() == 1 && allowed->quantized.size() == 1);

    // A different recipe on quantized weights: an error before anything is modified.
    std::vector<std::pair<std::string, QuantizedWeight>> mixed{{"a.weight", QuantizedWeight::dense(at::randn({64, 128}))},
        {"b.weight", must(QuantizedWeight::fp8(at::randn({64, 128}).to(at::kFloat8_e4m3fn), at::ones({})))}};
    auto refused = quantizeWeights(mixed, {});
    VT_CHECK(!refused.ok() && refused.error().message.find("Nothing was changed") != std::string::npos);
    VT_COMPARE(mixed[0].second.representation(), Representation::Dense);
}

VT_TEST(residentBytesOfAQuantizedModelMatchItsFile)
{
    auto source = open(test::envPath("VIREO_FIXTURES_ROOT") / "models" / "ltx23_Q4_K_M.gguf");
    const auto& cp = source.checkpoints.front();
    std::map<std::string, std::int64_t> byRepresentation;
    std::int64_t resident = 0;
    for (const auto& t : cp.tensors) {
        const auto w = must(loadWeight(cp, t.name));
        byRepresentation[w.describe()] += w.residentBytes();
        resident += w.residentBytes();
    }
    for (const auto& [rep, bytes] : byRepresentation)
        std::printf("   %-22s %10lld bytes\n", rep.c_str(), static_cast<long long>(bytes));
    VT_COMPARE(static_cast<std::uint64_t>(resident), cp.tensorBytes());
    std::int64_t bf16 = 0;
    for (const auto& t : cp.tensors)
        bf16 += t.numel() * 2;
    std::printf("   resident %lld bytes vs %lld as bf16 (%.2fx)\n", static_cast<long long>(resident), static_cast<long long>(bf16),
        static_cast<double>(bf16) / static_cast<double>(resident));
    VT_CHECK(resident < bf16);
}

VT_MAIN("TestQuant")
