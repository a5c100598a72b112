// The Qwen2 byte-level BPE tokenizer as Ideogram-4 uses it, against
// transformers 5.24 / tokenizers 0.23 / diffusers 0.42.1 at tiny sizes
// (tests/fixtures/make_ideogram4_fixtures.py).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/text/tokenizer.h"
#include "inference/text/unicode.h"

#include <nlohmann/json.hpp>

#include <map>

using namespace vireo;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path tokenizerDir() { return test::fixturesDir() / "tokenizer"; }

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
    return "first difference at " + std::to_string(at) + " of " + std::to_string(want.size()) + " (got "
        + std::to_string(got.size()) + " ids)";
}

} // namespace

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
        VT_CHECK_MSG(*got == want, c["prompt"].dump().substr(0, 120) << ": " << firstDifference(*got, want) << ", tokens "
                << c["tokens"].dump().substr(0, 300));
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
    VT_COMPARE(nfc("\xE2\x84\xAB"), std::string("\xC3\x85"));                            // angstrom -> Å
    VT_COMPARE(nfc("q\xCC\x87\xCC\xA3"), std::string("q\xCC\xA3\xCC\x87"));              // reordered by class
    VT_COMPARE(nfc("\xE0\xA5\x98"), std::string("\xE0\xA4\x95\xE0\xA4\xBC"));            // excluded: stays decomposed
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

VT_MAIN("test_qwen3vl")
