// The Qwen2 byte-level BPE tokenizer and the Qwen3-VL text tower as Ideogram-4 uses them, against
// transformers 5.24 / tokenizers 0.23 / diffusers 0.42.1 at tiny sizes
// (tests/fixtures/make_ideogram4_fixtures.py).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/qwen3vl/qwen3vltext.h"
#include "inference/tensorfile/tensorset.h"
#include "inference/text/tokenizer.h"
#include "inference/text/unicode.h"

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

fs::path tokenizerDir()
{
    return test::fixturesDir() / "tokenizer";
}
fs::path textDir()
{
    return test::fixturesDir() / "text";
}

constexpr double kTolerance = 1e-4;
// diffusers' QWEN3_VL_ACTIVATION_LAYERS.
const std::vector<std::int64_t> kTaps{0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 35};

const qwen3vl::TextEncoder& encoder(const std::string& folder, c10::ScalarType dtype = c10::kFloat)
{
    static std::map<std::string, qwen3vl::TextEncoder> cache;
    const auto key = folder + "/" + c10::toString(dtype);
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    qwen3vl::TextEncoderLoadOptions o;
    o.dtype = dtype;
    auto m = qwen3vl::TextEncoder::load(textDir() / folder, o);
    if (!m)
        throw std::runtime_error(folder + ": " + m.error().message);
    return cache.emplace(key, std::move(*m)).first->second;
}

// Max abs error of every prompt's features in a case file; the ids are checked against the
// tokenizer on the way.
double compareFeatures(const qwen3vl::TextEncoder& model, const fs::path& caseFile, const std::string& what)
{
    auto set = tensorfile::readTensorSet(caseFile);
    if (!set)
        throw std::runtime_error(set.error().message);
    double worst = 0;
    for (int i = 0;; ++i) {
        const auto* ids = set->find("p" + std::to_string(i) + ".ids");
        if (!ids)
            break;
        const auto& expected = *set->find("p" + std::to_string(i) + ".features");
        auto got = model.features(*ids, kTaps);
        VT_CHECK_MSG(got.ok(), (got.ok() ? "" : got.error().message));
        VT_COMPARE(got->sizes().vec(), expected.sizes().vec());
        const double e = (got->to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
        std::printf("   %s prompt %d: %lld tokens, max abs error %.2e (|f| max %.2f)\n", what.c_str(), i,
            static_cast<long long>(ids->size(0)), e, expected.abs().max().item<double>());
        worst = std::max(worst, e);
    }
    return worst;
}

const json& expectedTokens()
{
    static const json j = json::parse(test::readText(tokenizerDir() / "expected.json"));
    return j;
}

const text::Tokenizer& qwenTokenizer()
{
    static const text::Tokenizer tok = [] {
        auto t = text::Tokenizer::load(tokenizerDir() / "qwen2");
        if (!t)
            throw std::runtime_error(t.error().message);
        return std::move(*t);
    }();
    return tok;
}

bool mentions(const std::string& message, std::initializer_list<const char*> words)
{
    for (const char* w : words)
        if (message.find(w) == std::string::npos)
            return false;
    return true;
}

std::string firstDifference(const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& want)
{
    std::size_t at = 0;
    while (at < got.size() && at < want.size() && got[at] == want[at])
        ++at;
    return "first difference at " + std::to_string(at) + " of " + std::to_string(want.size()) + " (got " + std::to_string(got.size())
        + " ids)";
}

}  // namespace

// ================================================================ tokenizer

VT_TEST(tokenIdsMatchTransformersOnThePromptSet)
{
    const auto& tok = qwenTokenizer();
    int n = 0;
    for (const auto& c : expectedTokens()["cases"]) {
        const auto prompt = c["prompt"].get<std::string>();
        const auto want = c["ids"].get<std::vector<std::int64_t>>();
        auto got = tok.tokenize(prompt);
        VT_CHECK_MSG(got.ok(), c["prompt"].dump() << ": " << (got.ok() ? "" : got.error().message));
        VT_CHECK_MSG(*got == want,
            c["prompt"].dump().substr(0, 120) << ": " << firstDifference(*got, want) << ", tokens " << c["tokens"].dump().substr(0, 300));
        // The pipeline's chat-templated call (add_special_tokens=False).
        const auto chat = "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n";
        auto chatIds = tok.tokenize(chat);
        VT_CHECK(chatIds.ok());
        VT_CHECK_MSG(*chatIds == c["chat_ids"].get<std::vector<std::int64_t>>(), c["prompt"].dump().substr(0, 80) << " (chat)");
        ++n;
    }
    std::printf("   %d prompts, ids and chat-template ids identical (%s)\n", n, tok.describe().c_str());
    VT_CHECK(n >= 25);
    const auto& info = expectedTokens()["info"];
    VT_COMPARE(tok.vocabSize(), info["vocab_size"].get<std::int64_t>());
    VT_COMPARE(tok.padId(), info["pad_id"].get<std::int64_t>());
    VT_COMPARE(tok.eosId(), std::optional<std::int64_t>(info["eos_id"].get<std::int64_t>()));
    VT_CHECK(!tok.bosId());
    for (const auto& [token, id] : info["special_ids"].items())
        VT_COMPARE(tok.tokenToId(token), std::optional<std::int64_t>(id.get<std::int64_t>()));
}

