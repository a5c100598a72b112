// LoRA without a model: the run-time adapter against the dense delta on every weight
// representation (dense, scaled FP8, GGUF, NF4, int8) and on fused projections; LoRA files in
// every layout users meet, matched by name, alias and kohya's collapsed names with each
// convention's scale; and every refusal counted and named (LoHa, LoKr, DoRA, full patches,
// convolutions, text encoders, half pairs, hostile numbers).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/lora/lora.h"
#include "inference/models/nn/layers.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorset.h"
#include "inference/tensorfile/tensorview.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <set>
#include <unistd.h>

using namespace vireo;

namespace {

template <typename T>
T must(Result<T> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
    return std::move(*r);
}

void must(Result<void> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
}

tensorfile::ModelSource open(const std::filesystem::path& path)
{
    return must(tensorfile::ModelSource::open(path));
}

at::Tensor tensor(const tensorfile::Checkpoint& cp, const std::string& name)
{
    return must(tensorfile::readTensor(cp, *cp.find(name)));
}

std::filesystem::path scratch(const std::string& name)
{
    // One folder per run, removed at exit.
    static test::ScratchDir s("vireo-test-lora-");
    return s.path / name;
}

float maxRelative(const at::Tensor& got, const at::Tensor& want)
{
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item<float>();
}

// The reference: the weight as it dequantizes, plus each delta on its rows, in float32.
at::Tensor referenceLinear(const at::Tensor& x, const at::Tensor& dense, const std::optional<at::Tensor>& bias,
    const std::vector<std::tuple<std::int64_t, at::Tensor, at::Tensor>>& deltas)
{
    auto w = dense.clone();
    for (const auto& [offset, down, up] : deltas)
        w.narrow(0, offset, up.size(0)).add_(at::mm(up, down));
    return at::linear(x, w, bias ? *bias : at::Tensor());
}

lora::Target target(const std::string& name, std::int64_t in, std::int64_t out, std::vector<std::string> aliases = {})
{
    return lora::Target{name, std::move(aliases), in, out};
}

}  // namespace

VT_TEST(adapterAddsTheDeltaOnEveryRepresentation)
{
    c10::InferenceMode guard;
    at::manual_seed(11);
    const auto root = test::envPath("VIREO_FIXTURES_ROOT") / "quant";
    std::vector<std::pair<std::string, quant::QuantizedWeight>> weights;
    weights.emplace_back("dense", quant::QuantizedWeight::dense(at::randn({48, 80})));
    weights.emplace_back("int8", must(quant::QuantizedWeight::quantizeInt8(at::randn({48, 80}))));
    {
        auto source = open(root / "nf4.safetensors");
        weights.emplace_back("nf4", must(quant::loadWeight(source.checkpoints.front(), "L.weight")));
    }
    {
        auto source = open(root / "fp8_linear.safetensors");
        for (const char* l : {"pt", "pr", "bk"})
            weights.emplace_back(std::string("fp8 ") + l, must(quant::loadWeight(source.checkpoints.front(), std::string(l) + ".weight")));
    }
    {
        auto source = open(root / "gguf_blocks.safetensors");
        const auto& cp = source.checkpoints.front();
        for (const char* type : {"Q4_K", "Q8_0", "Q5_1"}) {
            const auto shapeText = cp.metadata.at(std::string(type) + ".shape");
            const std::vector<std::int64_t> shape{std::stoll(shapeText), std::stoll(shapeText.substr(shapeText.find(',') + 1))};
            weights.emplace_back(std::string("gguf ") + type,
                must(quant::QuantizedWeight::gguf(
                    tensor(cp, std::string(type) + ".blocks"), std::stoll(cp.metadata.at(std::string(type) + ".ggml_type")), shape)));
        }
    }
    for (const auto& [what, w] : weights) {
        const auto out = w.shape()[0], in = w.shape()[1];
        nn::Linear layer{"blocks.0.ff.net.2", w, at::randn({out}), {}, nullptr};
        const auto x = at::randn({2, 5, in});
        const auto plain = layer(x);
        nn::LoraDelta a{"blocks.0.ff.net.2", at::randn({4, in}) * 0.2, at::randn({out, 4}) * 0.3};
        nn::LoraDelta b{"blocks.0.ff.net.2", at::randn({8, in}) * 0.2, at::randn({out, 8}) * -0.1};
        layer.lora = nn::buildLoraAdapter(layer, {&a, &b});
        VT_CHECK(layer.lora != nullptr);
        const auto got = layer(x);
        const auto want = referenceLinear(x, must(w.dequantize(at::kFloat)), layer.bias, {{0, a.down, a.up}, {0, b.down, b.up}});
        const auto err = maxRelative(got, want);
        std::printf("   %-8s [%lld x %lld]: LoRA error %.2g (relative), the LoRA moves the output by %.2g\n", what.c_str(),
            static_cast<long long>(out), static_cast<long long>(in), err, (got - plain).abs().max().item<float>());
        VT_CHECK_MSG(err <= 1e-5f, what << ": " << err);
        VT_CHECK_MSG((got - plain).abs().max().item<float>() > 1e-2f, what << ": the LoRA changed nothing");
        // The fused GELU path gives way to the LoRA rather than dropping it.
        VT_CHECK(at::allclose(layer.withGeluTanh(x), nn::geluTanh(got), 1e-5, 1e-5));
        layer.lora = nullptr;
        VT_CHECK(at::equal(layer(x), plain));
    }
}

