// Gemma 3 text encoder and tokenizer.json tokenizer against transformers 5.24 / tokenizers 0.23 /
// diffusers 0.42.1 at tiny sizes (tests/fixtures/make_gemma3_fixtures.py).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/gemma3/gemma3.h"
#include "inference/tensorfile/tensorset.h"
#include "inference/text/tokenizer.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <stop_token>

#include <unistd.h>

using namespace vireo;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kTolerance = 1e-4;

fs::path gemmaDir()
{
    return test::fixturesDir() / "gemma";
}
fs::path tokenizerDir()
{
    return test::fixturesDir() / "tokenizer";
}

const json& expectedTokens()
{
    static const json j = json::parse(test::readText(tokenizerDir() / "expected.json"));
    return j;
}

const text::Tokenizer& tokenizer(const std::string& variant)
{
    static std::map<std::string, text::Tokenizer> cache;
    if (auto it = cache.find(variant); it != cache.end())
        return it->second;
    auto t = text::Tokenizer::load(tokenizerDir() / variant);
    if (!t)
        throw std::runtime_error(variant + ": " + t.error().message);
    return cache.emplace(variant, std::move(*t)).first->second;
}

const gemma3::TextEncoder& encoder(const std::string& folder)
{
    static std::map<std::string, gemma3::TextEncoder> cache;
    if (auto it = cache.find(folder); it != cache.end())
        return it->second;
    auto m = gemma3::TextEncoder::load(gemmaDir() / folder);
    if (!m)
        throw std::runtime_error(folder + ": " + m.error().message);
    return cache.emplace(folder, std::move(*m)).first->second;
}

std::string errorOf(const Result<text::Tokenizer>& r)
{
    return r.ok() ? std::string("(loaded)") : r.error().message;
}

bool mentions(const std::string& message, std::initializer_list<const char*> words)
{
    for (const char* w : words)
        if (message.find(w) == std::string::npos)
            return false;
    return true;
}

struct Errors {
    double validMax = 0, paddedMax = 0;
};

// Per stacked layer, the max abs error over valid (mask 1) and padded (mask 0) rows.
Errors compareHidden(const at::Tensor& got, const at::Tensor& expected, const at::Tensor& mask, const std::string& what)
{
    if (got.sizes() != expected.sizes())
        throw std::runtime_error(what + ": shape mismatch");
    const auto valid = mask.to(at::kBool).view({mask.size(0), mask.size(1), 1});
    Errors e;
    std::string line = "   " + what + " valid rows per layer:";
    for (std::int64_t l = 0; l < got.size(3); ++l) {
        const auto diff = (got.select(3, l).to(at::kDouble) - expected.select(3, l).to(at::kDouble)).abs();
        const double v = diff.masked_fill(valid.logical_not(), 0.0).max().item<double>();
        const double p = diff.masked_fill(valid, 0.0).max().item<double>();
        e.validMax = std::max(e.validMax, v);
        e.paddedMax = std::max(e.paddedMax, p);
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.1e", v);
        line += buf;
    }
    std::printf("%s\n   %s max valid %.2e, padded rows %.2e (|h| max %.2f)\n", line.c_str(), what.c_str(), e.validMax, e.paddedMax,
        expected.abs().max().item<double>());
    return e;
}

}  // namespace

// ================================================================ tokenizer

