#pragma once

// LTX's prompt enhancer: a small instruct model rewrites the user's prompt into the detailed,
// single-paragraph description LTX models are trained on, before the text encoder reads it.
// As ltx-core's LTXGemmaTextEncoder.enhance_t2v and diffusers 0.42.1's
// LTX2DFRPipeline.enhance_prompt run it for LTX-2.5's dedicated `prompt_enhancer`
// (google/gemma-4-E2B-it): a system turn and "user prompt: PROMPT" in Gemma 4's chat format,
// tokenized with the tokenizer's special tokens, left-padded to a multiple of 8, greedy
// decoding with no repeated 5-gram, at most 600 new tokens, decoded without special tokens and
// cleaned (typographic quotes and dashes made plain, anything before the first letter dropped).
// LTX-2.0/2.3 have no dedicated enhancer: their Gemma 3 text encoder writes the prompt it then
// reads (diffusers' LTX2Pipeline.enhance_prompt, ltx-core's enhance_t2v): Gemma 3's chat format
// (no system turn: the system text opens the user turn), sampled at temperature 0.7 with the
// model's top_k / top_p, seeded, at most 512 new tokens.
// Image-to-video (enhance_i2v): either is shown the first frame beside the prompt, Gemma 4 through
// its own vision tower (gemma4vision.h), Gemma 3 through SigLIP (gemma3vision.h).
// The system prompt is Vireo's own unless the caller gives one.

#include "inference/models/gemma3/gemma3.h"
#include "inference/models/gemma3/gemma3vision.h"
#include "inference/text/chattemplate.h"
#include "inference/text/tokenizer.h"
#include "inference/util/result.h"

#include <c10/core/ScalarType.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

namespace vireo::ltx2 {

struct EnhanceOptions {
    std::string systemPrompt;  // empty: defaultEnhancerSystemPrompt(), or the image one with an image
    int maxNewTokens = 0;  // 0: the reference's (600 for Gemma 4, 512 for Gemma 3)
    std::uint64_t seed = 10;  // Gemma 3's draws (the references take the video's seed)
    std::function<void(int done, int total)> progress;  // per generated token
    // Image-to-video (ltx-core's enhance_i2v): the first frame, uint8 [H, W, 3], shown to the
    // model beside "User Raw Input Prompt: PROMPT." (its long side brought to 896 with PIL's
    // bicubic, then the processor's own resize). Needs an enhancer that sees (whyBlind() empty).
    at::Tensor image;
};

struct EnhancedPrompt {
    std::string prompt;  // cleaned: what the text encoder reads
    std::string raw;  // the decoded reply before cleaning
    int tokens = 0;  // generated, the end-of-turn token included
    bool stoppedAtEos = false;  // false: cut at maxNewTokens
    // How it decoded: "greedy, no repeated 5-gram" or "sampled: temperature 0.7, top_k 64,
    // top_p 0.95, seed 42", and any generation_config.json field it did not apply.
    std::string decoding;
    // Why the chat was not the tokenizer's own template (none shipped, or one this renderer
    // refused) and the turn format written in code was used; empty when the template was.
    std::string chatNote;
};

class PromptEnhancer {
public:
    ~PromptEnhancer();
    PromptEnhancer(PromptEnhancer&&) noexcept;
    PromptEnhancer& operator=(PromptEnhancer&&) noexcept;

    // A diffusers LTX-2.5 pipeline folder (its prompt_enhancer/ component, the tokenizer from
    // processor/, else prompt_enhancer/, else tokenizer/), or a Gemma 4 model folder holding its
    // own tokenizer (a download of google/gemma-4-E2B-it).
    // A Gemma 3 model folder with its tokenizer enhances as LTX-2.0/2.3's text encoder does.
    // seeImages: also load a Gemma 4's vision tower, for image-to-video (whyBlind() says why it
    // could not be: no tower in the weights, no processor files, tokens that do not match).
    static Result<PromptEnhancer> load(
        const std::filesystem::path& path, const gemma3::TextEncoderLoadOptions& options = {}, bool seeImages = false);
    // LTX-2.0/2.3's self-enhancement: the loaded Gemma 3 text encoder's weights (shared, not
    // copied) and its tokenizer. origin names it in errors.
    // tokenizerFolder: where its chat template is (empty: none, the turn format in code is used).
    // vision: the text encoder's vision tower, for image-to-video (empty: text only); the image
    // processing is read from the tokenizer folder, a processor/ beside it, or the tower's folder.
    static Result<PromptEnhancer> sharing(const gemma3::TextEncoder& encoder, std::shared_ptr<const text::Tokenizer> tokenizer,
        const std::string& origin, const std::filesystem::path& tokenizerFolder = {},
        std::shared_ptr<const gemma3::VisionTower> vision = {});
    // Whether `path` holds one (a prompt_enhancer/ component with weights, or is a Gemma 4
    // model folder), without reading weights.
    static bool present(const std::filesystem::path& path);
    // The bytes its weights take in `dtype`, from one read of the headers (0 when they cannot be
    // read): on the device (the language model without the per-layer table) and in host memory
    // (the per-layer embedding table, which stays there); and the vision tower's, on the device
    // when it is shown an image.
    struct Bytes {
        std::int64_t device = 0, host = 0, vision = 0;
    };
    static Bytes bytes(const std::filesystem::path& path, c10::ScalarType dtype);
    static std::int64_t deviceBytes(const std::filesystem::path& path, c10::ScalarType dtype) { return bytes(path, dtype).device; }

    Result<EnhancedPrompt> enhance(std::string_view prompt, const EnhanceOptions& options = {}, std::stop_token stop = {}) const;

    // The chat text it feeds for a system and a user message: the tokenizer's chat template
    // rendered (chat_template.jinja or tokenizer_config.json's), else chatText's format, and
    // in *note why not.
    std::string chat(std::string_view system, std::string_view user, std::string* note = nullptr) const;
    // The same for a user turn of an image then text (image-to-video), before the processor
    // expands the image marker.
    std::string imageChat(std::string_view system, std::string_view user, std::string* note = nullptr) const;
    // Whether it can be shown an image (empty), else why not.
    std::string whyBlind() const;

    // The pieces, public for tests: the chat text (Gemma 4's turn format, or Gemma 3's with the
    // system text opening the user turn; contents stripped as the templates' `trim` does, the
    // model's turn opened), and clean_response.
    static std::string chatText(
        std::string_view system, std::string_view user, gemma3::Family family = gemma3::Family::Gemma4, bool image = false);
    static std::string cleanResponse(std::string_view text);

    const gemma3::CausalLm& model() const;
    const text::Tokenizer& tokenizer() const;

private:
    struct Impl;
    explicit PromptEnhancer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// Vireo's system prompt for the enhancer: what a good LTX prompt holds.
const std::string& defaultEnhancerSystemPrompt();
// The same when the first frame is given: it describes what follows from the image.
const std::string& defaultImageEnhancerSystemPrompt();

}  // namespace vireo::ltx2