VT_TEST(fusedProjectionsTakeTheirRows)
{
    c10::InferenceMode guard;
    at::manual_seed(12);
    const std::int64_t in = 32, q = 32, kv = 16, gates = 4;
    const auto dense = at::randn({q + 2 * kv + gates, in});
    nn::Linear fused{"attn1.to_qkv", quant::QuantizedWeight::dense(dense), at::randn({q + 2 * kv + gates}), {}, nullptr};
    fused.parts = {{"attn1.to_q", 0, q}, {"attn1.to_k", q, kv}, {"attn1.to_v", q + kv, kv}, {"attn1.to_gate_logits", q + 2 * kv, gates}};
    nn::LoraDelta toQ{"attn1.to_q", at::randn({4, in}), at::randn({q, 4})};
    nn::LoraDelta toV1{"attn1.to_v", at::randn({4, in}), at::randn({kv, 4})};
    nn::LoraDelta toV2{"attn1.to_v", at::randn({2, in}), at::randn({kv, 2})};
    nn::LoraDelta gate{"attn1.to_gate_logits", at::randn({3, in}), at::randn({gates, 3})};
    fused.lora = nn::buildLoraAdapter(fused, {&toV1, &gate, &toQ, &toV2});
    VT_COMPARE(fused.lora->slices.size(), std::size_t(3));  // k untouched
    const auto x = at::randn({3, 7, in});
    const auto want = referenceLinear(x, dense, fused.bias,
        {{0, toQ.down, toQ.up}, {q + kv, toV1.down, toV1.up}, {q + kv, toV2.down, toV2.up}, {q + 2 * kv, gate.down, gate.up}});
    const auto got = fused(x);
    VT_CHECK_MSG(maxRelative(got, want) <= 1e-5f, maxRelative(got, want));
    VT_CHECK(at::equal(got.narrow(-1, q, kv), at::linear(x, dense, *fused.bias).narrow(-1, q, kv)));
    // A delta that does not fit its part is refused, not bent to fit.
    nn::LoraDelta wrong{"attn1.to_k", at::randn({4, in}), at::randn({q, 4})};
    bool threw = false;
    try {
        (void)nn::buildLoraAdapter(fused, {&wrong});
    } catch (const c10::Error& e) {
        threw = std::string(e.what_without_backtrace()).find("does not fit") != std::string::npos;
    }
    VT_CHECK(threw);
}

