#include "inference/models/ltx2/ltx2durationhead.h"

#include "inference/models/ltx2/ltx2config.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/models/nn/layers.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace vireo::ltx2 {

namespace {

using Json = nlohmann::json;

Result<DurationHeadConfig> fromDiffusers(const std::string& text)
{
    auto j = jsonutil::parseUntrusted(text, "duration_head/config.json");
    if (!j)
        return j.error();
    if (!j->is_object())
        return makeError(ErrorCode::InvalidFormat, "duration_head/config.json is not a JSON object");
    try {
        DurationHeadConfig c;
        jsonutil::readField(*j, "video_cross_attention_dim", c.videoDim);
        jsonutil::readField(*j, "audio_cross_attention_dim", c.audioDim);
        jsonutil::readField(*j, "pooler_hidden_dim", c.poolerDim);
        jsonutil::readField(*j, "num_queries", c.queries);
        jsonutil::readField(*j, "num_pooler_heads", c.heads);
        jsonutil::readField(*j, "mlp_hidden_dim", c.mlpHidden);
        return c;
    } catch (const std::exception& e) {
        return makeError(ErrorCode::InvalidFormat, std::string("duration_head/config.json: ") + e.what());
    }
}

// ltx-core's DurationHeadConfigurator: the widths from the transformer section, the head's own
// values from a `duration_head` section, each with its default when absent.
Result<DurationHeadConfig> fromLtxCore(const std::string& text)
{
    auto j = jsonutil::parseUntrusted(text, "the checkpoint's embedded config");
    if (!j)
        return j.error();
    if (!j->is_object())
        return makeError(ErrorCode::InvalidFormat, "the checkpoint's embedded config is not a JSON object");
    const auto transformer = j->find("transformer");
    const auto head = j->find("duration_head");
    const bool hasTransformer = transformer != j->end() && transformer->is_object();
    const bool hasHead = head != j->end() && head->is_object();
    if (!hasTransformer && !hasHead)
        return makeError(ErrorCode::NotFound, "no transformer or duration_head section");
    try {
        DurationHeadConfig c;
        if (hasTransformer) {
            jsonutil::readField(*transformer, "cross_attention_dim", c.videoDim);
            jsonutil::readField(*transformer, "audio_cross_attention_dim", c.audioDim);
        }
        if (hasHead) {
            jsonutil::readField(*head, "pooler_hidden_dim", c.poolerDim);
            jsonutil::readField(*head, "num_queries", c.queries);
            jsonutil::readField(*head, "num_pooler_heads", c.heads);
            jsonutil::readField(*head, "mlp_hidden", c.mlpHidden);
        }
        return c;
    } catch (const std::exception& e) {
        return makeError(ErrorCode::InvalidFormat, std::string("the checkpoint's embedded config: ") + e.what());
    }
}

std::string shapeText(const std::vector<std::int64_t>& s)
{
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i)
        out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// Python's round(): halves go to the even neighbour (nearbyint under the default rounding mode).
std::int64_t roundHalfEven(double x)
{
    return static_cast<std::int64_t>(std::nearbyint(x));
}

}  // namespace

std::string durationHeadProblem(const Ltx2Weights& weights)
{
    auto head = resolveDurationHeadConfig(weights);
    if (head)
        return {};
    return head.error().code == ErrorCode::NotFound ? "this model has no duration head (LTX-2.5's files carry one)" : head.error().message;
}

