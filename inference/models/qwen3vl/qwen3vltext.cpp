#include "inference/models/qwen3vl/qwen3vltext.h"

#include "inference/models/nn/layers.h"
#include "inference/models/nn/strictweights.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>

namespace vireo::qwen3vl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using jsonutil::boolField;
using jsonutil::ConfigError;
using jsonutil::configFail;
using jsonutil::intField;
using jsonutil::numberField;
TextConfig parseText(const json& top, const std::string& where)
{
    if (!top.is_object())
        configFail(where + ": is not a JSON object");
    const std::string modelType = top.contains("model_type") && top["model_type"].is_string() ? top["model_type"].get<std::string>() : "";
    json tc;
    if (top.contains("text_config") && !top["text_config"].is_null()) {
        if (!top["text_config"].is_object())
            configFail(where + ": 'text_config' is not an object");
        if (!modelType.empty() && modelType != "qwen3_vl")
            configFail(where + ": is a '" + modelType + "' config, not Qwen3-VL (model_type qwen3_vl or qwen3_vl_text)");
        tc = top["text_config"];
    } else if (modelType == "qwen3_vl_text" || modelType.empty()) {
        tc = top;
    } else {
        configFail(where + ": is a '" + modelType + "' config, not Qwen3-VL (model_type qwen3_vl or qwen3_vl_text)");
    }
    const std::string textType = tc.contains("model_type") && tc["model_type"].is_string() ? tc["model_type"].get<std::string>() : "";
    if (!textType.empty() && textType != "qwen3_vl_text")
        configFail(where + ": the text config is a '" + textType + "' config, not qwen3_vl_text");

    TextConfig c;
    c.vocabSize = intField(tc, "vocab_size", c.vocabSize, where);
    c.hiddenSize = intField(tc, "hidden_size", c.hiddenSize, where);
    c.intermediateSize = intField(tc, "intermediate_size", c.intermediateSize, where);
    c.layers = intField(tc, "num_hidden_layers", c.layers, where);
    c.heads = intField(tc, "num_attention_heads", c.heads, where);
    c.kvHeads = intField(tc, "num_key_value_heads", c.heads, where);
    c.headDim = intField(tc, "head_dim", c.headDim, where);
    c.rmsNormEps = numberField(tc, "rms_norm_eps", c.rmsNormEps, where);
    if (tc.contains("attention_bias") && !tc["attention_bias"].is_null()) {
        if (!tc["attention_bias"].is_boolean())
            configFail(where + ": 'attention_bias' must be true or false");
        c.attentionBias = tc["attention_bias"].get<bool>();
    }
    const std::string act = tc.contains("hidden_act") && tc["hidden_act"].is_string() ? tc["hidden_act"].get<std::string>() : "silu";
    if (act != "silu")
        configFail(where + ": hidden_act '" + act + "' is not supported (Qwen3-VL uses silu)");
    if (c.vocabSize <= 0 || c.hiddenSize <= 0 || c.intermediateSize <= 0 || c.layers <= 0 || c.heads <= 0 || c.kvHeads <= 0
        || c.headDim <= 0 || c.heads % c.kvHeads != 0 || c.headDim % 2 != 0 || c.vocabSize > (1 << 24) || c.hiddenSize > (1 << 16)
        || c.intermediateSize > (1 << 20) || c.layers > 1024 || c.heads > 1024 || c.headDim > 4096
        || !(c.rmsNormEps > 0 && c.rmsNormEps < 1))
        configFail(where + ": inconsistent sizes (vocab " + std::to_string(c.vocabSize) + ", hidden " + std::to_string(c.hiddenSize)
            + ", layers " + std::to_string(c.layers) + ", heads " + std::to_string(c.heads) + "/" + std::to_string(c.kvHeads)
            + ", head_dim " + std::to_string(c.headDim) + ")");

    // rope_parameters (transformers 5) or rope_scaling + rope_theta (4.x).
    json rp = json::object();
    if (tc.contains("rope_parameters") && !tc["rope_parameters"].is_null())
        rp = tc["rope_parameters"];
    else if (tc.contains("rope_scaling") && !tc["rope_scaling"].is_null())
        rp = tc["rope_scaling"];
    if (!rp.is_object())
        configFail(where + ": rope_parameters / rope_scaling is not an object");
    std::string type = "default";
    if (rp.contains("rope_type") && rp["rope_type"].is_string())
        type = rp["rope_type"].get<std::string>();
    else if (rp.contains("type") && rp["type"].is_string())
        type = rp["type"].get<std::string>();
    if (type != "default" && type != "mrope")
        configFail(where + ": rope_type '" + type + "' is not supported by this version (default is)");
    c.ropeTheta = numberField(rp, "rope_theta", numberField(tc, "rope_theta", 0.0, where), where);
    if (!(c.ropeTheta > 0) || !std::isfinite(c.ropeTheta))
        configFail(where + ": needs a positive rope_theta");
    if (rp.contains("mrope_section") && !rp["mrope_section"].is_null()) {
        if (!rp["mrope_section"].is_array() || rp["mrope_section"].size() != 3)
            configFail(where + ": mrope_section must list 3 sizes, got " + jsonutil::shortDump(rp["mrope_section"]));
        c.mropeSection.clear();
        for (const auto& v : rp["mrope_section"]) {
            if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
                configFail(where + ": mrope_section holds " + jsonutil::shortDump(v));
            c.mropeSection.push_back(v.get<std::int64_t>());
        }
    }
    // The interleave reads frequency indices up to 3 * section - 1 of each axis.
    for (std::size_t axis = 1; axis < 3; ++axis)
        if (c.mropeSection[axis] * 3 > c.headDim / 2 + 2)
            configFail(where + ": mrope_section " + jsonutil::shortDump(rp["mrope_section"]) + " does not fit head_dim "
                + std::to_string(c.headDim));
    return c;
}