VT_TEST(everyLayoutIsMatchedWithItsScale)
{
    c10::InferenceMode guard;
    at::manual_seed(13);
    const std::vector<lora::Target> targets{
        target("transformer_blocks.0.attn1.to_q", 32, 32),
        target("transformer_blocks.0.ff.net.0.proj", 32, 64),
        target("proj_in", 16, 32, {"patchify_proj"}),
        target("time_embed.linear", 32, 192, {"adaln_single.linear"}),
    };
    auto pair = [](std::int64_t r, std::int64_t in, std::int64_t out) { return std::pair{at::randn({r, in}), at::randn({out, r})}; };
    const auto [qa, qb] = pair(4, 32, 32);
    const auto [fa, fb] = pair(8, 32, 64);
    const auto [pa, pb] = pair(4, 16, 32);
    const auto [ta, tb] = pair(4, 32, 192);

    // diffusers / PEFT, alpha from the metadata (and a per-module exception).
    const auto peft = scratch("peft.safetensors");
    must(tensorfile::writeSafetensors(peft,
        {{"transformer.transformer_blocks.0.attn1.to_q.lora_A.weight", qa},
            {"transformer.transformer_blocks.0.attn1.to_q.lora_B.weight", qb},
            {"transformer.transformer_blocks.0.ff.net.0.proj.lora_A.weight", fa},
            {"transformer.transformer_blocks.0.ff.net.0.proj.lora_B.weight", fb}, {"transformer.proj_in.lora_A.weight", pa},
            {"transformer.proj_in.lora_B.weight", pb}},
        {{"lora_adapter_metadata",
            R"({"r": 4, "lora_alpha": 8, "rank_pattern": {"ff.net.0.proj": 8}, "alpha_pattern": {"ff.net.0.proj": 2}})"}}));
    auto r = must(lora::inspect(peft, targets));
    VT_COMPARE(r.layout, std::string("peft"));
    VT_COMPARE(r.matched(), 3);
    VT_COMPARE(r.status(), std::string("applied"));
    for (const auto& m : r.modules)
        VT_CHECK_MSG(m.scale == (m.target == "transformer_blocks.0.ff.net.0.proj" ? 0.25 : 2.0), m.target << " scale " << m.scale);

    // Lightricks / ComfyUI native: ltx-core names, no alpha (scale 1).
    const auto comfy = scratch("comfy.safetensors");
    must(tensorfile::writeSafetensors(comfy,
        {{"diffusion_model.patchify_proj.lora_A.weight", pa}, {"diffusion_model.patchify_proj.lora_B.weight", pb},
            {"diffusion_model.adaln_single.linear.lora_A.weight", ta}, {"diffusion_model.adaln_single.linear.lora_B.weight", tb}}));
    r = must(lora::inspect(comfy, targets));
    VT_COMPARE(r.layout, std::string("comfy"));
    VT_COMPARE(r.matched(), 2);
    for (const auto& m : r.modules)
        VT_COMPARE(m.scale, 1.0);
    VT_COMPARE((std::set<std::string>{r.modules[0].target, r.modules[1].target}), (std::set<std::string>{"proj_in", "time_embed.linear"}));

    // kohya: '.' collapsed to '_', alpha / rank (alpha 0 reads as the rank).
    const auto kohya = scratch("kohya.safetensors");
    must(tensorfile::writeSafetensors(kohya,
        {{"lora_unet_transformer_blocks_0_attn1_to_q.lora_down.weight", qa},
            {"lora_unet_transformer_blocks_0_attn1_to_q.lora_up.weight", qb},
            {"lora_unet_transformer_blocks_0_attn1_to_q.alpha", at::tensor(2.0f)}, {"lora_unet_adaln_single_linear.lora_down.weight", ta},
            {"lora_unet_adaln_single_linear.lora_up.weight", tb}, {"lora_unet_adaln_single_linear.alpha", at::tensor(0.0f)}}));
    r = must(lora::inspect(kohya, targets));
    VT_COMPARE(r.layout, std::string("kohya"));
    VT_COMPARE(r.matched(), 2);
    for (const auto& m : r.modules)
        VT_CHECK_MSG(m.scale == (m.target == "time_embed.linear" ? 1.0 : 0.5), m.target << " " << m.scale);

    // The deltas carry strength x scale in up, so the run-time adapter is the reference delta.
    const auto deltas = must(lora::loadDeltas(r, 0.8, at::kFloat, at::kCPU));
    VT_COMPARE(deltas.size(), std::size_t(2));
    for (const auto& d : deltas) {
        const auto& up = d.target == "time_embed.linear" ? tb : qb;
        const double s = d.target == "time_embed.linear" ? 0.8 : 0.4;
        VT_CHECK(at::allclose(d.up, up * s, 1e-6, 1e-6));
    }
}