VT_TEST(tokenizerJsonAsWrittenRunsTheSamePipeline)
{
    // Without tokenizer_config.json the file runs as written (NFC, Split regex, ByteLevel):
    // tokenizers itself agreed with transformers on every prompt when the fixture was made.
    const auto file = test::readText(tokenizerDir() / "qwen2" / "tokenizer.json");
    auto plainConfig = json::parse(test::readText(tokenizerDir() / "qwen2" / "tokenizer_config.json"));
    plainConfig["tokenizer_class"] = "PreTrainedTokenizerFast";
    auto plain = text::Tokenizer::fromJson(file, plainConfig.dump(), "qwen2/tokenizer.json");
    VT_CHECK_MSG(plain.ok(), (plain.ok() ? "" : plain.error().message));
    for (const auto& c : expectedTokens()["cases"]) {
        auto got = plain->tokenize(c["prompt"].get<std::string>());
        VT_CHECK(got.ok());
        VT_CHECK_MSG(*got == c["ids"].get<std::vector<std::int64_t>>(), c["prompt"].dump().substr(0, 80));
    }
    // Another regex, ByteLevel with its own regex, and gaps in the added ids are named errors.
    auto refused = [&](const std::function<void(json&)>& edit, std::initializer_list<const char*> words, const std::string& config) {
        json j = json::parse(file);
        edit(j);
        auto r = text::Tokenizer::fromJson(j.dump(), config, "fixture/qwen2");
        VT_CHECK_MSG(!r.ok() && mentions(r.error().message, words), (r.ok() ? std::string("accepted") : r.error().message));
        std::printf("   refused: %s\n", r.error().message.c_str());
    };
    refused([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+"; }, {"Regex"}, plainConfig.dump());
    refused([](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }, {"ByteLevel"}, plainConfig.dump());
    auto config = json::parse(test::readText(tokenizerDir() / "qwen2" / "tokenizer_config.json"));
    auto& decoder = config["added_tokens_decoder"];
    const auto lastKey = std::prev(decoder.end()).key();
    decoder[std::to_string(std::stoll(lastKey) + 5)] = decoder[lastKey];
    decoder.erase(lastKey);
    refused([](json&) {}, {"contiguous"}, config.dump());
}

VT_TEST(unicodeHelpers)
{
    using namespace text::unicode;
    VT_CHECK(isLetter(U'a') && isLetter(U'東') && isLetter(0x1100) && !isLetter(U'1') && !isLetter(U' ') && !isLetter(0x1F98A));
    VT_CHECK(isNumber(U'7') && isNumber(0x00BD) && isNumber(0x216B) && !isNumber(U'x'));
    VT_CHECK(isWhiteSpace(U'\t') && isWhiteSpace(0x3000) && isWhiteSpace(0x85) && !isWhiteSpace(0x200B) && !isWhiteSpace(0xFEFF));
    // NFC: composition, canonical reordering, Hangul, singletons and exclusions.
    VT_COMPARE(nfc("e\xCC\x81"), std::string("\xC3\xA9"));
    VT_COMPARE(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), std::string("\xEA\xB0\x81"));  // jamo -> 각
    VT_COMPARE(nfc("\xE2\x84\xAB"), std::string("\xC3\x85"));  // angstrom -> Å
    VT_COMPARE(nfc("q\xCC\x87\xCC\xA3"), std::string("q\xCC\xA3\xCC\x87"));  // reordered by class
    VT_COMPARE(nfc("\xE0\xA5\x98"), std::string("\xE0\xA4\x95\xE0\xA4\xBC"));  // excluded: stays decomposed
    VT_COMPARE(nfc("plain ascii"), std::string("plain ascii"));
    // The Qwen2 split on a few shapes the regex alternatives decide.
    auto pieces = [](const std::string& s) {
        std::vector<std::string> out;
        const auto cps = decodeUtf8(s);
        for (const auto& [b, e] : qwen2Matches(cps))
            out.push_back(encodeUtf8(std::u32string_view(cps).substr(b, e - b)));
        return out;
    };
    VT_COMPARE(pieces("we're 42x  ok\n\n  end  "),
        (std::vector<std::string>{"we", "'re", " ", "4", "2", "x", " ", " ok", "\n\n", " ", " end", "  "}));  // tokenizers 0.23
    VT_COMPARE(pieces("a!!\r\nb"), (std::vector<std::string>{"a", "!!\r\n", "b"}));
}

// ================================================================ text tower

VT_TEST(featuresMatchThePipelinesEncodePrompt)
{
    const auto& model = encoder("model");
    VT_COMPARE(model.config().layers, std::int64_t{36});
    VT_COMPARE(model.config().kvHeads * 2, model.config().heads);
    // The pipeline's prompts through this tokenizer give the ids it fed the model.
    auto set = tensorfile::readTensorSet(textDir() / "case.safetensors");
    VT_CHECK(set.ok());
    const auto prompts = json::parse(set->metadata.at("prompts"));
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        auto ids = qwenTokenizer().tokenize("<|im_start|>user\n" + prompts[i].get<std::string>() + "<|im_end|>\n<|im_start|>assistant\n");
        VT_CHECK(ids.ok());
        const auto& want = *set->find("p" + std::to_string(i) + ".ids");
        VT_CHECK_MSG(*ids == std::vector<std::int64_t>(want.data_ptr<std::int64_t>(), want.data_ptr<std::int64_t>() + want.numel()),
            "prompt " << i << " tokenizes differently from the pipeline");
    }
    const double e = compareFeatures(model, textDir() / "case.safetensors", "fp32");
    VT_CHECK_MSG(e <= kTolerance, "max abs error " << e << " above 1e-4");
    VT_CHECK(model.bytesByRepresentation().size() == 1);
}

