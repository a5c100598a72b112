#include "inference/models/ltx2/ltx2promptenhancer.h"

#include "inference/models/gemma3/gemma4vision.h"

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

const std::string& defaultImageEnhancerSystemPrompt()
{
    static const std::string prompt =
        "You write prompts for a video model that brings a still image to life as a short clip with sound, from one paragraph of "
        "text. The image you are shown is the clip's first frame. Rewrite the user's idea as that paragraph.\n"
        "- Start from what the image shows and keep it: the subjects and how they look, where they are in the frame, the "
        "setting, the light and colour, the framing and lens.\n"
        "- Keep everything the user asked for: actions, style, any quoted speech word for word.\n"
        "- Describe what happens from that frame on, in order and in the present tense: how each subject moves, how the camera "
        "moves (static, pan, tilt, dolly, tracking, handheld), what changes in the light or the surroundings.\n"
        "- Describe the sound: ambience, effects, music, and any dialogue in quotes with who says it and how.\n"
        "- Contradict nothing in the image; invent no second scene, no cuts, no text on screen unless asked.\n"
        "- Write one paragraph of 80 to 160 words, plain prose, no lists, no headings, no preamble, no notes.";
    return prompt;
}

// Showing the model an image: the chat with its image marker expanded into the placeholders the
// processor writes, and the features [n, hidden] that replace them.
struct SeenImage {
    std::string chat;
    at::Tensor features;
};
using Eyes = std::function<Result<SeenImage>(const std::string& chat, const at::Tensor& rgb)>;

struct PromptEnhancer::Impl {
    gemma3::CausalLm model;
    std::shared_ptr<const text::Tokenizer> tokenizer;
    std::string origin;
    std::optional<text::ChatTemplate> chatTemplate;
    std::string chatTemplateProblem;  // why the folder's template cannot be read
    Eyes eyes;  // image-to-video; empty: text only
    std::string blind;  // why it cannot be shown an image; empty when it can

