// Gemma 4 unified (LTX-2.5's text encoder) against transformers 5.24 at a tiny size
// (tests/fixtures/make_gemma4_fixtures.py): the hidden states diffusers' LTX-2 pipeline stacks,
// with the keys as the values on full layers and with a v_proj, in the diffusers folder and in
// Lightricks' self-contained single file.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/gemma3/gemma3.h"
#include "inference/models/gemma3/gemma3vision.h"
#include "inference/models/gemma3/gemma4vision.h"
#include "inference/models/ltx2/ltx2promptenhancer.h"
#include "inference/text/chattemplate.h"
#include "inference/text/tokenizer.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <stop_token>

#include <sys/stat.h>
#include <unistd.h>

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
    refused(json{{"model_type", "gemma4"}}, "text_config");
    // The dense Gemma 4 (a prompt enhancer) parses, with Gemma4TextConfig's defaults; only the
    // causal LM loads it.
    auto dense = gemma3::parseTextConfig(
        json{{"model_type", "gemma4_text"}, {"hidden_size", 64}, {"num_hidden_layers", 6}, {"num_kv_shared_layers", 2},
            {"layer_types",
                {"sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"}},
            {"eos_token_id", json::array({1, 106})}}
            .dump(),
        "e/config.json");
    VT_CHECK_MSG(dense.ok(), (dense.ok() ? "" : dense.error().message));
    VT_CHECK(dense->dense && dense->perLayerDim == 256 && dense->slidingWindow == 512 && dense->kvSharedLayers == 2);
    VT_CHECK(dense->eosIds == (std::vector<std::int64_t>{1, 106}));
    // Each shared layer reads the last layer of its type before the shared ones.
    VT_COMPARE(dense->kvSourceOf(4), std::int64_t{3});
    VT_COMPARE(dense->kvSourceOf(5), std::int64_t{2});
    VT_COMPARE(dense->kvSourceOf(1), std::int64_t{1});
    refused(json{{"model_type", "gemma4_text"}, {"num_hidden_layers", 6}, {"num_kv_shared_layers", 1}}, "no earlier layer");
    refused(json{{"model_type", "gemma4_text"}, {"enable_moe_block", true}}, "mixture-of-experts");
    refused(json{{"model_type", "gemma4_text"}, {"final_logit_softcapping", -1}}, "final_logit_softcapping");
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

// ---------------------------------------------------------------- the prompt enhancer

namespace {

fs::path enhancerDir()
{
    return test::fixturesRoot() / "gemma4enhancer";
}

const tensorfile::TensorSet& enhancerCase()
{
    static const auto set = [] {
        auto s = tensorfile::readTensorSet(enhancerDir() / "case.safetensors");
        if (!s)
            throw std::runtime_error(s.error().message);
        return std::move(*s);
    }();
    return set;
}

std::vector<std::int64_t> idsOf(const at::Tensor& t)
{
    const auto c = t.to(at::kLong).contiguous().view({-1});
    return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

}  // namespace

// gemma-4-E2B-it's shape in small (per-layer embeddings, the last 3 layers reusing earlier keys
// and values with double-width MLPs, a soft cap that bites): transformers' greedy generate with
// no repeated 5-gram, token for token, each step's logits to float32 precision, and an EOS
// that stops the run where transformers stops.
VT_TEST(theEnhancerModelGeneratesAsTransformers)
{
    const auto& set = enhancerCase();
    auto lm = gemma3::CausalLm::load(enhancerDir() / "prompt_enhancer");
    VT_CHECK_MSG(lm.ok(), (lm.ok() ? "" : lm.error().message));
    const auto& c = lm->config();
    VT_CHECK(c.dense && c.perLayerDim == 8 && c.kvSharedLayers == 3 && c.doubleWideMlp && c.finalLogitSoftcap == 5.0);
    VT_COMPARE(c.kvSourceOf(5), std::int64_t{2});
    VT_COMPARE(c.kvSourceOf(6), std::int64_t{4});
    VT_COMPARE(c.kvSourceOf(7), std::int64_t{2});
    VT_COMPARE(lm->eosIds().size(), std::size_t{2});  // generation_config.json's [<eos>, <turn|>]
    VT_CHECK(lm->hostBytes() > 0);

    gemma3::GenerateOptions options;
    options.maxNewTokens = 40;
    options.noRepeatNgram = 5;
    int progressed = 0;
    options.progress = [&](int done, int) { progressed = done; };
    auto out = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), options);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    VT_CHECK(out->ids == idsOf(*set.find("generated")));
    VT_CHECK(!out->stoppedAtEos && progressed == 40);
    const auto& expected = *set.find("logits");
    VT_COMPARE(out->logits.sizes().vec(), expected.sizes().vec());
    const auto err = (out->logits - expected).abs().max().item<double>();
    const auto first = (out->logits[0] - expected[0]).abs().max().item<double>();
    const auto scale = expected.abs().max().item<double>();
    std::printf("   40 tokens as transformers; logits max abs error %.2e over all steps, %.2e at the first (|logit| max %.2f)\n", err,
        first, scale);
    // The cached steps add float32 rounding step by step (the first, the prompt's, is 1e-6).
    VT_CHECK(first < 1e-5 && err < 1e-4 * std::max(1.0, scale));

    // The logits come back as the model gave them, before the n-gram rule banned anything
    // (n = 1 bans every token the prompt holds).
    auto banning = options;
    banning.noRepeatNgram = 1;
    banning.maxNewTokens = 2;
    auto banned = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), banning);
    VT_CHECK(banned.ok() && at::isfinite(banned->logits).all().item<bool>() && at::equal(banned->logits[0], out->logits[0]));

    options.eosIds = lm->eosIds();
    options.eosIds.push_back(idsOf(*set.find("early_eos")).at(0));
    auto early = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), options);
    VT_CHECK(early.ok() && early->stoppedAtEos && early->ids == idsOf(*set.find("early_generated")));

    // Cancelled between tokens; a right-padded prompt refused.
    std::stop_source stopped;
    stopped.request_stop();
    auto cancelled = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), options, stopped.get_token());
    VT_CHECK(!cancelled.ok() && cancelled.error().code == ErrorCode::Cancelled);
    auto flipped = lm->generate(set.find("input_ids")->flip(1), set.find("attention_mask")->flip(1), options);
    VT_CHECK(!flipped.ok() && flipped.error().message.find("pad on the left") != std::string::npos);

    // Not a text encoder.
    auto asEncoder = gemma3::TextEncoder::load(enhancerDir() / "prompt_enhancer");
    VT_CHECK(!asEncoder.ok() && asEncoder.error().message.find("not a text encoder") != std::string::npos);
}

