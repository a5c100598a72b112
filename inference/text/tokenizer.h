#pragma once

// A Hugging Face tokenizer.json tokenizer that reproduces transformers 5.24's AutoTokenizer ids
// (tokenizers 0.23 semantics) for the byte-fallback BPE files Gemma 3 ships: normalizer,
// Split pre-tokenizer, BPE with merges / byte_fallback / fuse_unk, added and special tokens
// (left-most-longest matching, lstrip / rstrip, normalized or raw), TemplateProcessing, and
// the LTX-2 call: left padding to a fixed length, truncation, BOS.
//
// transformers does not always run tokenizer.json as written: for GemmaTokenizer(Fast) it
// rebuilds the pipeline from its class (Replace(" ", "▁"), Split(" "), BPE byte_fallback +
// fuse_unk) and takes the added tokens from tokenizer_config.json's added_tokens_decoder, and
// it ignores add_bos_token / add_eos_token there (the file's post-processor decides). This
// class does the same, so its ids match what the LTX-2 pipeline feeds the text encoder. Anything in the files it does
// not implement fails the load with the file and the feature named; it never tokenizes
// differently without saying so.

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::text {

struct Encoding {
    std::vector<std::int64_t> ids;
    std::vector<std::int64_t> attentionMask;  // 1 = token, 0 = padding
};

class Tokenizer {
public:
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

    // A folder holding tokenizer.json (and usually tokenizer_config.json), the tokenizer.json
    // file itself, or a diffusers pipeline folder (its tokenizer/ sub-folder is used).
    static Result<Tokenizer> load(const std::filesystem::path& path);
    // The same from the file contents; configJson may be empty (no tokenizer_config.json).
    // origin names the files in errors.
    static Result<Tokenizer> fromJson(
        const std::string& tokenizerJson, const std::string& configJson, const std::string& origin = "tokenizer.json");

    // The LTX-2 call (diffusers LTX2Pipeline._get_gemma_prompt_embeds): tokenizer(prompt,
    // padding="max_length", max_length, truncation, add_special_tokens) with padding_side
    // "left". The pipeline strips the prompt first (stripPythonWhitespace); this does not.
    // Without truncation a longer text comes back longer than maxLength, unpadded.
    Result<Encoding> encode(std::string_view text, std::int64_t maxLength = 1024, bool padLeft = true, bool addSpecialTokens = true,
        bool truncation = true) const;
    // Token ids of the text alone: no special tokens, truncation or padding.
    Result<std::vector<std::int64_t>> tokenize(std::string_view text) const;

    // Token ids back to text as transformers' decode(ids, skip_special_tokens) does for Gemma
    // (SentencePiece's decoder: "▁" to a space, <0xHH> byte runs to UTF-8 or U+FFFD each,
    // joined; no clean-up of spaces). Unsupported for other decoders; an unknown id is an error.
    Result<std::string> decode(const std::vector<std::int64_t>& ids, bool skipSpecialTokens = true) const;

    std::int64_t padId() const;  // the config's pad token, else eos (the pipeline's rule)
    std::optional<std::int64_t> bosId() const;
    std::optional<std::int64_t> eosId() const;
    std::int64_t vocabSize() const;  // model vocabulary plus added tokens (largest id + 1)
    std::optional<std::int64_t> tokenToId(std::string_view token) const;
    std::optional<std::string> idToToken(std::int64_t id) const;
    // How the pipeline was assembled, for logs: "GemmaTokenizer (rebuilt as transformers does)".
    const std::string& describe() const;

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// Python's str.strip() on UTF-8: removes leading and trailing characters for which
// str.isspace() holds (Unicode White_Space plus U+001C..U+001F). Invalid UTF-8 is returned as is.
std::string stripPythonWhitespace(std::string_view text);

}  // namespace vireo::text