VT_TEST(whatCannotBeAppliedIsRefusedWithCounts)
{
    c10::InferenceMode guard;
    at::manual_seed(14);
    const std::vector<lora::Target> targets{
        target("transformer_blocks.0.attn1.to_q", 32, 32), target("transformer_blocks.0.attn1.to_k", 32, 32)};
    const auto file = scratch("mixed.safetensors");
    const auto a = at::randn({4, 32}), b = at::randn({32, 4});
    must(tensorfile::writeSafetensors(file,
        {
            // One good module.
            {"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight", a},
            {"diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight", b},
            // No such layer, and a shape that does not fit.
            {"diffusion_model.transformer_blocks.9.attn1.to_q.lora_A.weight", a},
            {"diffusion_model.transformer_blocks.9.attn1.to_q.lora_B.weight", b},
            {"diffusion_model.transformer_blocks.0.attn1.to_k.lora_A.weight", at::randn({4, 48})},
            {"diffusion_model.transformer_blocks.0.attn1.to_k.lora_B.weight", b},
            // LoHa, LoKr, DoRA, a full patch, a convolution, a text encoder, half a pair, a stray.
            {"lora_unet_blocks_1_hada_w1_a", a},
            {"lora_unet_blocks_1_hada_w1_b", a},
            {"lora_unet_blocks_1_hada_w2_a", a},
            {"lora_unet_blocks_1_hada_w2_b", a},
            {"lora_unet_blocks_2_lokr_w1", a},
            {"lora_unet_blocks_2_lokr_w2", a},
            {"transformer.transformer_blocks.0.attn1.to_v.lora_A.weight", a},
            {"transformer.transformer_blocks.0.attn1.to_v.lora_B.weight", b},
            {"transformer.transformer_blocks.0.attn1.to_v.lora_magnitude_vector", at::randn({32})},
            {"diffusion_model.transformer_blocks.0.norm.diff", at::randn({32})},
            {"lora_unet_conv.lora_down.weight", at::randn({4, 8, 3, 3})},
            {"lora_unet_conv.lora_up.weight", at::randn({8, 4, 1, 1})},
            {"lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", a},
            {"lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", b},
            {"diffusion_model.transformer_blocks.1.attn1.to_q.lora_A.weight", a},
            {"something_else", at::randn({3})},
        }));
    const auto r = must(lora::inspect(file, targets));
    VT_COMPARE(r.matched(), 1);
    VT_COMPARE(r.unmatched(), 2);
    const std::string text = r.toText();
    std::printf("%s", text.c_str());
    for (const char* word : {"LoHa", "LoKr", "DoRA", "full-weight", "convolution", "text-encoder", "half", "not a LoRA"})
        VT_CHECK_MSG(text.find(word) != std::string::npos, word << " missing from the report");
    VT_CHECK(text.find("transformer_blocks.9.attn1.to_q: no such layer") != std::string::npos);
    VT_CHECK(text.find("does not fit the layer's [32 x 32]") != std::string::npos);
    VT_CHECK_MSG(r.status().rfind("partial: 2 of 3 modules unmatched, 16 keys refused", 0) == 0, r.status());
    VT_CHECK(r.toJson().find("\"refused_keys\":16") != std::string::npos);
    // Only the good module becomes a delta.
    VT_COMPARE(must(lora::loadDeltas(r, 1.0, at::kFloat, at::kCPU)).size(), std::size_t(1));

    // Nothing usable: refused with the first reason.
    const auto loha = scratch("loha.safetensors");
    must(tensorfile::writeSafetensors(loha, {{"lora_unet_blocks_1_hada_w1_a", a}, {"lora_unet_blocks_1_hada_w1_b", a}}));
    const auto only = must(lora::inspect(loha, targets));
    VT_CHECK(!only.usable());
    VT_CHECK_MSG(only.status().find("refused: LyCORIS LoHa") == 0, only.status());

    // Hostile numbers: a NaN alpha is refused at inspection, NaN weights at loading.
    const auto nan = scratch("nan.safetensors");
    auto bad = b.clone();
    bad[0][0] = std::numeric_limits<float>::quiet_NaN();
    must(tensorfile::writeSafetensors(nan,
        {{"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight", a},
            {"diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight", bad},
            {"lora_unet_transformer_blocks_0_attn1_to_k.lora_down.weight", a},
            {"lora_unet_transformer_blocks_0_attn1_to_k.lora_up.weight", b},
            {"lora_unet_transformer_blocks_0_attn1_to_k.alpha", at::tensor(std::numeric_limits<float>::infinity())}}));
    const auto hostile = must(lora::inspect(nan, targets));
    VT_COMPARE(hostile.matched(), 1);
    VT_CHECK(hostile.toText().find("not a finite number") != std::string::npos);
    const auto loaded = lora::loadDeltas(hostile, 1.0, at::kFloat, at::kCPU);
    VT_CHECK(!loaded.ok() && loaded.error().message.find("NaN") != std::string::npos);

    // Broken metadata and a file that is not a LoRA at all name the file.
    const auto meta = scratch("meta.safetensors");
    must(tensorfile::writeSafetensors(meta,
        {{"transformer.transformer_blocks.0.attn1.to_q.lora_A.weight", a},
            {"transformer.transformer_blocks.0.attn1.to_q.lora_B.weight", b}},
        {{"lora_adapter_metadata", "{not json"}}));
    const auto m = lora::inspect(meta, targets);
    VT_CHECK(!m.ok() && m.error().message.find(meta.string()) != std::string::npos);
    // Metadata that would become millions of JSON nodes is refused before it is built.
    std::string many = "[";
    for (int i = 0; i < 300000; ++i)
        many += i ? ",[]" : "[]";
    many += "]";
    const auto bloated = scratch("bloated.safetensors");
    must(tensorfile::writeSafetensors(bloated,
        {{"transformer.transformer_blocks.0.attn1.to_q.lora_A.weight", a},
            {"transformer.transformer_blocks.0.attn1.to_q.lora_B.weight", b}},
        {{"lora_adapter_metadata", many}}));
    const auto big = lora::inspect(bloated, targets);
    VT_CHECK_MSG(!big.ok() && big.error().message.find(bloated.string()) != std::string::npos
            && big.error().message.find("lora_adapter_metadata holds more than") != std::string::npos,
        (big.ok() ? std::string("accepted") : big.error().message));
    VT_CHECK(!lora::inspect(scratch("absent.safetensors"), targets).ok());
}