// transformers' NoRepeatNGramLogitsProcessor on sequences that repeat themselves.
VT_TEST(noRepeatNgramBansWhatTransformersBans)
{
    const auto& set = enhancerCase();
    const auto rows = *set.find("ngram_rows");
    const auto banned = *set.find("ngram_banned");
    int bans = 0;
    for (std::int64_t r = 0; r < rows.size(0); ++r) {
        const auto row = idsOf(rows[r]);
        const int n = static_cast<int>(row[0]);
        const std::vector<std::int64_t> sequence(row.begin() + 2, row.begin() + 2 + row[1]);
        std::vector<std::int64_t> expected;
        for (std::int64_t t = 0; t < banned.size(1); ++t)
            if (banned[r][t].item<std::int64_t>())
                expected.push_back(t);
        VT_CHECK_MSG(gemma3::noRepeatNgramBans(sequence, n) == expected, "row " << r << " (n " << n << ")");
        bans += static_cast<int>(expected.size());
    }
    VT_CHECK(bans > 5);
}

// The whole enhancer against diffusers' enhance_prompt: the chat text, its tokens, the greedy
// reply, the decode without special tokens and clean_response.
VT_TEST(theEnhancerRewritesAsDiffusers)
{
    const auto& set = enhancerCase();
    const auto& meta = set.metadata;
    VT_CHECK(ltx2::PromptEnhancer::present(enhancerDir()));
    VT_CHECK(!ltx2::PromptEnhancer::present(test::fixturesDir()));
    auto enhancer = ltx2::PromptEnhancer::load(enhancerDir());
    VT_CHECK_MSG(enhancer.ok(), (enhancer.ok() ? "" : enhancer.error().message));
    const auto chat = ltx2::PromptEnhancer::chatText(meta.at("system"), "user prompt: " + meta.at("prompt"));
    VT_COMPARE(chat, meta.at("template"));
    // The processor's ids: the chat text with the tokenizer's specials (a second <bos>, as the
    // references feed it), after the alignment padding.
    auto encoded = enhancer->tokenizer().encode(chat, 4096, false, true, false);
    VT_CHECK(encoded.ok());
    auto fed = idsOf(*set.find("input_ids"));
    const auto mask = idsOf(*set.find("attention_mask"));
    fed.erase(fed.begin(), fed.begin() + std::count(mask.begin(), mask.end(), 0));
    encoded->ids.resize(static_cast<std::size_t>(std::count(encoded->attentionMask.begin(), encoded->attentionMask.end(), 1)));
    auto show = [](const std::vector<std::int64_t>& v) {
        std::string t;
        for (std::size_t i = 0; i < std::min<std::size_t>(v.size(), 40); ++i)
            t += std::to_string(v[i]) + " ";
        return t + "(" + std::to_string(v.size()) + ")";
    };
    VT_CHECK_MSG(encoded->ids == fed, show(encoded->ids) << " vs " << show(fed));

    ltx2::EnhanceOptions options;
    options.systemPrompt = meta.at("system");
    options.maxNewTokens = 40;
    auto out = enhancer->enhance(meta.at("prompt"), options);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    VT_COMPARE(out->raw, meta.at("decoded"));
    VT_COMPARE(out->prompt, meta.at("enhanced"));
    VT_CHECK(out->tokens == 40 && !out->stoppedAtEos);
    // The chat came from processor/'s own template, rendered.
    std::string note = "unset";
    VT_COMPARE(enhancer->chat(meta.at("system"), "user prompt: " + meta.at("prompt"), &note), meta.at("template"));
    VT_CHECK(note.empty() && out->chatNote.empty());
}

// LTX-2.0/2.3's self-enhancement: the Gemma 3 text encoder writes the prompt, sampled as
// diffusers' LTX2Pipeline.enhance_prompt samples it (temperature 0.7, the model's top_k 24 and
// top_p 0.9, the RNG seeded with the seed): the same chat text, the same tokens drawn, the same
// prompt; another seed writes another; the encoder's weights are shared, not copied.
VT_TEST(gemma3WritesThePromptAsDiffusersSamplesIt)
{
    static const auto set = [] {
        auto s = tensorfile::readTensorSet(enhancerDir() / "gemma3_case.safetensors");
        if (!s)
            throw std::runtime_error(s.error().message);
        return std::move(*s);
    }();
    const auto& meta = set.metadata;
    const auto seed = std::stoull(meta.at("seed"));
    const auto chat = ltx2::PromptEnhancer::chatText(meta.at("system"), "user prompt: " + meta.at("prompt"), gemma3::Family::Gemma3);
    VT_COMPARE(chat, meta.at("template"));

    // The language model alone: generation_config.json's sampling, then transformers' draws.
    auto lm = gemma3::CausalLm::load(enhancerDir() / "gemma3");
    VT_CHECK_MSG(lm.ok(), (lm.ok() ? "" : lm.error().message));
    if (!lm.ok())
        return;
    const auto& d = lm->generationDefaults();
    VT_CHECK(d.doSample && d.topK == 24 && d.topP == 0.9 && d.eosIds.size() == 2 && d.unapplied.empty());
    gemma3::GenerateOptions options;
    options.maxNewTokens = 40;
    options.sampling = gemma3::Sampling{0.7, d.topK, d.topP, seed};
    auto out = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), options);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    if (!out.ok())
        return;
    const auto expected = idsOf(*set.find("generated"));
    std::size_t same = 0;
    while (same < expected.size() && same < out->ids.size() && out->ids[same] == expected[same])
        ++same;
    const auto err = (out->logits - *set.find("logits")).abs().max().item<double>();
    std::printf("   %zu of %zu sampled tokens as transformers; logits max abs error %.2e\n", same, expected.size(), err);
    VT_CHECK(out->ids == expected && err < 1e-4);
    VT_CHECK(idsOf(*set.find("greedy")) != expected);
    auto greedy = options;
    greedy.sampling.reset();
    auto g = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), greedy);
    VT_CHECK(g.ok() && g->ids == idsOf(*set.find("greedy")));
    auto other = options;
    other.sampling->seed = seed + 1;
    auto o = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), other);
    VT_CHECK(o.ok() && o->ids != expected);
    // Without top-k and top-p the same seed draws from the whole distribution: other tokens.
    auto wide = options;
    wide.sampling->topK = 0;
    wide.sampling->topP = 1.0;
    auto w = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), wide);
    VT_CHECK(w.ok() && w->ids != expected);
    auto bad = options;
    bad.sampling->topP = 0;
    VT_CHECK(!lm->generate(*set.find("input_ids"), *set.find("attention_mask"), bad).ok());

    // The whole enhancer, from the folder and sharing a loaded text encoder's weights.
    ltx2::EnhanceOptions eo;
    eo.systemPrompt = meta.at("system");
    eo.maxNewTokens = 40;
    eo.seed = seed;
    auto enhancer = ltx2::PromptEnhancer::load(enhancerDir() / "gemma3");
    VT_CHECK_MSG(enhancer.ok(), (enhancer.ok() ? "" : enhancer.error().message));
    auto enhanced = enhancer->enhance(meta.at("prompt"), eo);
    VT_CHECK_MSG(enhanced.ok(), (enhanced.ok() ? "" : enhanced.error().message));
    VT_CHECK(enhanced.ok() && enhanced->raw == meta.at("decoded") && enhanced->prompt == meta.at("enhanced"));
    VT_CHECK(enhanced.ok() && enhanced->decoding == "sampled: temperature 0.7, top_k 24, top_p 0.9, seed " + meta.at("seed"));
    VT_CHECK(enhanced.ok() && enhanced->chatNote.empty());  // Gemma 3's template from tokenizer_config.json

    auto encoder = gemma3::TextEncoder::load(enhancerDir() / "gemma3");
    auto tokenizer = text::Tokenizer::load(enhancerDir() / "gemma3");
    VT_CHECK(encoder.ok() && tokenizer.ok());
    if (!encoder.ok() || !tokenizer.ok())
        return;
    auto shared = ltx2::PromptEnhancer::sharing(
        *encoder, std::make_shared<const text::Tokenizer>(std::move(*tokenizer)), "gemma3", enhancerDir() / "gemma3");
    VT_CHECK_MSG(shared.ok(), (shared.ok() ? "" : shared.error().message));
    if (!shared.ok())
        return;
    auto again = shared->enhance(meta.at("prompt"), eo);
    VT_CHECK(again.ok() && again->prompt == meta.at("enhanced"));
    VT_COMPARE(shared->model().residentBytes(), encoder->residentBytes());

    // LTX-2.5's unified Gemma 4 is an encoder only.
    auto unified = gemma3::TextEncoder::load(test::fixturesDir() / "model");
    VT_CHECK(unified.ok());
    if (unified.ok()) {
        auto refused = gemma3::CausalLm::sharing(*unified);
        VT_CHECK(!refused.ok() && refused.error().message.find("not trained") != std::string::npos);
    }
}