Result<DurationHeadConfig> resolveDurationHeadConfig(const Ltx2Weights& w)
{
    const auto part = Part::DurationHead;
    const auto files = w.describeFiles();
    if (w.tensors(part).empty())
        return makeError(ErrorCode::NotFound, files + ": no LTX-2.5 duration head (duration_head.* tensors or a duration_head/ folder)");
    auto given = checkpointConfig(w, part, std::optional<DurationHeadConfig>(), fromDiffusers, fromLtxCore);
    if (!given)
        return given.error();
    DurationHeadConfig c = given->value_or(DurationHeadConfig{});
    if (auto bounds = ConfigBounds(files + ": the duration head's config")
                          .range("video_cross_attention_dim", c.videoDim, 1, kMaxChannels)
                          .range("audio_cross_attention_dim", c.audioDim, 1, kMaxChannels)
                          .range("pooler_hidden_dim", c.poolerDim, 1, kMaxChannels)
                          .range("num_queries", c.queries, 1, 1024)
                          .range("num_pooler_heads", c.heads, 1, kMaxHeads)
                          .range("mlp_hidden_dim", c.mlpHidden, 1, kMaxChannels)
                          .result();
        !bounds)
        return bounds.error();
    if (c.poolerDim % c.heads)
        return makeError(ErrorCode::InvalidFormat,
            files + ": the duration head's " + std::to_string(c.poolerDim) + "-wide pooler does not split into " + std::to_string(c.heads)
                + " heads; the config is damaged");
    // Every shape the config implies, against the headers: a mismatch is the wrong file or config.
    const std::pair<const char*, std::vector<std::int64_t>> expected[] = {
        {"video_input_proj.weight", {c.poolerDim, c.videoDim}},
        {"audio_input_proj.weight", {c.poolerDim, c.audioDim}},
        {"video_modality_emb", {c.poolerDim}},
        {"audio_modality_emb", {c.poolerDim}},
        {"attention_pooler.query_tokens", {c.queries, c.poolerDim}},
        {"mlp_hidden.weight", {c.mlpHidden, c.poolerDim * c.queries}},
        {"mlp_out.weight", {1, c.mlpHidden}},
    };
    for (const auto& [name, shape] : expected) {
        const auto found = w.shape(part, name);
        if (!found)
            return makeError(ErrorCode::InvalidFormat, files + ": the duration head has no " + name);
        if (*found != shape)
            return makeError(ErrorCode::InvalidFormat,
                files + ": the duration head's " + name + " is " + shapeText(*found) + ", its config says " + shapeText(shape)
                    + "; the file and the config are not of one model");
    }
    return c;
}

struct DurationHead::Impl {
    DurationHeadConfig config;
    c10::ScalarType dtype = c10::kFloat;
    struct Dense {
        at::Tensor weight, bias;
        at::Tensor operator()(const at::Tensor& x) const { return at::linear(x, weight, bias); }
    };
    Dense videoProj, audioProj, toQ, toK, toV, toOut, mlpHidden, mlpOut;
    at::Tensor videoEmb, audioEmb, queryTokens;
};