VT_TEST(tokenIdsMatchTransformersForEveryPrompt)
{
    std::map<std::string, int> perVariant;
    for (const auto& c : expectedTokens()["cases"]) {
        const auto variant = c["variant"].get<std::string>();
        const auto prompt = c["prompt"].get<std::string>();
        const auto maxLength = c["max_length"].get<std::int64_t>();
        const auto& tok = tokenizer(variant);
        auto e = tok.encode(prompt, maxLength);
        VT_CHECK_MSG(e.ok(), variant << " " << c["prompt"].dump() << ": " << (e.ok() ? "" : e.error().message));
        const auto ids = c["input_ids"].get<std::vector<std::int64_t>>();
        const auto mask = c["attention_mask"].get<std::vector<std::int64_t>>();
        if (e->ids != ids) {
            std::size_t at = 0;
            while (at < ids.size() && at < e->ids.size() && ids[at] == e->ids[at])
                ++at;
            VT_CHECK_MSG(false,
                variant << " max_length " << maxLength << " " << c["prompt"].dump().substr(0, 80) << ": ids differ first at position " << at
                        << " (tokens " << c["tokens"].dump().substr(0, 200) << ")");
        }
        VT_CHECK(e->attentionMask == mask);
        // The pipeline strips each prompt with Python's str.strip() first.
        VT_COMPARE(text::stripPythonWhitespace(prompt), c["stripped"].get<std::string>());
        ++perVariant[variant];
    }
    for (const auto& [v, n] : perVariant)
        std::printf("   %-8s %3d prompts, ids identical (%s)\n", v.c_str(), n, tokenizer(v).describe().c_str());
    VT_CHECK(perVariant.size() == 4 && perVariant["gemma"] >= 30);
    const auto& info = expectedTokens()["info"];
    VT_COMPARE(tokenizer("gemma").padId(), info["pad_id"].get<std::int64_t>());
    VT_COMPARE(tokenizer("gemma").bosId(), std::optional<std::int64_t>(info["bos_id"].get<std::int64_t>()));
    VT_COMPARE(tokenizer("gemma").vocabSize(), info["vocab_size"].get<std::int64_t>());
    // pad_token null: the pipeline pads with eos.
    VT_COMPARE(tokenizer("nopad").padId(), info["nopad_pad_id"].get<std::int64_t>());
    VT_COMPARE(tokenizer("nopad").padId(), tokenizer("nopad").eosId().value_or(-1));
}

VT_TEST(tokenizerCallOptions)
{
    const auto& tok = tokenizer("gemma");
    auto left = tok.encode("A cat walks", 12);
    auto right = tok.encode("A cat walks", 12, false);
    auto bare = tok.encode("A cat walks", 12, true, false);
    auto ids = tok.tokenize("A cat walks");
    VT_CHECK(left.ok() && right.ok() && bare.ok() && ids.ok());
    const auto n = static_cast<std::int64_t>(ids->size());
    VT_COMPARE(left->ids.back(), ids->back());
    VT_COMPARE(left->ids[static_cast<std::size_t>(11 - n)], tok.bosId().value_or(-1));
    VT_COMPARE(right->ids.front(), tok.bosId().value_or(-1));
    VT_COMPARE(right->ids.back(), tok.padId());
    VT_COMPARE(bare->ids[static_cast<std::size_t>(12 - n)], ids->front());
    // Without truncation a long prompt comes back whole, unpadded.
    const std::string longText(200, 'x');
    auto whole = tok.encode(longText, 16, true, true, false);
    VT_CHECK(whole.ok() && whole->ids.size() > 16 && whole->attentionMask.size() == whole->ids.size());
    // Invalid UTF-8 is an error, not a guess.
    auto bad = tok.encode(std::string("ok \xC3\x28 no"), 16);
    VT_CHECK(!bad.ok() && bad.error().code == ErrorCode::InvalidArgument);
    VT_COMPARE(text::stripPythonWhitespace("\x1f\t a b \u3000\n"), std::string("a b"));
}