// LTX-2.0/2.3's image-to-video self-enhancement: PIL's resizes bit for bit, the processor's
// pixels, the SigLIP tower and projector, the image placeholders with their two-way mask, and the
// sampled reply, against diffusers' LTX2ImageToVideoPipeline.enhance_prompt.
VT_TEST(gemma3SeesTheFirstFrameAsDiffusersDoes)
{
    auto read = tensorfile::readTensorSet(enhancerDir() / "gemma3_i2v_case.safetensors");
    VT_CHECK_MSG(read.ok(), (read.ok() ? "" : read.error().message));
    if (!read.ok())
        return;
    const auto& set = *read;
    const auto& meta = set.metadata;
    const auto resizes = std::stoi(meta.at("resizes"));
    int exact = 0;
    for (int i = 0; i < resizes; ++i) {
        const auto p = "resize" + std::to_string(i) + "_";
        const auto& want = *set.find(p + "out");
        const auto got = gemma3::pilResize(
            *set.find(p + "in"), want.size(1), want.size(0), static_cast<int>(set.find(p + "filter")->item<std::int64_t>()));
        if (at::equal(got, want))
            ++exact;
        else if (got.sizes() != want.sizes())
            std::printf("   resize %d: %s, Pillow %s\n", i, c10::str(got.sizes()).c_str(), c10::str(want.sizes()).c_str());
        else
            std::printf("   resize %d: %lld values differ, by up to %lld\n", i,
                static_cast<long long>((got != want).sum().item<std::int64_t>()),
                static_cast<long long>((got.to(at::kInt) - want.to(at::kInt)).abs().max().item<std::int32_t>()));
    }
    const auto prepared = gemma3::prepareEnhanceImage(*set.find("image"));
    std::printf("   %d of %d PIL resizes bit-exact; the enhancer's 896 prep %s\n", exact, resizes,
        at::equal(prepared, *set.find("prepared")) ? "bit-exact" : "differs");
    VT_CHECK(exact == resizes && at::equal(prepared, *set.find("prepared")));

    auto vision = gemma3::VisionTower::load(enhancerDir() / "gemma3");
    VT_CHECK_MSG(vision.ok(), (vision.ok() ? "" : vision.error().message));
    if (!vision.ok())
        return;
    const auto& vc = vision->config();
    VT_CHECK(vc.imageSize == 56 && vc.patchSize == 14 && vc.tokensPerImage == 4 && vc.layers == 2 && vc.textHidden == 48);
    auto processing = gemma3::readImageProcessing(vc, {enhancerDir() / "gemma3"});
    VT_CHECK_MSG(processing.ok(), (processing.ok() ? "" : processing.error().message));
    if (!processing.ok())
        return;
    VT_CHECK(processing->imageSeqLength == 4 && processing->resample == 2 && processing->width == 56);
    const auto pixels = gemma3::preprocessImage(prepared, *processing);
    const auto pixelErr = (pixels - *set.find("pixel_values")).abs().max().item<double>();
    auto features = vision->embed(*set.find("pixel_values"));
    VT_CHECK_MSG(features.ok(), (features.ok() ? "" : features.error().message));
    if (!features.ok())
        return;
    const auto featureErr = (*features - *set.find("image_features")).abs().max().item<double>();
    std::printf("   pixels max abs error %.2e; image features %.2e\n", pixelErr, featureErr);
    VT_CHECK(pixelErr == 0.0 && featureErr < 1e-5);

    // The language model with the features over the placeholders.
    auto lm = gemma3::CausalLm::load(enhancerDir() / "gemma3");
    VT_CHECK(lm.ok());
    if (!lm.ok())
        return;
    const auto seed = std::stoull(meta.at("seed"));
    gemma3::GenerateOptions options;
    options.maxNewTokens = 40;
    options.sampling = gemma3::Sampling{0.7, 24, 0.9, seed};
    options.imageFeatures = features->flatten(0, 1);
    auto out = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), options);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    if (!out.ok())
        return;
    const auto expected = idsOf(*set.find("generated"));
    const auto err = (out->logits - *set.find("logits")).abs().max().item<double>();
    std::printf("   %s sampled tokens as transformers; logits max abs error %.2e\n", out->ids == expected ? "all" : "NOT all", err);
    VT_CHECK(out->ids == expected && err < 1e-4);
    auto wrongCount = options;
    wrongCount.imageFeatures = features->flatten(0, 1).narrow(0, 0, 3);
    VT_CHECK(!lm->generate(*set.find("input_ids"), *set.find("attention_mask"), wrongCount).ok());

    // The whole enhancer sharing a loaded text encoder, shown the image.
    auto encoder = gemma3::TextEncoder::load(enhancerDir() / "gemma3");
    auto tokenizer = text::Tokenizer::load(enhancerDir() / "gemma3");
    VT_CHECK(encoder.ok() && tokenizer.ok());
    if (!encoder.ok() || !tokenizer.ok())
        return;
    auto sharedTokenizer = std::make_shared<const text::Tokenizer>(std::move(*tokenizer));
    auto tower = std::make_shared<const gemma3::VisionTower>(std::move(*vision));
    auto shared = ltx2::PromptEnhancer::sharing(*encoder, sharedTokenizer, "gemma3", enhancerDir() / "gemma3", tower);
    VT_CHECK_MSG(shared.ok(), (shared.ok() ? "" : shared.error().message));
    if (!shared.ok())
        return;
    VT_COMPARE(shared->whyBlind(), std::string());
    std::string note = "unset";
    VT_COMPARE(shared->imageChat(meta.at("system"), "User Raw Input Prompt: " + meta.at("prompt") + ".", &note), meta.at("template"));
    VT_CHECK(note.empty());
    VT_COMPARE(ltx2::PromptEnhancer::chatText(
                   meta.at("system"), "User Raw Input Prompt: " + meta.at("prompt") + ".", gemma3::Family::Gemma3, true),
        meta.at("template"));
    ltx2::EnhanceOptions eo;
    eo.systemPrompt = meta.at("system");
    eo.maxNewTokens = 40;
    eo.seed = seed;
    eo.image = *set.find("image");
    auto enhanced = shared->enhance(meta.at("prompt"), eo);
    VT_CHECK_MSG(enhanced.ok(), (enhanced.ok() ? "" : enhanced.error().message));
    VT_CHECK(enhanced.ok() && enhanced->prompt == meta.at("enhanced") && enhanced->tokens == 40);

    // Without the tower it says why, and refuses an image rather than ignore it.
    auto blind = ltx2::PromptEnhancer::sharing(*encoder, sharedTokenizer, "gemma3", enhancerDir() / "gemma3");
    VT_CHECK(blind.ok() && !blind->whyBlind().empty());
    if (blind.ok()) {
        auto refused = blind->enhance(meta.at("prompt"), eo);
        VT_CHECK(!refused.ok() && refused.error().message.find("first frame") != std::string::npos);
    }
    // Processor files that ask for what is not built are refused, naming the file.
    const auto dir = fs::temp_directory_path() / ("vireo_g3proc_" + std::to_string(::getpid()));
    ::mkdir(dir.c_str(), 0700);
    std::ofstream(dir / "preprocessor_config.json") << R"({"do_pan_and_scan": true, "size": {"height": 56, "width": 56}})";
    auto pan = gemma3::readImageProcessing(vc, {dir});
    VT_CHECK(!pan.ok() && pan.error().message.find("pan-and-scan") != std::string::npos);
    std::ofstream(dir / "preprocessor_config.json") << R"({"size": {"height": 64, "width": 64}, "resample": 3})";
    auto size = gemma3::readImageProcessing(vc, {dir});
    VT_CHECK(!size.ok() && size.error().message.find("preprocessor_config.json") != std::string::npos);
    std::ofstream(dir / "preprocessor_config.json") << R"({"size": {"height": 56, "width": 56}, "resample": 3, "image_seq_length": 4})";
    std::ofstream(dir / "tokenizer_config.json")
        << R"({"boi_token": {"content": "<boi>"}, "extra_special_tokens": {"image_token": "<img>"}})";
    auto hub = gemma3::readImageProcessing(vc, {dir});
    VT_CHECK(hub.ok() && hub->resample == 3 && hub->boiToken == "<boi>" && hub->imageToken == "<img>" && hub->eoiToken == "<end_of_image>");
    if (hub.ok())
        VT_COMPARE(hub->expand("a<boi>b"), std::string("a\n\n<boi><img><img><img><img><end_of_image>\n\nb"));
    for (const char* f : {"preprocessor_config.json", "tokenizer_config.json"})
        ::unlink((dir / f).c_str());
    ::rmdir(dir.c_str());

    // Vision configs are read as untrusted: none is NotFound (a text-only Gemma 3), sizes that do not
    // pool into the token count are refused.
    auto none = gemma3::parseVisionConfig(R"({"text_config": {"hidden_size": 48}})", "c.json");
    VT_CHECK(!none.ok() && none.error().code == ErrorCode::NotFound);
    auto untiled =
        gemma3::parseVisionConfig(R"({"vision_config": {"image_size": 56, "patch_size": 14}, "mm_tokens_per_image": 9})", "c.json");
    VT_CHECK(!untiled.ok() && untiled.error().message.find("does not pool") != std::string::npos);
    auto huge = gemma3::parseVisionConfig(R"({"vision_config": {"num_hidden_layers": 100000}})", "c.json");
    VT_CHECK(!huge.ok() && huge.error().message.find("num_hidden_layers") != std::string::npos);

    // A text-only export has no tower: NotFound, which the pipeline turns into a note.
    auto textOnly = gemma3::VisionTower::load(test::fixturesDir() / "model");
    VT_CHECK(!textOnly.ok() && textOnly.error().code == ErrorCode::NotFound);
}

