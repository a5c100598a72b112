#include "inference/models/ltx2/ltx2connectors.h"

#include "inference/util/device.h"

#include "inference/models/ltx2/ltx2layers.h"
#include "inference/models/ltx2/ltx2weights.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

namespace vireo::ltx2 {

namespace {

struct Stack {
    struct Block {
        Attention attn;
        FeedForward ff;
    };
    std::vector<Block> blocks;
    at::Tensor registers;  // [R, dim] or undefined
    std::int64_t heads = 0, dim = 0;
    std::int64_t bytes() const
    {
        std::int64_t n = registers.defined() ? registers.numel() * registers.element_size() : 0;
        for (const auto& b : blocks)
            n += b.attn.residentBytes() + b.ff.residentBytes();
        return n;
    }
};

}  // namespace

struct Connectors::Impl {
    ConnectorConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    nn::Linear textProjIn, videoTextProjIn, audioTextProjIn;
    Stack video, audio;

    Stack loadStack(WeightTaker& w, const std::string& prefix, std::int64_t heads, std::int64_t headDim, std::int64_t layers,
        std::int64_t registers, bool gated);
    at::Tensor runStack(const Stack& s, at::Tensor x, const at::Tensor& binaryMask) const;
    ConnectorOutputs run(const at::Tensor& textStates, const at::Tensor& mask) const;
};

Connectors::Connectors(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Connectors::~Connectors() = default;
Connectors::Connectors(Connectors&&) noexcept = default;
Connectors& Connectors::operator=(Connectors&&) noexcept = default;
const ConnectorConfig& Connectors::config() const
{
    return m_impl->config;
}

Result<ConnectorConfig> resolveConnectorConfig(
    const Ltx2Weights& w, const std::optional<ConnectorConfig>& override, const std::optional<TextFeatures>& textFeatures)
{
    const auto part = Part::Connectors;
    const auto files = w.describeFiles();
    const auto v20 = w.shape(part, "text_proj_in.weight", 2);
    const auto v23 = w.shape(part, "video_text_proj_in.weight", 2);
    const auto audio23 = w.shape(part, "audio_text_proj_in.weight", 2);
    if (!v20 && !v23)
        return makeError(ErrorCode::NotFound,
            files
                + ": the LTX-2 text projection (text_embedding_projection.* / text_proj_in) is missing; "
                  "for a GGUF transformer, add the text projection file that comes with it");
    const auto videoCount = w.indexCount(Part::Connectors, "video_connector.transformer_blocks.");
    if (!videoCount)
        return videoCount.error();
    const auto audioCount = w.indexCount(Part::Connectors, "audio_connector.transformer_blocks.");
    if (!audioCount)
        return audioCount.error();
    const auto videoLayers = *videoCount, audioLayers = *audioCount;
    if (videoLayers == 0 || audioLayers == 0)
        return makeError(ErrorCode::NotFound, files + ": the LTX-2 video/audio embeddings connectors are missing");
    const auto videoGate = w.shape(part, "video_connector.transformer_blocks.0.attn1.to_gate_logits.weight", 2);
    const auto audioGate = w.shape(part, "audio_connector.transformer_blocks.0.attn1.to_gate_logits.weight", 2);
    const auto videoQ = w.shape(part, "video_connector.transformer_blocks.0.attn1.to_q.weight", 2);
    const auto audioQ = w.shape(part, "audio_connector.transformer_blocks.0.attn1.to_q.weight", 2);
    if (!videoQ || !audioQ)
        return makeError(ErrorCode::InvalidFormat, files + ": connector attention weights (2-D attn1.to_q) are missing");
    const auto projIn = v23 ? (*v23)[1] : (*v20)[1];

    auto given = checkpointConfig(w, part, override, connectorConfigFromDiffusers, [&](const std::string& json) -> Result<ConnectorConfig> {
        auto parsed = configsFromLtxCore(json);
        if (!parsed)
            return parsed.error();
        auto fromCore = parsed->second;
        // ltx-core sizes the feature extractor from the Gemma config, not from caption_channels;
        // the transformer's number is the fallback when no text encoder config is known.
        if (textFeatures) {
            if (projIn != textFeatures->hidden * textFeatures->states)
                return makeError(ErrorCode::InvalidFormat,
                    files + ": the text projection takes " + std::to_string(projIn) + " features, not the text encoder's "
                        + std::to_string(textFeatures->hidden) + " x " + std::to_string(textFeatures->states)
                        + "; give the text encoder published with this model");
            fromCore.captionChannels = textFeatures->hidden;
            fromCore.textProjInFactor = textFeatures->states;
        } else {
            fromCore.textProjInFactor = fromCore.captionChannels > 0 ? projIn / fromCore.captionChannels : 0;
        }
        return fromCore;
    });
    if (!given)
        return given.error();
    ConnectorConfig c;
    if (*given) {
        c = **given;
    } else {
        // The text encoder's width and state count (Gemma-3-12B: 3840 x 49 unless told).
        const TextFeatures text = textFeatures.value_or(TextFeatures{});
        c.ropeSplit = true;
        c.perModalityProjections = v23.has_value();
        c.projBias = w.find(part, v23 ? "video_text_proj_in.bias" : "text_proj_in.bias") != nullptr;
        if (projIn != text.hidden * text.states)
            return makeError(ErrorCode::InvalidFormat,
                files + ": the text projection takes " + std::to_string(projIn) + " features, not the text encoder's "
                    + std::to_string(text.hidden) + " x " + std::to_string(text.states)
                    + "; pass a connector config or the matching text encoder");
        c.captionChannels = text.hidden;
        c.textProjInFactor = text.states;
        c.videoGated = videoGate.has_value();
        c.audioGated = audioGate.has_value();
        const auto vdim = (*videoQ)[0], adim = (*audioQ)[0];
        c.videoHeads = videoGate ? (*videoGate)[0] : vdim / 128;
        c.audioHeads = audioGate ? (*audioGate)[0] : adim / 128;
        if (c.videoHeads <= 0 || c.audioHeads <= 0 || vdim % c.videoHeads || adim % c.audioHeads)
            return makeError(ErrorCode::InvalidFormat, files + ": cannot infer the connector heads; pass a connector config");
        c.videoHeadDim = vdim / c.videoHeads;
        c.audioHeadDim = adim / c.audioHeads;
        c.videoLayers = videoLayers;
        c.audioLayers = audioLayers;
        const auto vr = w.shape(part, "video_connector.learnable_registers", 2);
        const auto ar = w.shape(part, "audio_connector.learnable_registers", 2);
        c.videoRegisters = vr ? (*vr)[0] : 0;
        c.audioRegisters = ar ? (*ar)[0] : 0;
        c.videoHiddenDim = vdim;
        c.audioHiddenDim = adim;
    }
    if (auto valid = validate(c, files + ": the connectors' hyper-parameters"); !valid)
        return valid.error();
    auto mismatch = [&](const std::string& what, const std::string& tensor) {
        return makeError(ErrorCode::InvalidFormat, files + ": the connector config says " + what + " but " + tensor + " disagrees");
    };
    if (c.perModalityProjections != v23.has_value())
        return mismatch(c.perModalityProjections ? "per-modality projections (2.3)" : "one shared projection (2.0)", "the text projection");
    if (c.captionChannels * c.textProjInFactor != projIn)
        return mismatch(std::to_string(c.captionChannels) + " x " + std::to_string(c.textProjInFactor) + " text features",
            v23 ? "video_text_proj_in.weight" : "text_proj_in.weight");
    if (c.videoHeads * c.videoHeadDim != (*videoQ)[0] || c.audioHeads * c.audioHeadDim != (*audioQ)[0])
        return mismatch(
            "connector widths " + std::to_string(c.videoHeads * c.videoHeadDim) + "/" + std::to_string(c.audioHeads * c.audioHeadDim),
            "attn1.to_q.weight");
    if (c.videoLayers != videoLayers || c.audioLayers != audioLayers)
        return mismatch(std::to_string(c.videoLayers) + "/" + std::to_string(c.audioLayers) + " connector layers", "transformer_blocks");
    if (c.videoGated != videoGate.has_value() || c.audioGated != audioGate.has_value())
        return mismatch(c.videoGated ? "gated attention" : "ungated attention", "to_gate_logits");
    if (c.perModalityProjections && audio23
        && ((*v23)[0] != c.videoHeads * c.videoHeadDim || (*audio23)[0] != c.audioHeads * c.audioHeadDim))
        return mismatch("projection widths", "video_text_proj_in / audio_text_proj_in");
    return c;
}

Stack Connectors::Impl::loadStack(WeightTaker& w, const std::string& prefix, std::int64_t heads, std::int64_t headDim, std::int64_t layers,
    std::int64_t registers, bool gated)
{
    Stack s;
    s.heads = heads;
    s.dim = heads * headDim;
    if (registers > 0)
        s.registers = w.tensor(prefix + ".learnable_registers");
    for (std::int64_t i = 0; i < layers; ++i) {
        const auto p = prefix + ".transformer_blocks." + std::to_string(i);
        s.blocks.push_back({Attention::load(w, p + ".attn1", heads, true, true, gated, true), FeedForward::load(w, p + ".ff", true)});
    }
    return s;
}

Result<Connectors> Connectors::load(const Ltx2Weights& weights, const ConnectorLoadOptions& options)
{
    auto config = resolveConnectorConfig(weights, options.config, options.textFeatures);
    if (!config)
        return config.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    const auto& c = impl->config;
    try {
        WeightTaker w(weights, Part::Connectors, options.device, options.dtype);
        if (c.perModalityProjections) {
            impl->videoTextProjIn = w.linear("video_text_proj_in", c.projBias);
            impl->audioTextProjIn = w.linear("audio_text_proj_in", c.projBias);
        } else {
            impl->textProjIn = w.linear("text_proj_in", c.projBias);
        }
        impl->video = impl->loadStack(w, "video_connector", c.videoHeads, c.videoHeadDim, c.videoLayers, c.videoRegisters, c.videoGated);
        impl->audio = impl->loadStack(w, "audio_connector", c.audioHeads, c.audioHeadDim, c.audioLayers, c.audioRegisters, c.audioGated);
        if (auto done = w.finish(); !done)
            return done.error();
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 connectors failed", ErrorCode::Internal);
    }
    return Connectors(std::move(impl));
}

at::Tensor Connectors::Impl::runStack(const Stack& s, at::Tensor x, const at::Tensor& binaryMask) const
{
    const auto batch = x.size(0), length = x.size(1);
    std::optional<at::Tensor> attnMask;
    if (s.registers.defined()) {
        const auto r = s.registers.size(0);
        TORCH_CHECK(length % r == 0, "the text length ", length, " must be a multiple of the ", r, " learnable registers");
        // Valid tokens move to the front in order; position p >= valid gets register p mod R.
        const auto registers = s.registers.unsqueeze(0).expand({length / r, -1, -1}).reshape({length, -1});
        const auto order = at::argsort(1 - binaryMask, /*stable=*/true, 1, false);
        const auto front = at::gather(x, 1, order.unsqueeze(-1).expand({-1, -1, x.size(-1)}));
        const auto valid = binaryMask.sum(1, true);
        const auto positions = at::arange(length, binaryMask.options()).unsqueeze(0);
        const auto frontMask = (positions < valid).unsqueeze(-1);
        x = at::where(frontMask, front, registers.unsqueeze(0).expand({batch, -1, -1}).to(x.scalar_type()));
    } else {
        const auto big = x.scalar_type() == at::kBFloat16 ? 3.3895313892515355e38 : std::numeric_limits<float>::max();
        attnMask = ((binaryMask - 1).to(x.scalar_type()) * big).view({batch, 1, 1, length});
    }
    const auto grid = (at::arange(length, x.options().dtype(at::kFloat)) / static_cast<double>(config.ropeBaseSeqLen))
                          .unsqueeze(0)
                          .repeat({batch, 1})
                          .unsqueeze(-1);
    const auto rope = makeRope(grid, s.dim, config.ropeTheta, config.ropeDoublePrecision, config.ropeSplit, s.heads);
    for (const auto& b : s.blocks) {
        x = x + b.attn(nn::rmsNormWeighted(x, std::nullopt, 1e-6), nullptr, attnMask, &rope, nullptr);
        x = x + b.ff(nn::rmsNormWeighted(x, std::nullopt, 1e-6));
    }
    return nn::rmsNormWeighted(x, std::nullopt, 1e-6);
}

ConnectorOutputs Connectors::Impl::run(const at::Tensor& textStates, const at::Tensor& maskIn) const
{
    const auto& c = config;
    auto x = textStates.to(device, dtype);
    if (x.dim() == 3) {
        TORCH_CHECK(x.size(2) == c.captionChannels * c.textProjInFactor, "text states have ", x.size(2), " features, expected ",
            c.captionChannels, " x ", c.textProjInFactor);
        x = x.unflatten(2, {c.captionChannels, -1});
    }
    TORCH_CHECK(x.dim() == 4 && x.size(2) == c.captionChannels && x.size(3) == c.textProjInFactor, "text states must be [B, L, ",
        c.captionChannels, ", ", c.textProjInFactor, "], got ", x.sizes());
    const auto batch = x.size(0), length = x.size(1);
    const auto mask = maskIn.to(device);
    TORCH_CHECK(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == length, "text mask must be [", batch, ", ", length, "]");
    at::Tensor videoIn, audioIn;
    if (c.perModalityProjections) {
        const auto variance = at::mean(x * x, 2, true);
        auto normed = (x * at::rsqrt(variance + 1e-6)).flatten(2, 3);
        normed = at::where(mask.to(at::kBool).unsqueeze(-1), normed, at::zeros_like(normed));
        videoIn = videoTextProjIn(normed * std::sqrt(double(c.videoHiddenDim) / double(c.captionChannels)));
        audioIn = audioTextProjIn(normed * std::sqrt(double(c.audioHiddenDim) / double(c.captionChannels)));
    } else {
        // Masked mean and range per batch item and layer over the valid (left-padded) tokens.
        const auto lengths = mask.sum(-1);
        const auto hidden = x.size(2);
        const auto idx = at::arange(length, mask.options().dtype(at::kLong)).unsqueeze(0);
        const auto valid = (idx >= (length - lengths.unsqueeze(1))).unsqueeze(-1).unsqueeze(-1);
        const auto masked = x.masked_fill(valid.logical_not(), 0.0);
        const auto count = (lengths * hidden).view({batch, 1, 1, 1});
        const auto mean = masked.sum({1, 2}, true) / (count + 1e-6);
        const auto lo = x.masked_fill(valid.logical_not(), std::numeric_limits<double>::infinity()).amin({1, 2}, true);
        const auto hi = x.masked_fill(valid.logical_not(), -std::numeric_limits<double>::infinity()).amax({1, 2}, true);
        auto normed = (x - mean) / (hi - lo + 1e-6) * 8;
        normed = normed.flatten(2);
        normed = normed.masked_fill(valid.squeeze(-1).expand({-1, -1, normed.size(-1)}).logical_not(), 0.0).to(dtype);
        videoIn = audioIn = textProjIn(normed);
    }
    // The reference binarizes (int64(mask) - 1) * max at -9000: only int64(mask) >= 1 counts as valid.
    const auto binary = (mask.to(at::kLong) >= 1).to(at::kLong);
    const auto video = runStack(this->video, videoIn, binary);
    const auto audio = runStack(this->audio, audioIn, binary);
    // Registers make every position valid; without them the reference's output mask is still
    // all ones ((m - 1) * max < 1e-6 holds for 0 and 1), so only the video output is masked by it.
    const auto outMask = at::ones({batch, length}, mask.options().dtype(at::kLong));
    return {video * outMask.unsqueeze(-1).to(video.scalar_type()), audio, outMask};
}

Result<ConnectorOutputs> Connectors::forward(const at::Tensor& textStates, const at::Tensor& mask) const
{
    try {
        return m_impl->run(textStates, mask);
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, std::string("LTX-2 connectors: ") + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, "LTX-2 connectors");
    }
}

std::int64_t Connectors::residentBytes() const
{
    const auto& m = *m_impl;
    return m.textProjIn.residentBytes() + m.videoTextProjIn.residentBytes() + m.audioTextProjIn.residentBytes() + m.video.bytes()
        + m.audio.bytes();
}

}  // namespace vireo::ltx2