VT_TEST(unsupportedTokenizerFeaturesAreNamedErrors)
{
    // The generic path runs tokenizer.json as written, so every section it reads is checked.
    const auto plain = json::parse(test::readText(tokenizerDir() / "plain" / "tokenizer.json"));
    const auto plainConfig = test::readText(tokenizerDir() / "plain" / "tokenizer_config.json");
    const std::string origin = "fixture/plain/tokenizer.json";
    auto refused = [&](const std::function<void(json&)>& edit, std::initializer_list<const char*> words,
                       const std::string& config = std::string()) {
        json j = plain;
        edit(j);
        auto r = text::Tokenizer::fromJson(j.dump(), config.empty() ? plainConfig : config, origin);
        VT_CHECK_MSG(!r.ok(), "accepted: " << words.begin()[0]);
        VT_CHECK_MSG(
            mentions(r.error().message, words) && mentions(r.error().message, {"fixture/plain/tokenizer.json"}), r.error().message);
        std::printf("   refused: %s\n", r.error().message.c_str());
    };
    refused([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"NFKC", "normalizer"});
    refused([](json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}}; }, {"ByteLevel", "pre-tokenizer"});
    refused([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "\\s+"}}; }, {"Regex"});
    refused([](json& j) { j["model"]["type"] = "Unigram"; }, {"Unigram", "model"});
    refused([](json& j) { j["model"]["dropout"] = 0.1; }, {"dropout"});
    refused([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, {"continuing_subword_prefix"});
    refused([](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, {"BertProcessing", "post-processor"});
    refused([](json& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation"});
    refused([](json& j) { j["added_tokens"].back()["single_word"] = true; }, {"single_word"});
    refused([](json&) {}, {"LlamaTokenizer"}, json{{"tokenizer_class", "LlamaTokenizer"}}.dump());
    // GemmaTokenizer takes its added tokens from tokenizer_config.json; without them transformers
    // falls back to legacy files this version does not replicate.
    refused([](json&) {}, {"added_tokens_decoder"}, json{{"tokenizer_class", "GemmaTokenizer"}}.dump());

    // A folder with only a SentencePiece model says so.
    const auto dir = fs::temp_directory_path() / ("vireo_tok_spm_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
        std::ofstream(dir / "tokenizer.model") << "spm";
    }
    auto spm = text::Tokenizer::load(dir);
    VT_CHECK_MSG(!spm.ok() && mentions(spm.error().message, {"tokenizer.model", "tokenizer.json"}), errorOf(spm));
    ::unlink((dir / "tokenizer.model").c_str());
    ::rmdir(dir.c_str());
}

// ================================================================ text encoder

VT_TEST(hiddenStatesMatchThePipelineOnALeftPaddedBatch)
{
    auto set = tensorfile::readTensorSet(gemmaDir() / "case.safetensors");
    VT_CHECK_MSG(set.ok(), (set.ok() ? "" : set.error().message));
    const auto& ids = *set->find("input_ids");
    const auto& mask = *set->find("attention_mask");
    const auto& expected = *set->find("expected.hidden");

    // End to end: the pipeline's prompts through this tokenizer give the ids it fed the model.
    const auto prompts = json::parse(set->metadata.at("prompts"));
    const auto maxLength = std::stoll(set->metadata.at("max_sequence_length"));
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        auto e = tokenizer("gemma").encode(text::stripPythonWhitespace(prompts[i].get<std::string>()), maxLength);
        VT_CHECK(e.ok());
        VT_CHECK_MSG(e->ids
                == std::vector<std::int64_t>(ids[static_cast<std::int64_t>(i)].data_ptr<std::int64_t>(),
                    ids[static_cast<std::int64_t>(i)].data_ptr<std::int64_t>() + maxLength),
            "prompt " << i << " tokenizes differently from the pipeline");
    }

    const auto& model = encoder("model");
    const auto& c = model.config();
    VT_COMPARE(c.layers, std::int64_t{6});
    VT_CHECK(c.layerTypes[0] == gemma3::LayerType::Sliding && c.layerTypes[2] == gemma3::LayerType::Full);
    VT_CHECK(c.slidingWindow < ids.size(1));  // the window cuts into the sequence
    auto out = model.forward(ids, mask);
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    VT_COMPARE(out->sizes().vec(), (std::vector<std::int64_t>{ids.size(0), ids.size(1), c.hiddenSize, c.layers + 1}));
    const auto e = compareHidden(*out, expected, mask, "fp32");
    VT_CHECK_MSG(e.validMax <= kTolerance, "valid rows: max abs error " << e.validMax << " above 1e-4");
    // Padded rows: a position that may attend to no key gets a zero attention output (torch's
    // SDPA for an all-masked row), so they match transformers too and stay finite.
    VT_CHECK_MSG(e.paddedMax <= kTolerance, "padded rows: max abs error " << e.paddedMax);
    VT_CHECK(at::isfinite(*out).all().item<bool>());
    VT_CHECK(model.residentBytes() > 0 && model.bytesByRepresentation().size() == 1);
}

VT_TEST(fp8WeightsAndTheOtherKeyLayoutMatch)
{
    auto set = tensorfile::readTensorSet(gemmaDir() / "case_fp8.safetensors");
    VT_CHECK(set.ok());
    const auto& model = encoder("fp8");
    const auto bytes = model.bytesByRepresentation();
    VT_CHECK(bytes.count("fp8-scaled") && bytes.at("fp8-scaled") > 0);
    std::printf("   fp8 folder resident: %lld B (%lld B fp8-scaled) vs %lld B dense\n", static_cast<long long>(model.residentBytes()),
        static_cast<long long>(bytes.at("fp8-scaled")), static_cast<long long>(encoder("model").residentBytes()));
    VT_CHECK(model.residentBytes() < encoder("model").residentBytes());
    // Its config.json is in the transformers-4.x form; it must describe the same model.
    const auto& a = model.config();
    const auto& b = encoder("model").config();
    VT_CHECK(a.layerTypes == b.layerTypes && a.ropeFull.linearFactor == 8.0 && b.ropeFull.linearFactor == 8.0
        && a.ropeSliding.theta == b.ropeSliding.theta && a.ropeFull.theta == b.ropeFull.theta);
    auto out = model.forward(*set->find("input_ids"), *set->find("attention_mask"));
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    const auto e = compareHidden(*out, *set->find("expected.hidden"), *set->find("attention_mask"), "fp8");
    VT_CHECK_MSG(e.validMax <= kTolerance && e.paddedMax <= kTolerance, "fp8 layout: max abs error above 1e-4");
}

VT_TEST(configParsing)
{
    // Only what Google's gemma-3-12b-it config.json states; the rest are Gemma3TextConfig defaults.
    const auto google = json{{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
        {"text_config",
            {{"hidden_size", 3840}, {"intermediate_size", 15360}, {"model_type", "gemma3_text"}, {"num_attention_heads", 16},
                {"num_hidden_layers", 48}, {"num_key_value_heads", 8}, {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
                {"sliding_window", 1024}}},
        {"vision_config", {{"model_type", "siglip_vision_model"}}}};
    auto c = gemma3::parseTextConfig(google.dump(), "12b/config.json");
    VT_CHECK_MSG(c.ok(), (c.ok() ? "" : c.error().message));
    const auto ref = gemma3::TextConfig::gemma3_12b();
    VT_CHECK(c->hiddenSize == ref.hiddenSize && c->layers == ref.layers && c->heads == ref.heads && c->kvHeads == ref.kvHeads
        && c->headDim == ref.headDim && c->vocabSize == ref.vocabSize && c->intermediateSize == ref.intermediateSize
        && c->slidingWindow == ref.slidingWindow && c->queryPreAttnScalar == ref.queryPreAttnScalar && c->layerTypes == ref.layerTypes
        && c->ropeFull.theta == 1e6 && c->ropeFull.linearFactor == 8.0 && c->ropeSliding.theta == 1e4 && c->ropeSliding.linearFactor == 1.0
        && c->imageTokenId == ref.imageTokenId && c->geluTanh);
    VT_CHECK(c->layerTypes[5] == gemma3::LayerType::Full && c->layerTypes[4] == gemma3::LayerType::Sliding);

    auto refused = [](json j, std::initializer_list<const char*> words) {
        auto r = gemma3::parseTextConfig(j.dump(), "x/config.json");
        VT_CHECK_MSG(!r.ok() && mentions(r.error().message, words) && mentions(r.error().message, {"x/config.json"}),
            (r.ok() ? std::string("accepted") : r.error().message));
    };
    refused({{"model_type", "t5"}}, {"t5"});
    auto j = google;
    j["text_config"]["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
    refused(j, {"yarn"});
    j = google;
    j["text_config"]["attn_logit_softcapping"] = 50.0;
    refused(j, {"attn_logit_softcapping"});
    j = google;
    j["text_config"]["use_bidirectional_attention"] = true;
    refused(j, {"use_bidirectional_attention"});
    j = google;
    j["text_config"]["layer_types"] = {"full_attention"};
    refused(j, {"layer_types"});
    j = google;
    j["text_config"]["hidden_activation"] = "silu";
    refused(j, {"silu"});
}

VT_TEST(everyTensorIsAccountedFor)
{
    const auto dir = fs::temp_directory_path() / ("vireo_gemma3_strict_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto config = test::readText(gemmaDir() / "model" / "config.json");
    {
        std::ofstream(dir / "config.json") << config;
    }
    auto full = tensorfile::readTensorSet(gemmaDir() / "model" / "model.safetensors");
    VT_CHECK(full.ok());
    auto tryLoad = [&](const std::map<std::string, at::Tensor>& tensors) {
        VT_CHECK(tensorfile::writeSafetensors(dir / "model.safetensors", tensors, full->metadata).ok());
        return gemma3::TextEncoder::load(dir);
    };
    auto missing = full->tensors;
    missing.erase("language_model.model.layers.4.mlp.up_proj.weight");
    auto r = tryLoad(missing);
    VT_CHECK_MSG(
        !r.ok() && mentions(r.error().message, {"layers.4.mlp.up_proj.weight", "missing"}), (r.ok() ? "loaded" : r.error().message));
    auto extra = full->tensors;
    extra.emplace("language_model.model.layers.6.mlp.up_proj.weight", at::zeros({4, 4}));
    r = tryLoad(extra);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"layers.6.mlp.up_proj.weight"}), (r.ok() ? "loaded" : r.error().message));
    auto stray = full->tensors;
    stray.emplace("text_projection.weight", at::zeros({4, 4}));
    r = tryLoad(stray);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"text_projection.weight"}), (r.ok() ? "loaded" : r.error().message));
    auto wrongShape = full->tensors;
    wrongShape["language_model.model.layers.0.self_attn.k_proj.weight"] = at::zeros({16, 64});
    r = tryLoad(wrongShape);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"k_proj.weight", "[16, 64]"}), (r.ok() ? "loaded" : r.error().message));
    // llama.cpp's names, no language model at all, no config beside weights that are not 12B's.
    auto ggufNames = full->tensors;
    ggufNames.emplace("token_embd.weight", at::zeros({4, 4}));
    r = tryLoad(ggufNames);
    VT_CHECK_MSG(!r.ok() && r.error().code == ErrorCode::Unsupported && mentions(r.error().message, {"llama.cpp", "token_embd"}),
        (r.ok() ? "loaded" : r.error().message));
    auto noModel = full->tensors;
    VT_CHECK(noModel.erase("language_model.model.embed_tokens.weight") == 1);
    r = tryLoad(noModel);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"no Gemma 3 language model", "embed_tokens.weight", "no prefix"}),
        (r.ok() ? "loaded" : r.error().message));
    ::unlink((dir / "config.json").c_str());
    r = tryLoad(full->tensors);
    VT_CHECK_MSG(!r.ok() && r.error().code == ErrorCode::NotFound && mentions(r.error().message, {"config.json", "12B"}),
        (r.ok() ? "loaded" : r.error().message));
    for (const char* f : {"model.safetensors", "config.json"})
        ::unlink((dir / f).c_str());
    ::rmdir(dir.c_str());
}

