#include "inference/models/ltx2/ltx2promptenhancer.h"

#include "inference/tensorfile/modelsource.h"
#include "inference/text/unicode.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <system_error>
#include <utility>

namespace vireo::ltx2 {

namespace fs = std::filesystem;

namespace {

bool isFile(const fs::path& p)
{
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

// Where the model is and where its tokenizer is, for a pipeline folder or a model folder.
std::pair<fs::path, fs::path> locate(const fs::path& path)
{
    if (isFile(path / "prompt_enhancer" / "config.json")) {
        for (const char* folder : {"processor", "prompt_enhancer", "tokenizer"})
            if (isFile(path / folder / "tokenizer.json"))
                return {path / "prompt_enhancer", path / folder};
        return {path / "prompt_enhancer", path / "processor"};
    }
    return {path, path};
}

// The characters ltx-core's clean_response maps (str.maketrans over these pairs).
constexpr std::pair<char32_t, char32_t> kPlain[] = {{U'\u2018', U'\''}, {U'\u2019', U'\''}, {U'\u201c', U'"'}, {U'\u201d', U'"'},
    {U'\u2014', U'-'}, {U'\u2013', U'-'}, {U'\u00a0', U' '}, {U'\u2032', U'\''}, {U'\u2212', U'-'}};

// The tokenizer folder's chat template into impl (or why there is none to use).
void readChatTemplate(const fs::path& folder, std::optional<text::ChatTemplate>& out, std::string& problem)
{
    if (folder.empty()) {
        problem = "no tokenizer folder with a chat template";
        return;
    }
    auto found = text::chatTemplateIn(folder);
    if (!found)
        problem = found.error().message;
    else if (!*found)
        problem = folder.string() + " has no chat template";
    else
        out = std::move(**found);
}

}  // namespace

const std::string& defaultEnhancerSystemPrompt()
{
    static const std::string prompt =
        "You write prompts for a video model that makes a short clip with sound from one paragraph of text. Rewrite the user's idea "
        "as that paragraph.\n"
        "- Keep everything the user asked for: subjects, actions, setting, style, any quoted speech word for word.\n"
        "- Describe what is seen in the order it happens, in the present tense: who or what is in frame and how it looks, how it "
        "moves, where the camera is and how it moves (static, pan, tilt, dolly, tracking, handheld), the framing and lens, the "
        "light and colour, the surroundings.\n"
        "- Describe the sound: ambience, effects, music, and any dialogue in quotes with who says it and how.\n"
        "- Add only details that make the shot concrete; invent no second scene, no cuts, no text on screen unless asked.\n"
        "- Write one paragraph of 80 to 160 words, plain prose, no lists, no headings, no preamble, no notes.";
    return prompt;
}

struct PromptEnhancer::Impl {
    gemma3::CausalLm model;
    std::shared_ptr<const text::Tokenizer> tokenizer;
    std::string origin;
    std::optional<text::ChatTemplate> chatTemplate;
    std::string chatTemplateProblem;  // why the folder's template cannot be read
};

namespace {

// The turn markers the family's chat needs, and the tokenizer checked against the model.
Result<void> checkTokenizer(const text::Tokenizer& tokenizer, const gemma3::CausalLm& model, const std::string& where)
{
    const bool gemma4 = model.config().family == gemma3::Family::Gemma4;
    static constexpr std::array<const char*, 2> kGemma4{"<|turn>", "<turn|>"}, kGemma3{"<start_of_turn>", "<end_of_turn>"};
    for (const char* marker : gemma4 ? kGemma4 : kGemma3)
        if (!tokenizer.tokenToId(marker))
            return makeError(ErrorCode::InvalidFormat,
                where + ": has no " + marker + " token; it is not " + model.config().familyName()
                    + "'s tokenizer, which the enhancer's chat needs");
    if (tokenizer.vocabSize() > model.config().vocabSize)
        return makeError(ErrorCode::InvalidFormat,
            where + ": the tokenizer has " + std::to_string(tokenizer.vocabSize()) + " tokens, the model "
                + std::to_string(model.config().vocabSize) + "; they do not belong together");
    return {};
}

}  // namespace

PromptEnhancer::PromptEnhancer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
PromptEnhancer::~PromptEnhancer() = default;
PromptEnhancer::PromptEnhancer(PromptEnhancer&&) noexcept = default;
PromptEnhancer& PromptEnhancer::operator=(PromptEnhancer&&) noexcept = default;

const gemma3::CausalLm& PromptEnhancer::model() const
{
    return m_impl->model;
}
const text::Tokenizer& PromptEnhancer::tokenizer() const
{
    return *m_impl->tokenizer;
}

bool PromptEnhancer::present(const fs::path& path)
{
    const auto [model, tokenizer] = locate(path);
    return isFile(model / "config.json") && isFile(tokenizer / "tokenizer.json") && model.filename() == "prompt_enhancer";
}

PromptEnhancer::Bytes PromptEnhancer::bytes(const fs::path& path, c10::ScalarType dtype)
{
    Bytes out;
    const auto source = tensorfile::ModelSource::open(locate(path).first);
    if (!source)
        return out;
    for (const auto& cp : source->checkpoints)
        for (const auto& t : cp.tensors)
            if (!gemma3::isUnusedByTextEncoder(t.name))
                (t.name.find("embed_tokens_per_layer") != std::string::npos ? out.host : out.device) +=
                    t.numel() * static_cast<std::int64_t>(c10::elementSize(dtype));
    return out;
}

Result<PromptEnhancer> PromptEnhancer::load(const fs::path& path, const gemma3::TextEncoderLoadOptions& options)
{
    const auto [modelPath, tokenizerPath] = locate(path);
    auto model = gemma3::CausalLm::load(modelPath, options);
    if (!model)
        return model.error();
    if (!isFile(tokenizerPath / "tokenizer.json"))
        return makeError(ErrorCode::NotFound,
            path.string()
                + ": the prompt enhancer's tokenizer is missing (looked for tokenizer.json in processor/, prompt_enhancer/ and "
                  "tokenizer/); download the whole prompt enhancer");
    auto tokenizer = text::Tokenizer::load(tokenizerPath);
    if (!tokenizer)
        return tokenizer.error();
    if (auto ok = checkTokenizer(*tokenizer, *model, tokenizerPath.string()); !ok)
        return ok.error();
    auto impl = std::make_unique<Impl>(
        Impl{std::move(*model), std::make_shared<const text::Tokenizer>(std::move(*tokenizer)), path.string(), std::nullopt, {}});
    readChatTemplate(tokenizerPath, impl->chatTemplate, impl->chatTemplateProblem);
    return PromptEnhancer(std::move(impl));
}

Result<PromptEnhancer> PromptEnhancer::sharing(const gemma3::TextEncoder& encoder, std::shared_ptr<const text::Tokenizer> tokenizer,
    const std::string& origin, const fs::path& tokenizerFolder)
{
    auto model = gemma3::CausalLm::sharing(encoder);
    if (!model)
        return model.error();
    if (!tokenizer)
        return makeError(ErrorCode::InvalidArgument, origin + ": the text encoder's tokenizer is not loaded");
    if (auto ok = checkTokenizer(*tokenizer, *model, origin + " (its tokenizer)"); !ok)
        return ok.error();
    auto impl = std::make_unique<Impl>(Impl{std::move(*model), std::move(tokenizer), origin, std::nullopt, {}});
    readChatTemplate(tokenizerFolder, impl->chatTemplate, impl->chatTemplateProblem);
    return PromptEnhancer(std::move(impl));
}

std::string PromptEnhancer::chat(std::string_view system, std::string_view user, std::string* note) const
{
    const auto& m = *m_impl;
    const auto family = m.model.config().family;
    const auto written = [&](const std::string& why) {
        if (note)
            *note = why + "; " + m.model.config().familyName() + "'s turn format written in code was used";
        return chatText(system, user, family);
    };
    if (!m.chatTemplate)
        return written(m.chatTemplateProblem);
    auto rendered = text::renderChatTemplate(*m.chatTemplate, {{"system", std::string(system), {}}, {"user", std::string(user), {}}}, true);
    if (!rendered)
        return written("the chat template could not be rendered (" + rendered.error().message + ")");
    if (note)
        note->clear();
    return std::move(*rendered);
}

std::string PromptEnhancer::chatText(std::string_view system, std::string_view user, gemma3::Family family)
{
    if (family == gemma3::Family::Gemma3)
        // Gemma 3's template has no system role: its text and a blank line open the first user
        // turn, untrimmed (only the turns' contents are trimmed).
        return "<bos><start_of_turn>user\n" + std::string(system) + "\n\n" + text::stripPythonWhitespace(user)
            + "<end_of_turn>\n<start_of_turn>model\n";
    std::string out = "<bos>";
    for (const auto& [role, content] : {std::pair{"system", system}, {"user", user}})
        out += std::string("<|turn>") + role + "\n" + text::stripPythonWhitespace(content) + "<turn|>\n";
    return out + "<|turn>model\n";
}

std::string PromptEnhancer::cleanResponse(std::string_view text)
{
    auto chars = text::unicode::decodeUtf8(text);
    for (auto& c : chars)
        for (const auto& [from, to] : kPlain)
            if (c == from)
                c = to;
    std::size_t first = 0;
    while (first < chars.size() && !text::unicode::isLetter(chars[first]))
        ++first;
    // Python's loop returns the text unchanged when no character is a letter.
    return text::unicode::encodeUtf8(first == chars.size() ? std::u32string_view(chars) : std::u32string_view(chars).substr(first));
}

Result<EnhancedPrompt> PromptEnhancer::enhance(std::string_view prompt, const EnhanceOptions& options, std::stop_token stop) const
{
    const auto& m = *m_impl;
    const auto& tokenizer = *m.tokenizer;
    const auto family = m.model.config().family;
    const auto system = options.systemPrompt.empty() ? defaultEnhancerSystemPrompt() : options.systemPrompt;
    std::string chatNote;
    const auto chat = this->chat(system, "user prompt: " + std::string(prompt), &chatNote);
    constexpr std::int64_t kMaxPromptTokens = 16384;
    auto encoded = tokenizer.encode(chat, kMaxPromptTokens + 1, false, true, false);
    if (!encoded)
        return encoded.error();
    // encode() pads to the length asked for (on the right here): keep the tokens alone.
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < encoded->ids.size(); ++i)
        if (encoded->attentionMask[i])
            ids.push_back(encoded->ids[i]);
    if (static_cast<std::int64_t>(ids.size()) > kMaxPromptTokens)
        return makeError(ErrorCode::InvalidArgument,
            "the prompt and system prompt are " + std::to_string(ids.size()) + " tokens; the enhancer takes at most "
                + std::to_string(kMaxPromptTokens));
    // ltx-core's _pad_inputs_for_attention_alignment: left padding to a multiple of 8.
    const auto pad = (8 - static_cast<std::int64_t>(ids.size()) % 8) % 8;
    std::vector<std::int64_t> mask(ids.size(), 1);
    ids.insert(ids.begin(), static_cast<std::size_t>(pad), tokenizer.padId());
    mask.insert(mask.begin(), static_cast<std::size_t>(pad), 0);
    const auto n = static_cast<std::int64_t>(ids.size());
    const auto idTensor = at::from_blob(ids.data(), {1, n}, at::kLong).clone();
    const auto maskTensor = at::from_blob(mask.data(), {1, n}, at::kLong).clone();

