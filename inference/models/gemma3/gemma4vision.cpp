#include "inference/models/gemma3/gemma4vision.h"

#include "inference/models/gemma3/gemma3.h"
#include "inference/models/gemma3/gemma3vision.h"
#include "inference/models/gemma3/processorfiles.h"
#include "inference/models/nn/layers.h"
#include "inference/models/nn/strictweights.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace vireo::gemma3 {

namespace fs = std::filesystem;
using json = nlohmann::json;
using jsonutil::ConfigError;
using jsonutil::configFail;
using jsonutil::intField;
using jsonutil::numberField;

// ------------------------------------------------------------------ config

Result<Gemma4VisionConfig> parseGemma4VisionConfig(const std::string& configJson, const std::string& origin)
{
    try {
        auto parsed = jsonutil::parseUntrusted(configJson, origin);
        if (!parsed)
            return parsed.error();
        const auto& top = *parsed;
        if (!top.is_object() || !top.contains("vision_config") || top["vision_config"].is_null())
            return makeError(ErrorCode::NotFound, origin + ": has no vision_config (a text-only Gemma 4)");
        if (!top["vision_config"].is_object())
            configFail(origin + ": vision_config is not an object");
        const auto& v = top["vision_config"];
        const std::string type = v.contains("model_type") && v["model_type"].is_string() ? v["model_type"].get<std::string>() : "";
        if (!type.empty() && type != "gemma4_vision")
            configFail(origin + ": vision_config is a '" + type + "' config, not Gemma 4's (gemma4_vision)");
        Gemma4VisionConfig c;
        c.hiddenSize = intField(v, "hidden_size", c.hiddenSize, origin);
        c.intermediateSize = intField(v, "intermediate_size", c.intermediateSize, origin);
        c.layers = intField(v, "num_hidden_layers", c.layers, origin);
        c.heads = intField(v, "num_attention_heads", c.heads, origin);
        c.kvHeads = intField(v, "num_key_value_heads", c.kvHeads, origin);
        c.headDim = v.contains("head_dim") && v["head_dim"].is_null() ? c.hiddenSize / std::max<std::int64_t>(c.heads, 1)
                                                                      : intField(v, "head_dim", c.headDim, origin);
        c.rmsNormEps = numberField(v, "rms_norm_eps", c.rmsNormEps, origin);
        c.poolingKernel = intField(v, "pooling_kernel_size", c.poolingKernel, origin);
        c.patchSize = intField(v, "patch_size", c.patchSize, origin);
        c.positionEmbeddingSize = intField(v, "position_embedding_size", c.positionEmbeddingSize, origin);
        c.clippedLinears = jsonutil::boolField(v, "use_clipped_linears", false, origin);
        c.standardize = jsonutil::boolField(v, "standardize", false, origin);
        const std::string act = v.contains("hidden_activation") && v["hidden_activation"].is_string()
            ? v["hidden_activation"].get<std::string>()
            : "gelu_pytorch_tanh";
        if (act != "gelu_pytorch_tanh" && act != "gelu")
            configFail(origin + ": vision_config.hidden_activation '" + act + "' is not supported (gelu_pytorch_tanh or gelu)");
        c.geluTanh = act == "gelu_pytorch_tanh";
        if (const auto* rope = jsonutil::objectField(v, "rope_parameters")) {
            const std::string ropeType =
                rope->contains("rope_type") && (*rope)["rope_type"].is_string() ? (*rope)["rope_type"].get<std::string>() : "axial";
            if (ropeType != "axial")
                configFail(origin + ": vision_config.rope_parameters asks for '" + ropeType + "' RoPE; Gemma 4's tower is axial");
            c.ropeTheta = numberField(*rope, "rope_theta", c.ropeTheta, origin);
        }
        const json* text = jsonutil::objectField(top, "text_config");
        c.textHidden = text ? intField(*text, "hidden_size", c.textHidden, origin) : c.textHidden;
        c.imageTokenId = intField(top, "image_token_id", c.imageTokenId, origin);
        c.boiTokenId = intField(top, "boi_token_id", c.boiTokenId, origin);
        c.eoiTokenId = intField(top, "eoi_token_id", c.eoiTokenId, origin);

        const auto bounded = [&](std::int64_t value, std::int64_t hi, const char* what) {
            if (value <= 0 || value > hi)
                configFail(origin + ": " + what + " " + std::to_string(value) + " is out of range (1.." + std::to_string(hi) + ")");
        };
        bounded(c.hiddenSize, 1 << 16, "vision hidden_size");
        bounded(c.intermediateSize, 1 << 18, "vision intermediate_size");
        bounded(c.layers, 256, "vision num_hidden_layers");
        bounded(c.heads, 1024, "vision num_attention_heads");
        bounded(c.kvHeads, 1024, "vision num_key_value_heads");
        bounded(c.headDim, 1024, "vision head_dim");
        bounded(c.poolingKernel, 16, "vision pooling_kernel_size");
        bounded(c.patchSize, 256, "vision patch_size");
        bounded(c.positionEmbeddingSize, 1 << 20, "vision position_embedding_size");
        bounded(c.textHidden, 1 << 16, "text hidden_size");
        if (c.heads % c.kvHeads)
            configFail(
                origin + ": " + std::to_string(c.heads) + " vision heads do not share " + std::to_string(c.kvHeads) + " key/value heads");
        // Axial RoPE turns half the head on each axis, in pairs.
        if (c.headDim % 4)
            configFail(origin + ": vision head_dim " + std::to_string(c.headDim) + " does not split into two rotated halves");
        if (!(c.rmsNormEps > 0 && c.rmsNormEps < 1) || !(c.ropeTheta > 1) || !std::isfinite(c.ropeTheta))
            configFail(origin + ": vision rms_norm_eps or rope_theta out of range");
        return c;
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, origin + ": not a usable Gemma 4 vision config (" + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

// ------------------------------------------------------------------ processing

std::string Gemma4ImageProcessing::expand(const std::string& chat, std::int64_t softTokens) const
{
    if (imageToken.empty())
        return chat;
    std::string run = boiToken;
    run.reserve(run.size() + imageToken.size() * static_cast<std::size_t>(std::max<std::int64_t>(softTokens, 0)) + eoiToken.size());
    for (std::int64_t i = 0; i < softTokens; ++i)
        run += imageToken;
    run += eoiToken;
    std::string out;
    std::size_t from = 0;
    for (auto at = chat.find(imageToken); at != std::string::npos; at = chat.find(imageToken, from)) {
        out.append(chat, from, at - from);
        out += run;
        from = at + imageToken.size();
    }
    out.append(chat, from);
    return out;
}

Result<Gemma4ImageProcessing> readGemma4ImageProcessing(const Gemma4VisionConfig& config, const std::vector<fs::path>& folders)
{
    Gemma4ImageProcessing p;
    p.patchSize = config.patchSize;
    p.poolingKernel = config.poolingKernel;
    try {
        auto pre = detail::firstJsonIn(folders, "preprocessor_config.json");
        auto proc = detail::firstJsonIn(folders, "processor_config.json");
        if (!pre && proc)
            if (const auto* nested = jsonutil::objectField(proc->first, "image_processor"))
                pre = std::pair{*nested, proc->second + " (image_processor)"};
        if (pre) {
            const auto& [j, where] = *pre;
            p.doResize = jsonutil::boolField(j, "do_resize", true, where);
            p.doRescale = jsonutil::boolField(j, "do_rescale", true, where);
            p.doNormalize = jsonutil::boolField(j, "do_normalize", false, where);
            p.rescaleFactor = numberField(j, "rescale_factor", p.rescaleFactor, where);
            p.resample = static_cast<int>(intField(j, "resample", 3, where));
            if (p.resample != 2 && p.resample != 3)
                configFail(where + ": resample " + std::to_string(p.resample) + " is not supported (2 bilinear or 3 bicubic)");
            p.patchSize = intField(j, "patch_size", p.patchSize, where);
            p.poolingKernel = intField(j, "pooling_kernel_size", p.poolingKernel, where);
            p.maxSoftTokens = intField(j, "max_soft_tokens", p.maxSoftTokens, where);
            detail::readTriple(j, "image_mean", p.mean, where);
            detail::readTriple(j, "image_std", p.stdDev, where);
            if (std::any_of(p.stdDev.begin(), p.stdDev.end(), [](double s) { return !(std::abs(s) > 0) || !std::isfinite(s); }))
                configFail(where + ": image_std holds a zero");
            // Gemma4ImageProcessor's _SUPPORTED_SOFT_TOKENS.
            constexpr std::array<std::int64_t, 5> kSoftTokens{70, 140, 280, 560, 1120};
            if (std::find(kSoftTokens.begin(), kSoftTokens.end(), p.maxSoftTokens) == kSoftTokens.end())
                configFail(where + ": max_soft_tokens " + std::to_string(p.maxSoftTokens)
                    + " is not one Gemma 4 offers (70, 140, 280, 560, 1120)");
            // Every patch attends to every other: a budget beyond Gemma 4's largest (1,120 soft tokens
            // pooled 3 x 3) is a file asking for hours of work, not a model.
            if (p.maxPatches() > 1120 * 9)
                configFail(where + ": asks for up to " + std::to_string(p.maxPatches()) + " patches an image; Gemma 4 reads at most "
                    + std::to_string(1120 * 9));
            if (p.patchSize != config.patchSize || p.poolingKernel != config.poolingKernel)
                configFail(where + ": cuts " + std::to_string(p.patchSize) + "-pixel patches pooled " + std::to_string(p.poolingKernel)
                    + " x " + std::to_string(p.poolingKernel) + ", the vision tower reads " + std::to_string(config.patchSize)
                    + "-pixel patches pooled " + std::to_string(config.poolingKernel) + " x " + std::to_string(config.poolingKernel));
        }
        if (auto tok = detail::firstJsonIn(folders, "tokenizer_config.json")) {
            detail::readSpecialToken(tok->first, "boi_token", p.boiToken);
            detail::readSpecialToken(tok->first, "image_token", p.imageToken);
            detail::readSpecialToken(tok->first, "eoi_token", p.eoiToken);
        }
        return p;
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, std::string("the image processor's config is not usable (") + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

Result<std::pair<std::int64_t, std::int64_t>> gemma4ResizeTarget(
    std::int64_t height, std::int64_t width, std::int64_t patchSize, std::int64_t maxPatches, std::int64_t pooling)
{
    if (height <= 0 || width <= 0 || patchSize <= 0 || maxPatches <= 0 || pooling <= 0 || height > (1 << 20) || width > (1 << 20))
        return makeError(ErrorCode::InvalidArgument,
            "an image of " + std::to_string(width) + "x" + std::to_string(height) + " cannot be cut into patches");
    // Python's float arithmetic, step for step.
    const double targetPx = static_cast<double>(maxPatches * patchSize * patchSize);
    const double factor = std::sqrt(targetPx / static_cast<double>(height * width));
    const auto side = pooling * patchSize;
    auto th = static_cast<std::int64_t>(std::floor(factor * static_cast<double>(height) / static_cast<double>(side))) * side;
    auto tw = static_cast<std::int64_t>(std::floor(factor * static_cast<double>(width) / static_cast<double>(side))) * side;
    if (th == 0 && tw == 0)
        return makeError(
            ErrorCode::InvalidArgument, "an image of " + std::to_string(width) + "x" + std::to_string(height) + " resizes to nothing");
    const auto maxSide = (maxPatches / (pooling * pooling)) * side;
    if (th == 0) {
        th = side;
        tw = std::min(static_cast<std::int64_t>(std::floor(static_cast<double>(width) / static_cast<double>(height))) * side, maxSide);
    } else if (tw == 0) {
        tw = side;
        th = std::min(static_cast<std::int64_t>(std::floor(static_cast<double>(height) / static_cast<double>(width))) * side, maxSide);
    }
    if (static_cast<double>(th * tw) > targetPx)
        return makeError(ErrorCode::InvalidArgument,
            "an image of " + std::to_string(width) + "x" + std::to_string(height) + " resizes to " + std::to_string(tw) + "x"
                + std::to_string(th) + ", more than " + std::to_string(maxPatches) + " patches");
    return std::pair{th, tw};
}

Result<Gemma4Patches> gemma4Patches(const at::Tensor& rgb, const Gemma4ImageProcessing& p)
{
    try {
        TORCH_CHECK(rgb.dim() == 3 && rgb.size(2) == 3 && rgb.scalar_type() == at::kByte, "an RGB image is uint8 [H, W, 3], got ",
            rgb.sizes(), " ", rgb.scalar_type());
        auto image = rgb.to(at::kCPU).contiguous();
        if (p.doResize) {
            auto target = gemma4ResizeTarget(image.size(0), image.size(1), p.patchSize, p.maxPatches(), p.poolingKernel);
            if (!target)
                return target.error();
            const auto [th, tw] = *target;
            if (th != image.size(0) || tw != image.size(1))
                image = pilResize(image, tw, th, p.resample);
        }
        const auto h = image.size(0), w = image.size(1), ps = p.patchSize;
        const auto side = ps * p.poolingKernel;
        TORCH_CHECK(h % side == 0 && w % side == 0, "the image is ", w, "x", h, ", not whole ", side, "-pixel pooled patches");
        // numpy's rescale in float64 stored as float32; normalize in float32 (Gemma 4 does not).
        auto x = image.to(at::kDouble);
        x = (p.doRescale ? x * p.rescaleFactor : x).to(at::kFloat);
        if (p.doNormalize) {
            const auto mean = at::tensor(std::vector<double>(p.mean), at::kDouble).to(at::kFloat);
            const auto deviation = at::tensor(std::vector<double>(p.stdDev), at::kDouble).to(at::kFloat);
            x = (x - mean) / deviation;
        }
        Gemma4Patches out;
        const auto ph = h / ps, pw = w / ps;
        // convert_image_to_patches: (y, x) patches, each its rows of (px, channel) values.
        out.pixels = x.view({ph, ps, pw, ps, 3}).permute({0, 2, 1, 3, 4}).reshape({ph * pw, ps * ps * 3}).contiguous();
        const auto ys = at::arange(ph, at::kLong).view({ph, 1}).expand({ph, pw});
        const auto xs = at::arange(pw, at::kLong).view({1, pw}).expand({ph, pw});
        out.positions = at::stack({xs, ys}, -1).reshape({ph * pw, 2}).contiguous();
        out.softTokens = ph * pw / (p.poolingKernel * p.poolingKernel);
        out.height = h;
        out.width = w;
        return out;
    } catch (const c10::Error& e) {
        return errorFromException(e, "Gemma 4 image processing", ErrorCode::InvalidArgument);
    }
}

// ------------------------------------------------------------------ the tower

namespace {

// Longest first: a name takes the first prefix it starts with.
const std::vector<std::string> kTowerPrefixes{"model.vision_tower.", "vision_tower."};
const std::vector<std::string> kEmbedderPrefixes{"model.embed_vision.", "embed_vision."};

// Canonical "tower.*" / "embedder.*" names -> stored tensors.
std::map<std::string, nn::StoredTensor> visionIndex(const tensorfile::ModelSource& source, const std::string& component)
{
    std::map<std::string, nn::StoredTensor> index;
    for (const auto& cp : source.checkpoints) {
        if (cp.component != component)
            continue;
        for (const auto& t : cp.tensors) {
            if (quant::isQuantizationSibling(t.name))
                continue;
            for (const auto& [prefixes, canonical] : {std::pair{&kTowerPrefixes, "tower."}, std::pair{&kEmbedderPrefixes, "embedder."}})
                for (const auto& p : *prefixes)
                    if (t.name.starts_with(p)) {
                        index.emplace(canonical + t.name.substr(p.size()), nn::StoredTensor{&cp, t.name});
                        break;
                    }
        }
    }
    return index;
}

// Gemma4ClippableLinear: a bias-free linear whose input and output are clamped by stored bounds.
struct ClippedLinear {
    nn::Linear linear;
    at::Tensor inMin, inMax, outMin, outMax;  // 0-dim, undefined without use_clipped_linears

    at::Tensor operator()(at::Tensor x) const
    {
        if (inMin.defined())
            x = at::clamp(x, inMin, inMax);
        x = linear(x);
        if (outMin.defined())
            x = at::clamp(x, outMin, outMax);
        return x;
    }
    std::int64_t residentBytes() const
    {
        std::int64_t n = linear.residentBytes();
        for (const auto* t : {&inMin, &inMax, &outMin, &outMax})
            n += quant::bytesOf(*t);
        return n;
    }
};

struct EncoderLayer {
    ClippedLinear q, k, v, o, gate, up, down;
    at::Tensor qNorm, kNorm, inputNorm, postAttentionNorm, preFeedforwardNorm, postFeedforwardNorm;
};

}  // namespace

struct Gemma4VisionTower::Impl {
    Gemma4VisionConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string origin;
    fs::path folder;
    nn::Linear inputProj;
    at::Tensor positionTable;  // [2, positions, hidden]
    std::vector<EncoderLayer> layers;
    at::Tensor stdBias, stdScale;  // float32, undefined without standardize
    nn::Linear projection;  // embed_vision: hidden -> text hidden
};

Gemma4VisionTower::Gemma4VisionTower(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Gemma4VisionTower::~Gemma4VisionTower() = default;
Gemma4VisionTower::Gemma4VisionTower(Gemma4VisionTower&&) noexcept = default;
Gemma4VisionTower& Gemma4VisionTower::operator=(Gemma4VisionTower&&) noexcept = default;

const Gemma4VisionConfig& Gemma4VisionTower::config() const
{
    return m_impl->config;
}
const fs::path& Gemma4VisionTower::folder() const
{
    return m_impl->folder;
}

std::int64_t Gemma4VisionTower::bytes(const fs::path& path, c10::ScalarType dtype)
{
    const auto source = tensorfile::ModelSource::open(path);
    return source ? bytes(*source, dtype) : 0;
}

std::int64_t Gemma4VisionTower::bytes(const tensorfile::ModelSource& source, c10::ScalarType dtype)
{
    return detail::indexBytes(visionIndex(source, detail::weightsComponent(source, "prompt_enhancer")), dtype);
}

Result<Gemma4VisionTower> Gemma4VisionTower::load(const fs::path& path, const Gemma4VisionLoadOptions& options)
{
    auto opened = tensorfile::ModelSource::open(path);
    if (!opened)
        return opened.error();
    const auto& source = *opened;
    const std::string origin = path.string();
    const auto component = detail::weightsComponent(source, "prompt_enhancer");
    auto index = visionIndex(source, component);
    if (!index.count("tower.patch_embedder.input_proj.weight"))
        return makeError(ErrorCode::NotFound,
            origin + ": the Gemma 4 weights carry no vision tower (model.vision_tower.*); a text-only export cannot see images");

    auto impl = std::make_unique<Impl>();
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->origin = origin;
    impl->folder = detail::componentFolder(source, component);
    const auto configText = detail::componentConfig(source, component, impl->folder);
    if (!configText)
        return makeError(ErrorCode::NotFound,
            origin + ": no config.json describes the Gemma 4 vision tower; put the model's config.json next to its weights");
    auto parsed = parseGemma4VisionConfig(configText->first, configText->second);
    if (!parsed)
        return parsed.error();
    impl->config = *parsed;
    const auto& c = impl->config;
    try {
        quant::LoadOptions lo;
        lo.device = options.device;
        nn::StrictWeights w(std::move(index), lo, options.dtype, origin, "Gemma 4", "vision tower");
        const auto d = c.hiddenSize, hd = c.headDim;
        const auto scalar = [&](const std::string& name) {
            auto t = w.dense(name, {}, options.dtype);
            if (t.defined() && t.numel() != 1) {
                w.fail(name + ": holds " + std::to_string(t.numel()) + " values, a clamp bound holds one");
                return at::Tensor();
            }
            return t.defined() ? t.reshape({}) : t;
        };
        const auto clipped = [&](const std::string& name, std::int64_t out, std::int64_t in) {
            ClippedLinear l;
            l.linear = w.linear(name + ".linear", out, in, false);
            if (c.clippedLinears) {
                l.inMin = scalar(name + ".input_min");
                l.inMax = scalar(name + ".input_max");
                l.outMin = scalar(name + ".output_min");
                l.outMax = scalar(name + ".output_max");
            }
            return l;
        };
        impl->inputProj = w.linear("tower.patch_embedder.input_proj", d, 3 * c.patchSize * c.patchSize, false);
        impl->positionTable = w.dense("tower.patch_embedder.position_embedding_table", {2, c.positionEmbeddingSize, d}, options.dtype);
        for (std::int64_t i = 0; i < c.layers; ++i) {
            const auto p = "tower.encoder.layers." + std::to_string(i) + ".";
            EncoderLayer l;
            l.q = clipped(p + "self_attn.q_proj", c.heads * hd, d);
            l.k = clipped(p + "self_attn.k_proj", c.kvHeads * hd, d);
            l.v = clipped(p + "self_attn.v_proj", c.kvHeads * hd, d);
            l.o = clipped(p + "self_attn.o_proj", d, c.heads * hd);
            l.qNorm = w.dense(p + "self_attn.q_norm.weight", {hd}, options.dtype);
            l.kNorm = w.dense(p + "self_attn.k_norm.weight", {hd}, options.dtype);
            l.gate = clipped(p + "mlp.gate_proj", c.intermediateSize, d);
            l.up = clipped(p + "mlp.up_proj", c.intermediateSize, d);
            l.down = clipped(p + "mlp.down_proj", d, c.intermediateSize);
            l.inputNorm = w.dense(p + "input_layernorm.weight", {d}, options.dtype);
            l.postAttentionNorm = w.dense(p + "post_attention_layernorm.weight", {d}, options.dtype);
            l.preFeedforwardNorm = w.dense(p + "pre_feedforward_layernorm.weight", {d}, options.dtype);
            l.postFeedforwardNorm = w.dense(p + "post_feedforward_layernorm.weight", {d}, options.dtype);
            impl->layers.push_back(std::move(l));
        }
        if (c.standardize) {
            // Buffers in the model's dtype, used in float32.
            const auto bias = w.dense("tower.std_bias", {d}, options.dtype);
            const auto scale = w.dense("tower.std_scale", {d}, options.dtype);
            if (bias.defined() && scale.defined()) {
                impl->stdBias = bias.to(at::kFloat);
                impl->stdScale = scale.to(at::kFloat);
            }
        }
        impl->projection = w.linear("embedder.embedding_projection", c.textHidden, d, false);
        if (auto done = w.finish(); !done)
            return done.error();
    } catch (const c10::Error& e) {
        return errorFromException(e, origin + ": loading the Gemma 4 vision tower failed", ErrorCode::Internal);
    }
    return Gemma4VisionTower(std::move(impl));
}

std::int64_t Gemma4VisionTower::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t n = m.inputProj.residentBytes() + quant::bytesOf(m.positionTable) + quant::bytesOf(m.stdBias) + quant::bytesOf(m.stdScale)
        + m.projection.residentBytes();
    for (const auto& l : m.layers) {
        for (const auto* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
            n += lin->residentBytes();
        for (const auto* t : {&l.qNorm, &l.kNorm, &l.inputNorm, &l.postAttentionNorm, &l.preFeedforwardNorm, &l.postFeedforwardNorm})
            n += quant::bytesOf(*t);
    }
    return n;
}

Result<at::Tensor> Gemma4VisionTower::encode(const Gemma4Patches& patches) const
{
    const auto& m = *m_impl;
    const auto& c = m.config;
    try {
        const auto& px = patches.pixels;
        const auto& pos = patches.positions;
        const auto n = px.dim() == 2 ? px.size(0) : 0, k = c.poolingKernel;
        TORCH_CHECK(n > 0 && px.size(1) == 3 * c.patchSize * c.patchSize && pos.dim() == 2 && pos.size(0) == n && pos.size(1) == 2,
            "the tower reads patches [n, ", 3 * c.patchSize * c.patchSize, "] with positions [n, 2], got ", px.sizes(), " and ",
            pos.sizes());
        const auto gw = patches.width / c.patchSize, gh = patches.height / c.patchSize;
        TORCH_CHECK(gw > 0 && gh > 0 && gw * gh == n && gw % k == 0 && gh % k == 0, "a ", gw, "x", gh,
            " patch grid does not hold the patches or pool ", k, " x ", k);
        const auto hostPos = pos.to(at::kCPU, at::kLong);
        TORCH_CHECK(hostPos.min().item<std::int64_t>() >= 0 && hostPos.max().item<std::int64_t>() < c.positionEmbeddingSize,
            "patch positions must lie in [0, ", c.positionEmbeddingSize, ")");
        const auto d = c.hiddenSize, hd = c.headDim;

        // Gemma4VisionPatchEmbedder: pixels to [-1, 1] (in float32), a projection, and the
        // position table's x and y rows added.
        const auto p = pos.to(m.device, at::kLong);
        const auto xs = p.select(1, 0), ys = p.select(1, 1);
        auto h = m.inputProj((2.0 * (px.to(m.device, at::kFloat) - 0.5)).to(m.dtype));
        h = h + (m.positionTable.select(0, 0).index_select(0, xs) + m.positionTable.select(0, 1).index_select(0, ys));

        // Axial RoPE: inverse frequencies over head_dim / 2, each axis turning its half of the
        // head (x first), cos and sin in float32 brought to the compute dtype.
        const auto spatial = hd / 2;
        const auto invFreq = 1.0
            / at::pow(
                c.ropeTheta, at::arange(0, spatial, 2, at::TensorOptions().dtype(at::kLong).device(m.device)).to(at::kFloat) / spatial);
        const auto turn = [&](const at::Tensor& axis) {
            const auto f = axis.to(at::kFloat).view({n, 1}) * invFreq.view({1, -1});
            const auto e = at::cat({f, f}, -1).view({n, 1, spatial});
            return std::pair{e.cos().to(m.dtype), e.sin().to(m.dtype)};
        };
        // Pairs, not structured bindings: the lambda below captures them.
        const auto alongX = turn(xs), alongY = turn(ys);
        const auto rope = [&](const at::Tensor& x) {  // [n, heads, hd]
            const auto a = x.narrow(-1, 0, spatial), b = x.narrow(-1, spatial, spatial);
            return at::cat({a * alongX.first + rotateHalf(a) * alongX.second, b * alongY.first + rotateHalf(b) * alongY.second}, -1);
        };
        const auto act = [&](const at::Tensor& x) { return c.geluTanh ? nn::geluTanh(x) : at::gelu(x); };
        const auto eps = c.rmsNormEps;
        // Gemma4RMSNorm (w, not 1 + w).
        const auto norm = [](const at::Tensor& x, const at::Tensor& w, double e) { return gemmaNorm(x, w, e, Family::Gemma4); };

        for (const auto& l : m.layers) {
            const auto x = norm(h, l.inputNorm, eps);
            const auto q = rope(norm(l.q(x).view({n, c.heads, hd}), l.qNorm, eps)).transpose(0, 1).unsqueeze(0);
            const auto key = rope(norm(l.k(x).view({n, c.kvHeads, hd}), l.kNorm, eps)).transpose(0, 1).unsqueeze(0);
            const auto value = norm(l.v(x).view({n, c.kvHeads, hd}), at::Tensor(), eps).transpose(0, 1).unsqueeze(0);
            // Every patch sees every patch (the reference's padding, masked there, is not made
            // here); scaling 1: the q/k norms set the scale.
            const auto out = at::scaled_dot_product_attention(q, key, value, std::nullopt, 0.0, false, 1.0, c.kvHeads != c.heads);
            h = h + norm(l.o(out.squeeze(0).transpose(0, 1).reshape({n, c.heads * hd})), l.postAttentionNorm, eps);
            const auto y = norm(h, l.preFeedforwardNorm, eps);
            h = h + norm(l.down(act(l.gate(y)) * l.up(y)), l.postFeedforwardNorm, eps);
        }

        // Gemma4VisionPooler: each k x k block of patches averaged (row-major over the pooled
        // grid), times sqrt(hidden), in float32; then the standardization, in float32.
        // The average is brought back to the compute dtype before the scaling, as the reference's is.
        auto pooled = (h.to(at::kFloat) * (1.0 / static_cast<double>(k * k))).view({gh / k, k, gw / k, k, d}).sum({1, 3}).view({-1, d});
        pooled = pooled.to(m.dtype).to(at::kFloat) * std::sqrt(static_cast<double>(d));
        if (m.stdBias.defined())
            pooled = (pooled - m.stdBias) * m.stdScale;
        return pooled.to(m.dtype);
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, m.origin + ": Gemma 4 vision tower: " + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": Gemma 4 vision tower");
    }
}

Result<at::Tensor> Gemma4VisionTower::embed(const Gemma4Patches& patches) const
{
    auto encoded = encode(patches);
    if (!encoded)
        return encoded.error();
    const auto& m = *m_impl;
    try {
        // Gemma4MultimodalEmbedder: a weightless RMS norm, then the projection.
        return m.projection(gemmaNorm(*encoded, at::Tensor(), m.config.rmsNormEps, Family::Gemma4));
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": Gemma 4 vision embedder");
    }
}

}  // namespace vireo::gemma3