VT_TEST(vendorFp8TextEncoderMatches)
{
    const auto& model = encoder("fp8");
    const auto bytes = model.bytesByRepresentation();
    VT_CHECK(bytes.count("fp8-scaled") && bytes.at("fp8-scaled") > 0);
    VT_CHECK(model.residentBytes() < encoder("model").residentBytes());
    const double e = compareFeatures(model, textDir() / "case_fp8.safetensors", "fp8");
    VT_CHECK_MSG(e <= kTolerance, "fp8: max abs error " << e << " above 1e-4");
}

VT_TEST(bfloat16ComputeFollowsTheReference)
{
    // transformers with dtype=bfloat16, each prompt unpadded (the reference's own result moves by
    // up to 1.35 at |f| ~35 when it is padded, so only the unpadded run is a sharp reference). One
    // bf16 step at 32 is 0.25; a missing cast point (norm order, RoPE table dtype) is far more.
    const double e = compareFeatures(encoder("model", at::kBFloat16), textDir() / "case_bf16.safetensors", "bf16");
    VT_CHECK_MSG(e <= 0.25, "bf16: max abs error " << e << " above 0.25");
}

VT_TEST(everyTensorIsAccountedForAndInputsAreChecked)
{
    const auto dir = fs::temp_directory_path() / ("vireo_qwen3vl_strict_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
        std::ofstream(dir / "config.json") << test::readText(textDir() / "model" / "config.json");
    }
    auto full = tensorfile::readTensorSet(textDir() / "model" / "model.safetensors");
    VT_CHECK(full.ok());
    auto tryLoad = [&](const std::map<std::string, at::Tensor>& tensors) {
        VT_CHECK(tensorfile::writeSafetensors(dir / "model.safetensors", tensors, full->metadata).ok());
        return qwen3vl::TextEncoder::load(dir);
    };
    auto missing = full->tensors;
    missing.erase("language_model.layers.7.mlp.up_proj.weight");
    auto r = tryLoad(missing);
    VT_CHECK_MSG(
        !r.ok() && mentions(r.error().message, {"layers.7.mlp.up_proj.weight", "missing"}), (r.ok() ? "loaded" : r.error().message));
    auto extra = full->tensors;
    extra.emplace("language_model.layers.36.mlp.up_proj.weight", at::zeros({4, 4}));
    r = tryLoad(extra);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"layers.36.mlp.up_proj.weight"}), (r.ok() ? "loaded" : r.error().message));
    auto stray = full->tensors;
    stray.emplace("text_projection.weight", at::zeros({4, 4}));
    r = tryLoad(stray);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"text_projection.weight"}), (r.ok() ? "loaded" : r.error().message));
    auto wrongShape = full->tensors;
    wrongShape["language_model.layers.0.self_attn.k_proj.weight"] = at::zeros({16, 32});
    r = tryLoad(wrongShape);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"k_proj.weight", "[16, 32]"}), (r.ok() ? "loaded" : r.error().message));
    for (const char* f : {"model.safetensors", "config.json"})
        ::unlink((dir / f).c_str());
    ::rmdir(dir.c_str());

    const auto& model = encoder("model");
    const auto ids = at::arange(5, at::TensorOptions().dtype(at::kLong));
    std::stop_source stop;
    stop.request_stop();
    auto cancelled = model.features(ids, kTaps, stop.get_token());
    VT_CHECK(!cancelled.ok() && cancelled.error().code == ErrorCode::Cancelled);
    auto outOfVocab = model.features(ids + model.config().vocabSize, kTaps);
    VT_CHECK_MSG(!outOfVocab.ok() && mentions(outOfVocab.error().message, {"token ids"}), "out-of-vocabulary ids accepted");
    auto badTap = model.features(ids, {36});
    VT_CHECK(!badTap.ok());
}