struct Layer {
    nn::Linear q, k, v, o, gate, up, down;
    at::Tensor inputNorm, postAttentionNorm, qNorm, kNorm;
};

using quant::bytesOf;

// Qwen3VLTextRMSNorm: normalized in float32, back to x's dtype, then times the weight.
at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps)
{
    const auto xf = x.to(at::kFloat);
    return weight * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
}

at::Tensor rotateHalf(const at::Tensor& x)
{
    const auto half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

at::Tensor repeatKv(const at::Tensor& x, std::int64_t n)
{
    if (n == 1)
        return x;
    const auto b = x.size(0), kv = x.size(1), t = x.size(2), d = x.size(3);
    return x.unsqueeze(2).expand({b, kv, n, t, d}).reshape({b, kv * n, t, d});
}

const std::vector<std::string> kIgnoredPrefixes{"visual.", "model.visual.", "lm_head.", "model.lm_head."};
const std::vector<std::string> kLanguageModelPrefixes{"language_model.", "model.language_model.", "model.", ""};

}  // namespace

TextConfig TextConfig::qwen3vl_8b()
{
    TextConfig c;
    c.vocabSize = 151936;
    c.hiddenSize = 4096;
    c.intermediateSize = 12288;
    c.layers = 36;
    c.heads = 32;
    c.kvHeads = 8;
    c.headDim = 128;
    c.rmsNormEps = 1e-6;
    c.ropeTheta = 5'000'000.0;
    c.mropeSection = {24, 20, 20};
    return c;
}