namespace {

// A copy of `from` (a small fixture folder) in `to`, with config.json edited by `edit`.
void copyModelFolder(const fs::path& from, const fs::path& to, const std::function<void(json&)>& edit)
{
    ::mkdir(to.c_str(), 0700);
    for (const char* name : {"config.json", "generation_config.json", "model.safetensors"}) {
        std::ifstream in(from / name, std::ios::binary);
        if (!in)
            continue;
        if (std::string(name) == "config.json") {
            auto j = json::parse(in);
            edit(j);
            std::ofstream(to / name) << j.dump();
        } else {
            std::ofstream(to / name, std::ios::binary) << in.rdbuf();
        }
    }
}

void removeModelFolder(const fs::path& dir)
{
    for (const char* name :
        {"config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json", "tokenizer_config.json"})
        ::unlink((dir / name).c_str());
    ::rmdir(dir.c_str());
}

}  // namespace

// LTX-2.5's dedicated enhancer shown the first frame: Gemma4ImageProcessor's aspect-kept resize
// to the patch budget and its patches, the vision tower (axial RoPE, clipped linears, pooling,
// standardization) and embedder, the soft tokens over the placeholders, and the greedy reply,
// against diffusers' LTX2DFRPipeline.enhance_prompt with Gemma4Processor.
VT_TEST(gemma4SeesTheFirstFrameAsDiffusersDoes)
{
    auto read = tensorfile::readTensorSet(enhancerDir() / "gemma4_i2v_case.safetensors");
    VT_CHECK_MSG(read.ok(), (read.ok() ? "" : read.error().message));
    if (!read.ok())
        return;
    const auto& set = *read;
    const auto& meta = set.metadata;
    const auto root = enhancerDir() / "gemma4_i2v";

    // get_aspect_ratio_preserving_size, thin images and refusals included.
    const auto sizes = *set.find("sizes");
    int sized = 0, refused = 0;
    for (std::int64_t r = 0; r < sizes.size(0); ++r) {
        const auto v = idsOf(sizes[r]);  // h, w, patch, soft tokens, pooling, target h, target w
        const auto target = gemma3::gemma4ResizeTarget(v[0], v[1], v[2], v[3] * v[4] * v[4], v[4]);
        if (v[5] < 0) {
            VT_CHECK_MSG(!target.ok(), "row " << r << " should be refused");
            refused += target.ok() ? 0 : 1;
        } else {
            VT_CHECK_MSG(target.ok() && target->first == v[5] && target->second == v[6],
                "row " << r << ": " << v[0] << "x" << v[1] << " -> " << (target.ok() ? target->first : -1) << "x"
                       << (target.ok() ? target->second : -1) << ", expected " << v[5] << "x" << v[6]);
            sized += target.ok() && target->first == v[5] && target->second == v[6] ? 1 : 0;
        }
    }
    // (transformers refuses no shape these budgets allow: a thin image gets one pooled row.)
    std::printf("   %d resize targets as transformers, %d refused as it refuses\n", sized, refused);
    VT_CHECK(sized + refused == sizes.size(0) && sized > 40);

    const auto prepared = gemma3::prepareEnhanceImage(*set.find("image"));
    VT_CHECK(at::equal(prepared, *set.find("prepared")));
    VT_CHECK(at::equal(gemma3::pilResize(prepared, 120, 72, 3), *set.find("resized")));

    auto tower = gemma3::Gemma4VisionTower::load(root / "prompt_enhancer");
    VT_CHECK_MSG(tower.ok(), (tower.ok() ? "" : tower.error().message));
    if (!tower.ok())
        return;
    const auto& vc = tower->config();
    VT_CHECK(vc.hiddenSize == 32 && vc.layers == 2 && vc.heads == 2 && vc.kvHeads == 1 && vc.headDim == 16 && vc.patchSize == 4
        && vc.poolingKernel == 3 && vc.clippedLinears && vc.standardize && vc.textHidden == 64 && vc.ropeTheta == 100.0);
    VT_CHECK(gemma3::Gemma4VisionTower::bytes(root / "prompt_enhancer", at::kFloat) == tower->residentBytes());
    auto processing = gemma3::readGemma4ImageProcessing(vc, {root / "processor"});
    VT_CHECK_MSG(processing.ok(), (processing.ok() ? "" : processing.error().message));
    if (!processing.ok())
        return;
    VT_CHECK(processing->maxSoftTokens == 70 && processing->patchSize == 4 && processing->poolingKernel == 3 && processing->resample == 3
        && !processing->doNormalize && processing->boiToken == "<|image>" && processing->imageToken == "<|image|>"
        && processing->eoiToken == "<image|>");
    auto patches = gemma3::gemma4Patches(prepared, *processing);
    VT_CHECK_MSG(patches.ok(), (patches.ok() ? "" : patches.error().message));
    if (!patches.ok())
        return;
    VT_CHECK(patches->height == 72 && patches->width == 120 && patches->softTokens == 60);
    const auto& refPixels = *set.find("pixel_values");
    const auto& refPositions = *set.find("image_position_ids");
    const auto valid = patches->pixels.size(0);
    const auto pixelErr = (patches->pixels - refPixels[0].narrow(0, 0, valid)).abs().max().item<double>();
    VT_CHECK(valid == 540 && at::equal(patches->positions, refPositions[0].narrow(0, 0, valid)));
    VT_CHECK(refPositions[0].narrow(0, valid, refPositions.size(1) - valid).eq(-1).all().item<bool>());  // the padding not made

    auto encoded = tower->encode(*patches);
    auto features = tower->embed(*patches);
    VT_CHECK(encoded.ok() && features.ok());
    if (!encoded.ok() || !features.ok())
        return;
    const auto towerErr = (*encoded - *set.find("tower")).abs().max().item<double>();
    const auto featureErr = (*features - *set.find("image_features")).abs().max().item<double>();
    std::printf("   patches max abs error %.2e; tower %.2e, image features %.2e (|features| max %.2f)\n", pixelErr, towerErr, featureErr,
        set.find("image_features")->abs().max().item<double>());
    VT_CHECK(pixelErr == 0.0 && towerErr < 1e-4 && featureErr < 1e-4);

    // The language model reads the image causally (gemma-4-E2B-it has no use_bidirectional_attention).
    auto lm = gemma3::CausalLm::load(root / "prompt_enhancer");
    VT_CHECK_MSG(lm.ok(), (lm.ok() ? "" : lm.error().message));
    if (!lm.ok())
        return;
    VT_CHECK(lm->config().imageAttention == gemma3::TextConfig::ImageAttention::Causal && lm->config().imageTokenId.has_value());
    gemma3::GenerateOptions options;
    options.maxNewTokens = 40;
    options.noRepeatNgram = 5;
    options.imageFeatures = *features;
    auto out = lm->generate(*set.find("input_ids"), *set.find("attention_mask"), options);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    if (!out.ok())
        return;
    const auto err = (out->logits - *set.find("logits")).abs().max().item<double>();
    std::printf(
        "   %s tokens as transformers; logits max abs error %.2e\n", out->ids == idsOf(*set.find("generated")) ? "all" : "NOT all", err);
    VT_CHECK(out->ids == idsOf(*set.find("generated")) && err < 1e-4);

    // use_bidirectional_attention "vision": the image's run attends both ways on sliding layers.
    const auto visionDir = fs::temp_directory_path() / ("vireo_g4vision_" + std::to_string(::getpid()));
    copyModelFolder(root / "prompt_enhancer", visionDir, [](json& j) { j["text_config"]["use_bidirectional_attention"] = "vision"; });
    auto bidirectional = gemma3::CausalLm::load(visionDir);
    VT_CHECK_MSG(bidirectional.ok(), (bidirectional.ok() ? "" : bidirectional.error().message));
    if (bidirectional.ok()) {
        VT_CHECK(bidirectional->config().imageAttention == gemma3::TextConfig::ImageAttention::BothWaysSliding);
        const auto& ids = *set.find("vision_ids");
        auto run = bidirectional->generate(ids, at::ones_like(ids), options);
        VT_CHECK_MSG(run.ok(), (run.ok() ? "" : run.error().message));
        if (run.ok()) {
            const auto verr = (run->logits - *set.find("vision_logits")).abs().max().item<double>();
            std::printf("   two-way image run on sliding layers: %s tokens as transformers, logits max abs error %.2e\n",
                run->ids == idsOf(*set.find("vision_generated")) ? "all" : "NOT all", verr);
            VT_CHECK(run->ids == idsOf(*set.find("vision_generated")) && verr < 1e-4);
            // The causal reading of the same prompt is measurably another.
            auto causal = lm->generate(ids, at::ones_like(ids), options);
            VT_CHECK(causal.ok() && (causal->logits[0] - set.find("vision_logits")->select(0, 0)).abs().max().item<double>() > 1e-3);
        }
    }
    copyModelFolder(root / "prompt_enhancer", visionDir, [](json& j) { j["text_config"]["use_bidirectional_attention"] = "all"; });
    auto all = gemma3::CausalLm::load(visionDir);
    VT_CHECK(!all.ok() && all.error().message.find("\"all\"") != std::string::npos);
    // A tower whose config asks for what its weights do not hold is refused by name.
    copyModelFolder(root / "prompt_enhancer", visionDir, [](json& j) { j["vision_config"]["use_clipped_linears"] = false; });
    auto unclipped = gemma3::Gemma4VisionTower::load(visionDir);
    VT_CHECK(!unclipped.ok() && unclipped.error().message.find("input_min") != std::string::npos);
    removeModelFolder(visionDir);

    // The whole enhancer, from the pipeline-shaped folder, shown the image.
    auto enhancer = ltx2::PromptEnhancer::load(root, {}, true);
    VT_CHECK_MSG(enhancer.ok(), (enhancer.ok() ? "" : enhancer.error().message));
    if (!enhancer.ok())
        return;
    VT_COMPARE(enhancer->whyBlind(), std::string());
    const auto user = "User Raw Input Prompt: " + meta.at("prompt") + ".";
    std::string note = "unset";
    VT_COMPARE(enhancer->imageChat(meta.at("system"), user, &note), meta.at("template"));
    VT_CHECK(note.empty());
    VT_COMPARE(ltx2::PromptEnhancer::chatText(meta.at("system"), user, gemma3::Family::Gemma4, true), meta.at("template"));
    ltx2::EnhanceOptions eo;
    eo.systemPrompt = meta.at("system");
    eo.maxNewTokens = 40;
    eo.image = *set.find("image");
    auto enhanced = enhancer->enhance(meta.at("prompt"), eo);
    VT_CHECK_MSG(enhanced.ok(), (enhanced.ok() ? "" : enhanced.error().message));
    VT_CHECK(enhanced.ok() && enhanced->prompt == meta.at("enhanced") && enhanced->tokens == 40);
    const auto bytes = ltx2::PromptEnhancer::bytes(root, at::kFloat);
    VT_COMPARE(bytes.vision, tower->residentBytes());

    // Loaded for text only, or without a tower in its weights, it says why and refuses an image.
    auto textOnly = ltx2::PromptEnhancer::load(root);
    VT_CHECK(textOnly.ok() && !textOnly->whyBlind().empty());
    if (textOnly.ok()) {
        auto refusedImage = textOnly->enhance(meta.at("prompt"), eo);
        VT_CHECK(!refusedImage.ok() && refusedImage.error().message.find("first frame") != std::string::npos);
    }
    auto towerless = ltx2::PromptEnhancer::load(enhancerDir(), {}, true);
    VT_CHECK(towerless.ok() && towerless->whyBlind().find("no vision tower") != std::string::npos);
    auto noTower = gemma3::Gemma4VisionTower::load(enhancerDir() / "prompt_enhancer");
    VT_CHECK(!noTower.ok() && noTower.error().code == ErrorCode::NotFound);
    // The tower beside a tokenizer without Gemma 4's image tokens (the text-only enhancer's).
    const auto mixed = fs::temp_directory_path() / ("vireo_g4mixed_" + std::to_string(::getpid()));
    ::mkdir(mixed.c_str(), 0700);
    copyModelFolder(root / "prompt_enhancer", mixed / "prompt_enhancer", [](json&) {});
    ::mkdir((mixed / "processor").c_str(), 0700);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
        std::ifstream in(enhancerDir() / "processor" / name, std::ios::binary);
        std::ofstream(mixed / "processor" / name, std::ios::binary) << in.rdbuf();
    }
    auto untokened = ltx2::PromptEnhancer::load(mixed, {}, true);
    VT_CHECK_MSG(untokened.ok() && untokened->whyBlind().find("has no <|image> / <|image|> / <image|> tokens") != std::string::npos,
        (untokened.ok() ? untokened->whyBlind() : untokened.error().message));
    removeModelFolder(mixed / "prompt_enhancer");
    ::unlink((mixed / "processor" / "tokenizer.json").c_str());
    removeModelFolder(mixed / "processor");
    ::rmdir(mixed.c_str());

    // Processor files and configs are read as untrusted: what is not built is refused, by name.
    const auto dir = fs::temp_directory_path() / ("vireo_g4proc_" + std::to_string(::getpid()));
    ::mkdir(dir.c_str(), 0700);
    std::ofstream(dir / "preprocessor_config.json") << R"({"max_soft_tokens": 100, "patch_size": 4})";
    auto odd = gemma3::readGemma4ImageProcessing(vc, {dir});
    VT_CHECK(!odd.ok() && odd.error().message.find("max_soft_tokens 100") != std::string::npos);
    std::ofstream(dir / "preprocessor_config.json") << R"({"max_soft_tokens": 70, "patch_size": 16})";
    auto patch = gemma3::readGemma4ImageProcessing(vc, {dir});
    VT_CHECK(!patch.ok() && patch.error().message.find("preprocessor_config.json") != std::string::npos);
    std::ofstream(dir / "preprocessor_config.json") << R"({"max_soft_tokens": 280, "patch_size": 4, "resample": 1})";
    auto filter = gemma3::readGemma4ImageProcessing(vc, {dir});
    VT_CHECK(!filter.ok() && filter.error().message.find("resample 1") != std::string::npos);
    std::ofstream(dir / "preprocessor_config.json") << R"({"max_soft_tokens": 1120, "patch_size": 4, "pooling_kernel_size": 4})";
    auto hostile = gemma3::readGemma4ImageProcessing(vc, {dir});
    VT_CHECK(!hostile.ok() && hostile.error().message.find("17920 patches") != std::string::npos);
    removeModelFolder(dir);
    VT_COMPARE(processing->expand("a<|image|>b", 2), std::string("a<|image><|image|><|image|><image|>b"));
    auto none = gemma3::parseGemma4VisionConfig(R"({"text_config": {"hidden_size": 64}})", "c.json");
    VT_CHECK(!none.ok() && none.error().code == ErrorCode::NotFound);
    auto rope = gemma3::parseGemma4VisionConfig(R"({"vision_config": {"rope_parameters": {"rope_type": "default"}}})", "c.json");
    VT_CHECK(!rope.ok() && rope.error().message.find("axial") != std::string::npos);
    auto head = gemma3::parseGemma4VisionConfig(R"({"vision_config": {"head_dim": 6}})", "c.json");
    VT_CHECK(!head.ok() && head.error().message.find("head_dim 6") != std::string::npos);
    auto heads = gemma3::parseGemma4VisionConfig(R"({"vision_config": {"num_attention_heads": 12, "num_key_value_heads": 5}})", "c.json");
    VT_CHECK(!heads.ok());
    VT_CHECK(
        !gemma3::gemma4ResizeTarget(0, 10, 16, 2520, 3).ok() && !gemma3::gemma4Patches(at::zeros({8, 8, 4}, at::kByte), *processing).ok());
}