VT_TEST(configParsing)
{
    // Qwen3-VL-8B-Instruct's text_config as transformers 5 writes it, then in the 4.x form.
    json real = {{"model_type", "qwen3_vl"},
        {"text_config",
            {{"model_type", "qwen3_vl_text"}, {"hidden_size", 4096}, {"intermediate_size", 12288}, {"num_hidden_layers", 36},
                {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"head_dim", 128}, {"vocab_size", 151936}, {"rms_norm_eps", 1e-6},
                {"rope_parameters",
                    {{"rope_type", "default"}, {"rope_theta", 5000000}, {"mrope_section", {24, 20, 20}}, {"mrope_interleaved", true}}}}}};
    auto c = qwen3vl::parseTextConfig(real.dump(), "8b/config.json");
    VT_CHECK_MSG(c.ok(), (c.ok() ? "" : c.error().message));
    const auto ref = qwen3vl::TextConfig::qwen3vl_8b();
    VT_CHECK(c->hiddenSize == ref.hiddenSize && c->layers == ref.layers && c->heads == ref.heads && c->kvHeads == ref.kvHeads
        && c->headDim == ref.headDim && c->vocabSize == ref.vocabSize && c->intermediateSize == ref.intermediateSize
        && c->ropeTheta == ref.ropeTheta && c->mropeSection == ref.mropeSection);
    auto legacy = real;
    legacy["text_config"].erase("rope_parameters");
    legacy["text_config"]["rope_theta"] = 5000000;
    legacy["text_config"]["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {24, 20, 20}}, {"mrope_interleaved", true}};
    c = qwen3vl::parseTextConfig(legacy.dump(), "8b/config.json");
    VT_CHECK_MSG(c.ok() && c->ropeTheta == 5e6, (c.ok() ? "" : c.error().message));
    auto refused = [](json j, std::initializer_list<const char*> words) {
        auto r = qwen3vl::parseTextConfig(j.dump(), "x/config.json");
        VT_CHECK_MSG(!r.ok() && mentions(r.error().message, words) && mentions(r.error().message, {"x/config.json"}),
            (r.ok() ? std::string("accepted") : r.error().message));
    };
    refused({{"model_type", "qwen2_vl"}}, {"qwen2_vl"});
    auto j = real;
    j["text_config"]["rope_parameters"]["rope_type"] = "yarn";
    refused(j, {"yarn"});
    j = real;
    j["text_config"]["num_key_value_heads"] = 5;
    refused(j, {"inconsistent"});
    j = real;
    j["text_config"]["num_hidden_layers"] = 1e30;
    refused(j, {"num_hidden_layers"});
    j = real;
    j["text_config"]["rope_parameters"].erase("rope_theta");
    refused(j, {"rope_theta"});
}

VT_MAIN("test_qwen3vl")