// What the second adversarial pass found (issue #25): each refused with words for what it is,
// from the cheapest place that can tell.
VT_TEST(hostileRanksNumbersAndHeadersAreNamed)
{
    c10::InferenceMode guard;
    at::manual_seed(15);
    const std::vector<lora::Target> targets{target("transformer_blocks.0.attn1.to_q", 32, 32)};
    const auto a = at::randn({4, 32}) * 0.1, b = at::randn({32, 4}) * 0.1;
    auto pair = [&](const at::Tensor& down, const at::Tensor& up) {
        return std::map<std::string, at::Tensor>{{"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight", down},
            {"diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight", up}};
    };
    // Rank 0 and a rank larger than the layer: not "different ranks", which they are not.
    const auto zero = scratch("rank0.safetensors");
    must(tensorfile::writeSafetensors(zero, pair(at::zeros({0, 32}), at::zeros({32, 0}))));
    auto r0 = must(lora::inspect(zero, targets));
    VT_CHECK_MSG(
        !r0.usable() && r0.toText().find("rank 0") != std::string::npos && r0.toText().find("different ranks") == std::string::npos,
        r0.toText());
    const auto huge = scratch("rank5000.safetensors");
    must(tensorfile::writeSafetensors(huge, pair(at::zeros({5000, 32}), at::zeros({32, 5000}))));
    auto r5000 = must(lora::inspect(huge, targets));
    VT_CHECK_MSG(!r5000.usable() && r5000.toText().find("rank 5000, above the 4096") != std::string::npos, r5000.toText());
    // A PEFT alpha that is no number is an error, not the rank in its place.
    const auto word = scratch("alpha-word.safetensors");
    must(tensorfile::writeSafetensors(word,
        {{"transformer.transformer_blocks.0.attn1.to_q.lora_A.weight", a},
            {"transformer.transformer_blocks.0.attn1.to_q.lora_B.weight", b}},
        {{"lora_adapter_metadata", R"({"lora_alpha": "eight", "r": 4})"}}));
    auto alpha = lora::inspect(word, targets);
    VT_CHECK_MSG(!alpha.ok() && alpha.error().message.find("lora_alpha") != std::string::npos
            && alpha.error().message.find("\"eight\"") != std::string::npos
            && alpha.error().message.find("not a number") != std::string::npos,
        (alpha.ok() ? std::string("accepted") : alpha.error().message));
    // A header far larger than any LoRA's is refused from its first bytes, before it is parsed.
    const auto header = scratch("header.safetensors");
    must(tensorfile::writeSafetensors(header, pair(a, b), {{"padding", std::string(17 << 20, 'a')}}));
    auto big = lora::inspect(header, targets);
    VT_CHECK_MSG(!big.ok() && big.error().message.find("safetensors header is") != std::string::npos
            && big.error().message.find(header.string()) != std::string::npos,
        (big.ok() ? std::string("accepted") : big.error().message));
    // Weights that would move a layer by more than any trained LoRA does (3e38), and a strength
    // far outside what LoRAs are made for: the first refused, the second applied and said.
    const auto wild = scratch("wild.safetensors");
    auto down = a.clone();
    down[0][0] = 3e38f;
    must(tensorfile::writeSafetensors(wild, pair(down, b)));
    auto wildReport = must(lora::inspect(wild, targets));
    auto wildDeltas = lora::loadDeltas(wildReport, 1.0, at::kFloat, at::kCPU);
    VT_CHECK_MSG(!wildDeltas.ok() && wildDeltas.error().message.find("could change a weight by up to") != std::string::npos,
        (wildDeltas.ok() ? std::string("accepted") : wildDeltas.error().message));
    const auto tame = scratch("tame.safetensors");
    must(tensorfile::writeSafetensors(tame, pair(a, b)));
    std::vector<nn::LoraDelta> deltas;
    const auto outcomes = lora::prepare({{tame, 100.0}, {tame, 1.0}}, targets, at::kFloat, at::kCPU, &deltas);
    VT_COMPARE(outcomes.size(), std::size_t(2));
    VT_CHECK_MSG(outcomes[0].status.find("strength 100 is far outside") != std::string::npos, outcomes[0].status);
    VT_CHECK_MSG(outcomes[1].status == "applied", outcomes[1].status);
    VT_COMPARE(deltas.size(), std::size_t(2));
}

VT_TEST(cleanup)
{
    // libtorch ships its own std::filesystem::remove_all, which crashes: one file at a time.
    for (const char* f :
        {"peft", "comfy", "kohya", "mixed", "loha", "nan", "meta", "bloated", "rank0", "rank5000", "alpha-word", "header", "wild", "tame"})
        ::unlink(scratch(std::string(f) + ".safetensors").c_str());
    VT_CHECK(::rmdir(scratch("x").parent_path().c_str()) == 0);
}

VT_MAIN("TestLora")