// generation_config.json read as untrusted: bad numbers named, unapplied sampling fields said.
VT_TEST(generationConfigIsReadWithItsDefaults)
{
    auto d = gemma3::parseGenerationConfig(R"({"eos_token_id": [1, 106], "do_sample": true, "top_k": 64, "top_p": 0.95})", "g.json");
    VT_CHECK(d.ok() && d->doSample && d->topK == 64 && d->topP == 0.95 && d->temperature == 1.0 && d->eosIds.size() == 2);
    auto none = gemma3::parseGenerationConfig("{}", "g.json");
    VT_CHECK(none.ok() && !none->doSample && none->topK == 50 && none->topP == 1.0 && none->eosIds.empty());
    auto extra = gemma3::parseGenerationConfig(R"({"min_p": 0.1, "repetition_penalty": 1.0, "typical_p": 0.5})", "g.json");
    VT_CHECK(extra.ok() && extra->unapplied == std::vector<std::string>({"min_p", "typical_p"}));
    for (const char* bad : {R"({"top_p": 0})", R"({"top_p": 1.5})", R"({"top_k": -1})", R"({"top_k": 2.5})", R"({"temperature": 0})",
             R"({"temperature": "hot"})", "[1]", "{"}) {
        auto r = gemma3::parseGenerationConfig(bad, "g.json");
        VT_CHECK_MSG(!r.ok() && r.error().message.find("g.json") != std::string::npos, bad);
    }
}

