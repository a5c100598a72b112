// Gemma 4 unified (LTX-2.5's text encoder) against transformers 5.24 at a tiny size
// (tests/fixtures/make_gemma4_fixtures.py): the hidden states diffusers' LTX-2 pipeline stacks,
// with the keys as the values on full layers and with a v_proj, in the diffusers folder and in
// Lightricks' self-contained single file.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/gemma3/gemma3.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>

using namespace vireo;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;

const gemma3::TextEncoder& encoder(const std::string& what)
{
    static std::map<std::string, gemma3::TextEncoder> cache;
    if (auto it = cache.find(what); it != cache.end())
        return it->second;
    auto m = gemma3::TextEncoder::load(test::fixturesDir() / what);
    if (!m)
        throw std::runtime_error(what + ": " + m.error().message);
    return cache.emplace(what, std::move(*m)).first->second;
}

// Max abs error over the positions the mask keeps, and over the padded ones.
std::pair<double, double> errors(const at::Tensor& out, const at::Tensor& expected, const at::Tensor& mask)
{
    const auto diff = (out.to(at::kDouble) - expected.to(at::kDouble)).abs().amax({2, 3});  // [B, T]
    const auto valid = mask.to(at::kBool);
    const auto pick = [&](const at::Tensor& m) { return m.any().item<bool>() ? diff.masked_select(m).max().item<double>() : 0.0; };
    return {pick(valid), pick(valid.logical_not())};
}

void checkCase(const std::string& model, const std::string& caseFile)
{
    auto set = tensorfile::readTensorSet(test::fixturesDir() / caseFile);
    VT_CHECK_MSG(set.ok(), (set.ok() ? "" : set.error().message));
    const auto& ids = *set->find("input_ids");
    const auto& mask = *set->find("attention_mask");
    const auto& expected = *set->find("expected.hidden");
    const auto& m = encoder(model);
    const auto& c = m.config();
    VT_CHECK(c.family == gemma3::Family::Gemma4);
    auto out = m.forward(ids, mask);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    VT_COMPARE(out->sizes().vec(), expected.sizes().vec());
    const auto [valid, padded] = errors(*out, expected, mask);
    std::printf("   %-28s valid rows %.2e, padded rows %.2e (|y| max %.2f)\n", caseFile.c_str(), valid, padded,
        expected.abs().max().item<double>());
    VT_CHECK_MSG(valid <= kTolerance && padded <= kTolerance, caseFile << ": max abs error above 1e-4");
    VT_CHECK(at::isfinite(*out).all().item<bool>());
}

}  // namespace

// The LTX-2.5 shape in small: full layers whose values are their raw keys (no v_proj), one
// key/value head of twice the width, proportional RoPE, a window that masks, and placeholder
// ids that must become padding before the lookup.
VT_TEST(keysAsValuesMatchTransformers)
{
    checkCase("model", "case.safetensors");
    const auto& c = encoder("model").config();
    VT_CHECK(c.fullKeyIsValue && c.fullHeadDim == 2 * c.headDim && c.fullKvHeads == 1 && c.ropeFull.proportional);
    VT_CHECK(c.layerTypes[5] == gemma3::LayerType::Full && c.layerTypes[4] == gemma3::LayerType::Sliding);
    VT_CHECK(!c.placeholderIds.empty());
}

VT_TEST(aValueProjectionMatchesTransformers)
{
    checkCase("model_v", "case_v.safetensors");
    VT_CHECK(!encoder("model_v").config().fullKeyIsValue);
}

// Lightricks' single file: the language model under model.*, its config in the gemma_config
// metadata, and the text projection, tokenizer and Hub files beside it, which the encoder leaves.
VT_TEST(theSelfContainedSingleFileMatches)
{
    checkCase("comfy.safetensors", "case_comfy.safetensors");
    VT_COMPARE(encoder("comfy.safetensors").residentBytes(), encoder("model").residentBytes());
}

VT_TEST(configParsing)
{
    const auto base = json{{"model_type", "gemma4_unified"},
        {"text_config",
            {{"model_type", "gemma4_unified_text"}, {"hidden_size", 64}, {"num_hidden_layers", 6}, {"num_attention_heads", 4},
                {"num_key_value_heads", 2}, {"head_dim", 16}, {"attention_k_eq_v", true}, {"global_head_dim", 32},
                {"num_global_key_value_heads", 1}}}};
    // The constructor's form (global_head_dim) and the saved one (per_layer_config) agree.
    auto c = gemma3::parseTextConfig(base.dump(), "a/config.json");
    VT_CHECK_MSG(c.ok(), (c.ok() ? "" : c.error().message));
    VT_CHECK(c->fullHeadDim == 32 && c->fullKvHeads == 1 && c->layerTypes.back() == gemma3::LayerType::Full);
    VT_CHECK(
        c->ropeFull.proportional && c->ropeFull.partialRotaryFactor == 0.25 && c->ropeFull.theta == 1e6 && c->ropeSliding.theta == 1e4);
    VT_COMPARE(c->placeholderIds.size(), std::size_t{3});
    auto saved = base;
    saved["text_config"].erase("global_head_dim");
    saved["text_config"].erase("num_global_key_value_heads");
    saved["text_config"]["per_layer_config"] = {{"5", {{"head_dim", 32}, {"num_key_value_heads", 1}}}};
    auto d = gemma3::parseTextConfig(saved.dump(), "b/config.json");
    VT_CHECK(d.ok() && d->fullHeadDim == 32 && d->fullKvHeads == 1);

    auto refused = [](const json& j, const char* word) {
        auto r = gemma3::parseTextConfig(j.dump(), "x/config.json");
        VT_CHECK_MSG(
            !r.ok() && r.error().message.find(word) != std::string::npos && r.error().message.find("x/config.json") != std::string::npos,
            (r.ok() ? std::string("accepted") : r.error().message));
    };
    refused(json{{"model_type", "gemma4"}}, "prompt enhancer");
    auto j = base;
    j["text_config"]["num_kv_shared_layers"] = 2;
    refused(j, "num_kv_shared_layers");
    j = base;
    j["text_config"]["use_bidirectional_attention"] = "all";
    refused(j, "use_bidirectional_attention");
    j = saved;
    j["text_config"]["per_layer_config"] = {{"2", {{"head_dim", 32}}}};
    refused(j, "sliding layer 2");
    j = saved;
    j["text_config"]["per_layer_config"] = {{"99", {{"head_dim", 32}}}};
    refused(j, "'99'");
    j = base;
    j["text_config"]["rope_parameters"] = {
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 2.0}, {"rope_theta", 1e6}}},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
    refused(j, "partial_rotary_factor");
    j = base;
    j["text_config"]["global_head_dim"] = 33;
    refused(j, "head_dim 33");
}

VT_MAIN("test_gemma4")