Result<TextConfig> parseTextConfig(const std::string& configJson, const std::string& origin)
{
    try {
        auto parsed = jsonutil::parseUntrusted(configJson, origin);
        if (!parsed)
            return parsed.error();
        return parseText(*parsed, origin);
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, origin + ": not a usable Qwen3-VL config (" + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

struct TextEncoder::Impl {
    TextConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string origin;
    nn::Embedding embed;
    std::vector<Layer> layers;
    at::Tensor invFreq;  // float32 [head_dim / 2]

    at::Tensor run(const at::Tensor& ids, const std::vector<std::int64_t>& taps, const std::stop_token& stop, bool& cancelled) const;
};

TextEncoder::TextEncoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
TextEncoder::~TextEncoder() = default;
TextEncoder::TextEncoder(TextEncoder&&) noexcept = default;
TextEncoder& TextEncoder::operator=(TextEncoder&&) noexcept = default;

const TextConfig& TextEncoder::config() const
{
    return m_impl->config;
}
c10::Device TextEncoder::device() const
{
    return m_impl->device;
}
c10::ScalarType TextEncoder::dtype() const
{
    return m_impl->dtype;
}

Result<TextEncoder> TextEncoder::load(const fs::path& path, const TextEncoderLoadOptions& options)
{
    if (auto bad = checkComputeDtype("Qwen3-VL", options.dtype); !bad)
        return bad.error();
    auto opened = tensorfile::ModelSource::open(path);
    if (!opened)
        return opened.error();
    const auto& source = *opened;
    const std::string origin = path.string();

    auto found = nn::findLanguageModel(source, origin, {"Qwen3-VL", kLanguageModelPrefixes, kIgnoredPrefixes, {}});
    if (!found)
        return found.error();
    auto& index = found->index;

    TextConfig config;
    if (options.config) {
        config = *options.config;
    } else if (found->configText) {
        auto parsed = parseTextConfig(*found->configText, found->configPath);
        if (!parsed)
            return parsed.error();
        config = *parsed;
    } else {
        return makeError(ErrorCode::NotFound,
            origin
                + ": no config.json beside the Qwen3-VL weights; put the model's config.json "
                  "next to them or pass a config");
    }

    auto impl = std::make_unique<Impl>();
    impl->config = config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->origin = origin;
    const auto& c = impl->config;
    try {
        quant::LoadOptions lo;
        lo.device = options.device;
        nn::StrictWeights w(std::move(index), lo, options.dtype, origin, "Qwen3-VL", "language model");
        const auto d = c.hiddenSize, qd = c.heads * c.headDim, kvd = c.kvHeads * c.headDim;
        if (auto set = impl->embed.set(w.weight("embed_tokens.weight", {c.vocabSize, d}), options.dtype, options.device); !set)
            return makeError(ErrorCode::InvalidFormat, origin + ": embed_tokens: " + set.error().message);
        for (std::int64_t i = 0; i < c.layers; ++i) {
            const auto p = "layers." + std::to_string(i) + ".";
            Layer l;
            l.q = w.linear(p + "self_attn.q_proj", qd, d, c.attentionBias);
            l.k = w.linear(p + "self_attn.k_proj", kvd, d, c.attentionBias);
            l.v = w.linear(p + "self_attn.v_proj", kvd, d, c.attentionBias);
            l.o = w.linear(p + "self_attn.o_proj", d, qd, c.attentionBias);
            l.qNorm = w.dense(p + "self_attn.q_norm.weight", {c.headDim}, options.dtype);
            l.kNorm = w.dense(p + "self_attn.k_norm.weight", {c.headDim}, options.dtype);
            l.gate = w.linear(p + "mlp.gate_proj", c.intermediateSize, d, false);
            l.up = w.linear(p + "mlp.up_proj", c.intermediateSize, d, false);
            l.down = w.linear(p + "mlp.down_proj", d, c.intermediateSize, false);
            l.inputNorm = w.dense(p + "input_layernorm.weight", {d}, options.dtype);
            l.postAttentionNorm = w.dense(p + "post_attention_layernorm.weight", {d}, options.dtype);
            impl->layers.push_back(std::move(l));
        }
        // The final norm is part of the checkpoint but not of the features (the pipeline taps
        // the residual stream); checked for shape and not kept.
        w.dense("norm.weight", {d}, options.dtype);
        if (auto done = w.finish(); !done)
            return done.error();
        // 1 / base^(arange(0, dim, 2) / dim) in float32, as Qwen3VLTextRotaryEmbedding computes it.
        const auto exponent = at::arange(0, c.headDim, 2, at::TensorOptions().dtype(at::kFloat)) / static_cast<double>(c.headDim);
        impl->invFreq = at::reciprocal(at::pow(at::Scalar(c.ropeTheta), exponent)).to(options.device);
    } catch (const c10::Error& e) {
        return errorFromException(e, origin + ": loading Qwen3-VL failed", ErrorCode::Internal);
    }
    return TextEncoder(std::move(impl));
}

at::Tensor TextEncoder::Impl::run(
    const at::Tensor& inputIds, const std::vector<std::int64_t>& taps, const std::stop_token& stop, bool& cancelled) const
{
    const auto& c = config;
    TORCH_CHECK(inputIds.dim() == 1, "Qwen3-VL expects the ids of one prompt [T], got ", inputIds.sizes());
    TORCH_CHECK(!at::isFloatingType(inputIds.scalar_type()), "input ids must be integers, got ", inputIds.scalar_type());
    TORCH_CHECK(!taps.empty(), "no layers to tap");
    for (auto t : taps)
        TORCH_CHECK(t >= 0 && t < c.layers, "tapped layer ", t, " is outside the model's ", c.layers, " layers");
    const auto t = inputIds.size(0);
    const auto ids = inputIds.to(device, at::kLong).view({1, t});
    if (ids.numel() > 0) {
        const auto lo = ids.min().item<std::int64_t>(), hi = ids.max().item<std::int64_t>();
        TORCH_CHECK(lo >= 0 && hi < c.vocabSize, "token ids must lie in [0, ", c.vocabSize, "), got ", lo, "..", hi,
            "; the tokenizer does not belong to this model");
    }
    auto h = embed.lookup(ids, dtype).to(dtype);

    // Positions 0..T-1 on all three MRoPE axes: the interleave picks every frequency from an
    // identical axis, so it is plain RoPE. Angles in float32, cos/sin cast to the model dtype.
    const auto pos = at::arange(t, at::TensorOptions().dtype(at::kFloat).device(device));
    const auto freqs = pos.view({t, 1}) * invFreq.view({1, -1});
    const auto emb = at::cat({freqs, freqs}, -1);
    const auto cos = emb.cos().to(dtype).view({1, 1, t, c.headDim});
    const auto sin = emb.sin().to(dtype).view({1, 1, t, c.headDim});
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));

    std::vector<at::Tensor> captured(taps.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
        if (stop.stop_requested()) {
            cancelled = true;
            return {};
        }
        const auto& l = layers[i];
        const auto x = rmsNorm(h, l.inputNorm, c.rmsNormEps);
        auto q = rmsNorm(l.q(x).view({1, t, c.heads, c.headDim}), l.qNorm, c.rmsNormEps).transpose(1, 2);
        auto k = rmsNorm(l.k(x).view({1, t, c.kvHeads, c.headDim}), l.kNorm, c.rmsNormEps).transpose(1, 2);
        auto v = l.v(x).view({1, t, c.kvHeads, c.headDim}).transpose(1, 2);
        q = q * cos + rotateHalf(q) * sin;
        k = k * cos + rotateHalf(k) * sin;
        k = repeatKv(k, c.heads / c.kvHeads);
        v = repeatKv(v, c.heads / c.kvHeads);
        const auto a = at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true, scale);
        h = h + l.o(a.transpose(1, 2).reshape({1, t, c.heads * c.headDim}));
        const auto f = rmsNorm(h, l.postAttentionNorm, c.rmsNormEps);
        h = h + l.down(at::silu(l.gate(f)) * l.up(f));
        for (std::size_t k2 = 0; k2 < taps.size(); ++k2)
            if (taps[k2] == static_cast<std::int64_t>(i))
                captured[k2] = h[0];
    }
    // stack(taps, -1).flatten(1): feature index d * taps + k.
    return at::stack(captured, -1).reshape({t, c.hiddenSize * static_cast<std::int64_t>(taps.size())});
}