    gemma3::GenerateOptions generate;
    generate.progress = options.progress;
    std::string decoding;
    if (family == gemma3::Family::Gemma4) {
        // ltx-core's GEMMA4_ENHANCE_GENERATION_KWARGS: greedy, no repeated 5-gram.
        generate.maxNewTokens = options.maxNewTokens > 0 ? options.maxNewTokens : 600;
        generate.noRepeatNgram = 5;
        decoding = "greedy, no repeated 5-gram";
    } else {
        // GEMMA3_PROMPT_ENHANCEMENT_CONFIG: sampled at 0.7; the rest is the model's
        // generation_config.json (google/gemma-3-12b-it: top_k 64, top_p 0.95).
        const auto& d = m.model.generationDefaults();
        generate.maxNewTokens = options.maxNewTokens > 0 ? options.maxNewTokens : 512;
        generate.sampling = gemma3::Sampling{0.7, d.topK, d.topP, options.seed};
        // A turn ends at <end_of_turn> whatever generation_config.json lists.
        generate.eosIds = m.model.eosIds();
        if (const auto end = tokenizer.tokenToId("<end_of_turn>"))
            if (std::find(generate.eosIds.begin(), generate.eosIds.end(), *end) == generate.eosIds.end())
                generate.eosIds.push_back(*end);
        std::ostringstream d2;
        d2 << "sampled: temperature 0.7, top_k " << d.topK << ", top_p " << d.topP << ", seed " << options.seed;
        decoding = d2.str();
        for (const auto& field : d.unapplied)
            decoding += "; generation_config.json's " + field + " is not applied";
    }
    auto out = m.model.generate(idTensor, maskTensor, generate, stop);
    if (!out)
        return out.error();
    auto raw = tokenizer.decode(out->ids, true);
    if (!raw)
        return raw.error();
    EnhancedPrompt result;
    result.raw = std::move(*raw);
    result.prompt = cleanResponse(result.raw);
    result.tokens = static_cast<int>(out->ids.size());
    result.stoppedAtEos = out->stoppedAtEos;
    result.decoding = std::move(decoding);
    result.chatNote = std::move(chatNote);
    if (text::stripPythonWhitespace(result.prompt).empty())
        return makeError(
            ErrorCode::InvalidFormat, m.origin + ": the prompt enhancer answered with no text; generate with the prompt as written");
    return result;
}

}  // namespace vireo::ltx2