VT_TEST(cancelAndBadInputsAreErrors)
{
    auto set = tensorfile::readTensorSet(gemmaDir() / "case.safetensors");
    VT_CHECK(set.ok());
    const auto& ids = *set->find("input_ids");
    const auto& mask = *set->find("attention_mask");
    const auto& model = encoder("model");
    std::stop_source stop;
    stop.request_stop();
    auto cancelled = model.forward(ids, mask, stop.get_token());
    VT_CHECK(!cancelled.ok() && cancelled.error().code == ErrorCode::Cancelled);
    auto outOfVocab = model.forward(ids + model.config().vocabSize, mask);
    VT_CHECK_MSG(!outOfVocab.ok() && mentions(outOfVocab.error().message, {"token ids"}), "out-of-vocabulary ids accepted");
    auto badMask = model.forward(ids, mask.narrow(1, 0, 4));
    VT_CHECK(!badMask.ok());
    // Batch rows are independent: one prompt alone gives its row of the batch.
    auto one = model.forward(ids.narrow(0, 1, 1), mask.narrow(0, 1, 1));
    auto all = model.forward(ids, mask);
    VT_CHECK(one.ok() && all.ok());
    VT_CHECK((*one - all->narrow(0, 1, 1)).abs().max().item<double>() <= kTolerance);
}

VT_MAIN("test_gemma3")