Result<at::Tensor> TextEncoder::features(const at::Tensor& ids, const std::vector<std::int64_t>& taps, std::stop_token stop) const
{
    try {
        bool cancelled = false;
        auto out = m_impl->run(ids, taps, stop, cancelled);
        if (cancelled)
            return makeError(ErrorCode::Cancelled, "Qwen3-VL text encoding was cancelled");
        return out;
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, m_impl->origin + ": Qwen3-VL: " + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, m_impl->origin + ": Qwen3-VL");
    }
}

std::int64_t TextEncoder::residentBytes() const
{
    std::int64_t n = 0;
    for (const auto& [name, bytes] : bytesByRepresentation())
        n += bytes;
    return n;
}

std::map<std::string, std::int64_t> TextEncoder::bytesByRepresentation() const
{
    const auto& m = *m_impl;
    std::map<std::string, std::int64_t> out;
    if (m.embed.table.defined())
        out["dense"] += m.embed.residentBytes();
    else if (m.embed.weight.defined())
        out[std::string(quant::representationName(m.embed.weight.representation()))] += m.embed.residentBytes();
    for (const auto& l : m.layers) {
        for (const auto* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
            if (lin->defined())
                out[std::string(quant::representationName(lin->weight.representation()))] += lin->residentBytes();
        for (const auto* t : {&l.inputNorm, &l.postAttentionNorm, &l.qNorm, &l.kNorm})
            out["dense"] += bytesOf(*t);
    }
    return out;
}

}  // namespace vireo::qwen3vl