// Chat templates rendered as transformers' Jinja environment renders them: Gemma 3's, a Gemma
// 4-shaped one with macros, namespaces and tool calls, whitespace control with trim_blocks and
// lstrip_blocks, and the expressions, filters, tests and loops templates use; what Jinja
// refuses, refused.
VT_TEST(chatTemplatesRenderAsJinjaDoes)
{
    std::ifstream in(enhancerDir() / "chat_templates.json");
    const auto cases = nlohmann::ordered_json::parse(in);
    VT_CHECK(cases.size() >= 20);
    int rendered = 0, refused = 0;
    for (const auto& c : cases) {
        const auto name = c["name"].get<std::string>();
        auto out = text::renderJinja(c["template"].get<std::string>(), c["context"], name);
        if (c.contains("error")) {
            VT_CHECK_MSG(!out.ok(), name << " rendered, Jinja refused: " << c["error"].get<std::string>());
            refused += !out.ok();
        } else {
            VT_CHECK_MSG(out.ok(), name << ": " << (out.ok() ? "" : out.error().message));
            if (out.ok()) {
                VT_CHECK_MSG(*out == c["expected"].get<std::string>(),
                    name << ":\n  got      " << nlohmann::json(*out).dump() << "\n  expected " << c["expected"].dump());
                rendered += *out == c["expected"].get<std::string>();
            }
        }
    }
    std::printf("   %d templates rendered as Jinja, %d refused as Jinja refuses them\n", rendered, refused);

    // Brackets nested as deep as real templates go (and deeper) render.
    auto nested = text::renderJinja(
        "{{ {'a': [1, [2, [3, {'b': ((4 + (5)))}]]]}['a'][1][1][1]['b'] | string }}", nlohmann::ordered_json::object(), "nested");
    VT_CHECK_MSG(nested.ok() && *nested == "9", (nested.ok() ? *nested : nested.error().message));
    // Hostile templates fail with an error, never a hang or a crash.
    nlohmann::ordered_json none = nlohmann::ordered_json::object();
    for (const std::string& bad : {std::string("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
             std::string("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"),
             "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", std::string("{{ 'a' - 1 }}"), std::string("{{ x.y }}"),
             std::string("{% for x in 5 %}{% endfor %}"), std::string("{% break %}"),
             std::string("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
             std::string("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}")}) {
        auto r = text::renderJinja("{{ '' }}" + bad, none, "bad.jinja");
        VT_CHECK_MSG(!r.ok() && r.error().message.rfind("bad.jinja: ", 0) == 0, bad.substr(0, 60));
    }
}

VT_TEST(cleaningAndDecodingFollowTheReference)
{
    using ltx2::PromptEnhancer;
    VT_COMPARE(PromptEnhancer::cleanResponse("\n\n**1.** \u201cA fox\u201d \u2014 runs\u00a0fast \u2018here\u2019 5\u22122"),
        std::string("A fox\" - runs fast 'here' 5-2"));
    VT_COMPARE(PromptEnhancer::cleanResponse("  \u6771\u4eac at night"), std::string("\u6771\u4eac at night"));
    VT_COMPARE(PromptEnhancer::cleanResponse("123 -- !!"), std::string("123 -- !!"));  // no letter: unchanged
    VT_COMPARE(PromptEnhancer::chatText("  sys \n", "\tuser"),
        std::string("<bos><|turn>system\nsys<turn|>\n<|turn>user\nuser<turn|>\n<|turn>model\n"));

    auto tok = text::Tokenizer::load(enhancerDir() / "processor");
    VT_CHECK(tok.ok());
    const auto ids = tok->tokenize("Le caf\u00e9 \uc548\ub155 <|turn> \u2581x");
    VT_CHECK(ids.ok());
    auto back = tok->decode(*ids, false);
    VT_CHECK(back.ok());
    VT_COMPARE(*back, std::string("Le caf\u00e9 \uc548\ub155 <|turn>  x"));
    auto skipped = tok->decode(*ids, true);
    VT_CHECK(skipped.ok() && *skipped == "Le caf\u00e9 \uc548\ub155   x");
    // A byte run that is not UTF-8 decodes to one U+FFFD per byte, as ByteFallback does; an
    // unknown id fails.
    auto lone = tok->decode({*tok->tokenToId("<0x80>"), *tok->tokenToId("<0x41>")}, true);
    VT_CHECK(lone.ok() && *lone == "\uFFFD\uFFFD");  // the whole run is not UTF-8
    VT_CHECK(!tok->decode({1 << 20}, true).ok());
}

// An enhancer whose tokenizer is not Gemma 4's (no turn markers) is refused naming the file,
// before anything generates.
VT_TEST(anEnhancerWithoutGemma4sTokenizerIsRefused)
{
    // libtorch ships its own std::filesystem::remove_all and copy, which crash: POSIX calls here.
    const auto work = fs::temp_directory_path() / ("vireo-enhancer-" + std::to_string(::getpid()));
    VT_CHECK(::mkdir(work.c_str(), 0700) == 0 && ::mkdir((work / "processor").c_str(), 0700) == 0);
    VT_CHECK(::symlink((enhancerDir() / "prompt_enhancer").c_str(), (work / "prompt_enhancer").c_str()) == 0);
    const char* files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (const char* file : files) {
        std::ifstream in(enhancerDir() / "processor" / file);
        auto j = json::parse(in);
        for (const char* list : {"added_tokens", "added_tokens_decoder"})
            if (j.contains(list))
                for (auto& t : j[list])
                    if (t.is_object() && t.value("content", "") == "<|turn>")
                        t["content"] = "<|step>";
        std::ofstream(work / "processor" / file) << j.dump();
    }
    auto refused = ltx2::PromptEnhancer::load(work);
    for (const char* file : files)
        ::unlink((work / "processor" / file).c_str());
    ::unlink((work / "prompt_enhancer").c_str());
    ::rmdir((work / "processor").c_str());
    ::rmdir(work.c_str());
    VT_CHECK_MSG(!refused.ok() && refused.error().message.find("has no <|turn> token") != std::string::npos
            && refused.error().message.find("processor") != std::string::npos,
        (refused.ok() ? std::string("loaded") : refused.error().message));
}

// The enhancer feeds what the tokenizer's own template renders (here one that opens an empty
// thought channel after the model's turn, as Gemma 4 templates do with thinking off); a
// template it cannot render, or none, falls back to the turn format in code and says why.
VT_TEST(theEnhancerFollowsTheTokenizersChatTemplate)
{
    const auto work = fs::temp_directory_path() / ("vireo-template-" + std::to_string(::getpid()));
    VT_CHECK(::mkdir(work.c_str(), 0700) == 0 && ::mkdir((work / "processor").c_str(), 0700) == 0);
    VT_CHECK(::symlink((enhancerDir() / "prompt_enhancer").c_str(), (work / "prompt_enhancer").c_str()) == 0);
    VT_CHECK(::symlink((enhancerDir() / "processor" / "tokenizer.json").c_str(), (work / "processor" / "tokenizer.json").c_str()) == 0);
    std::ifstream in(enhancerDir() / "processor" / "tokenizer_config.json");
    auto config = json::parse(in);
    std::ifstream casesIn(enhancerDir() / "chat_templates.json");
    const auto cases = json::parse(casesIn);
    std::string shaped;
    for (const auto& c : cases)
        if (c["name"] == "gemma4_shaped")
            shaped = c["template"].get<std::string>();
    // tokenizer_config.json's chat_template as given (null: none).
    auto chatWith = [&](const json& chatTemplate, std::string* note) {
        auto c = config;
        if (!chatTemplate.is_null())
            c["chat_template"] = chatTemplate;
        else
            c.erase("chat_template");
        std::ofstream(work / "processor" / "tokenizer_config.json") << c.dump();
        auto enhancer = ltx2::PromptEnhancer::load(work);
        VT_CHECK_MSG(enhancer.ok(), (enhancer.ok() ? "" : enhancer.error().message));
        return enhancer.ok() ? enhancer->chat("Be brief.", "user prompt: a fox", note) : std::string();
    };
    std::string note;
    const auto thought = chatWith(json(shaped), &note);
    const std::string suffix = "<|turn>model\n<|channel>thought\n<channel|>";
    VT_CHECK_MSG(thought.size() > suffix.size() && thought.substr(thought.size() - suffix.size()) == suffix && note.empty(),
        thought << " / " << note);
    const auto builtIn = ltx2::PromptEnhancer::chatText("Be brief.", "user prompt: a fox");
    const auto unsupported = chatWith(json("{% set x %}y{% endset %}{{ x }}"), &note);
    VT_CHECK_MSG(unsupported == builtIn && note.find("could not be rendered") != std::string::npos
            && note.find("set blocks") != std::string::npos && note.find("turn format written in code") != std::string::npos,
        note);
    const auto none = chatWith(json(), &note);
    VT_CHECK_MSG(none == builtIn && note.find("has no chat template") != std::string::npos, note);
    // The list form: the template named "default"; anything else in the field is said.
    const auto listed =
        chatWith(json::array({{{"name", "tool_use"}, {"template", "x"}}, {{"name", "default"}, {"template", shaped}}}), &note);
    VT_CHECK(listed == thought && note.empty());
    const auto odd = chatWith(json(42), &note);
    VT_CHECK_MSG(odd == builtIn && note.find("neither a template nor a list") != std::string::npos, note);
    ::unlink((work / "processor" / "tokenizer_config.json").c_str());
    ::unlink((work / "processor" / "tokenizer.json").c_str());
    ::unlink((work / "prompt_enhancer").c_str());
    ::rmdir((work / "processor").c_str());
    ::rmdir(work.c_str());
}

// A tokenizer whose decoder this version does not implement refuses to decode, naming it; an
// enhancer whose tokenizer has more tokens than its model is refused before it writes.
VT_TEST(decodeAndVocabularyMismatchesAreRefused)
{
    const auto work = fs::temp_directory_path() / ("vireo-decoder-" + std::to_string(::getpid()));
    VT_CHECK(::mkdir(work.c_str(), 0700) == 0);
    {
        std::ifstream in(enhancerDir() / "processor" / "tokenizer.json");
        auto j = json::parse(in);
        j["decoder"] = json::parse(R"({"type": "WordPiece", "prefix": "##", "cleanup": true})");
        std::ofstream(work / "tokenizer.json") << j.dump();
        std::ofstream(work / "tokenizer_config.json")
            << R"({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "pad_token": "<pad>"})";
    }
    auto tok = text::Tokenizer::load(work);
    ::unlink((work / "tokenizer.json").c_str());
    ::unlink((work / "tokenizer_config.json").c_str());
    ::rmdir(work.c_str());
    VT_CHECK_MSG(tok.ok(), (tok.ok() ? "" : tok.error().message));
    if (tok.ok()) {
        auto decoded = tok->decode({5, 6}, true);
        VT_CHECK_MSG(!decoded.ok() && decoded.error().message.find("WordPiece") != std::string::npos
                && decoded.error().message.find("is not supported") != std::string::npos,
            (decoded.ok() ? *decoded : decoded.error().message));
    }

    // Gemma 3's text encoder (1,040 tokens) with the Gemma 4 enhancer's tokenizer (1,042, both
    // turn formats): they do not belong together.
    auto encoder = gemma3::TextEncoder::load(enhancerDir() / "gemma3");
    auto wide = text::Tokenizer::load(enhancerDir() / "processor");
    VT_CHECK(encoder.ok() && wide.ok());
    if (encoder.ok() && wide.ok()) {
        VT_CHECK(wide->vocabSize() > encoder->config().vocabSize);
        auto refused = ltx2::PromptEnhancer::sharing(*encoder, std::make_shared<const text::Tokenizer>(std::move(*wide)), "te");
        VT_CHECK_MSG(!refused.ok() && refused.error().message.find("do not belong together") != std::string::npos,
            (refused.ok() ? std::string("accepted") : refused.error().message));
    }
}

VT_MAIN("test_gemma4")