DurationHead::DurationHead(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
DurationHead::~DurationHead() = default;
DurationHead::DurationHead(DurationHead&&) noexcept = default;
DurationHead& DurationHead::operator=(DurationHead&&) noexcept = default;

const DurationHeadConfig& DurationHead::config() const
{
    return m_impl->config;
}

Result<DurationHead> DurationHead::load(const Ltx2Weights& weights, c10::Device device, c10::ScalarType dtype)
{
    auto config = resolveDurationHeadConfig(weights);
    if (!config)
        return config.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->dtype = dtype;
    const auto p = config->poolerDim;
    try {
        WeightTaker w(weights, Part::DurationHead, device, dtype);
        auto dense = [&](const std::string& name) { return Impl::Dense{w.tensor(name + ".weight"), w.tensor(name + ".bias")}; };
        impl->videoProj = dense("video_input_proj");
        impl->audioProj = dense("audio_input_proj");
        impl->videoEmb = w.tensor("video_modality_emb");
        impl->audioEmb = w.tensor("audio_modality_emb");
        impl->queryTokens = w.tensor("attention_pooler.query_tokens");
        if (w.has("attention_pooler.cross_attn.in_proj_weight")) {
            // nn.MultiheadAttention: q, k and v stacked in one [3P, P] projection.
            const auto in = w.tensor("attention_pooler.cross_attn.in_proj_weight");
            const auto bias = w.tensor("attention_pooler.cross_attn.in_proj_bias");
            TORCH_CHECK(in.dim() == 2 && in.size(0) == 3 * p && in.size(1) == p && bias.dim() == 1 && bias.size(0) == 3 * p,
                "attention_pooler.cross_attn.in_proj_weight / in_proj_bias are ", in.sizes(), " / ", bias.sizes(), ", expected [", 3 * p,
                ", ", p, "] / [", 3 * p, "]");
            const auto rows = in.chunk(3, 0);
            const auto biases = bias.chunk(3, 0);
            impl->toQ = {rows[0], biases[0]};
            impl->toK = {rows[1], biases[1]};
            impl->toV = {rows[2], biases[2]};
            impl->toOut = dense("attention_pooler.cross_attn.out_proj");
        } else {
            impl->toQ = dense("attention_pooler.to_q");
            impl->toK = dense("attention_pooler.to_k");
            impl->toV = dense("attention_pooler.to_v");
            impl->toOut = dense("attention_pooler.to_out");
        }
        impl->mlpHidden = dense("mlp_hidden");
        impl->mlpOut = dense("mlp_out");
        if (auto done = w.finish(); !done)
            return done.error();
        for (const auto* d : {&impl->toQ, &impl->toK, &impl->toV, &impl->toOut})
            TORCH_CHECK(d->weight.dim() == 2 && d->weight.size(0) == p && d->weight.size(1) == p && d->bias.numel() == p,
                "the duration head's attention projections must be [", p, ", ", p, "] with a bias, got ", d->weight.sizes());
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2.5 duration head failed", ErrorCode::InvalidFormat);
    }
    return DurationHead(std::move(impl));
}

Result<at::Tensor> DurationHead::seconds(const std::optional<at::Tensor>& video, const std::optional<at::Tensor>& audio) const
{
    const auto& m = *m_impl;
    const auto& c = m.config;
    if (!video && !audio)
        return makeError(ErrorCode::InvalidArgument, "the duration head needs the video or the audio connector output");
    try {
        const auto device = m.queryTokens.device();
        std::vector<at::Tensor> groups;
        std::int64_t batch = -1;
        auto add = [&](const at::Tensor& t, std::int64_t width, const Impl::Dense& proj, const at::Tensor& emb, const char* what) {
            TORCH_CHECK(t.dim() == 3 && t.size(2) == width && (batch < 0 || t.size(0) == batch) && t.size(0) > 0 && t.size(1) > 0, "the ",
                what, " connector output must be [B, T, ", width, "], got ", t.sizes());
            batch = t.size(0);
            groups.push_back(proj(t.to(device, m.dtype)) + emb);
        };
        if (video)
            add(*video, c.videoDim, m.videoProj, m.videoEmb, "video");
        if (audio)
            add(*audio, c.audioDim, m.audioProj, m.audioEmb, "audio");
        const auto tokens = at::cat(groups, 1);
        // One learned query set cross-attends every token; no mask (the connectors already put
        // their registers where the prompt was padding).
        const auto heads = c.heads;
        auto split = [&](const at::Tensor& x) { return x.unflatten(2, {heads, -1}).transpose(1, 2); };
        const auto q = split(m.toQ(m.queryTokens).unsqueeze(0).expand({batch, -1, -1}));
        const auto pooled = nn::attention(q, split(m.toK(tokens)), split(m.toV(tokens)), std::nullopt).transpose(1, 2).flatten(2, 3);
        const auto hidden = nn::geluTanh(m.mlpHidden(m.toOut(pooled).flatten(1)));
        return m.mlpOut(hidden).squeeze(-1).exp().to(at::kFloat);
    } catch (const c10::Error& e) {
        return errorFromException(e, "LTX-2.5 duration head", ErrorCode::InvalidArgument);
    }
}

PredictedFrames framesForSeconds(double seconds, double fps, std::int64_t ratio, double minSeconds, double maxSeconds)
{
    PredictedFrames out;
    // Callers pass validated values; anything else gets the shortest grid length, never a
    // division by zero or a cast of a NaN.
    if (!(fps > 0) || ratio <= 0 || !std::isfinite(seconds) || !(minSeconds <= maxSeconds) || !std::isfinite(maxSeconds)) {
        out.frames = 1;
        out.outsideBounds = true;
        return out;
    }
    const auto minFrames = std::max<std::int64_t>(1, roundHalfEven(minSeconds * fps));
    const auto maxFrames = roundHalfEven(maxSeconds * fps);
    const auto raw = roundHalfEven(std::clamp(seconds * fps, -1e15, 1e15));
    const auto clamped = std::max(minFrames, std::min(raw, maxFrames));
    auto frames = ((clamped - 1) / ratio) * ratio + 1;
    if (clamped - 1 < 0)
        frames = 1;
    if (frames < minFrames) {
        const auto up = frames + ratio;
        if (up <= maxFrames) {
            frames = up;
        } else {
            if (std::llabs(up - clamped) < std::llabs(frames - clamped))
                frames = up;
            out.outsideBounds = true;
        }
    }
    out.frames = frames;
    out.clamped = seconds < minSeconds || seconds > maxSeconds;
    return out;
}

}  // namespace vireo::ltx2