    // The template rendered for these messages, else the turn format in code and why.
    std::string render(
        const std::vector<text::ChatMessage>& messages, const std::function<std::string()>& written, std::string* note) const;
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

// The tokenizer's boi / image / eoi tokens, and its image token as the model's; why not otherwise.
std::string checkImageTokens(const text::Tokenizer& tok, const gemma3::CausalLm& model, const std::string& boi, const std::string& image,
    const std::string& eoi, std::int64_t towerImageId, const std::string& origin)
{
    const auto imageId = tok.tokenToId(image);
    if (!imageId || !tok.tokenToId(boi) || !tok.tokenToId(eoi))
        return origin + ": the tokenizer has no " + boi + " / " + image + " / " + eoi + " tokens";
    const auto modelId = model.config().imageTokenId.value_or(towerImageId);
    if (*imageId != towerImageId || *imageId != modelId)
        return origin + ": the tokenizer's " + image + " is " + std::to_string(*imageId) + ", the model's image token "
            + std::to_string(towerImageId);
    return {};
}

// LTX-2.5's enhancer (Gemma 4) shown the image: its own vision tower and Gemma4Processor's files,
// or why it cannot be (in *blind). A tower that is there but broken is an error.
Result<Eyes> gemma4Eyes(const gemma3::CausalLm& model, const text::Tokenizer& tok, const fs::path& modelPath, const fs::path& tokenizerPath,
    const gemma3::TextEncoderLoadOptions& options, std::string& blind)
{
    auto loaded = gemma3::Gemma4VisionTower::load(modelPath, gemma3::Gemma4VisionLoadOptions{options.device, options.dtype});
    if (!loaded) {
        if (loaded.error().code != ErrorCode::NotFound)
            return loaded.error();
        blind = loaded.error().message;
        return Eyes{};
    }
    auto tower = std::make_shared<const gemma3::Gemma4VisionTower>(std::move(*loaded));
    const auto& vc = tower->config();
    if (vc.textHidden != model.config().hiddenSize) {
        blind = modelPath.string() + ": the vision tower projects to " + std::to_string(vc.textHidden) + " values, the language model is "
            + std::to_string(model.config().hiddenSize) + " wide";
        return Eyes{};
    }
    auto processing = gemma3::readGemma4ImageProcessing(vc, {tokenizerPath, modelPath, tower->folder()});
    if (!processing) {
        blind = processing.error().message;
        return Eyes{};
    }
    blind = checkImageTokens(
        tok, model, processing->boiToken, processing->imageToken, processing->eoiToken, vc.imageTokenId, tokenizerPath.string());
    if (!blind.empty())
        return Eyes{};
    return Eyes{[tower, p = std::move(*processing)](const std::string& chat, const at::Tensor& rgb) -> Result<SeenImage> {
        // diffusers' 896 long side, then Gemma4ImageProcessor's own resize to the patch budget.
        auto patches = gemma3::gemma4Patches(gemma3::prepareEnhanceImage(rgb), p);
        if (!patches)
            return patches.error();
        auto features = tower->embed(*patches);
        if (!features)
            return features.error();
        return SeenImage{p.expand(chat, patches->softTokens), std::move(*features)};
    }};
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
    out.vision = gemma3::Gemma4VisionTower::bytes(*source, dtype);
    return out;
}

Result<PromptEnhancer> PromptEnhancer::load(const fs::path& path, const gemma3::TextEncoderLoadOptions& options, bool seeImages)
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
        Impl{std::move(*model), std::make_shared<const text::Tokenizer>(std::move(*tokenizer)), path.string(), std::nullopt, {}, {}, {}});
    if (impl->model.config().family != gemma3::Family::Gemma4) {
        impl->blind = "a Gemma 3 prompt enhancer loaded on its own is not shown images by this version (as the text encoder it is)";
    } else if (!seeImages) {
        impl->blind = "the prompt enhancer was loaded without its vision tower";
    } else {
        auto eyes = gemma4Eyes(impl->model, *impl->tokenizer, modelPath, tokenizerPath, options, impl->blind);
        if (!eyes)
            return eyes.error();
        impl->eyes = std::move(*eyes);
    }
    readChatTemplate(tokenizerPath, impl->chatTemplate, impl->chatTemplateProblem);
    return PromptEnhancer(std::move(impl));
}

Result<PromptEnhancer> PromptEnhancer::sharing(const gemma3::TextEncoder& encoder, std::shared_ptr<const text::Tokenizer> tokenizer,
    const std::string& origin, const fs::path& tokenizerFolder, std::shared_ptr<const gemma3::VisionTower> vision)
{
    auto model = gemma3::CausalLm::sharing(encoder);
    if (!model)
        return model.error();
    if (!tokenizer)
        return makeError(ErrorCode::InvalidArgument, origin + ": the text encoder's tokenizer is not loaded");
    if (auto ok = checkTokenizer(*tokenizer, *model, origin + " (its tokenizer)"); !ok)
        return ok.error();
    auto impl = std::make_unique<Impl>(Impl{std::move(*model), std::move(tokenizer), origin, std::nullopt, {}, {}, {}});
    readChatTemplate(tokenizerFolder, impl->chatTemplate, impl->chatTemplateProblem);
    if (!vision) {
        impl->blind = "the text encoder's vision tower is not loaded";
    } else if (vision->config().textHidden != impl->model.config().hiddenSize) {
        impl->blind = origin + ": the vision tower projects to " + std::to_string(vision->config().textHidden)
            + " values, the language model is " + std::to_string(impl->model.config().hiddenSize) + " wide";
    } else {
        std::vector<fs::path> folders{tokenizerFolder};
        if (!tokenizerFolder.empty())
            folders.push_back(tokenizerFolder.parent_path() / "processor");
        folders.push_back(vision->folder());
        auto processing = gemma3::readImageProcessing(vision->config(), folders);
        if (!processing)
            impl->blind = processing.error().message;
        else
            impl->blind = checkImageTokens(*impl->tokenizer, impl->model, processing->boiToken, processing->imageToken,
                processing->eoiToken, vision->config().imageTokenId, origin);
        if (impl->blind.empty())
            impl->eyes = [vision, p = std::move(*processing)](const std::string& chat, const at::Tensor& rgb) -> Result<SeenImage> {
                // Gemma3Processor: each image marker becomes the full run of placeholders.
                const auto pixels = gemma3::preprocessImage(gemma3::prepareEnhanceImage(rgb), p);
                auto embedded = vision->embed(pixels);
                if (!embedded)
                    return embedded.error();
                return SeenImage{p.expand(chat), embedded->flatten(0, 1)};
            };
    }
    return PromptEnhancer(std::move(impl));
}

std::string PromptEnhancer::Impl::render(
    const std::vector<text::ChatMessage>& messages, const std::function<std::string()>& written, std::string* note) const
{
    const auto fallback = [&](const std::string& why) {
        if (note)
            *note = why + "; " + model.config().familyName() + "'s turn format written in code was used";
        return written();
    };
    if (!chatTemplate)
        return fallback(chatTemplateProblem);
    auto rendered = text::renderChatTemplate(*chatTemplate, messages, true);
    if (!rendered)
        return fallback("the chat template could not be rendered (" + rendered.error().message + ")");
    if (note)
        note->clear();
    return std::move(*rendered);
}

std::string PromptEnhancer::chat(std::string_view system, std::string_view user, std::string* note) const
{
    const auto family = m_impl->model.config().family;
    return m_impl->render(
        {{"system", std::string(system), {}}, {"user", std::string(user), {}}}, [&] { return chatText(system, user, family); }, note);
}

std::string PromptEnhancer::imageChat(std::string_view system, std::string_view user, std::string* note) const
{
    const auto family = m_impl->model.config().family;
    return m_impl->render(
        {{"system", std::string(system), {}}, {"user", {}, {{"image", {}}, {"text", std::string(user)}}}},
        [&] { return chatText(system, user, family, true); }, note);
}

std::string PromptEnhancer::whyBlind() const
{
    return m_impl->eyes ? std::string() : m_impl->blind;
}

std::string PromptEnhancer::chatText(std::string_view system, std::string_view user, gemma3::Family family, bool image)
{
    if (family == gemma3::Family::Gemma3)
        // Gemma 3's template has no system role: its text and a blank line open the first user
        // turn, untrimmed (only the turns' contents are trimmed); an image part is its marker.
        return "<bos><start_of_turn>user\n" + std::string(system) + "\n\n" + (image ? "<start_of_image>" : "")
            + text::stripPythonWhitespace(user) + "<end_of_turn>\n<start_of_turn>model\n";
    // Gemma 4's template writes an image part as "\n\n<|image|>\n\n" before the trimmed text.
    return "<bos><|turn>system\n" + text::stripPythonWhitespace(system) + "<turn|>\n<|turn>user\n" + (image ? "\n\n<|image|>\n\n" : "")
        + text::stripPythonWhitespace(user) + "<turn|>\n<|turn>model\n";
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
    const bool image = options.image.defined();
    if (image && !m.eyes)
        return makeError(ErrorCode::Unsupported, m.origin + ": cannot be shown the first frame: " + m.blind);
    const auto system = !options.systemPrompt.empty() ? options.systemPrompt
        : image                                       ? defaultImageEnhancerSystemPrompt()
                                                      : defaultEnhancerSystemPrompt();
    std::string chatNote;
    // ltx-core's enhance_t2v / enhance_i2v user turns.
    auto chat = image ? imageChat(system, "User Raw Input Prompt: " + std::string(prompt) + ".", &chatNote)
                      : this->chat(system, "user prompt: " + std::string(prompt), &chatNote);
    at::Tensor features;
    if (image) {
        auto seen = m.eyes(chat, options.image);
        if (!seen)
            return seen.error();
        chat = std::move(seen->chat);
        features = std::move(seen->features);
    }
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
    generate.imageFeatures = features;
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
