#include "inference/models/ltx2/ltx2config.h"

#include "inference/util/jsonlimits.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace vireo::ltx2 {

namespace {

using Json = nlohmann::json;

// Products of values not yet range-checked (a bounds chain evaluates all its arguments, and
// the embedded config derives widths before validation): never an overflow.
std::int64_t mulOrMax(std::int64_t a, std::int64_t b)
{
    std::int64_t out = 0;
    return __builtin_mul_overflow(a, b, &out) ? INT64_MAX : out;
}

// A present, non-null key must hold a T; jsonutil's error names the key.
template <typename T>
void read(const Json& j, const char* key, T& out)
{
    jsonutil::readField(j, key, out);
}

// A fixed-length list of integers ("vae_scale_factors": [8, 32, 32]).
template <std::size_t N>
bool readInts(const Json& j, const char* key, std::array<std::int64_t, N>& out)
{
    std::vector<std::int64_t> v;
    if (!jsonutil::readField(j, key, v))
        return false;
    if (v.size() != N)
        throw jsonutil::FieldError(
            "'" + std::string(key) + "' has " + std::to_string(v.size()) + " entries, expected " + std::to_string(N));
    std::copy(v.begin(), v.end(), out.begin());
    return true;
}

void readRope(const Json& j, const char* key, bool& split)
{
    if (const auto it = j.find(key); it != j.end() && it->is_string())
        split = it->get<std::string>() == "split";
}

Result<Json> parseObject(const std::string& text, const char* what)
{
    auto j = jsonutil::parseUntrusted(text, what);
    if (!j)
        return j.error();
    if (!j->is_object())
        return makeError(ErrorCode::InvalidFormat, std::string(what) + " is not a JSON object");
    return j;
}

Result<void> checkRope(const Json& j, const char* what)
{
    if (const auto it = j.find("rope_type"); it != j.end() && it->is_string() && *it != "split" && *it != "interleaved")
        return makeError(ErrorCode::Unsupported, std::string(what) + ": rope_type '" + it->get<std::string>() + "' is not supported");
    return {};
}

}  // namespace

Result<TransformerConfig> transformerConfigFromDiffusers(const std::string& text)
{
    auto parsed = parseObject(text, "transformer/config.json");
    if (!parsed)
        return parsed.error();
    const Json& j = *parsed;
    if (auto r = checkRope(j, "transformer/config.json"); !r)
        return r.error();
    try {
        TransformerConfig c;
        read(j, "in_channels", c.inChannels);
        c.outChannels = c.inChannels;
        read(j, "out_channels", c.outChannels);
        read(j, "num_attention_heads", c.heads);
        read(j, "attention_head_dim", c.headDim);
        read(j, "cross_attention_dim", c.crossAttentionDim);
        read(j, "audio_in_channels", c.audioInChannels);
        c.audioOutChannels = c.audioInChannels;
        read(j, "audio_out_channels", c.audioOutChannels);
        read(j, "audio_num_attention_heads", c.audioHeads);
        read(j, "audio_attention_head_dim", c.audioHeadDim);
        read(j, "audio_cross_attention_dim", c.audioCrossAttentionDim);
        read(j, "num_layers", c.layers);
        read(j, "caption_channels", c.captionChannels);
        read(j, "gated_attn", c.gatedAttn);
        read(j, "cross_attn_mod", c.crossAttnMod);
        read(j, "audio_gated_attn", c.audioGatedAttn);
        read(j, "audio_cross_attn_mod", c.audioCrossAttnMod);
        read(j, "use_prompt_embeddings", c.usePromptEmbeddings);
        read(j, "use_prompt_adaln_single", c.usePromptAdalnSingle);
        read(j, "perturbed_attn", c.perturbedAttn);
        read(j, "ff_bias", c.ffBias);
        read(j, "audio_ff_bias", c.audioFfBias);
        read(j, "attention_bias", c.attentionBias);
        read(j, "attention_out_bias", c.attentionOutBias);
        read(j, "norm_eps", c.normEps);
        read(j, "rope_theta", c.ropeTheta);
        read(j, "rope_double_precision", c.ropeDoublePrecision);
        readRope(j, "rope_type", c.ropeSplit);
        read(j, "causal_offset", c.causalOffset);
        readInts(j, "vae_scale_factors", c.vaeScaleFactors);
        read(j, "pos_embed_max_pos", c.posEmbedMaxPos);
        read(j, "base_height", c.baseHeight);
        read(j, "base_width", c.baseWidth);
        read(j, "audio_scale_factor", c.audioScaleFactor);
        read(j, "audio_pos_embed_max_pos", c.audioPosEmbedMaxPos);
        read(j, "audio_sampling_rate", c.audioSamplingRate);
        read(j, "audio_hop_length", c.audioHopLength);
        read(j, "timestep_scale_multiplier", c.timestepScaleMultiplier);
        read(j, "cross_attn_timestep_scale_multiplier", c.crossAttnTimestepScaleMultiplier);
        read(j, "use_keyframes_abs_pos_embedding", c.keyframesAbsPosEmbedding);
        std::string activation = "gelu-approximate";
        read(j, "activation_fn", activation);
        if (activation != "gelu-approximate")
            return makeError(ErrorCode::Unsupported, "transformer/config.json: activation_fn '" + activation + "' is not supported");
        return c;
    } catch (const std::exception& e) {  // JSON errors, and read()'s naming the key
        return makeError(ErrorCode::InvalidFormat, std::string("transformer/config.json: ") + e.what());
    }
}

Result<ConnectorConfig> connectorConfigFromDiffusers(const std::string& text)
{
    auto parsed = parseObject(text, "connectors/config.json");
    if (!parsed)
        return parsed.error();
    const Json& j = *parsed;
    if (auto r = checkRope(j, "connectors/config.json"); !r)
        return r.error();
    try {
        ConnectorConfig c;
        read(j, "caption_channels", c.captionChannels);
        read(j, "text_proj_in_factor", c.textProjInFactor);
        read(j, "video_connector_num_attention_heads", c.videoHeads);
        read(j, "video_connector_attention_head_dim", c.videoHeadDim);
        read(j, "video_connector_num_layers", c.videoLayers);
        read(j, "video_connector_num_learnable_registers", c.videoRegisters);
        read(j, "video_gated_attn", c.videoGated);
        read(j, "audio_connector_num_attention_heads", c.audioHeads);
        read(j, "audio_connector_attention_head_dim", c.audioHeadDim);
        read(j, "audio_connector_num_layers", c.audioLayers);
        read(j, "audio_connector_num_learnable_registers", c.audioRegisters);
        read(j, "audio_gated_attn", c.audioGated);
        if (j.contains("video_connector_num_learnable_registers") && j["video_connector_num_learnable_registers"].is_null())
            c.videoRegisters = 0;
        if (j.contains("audio_connector_num_learnable_registers") && j["audio_connector_num_learnable_registers"].is_null())
            c.audioRegisters = 0;
        read(j, "connector_rope_base_seq_len", c.ropeBaseSeqLen);
        read(j, "rope_theta", c.ropeTheta);
        read(j, "rope_double_precision", c.ropeDoublePrecision);
        readRope(j, "rope_type", c.ropeSplit);
        read(j, "per_modality_projections", c.perModalityProjections);
        read(j, "video_hidden_dim", c.videoHiddenDim);
        read(j, "audio_hidden_dim", c.audioHiddenDim);
        read(j, "proj_bias", c.projBias);
        bool causalPositions = false;
        read(j, "causal_temporal_positioning", causalPositions);
        if (causalPositions)
            return makeError(ErrorCode::Unsupported, "connectors/config.json: causal_temporal_positioning is not supported");
        return c;
    } catch (const std::exception& e) {  // JSON errors, and read()'s naming the key
        return makeError(ErrorCode::InvalidFormat, std::string("connectors/config.json: ") + e.what());
    }
}

Result<std::pair<TransformerConfig, ConnectorConfig>> configsFromLtxCore(const std::string& text)
{
    auto parsed = parseObject(text, "the checkpoint's embedded config");
    if (!parsed)
        return parsed.error();
    const auto it = parsed->find("transformer");
    if (it == parsed->end() || !it->is_object())
        // A companion file (a separate VAE, connectors or vocoder file) embeds the sections of
        // what it holds: no transformer section means "not here", as for the other parts.
        return makeError(ErrorCode::NotFound, "the checkpoint's embedded config has no \"transformer\" section");
    const Json& j = *it;
    if (auto r = checkRope(j, "the checkpoint's embedded config"); !r)
        return r.error();
    try {
        TransformerConfig t;
        ConnectorConfig c;
        // ltx-core's own defaults where a key is absent (model_configurator.py).
        t.ropeSplit = c.ropeSplit = false;
        readRope(j, "rope_type", t.ropeSplit);
        c.ropeSplit = t.ropeSplit;
        read(j, "num_attention_heads", t.heads);
        read(j, "attention_head_dim", t.headDim);
        read(j, "in_channels", t.inChannels);
        t.outChannels = t.inChannels;
        read(j, "out_channels", t.outChannels);
        read(j, "num_layers", t.layers);
        read(j, "cross_attention_dim", t.crossAttentionDim);
        read(j, "norm_eps", t.normEps);
        read(j, "positional_embedding_theta", t.ropeTheta);
        if (std::array<std::int64_t, 3> maxPos{}; readInts(j, "positional_embedding_max_pos", maxPos)) {
            t.posEmbedMaxPos = maxPos[0];
            t.baseHeight = maxPos[1];
            t.baseWidth = maxPos[2];
        }
        read(j, "timestep_scale_multiplier", t.timestepScaleMultiplier);
        // ltx-core multiplies the cross-modal gate sigma by this factor, and its code default is 1.
        t.crossAttnTimestepScaleMultiplier = 1.0;
        read(j, "av_ca_timestep_scale_multiplier", t.crossAttnTimestepScaleMultiplier);
        read(j, "audio_num_attention_heads", t.audioHeads);
        read(j, "audio_attention_head_dim", t.audioHeadDim);
        read(j, "audio_in_channels", t.audioInChannels);
        t.audioOutChannels = t.audioInChannels;
        read(j, "audio_out_channels", t.audioOutChannels);
        read(j, "audio_cross_attention_dim", t.audioCrossAttentionDim);
        if (std::array<std::int64_t, 1> maxPos{}; readInts(j, "audio_positional_embedding_max_pos", maxPos))
            t.audioPosEmbedMaxPos = maxPos[0];
        if (const auto p = j.find("frequencies_precision"); p != j.end() && p->is_string())
            t.ropeDoublePrecision = c.ropeDoublePrecision = *p == "float64";
        bool gated = false, adaln = false, projBefore = false;
        read(j, "apply_gated_attention", gated);
        read(j, "cross_attention_adaln", adaln);
        read(j, "caption_proj_before_connector", projBefore);
        t.gatedAttn = t.audioGatedAttn = gated;
        t.crossAttnMod = t.audioCrossAttnMod = t.perturbedAttn = adaln;
        read(j, "caption_channels", t.captionChannels);
        t.usePromptEmbeddings = !projBefore;

        c.captionChannels = t.captionChannels;
        c.perModalityProjections = c.projBias = projBefore;
        c.videoHiddenDim = mulOrMax(t.heads, t.headDim);
        c.audioHiddenDim = mulOrMax(t.audioHeads, t.audioHeadDim);
        read(j, "connector_num_attention_heads", c.videoHeads);
        read(j, "connector_attention_head_dim", c.videoHeadDim);
        read(j, "connector_num_layers", c.videoLayers);
        read(j, "connector_num_learnable_registers", c.videoRegisters);
        c.audioHeads = c.videoHeads;
        c.audioHeadDim = c.videoHeadDim;
        c.audioLayers = c.videoLayers;
        c.audioRegisters = c.videoRegisters;
        read(j, "audio_connector_num_attention_heads", c.audioHeads);
        read(j, "audio_connector_attention_head_dim", c.audioHeadDim);
        read(j, "audio_connector_num_layers", c.audioLayers);
        read(j, "audio_connector_num_learnable_registers", c.audioRegisters);
        if (std::array<std::int64_t, 1> maxPos{}; readInts(j, "connector_positional_embedding_max_pos", maxPos))
            c.ropeBaseSeqLen = maxPos[0];
        read(j, "connector_apply_gated_attention", c.videoGated);
        c.audioGated = c.videoGated;
        return std::pair{t, c};
    } catch (const std::exception& e) {  // JSON errors, and read()'s naming the key
        return makeError(ErrorCode::InvalidFormat, std::string("the checkpoint's embedded config: ") + e.what());
    }
}

ConfigBounds& ConfigBounds::range(const char* key, std::int64_t value, std::int64_t lo, std::int64_t hi)
{
    if (!m_problem && (value < lo || value > hi))
        m_problem = m_where + ": " + key + " is " + std::to_string(value) + ", expected " + std::to_string(lo) + " .. " + std::to_string(hi)
            + "; the config is damaged or not for this model";
    return *this;
}

ConfigBounds& ConfigBounds::positive(const char* key, double value, double hi)
{
    if (!m_problem && !(std::isfinite(value) && value > 0 && value <= hi))
        m_problem = m_where + ": " + key + " is " + std::to_string(value) + ", expected a positive number; the config is damaged";
    return *this;
}

ConfigBounds& ConfigBounds::finite(const char* key, double value)
{
    if (!m_problem && !std::isfinite(value))
        m_problem = m_where + ": " + key + " is not a finite number; the config is damaged";
    return *this;
}

Result<void> ConfigBounds::result() const
{
    if (m_problem)
        return makeError(ErrorCode::InvalidFormat, *m_problem);
    return {};
}

Result<void> validate(const TransformerConfig& c, const std::string& where)
{
    ConfigBounds b(where);
    b.range("in_channels", c.inChannels, 1, kMaxChannels)
        .range("out_channels", c.outChannels, 1, kMaxChannels)
        .range("num_attention_heads", c.heads, 1, kMaxHeads)
        .range("attention_head_dim", c.headDim, 1, kMaxHeadDim)
        .range("cross_attention_dim", c.crossAttentionDim, 1, kMaxChannels)
        .range("audio_in_channels", c.audioInChannels, 1, kMaxChannels)
        .range("audio_out_channels", c.audioOutChannels, 1, kMaxChannels)
        .range("audio_num_attention_heads", c.audioHeads, 1, kMaxHeads)
        .range("audio_attention_head_dim", c.audioHeadDim, 1, kMaxHeadDim)
        .range("audio_cross_attention_dim", c.audioCrossAttentionDim, 1, kMaxChannels)
        .range("num_layers", c.layers, 1, kMaxBlocks)
        .range("caption_channels", c.captionChannels, 1, kMaxChannels)
        .positive("norm_eps", c.normEps, 1.0)
        .positive("rope_theta", c.ropeTheta)
        .range("causal_offset", c.causalOffset, 0, 1024)
        .range("vae_scale_factors[0]", c.vaeScaleFactors[0], 1, 1024)
        .range("vae_scale_factors[1]", c.vaeScaleFactors[1], 1, 1024)
        .range("vae_scale_factors[2]", c.vaeScaleFactors[2], 1, 1024)
        .range("pos_embed_max_pos", c.posEmbedMaxPos, 1, 1 << 20)
        .range("base_height", c.baseHeight, 1, 1 << 20)
        .range("base_width", c.baseWidth, 1, 1 << 20)
        .range("audio_scale_factor", c.audioScaleFactor, 1, 1024)
        .range("audio_pos_embed_max_pos", c.audioPosEmbedMaxPos, 1, 1 << 20)
        .range("audio_sampling_rate", c.audioSamplingRate, 1, 1 << 20)
        .range("audio_hop_length", c.audioHopLength, 1, 1 << 20)
        .finite("timestep_scale_multiplier", c.timestepScaleMultiplier)
        .finite("cross_attn_timestep_scale_multiplier", c.crossAttnTimestepScaleMultiplier)
        .range("num_attention_heads x attention_head_dim", mulOrMax(c.heads, c.headDim), 1, kMaxChannels)
        .range("audio_num_attention_heads x audio_attention_head_dim", mulOrMax(c.audioHeads, c.audioHeadDim), 1, kMaxChannels);
    return b.result();
}

Result<void> validate(const ConnectorConfig& c, const std::string& where)
{
    ConfigBounds b(where);
    b.range("caption_channels", c.captionChannels, 1, kMaxChannels)
        .range("text_proj_in_factor", c.textProjInFactor, 1, 1024)
        .range("video_connector_num_attention_heads", c.videoHeads, 1, kMaxHeads)
        .range("video_connector_attention_head_dim", c.videoHeadDim, 1, kMaxHeadDim)
        .range("video_connector_num_layers", c.videoLayers, 1, kMaxBlocks)
        .range("video_connector_num_learnable_registers", c.videoRegisters, 0, 1 << 16)
        .range("audio_connector_num_attention_heads", c.audioHeads, 1, kMaxHeads)
        .range("audio_connector_attention_head_dim", c.audioHeadDim, 1, kMaxHeadDim)
        .range("audio_connector_num_layers", c.audioLayers, 1, kMaxBlocks)
        .range("audio_connector_num_learnable_registers", c.audioRegisters, 0, 1 << 16)
        .range("connector_rope_base_seq_len", c.ropeBaseSeqLen, 1, 1 << 24)
        .positive("rope_theta", c.ropeTheta)
        .range("video_hidden_dim", c.videoHiddenDim, 1, kMaxChannels)
        .range("audio_hidden_dim", c.audioHiddenDim, 1, kMaxChannels)
        .range("video heads x head dim", mulOrMax(c.videoHeads, c.videoHeadDim), 1, kMaxChannels)
        .range("audio heads x head dim", mulOrMax(c.audioHeads, c.audioHeadDim), 1, kMaxChannels);
    return b.result();
}

namespace {

// ltx-core's parse_model_version: the leading dot-separated whole numbers ("2.3.rc1" -> 2.3;
// nothing numeric -> empty, below every version).
std::vector<long> versionParts(const std::string& text)
{
    std::vector<long> out;
    std::size_t at = 0;
    while (at <= text.size() && out.size() < 8) {
        const auto dot = text.find('.', at);
        const auto part = text.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
        if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos)
            break;
        out.push_back(std::stol(part));
        if (dot == std::string::npos)
            break;
        at = dot + 1;
    }
    return out;
}

}  // namespace

Result<std::string> checkGemmaVersion(const GemmaStamp& stamp, const std::string& gemmaConfig, const std::string& gemmaName)
{
    auto config = jsonutil::parseUntrusted(gemmaConfig, gemmaName);
    if (!config)
        return config.error();
    const auto actualIt = config->is_object() ? config->find("gemma_version") : config->end();
    const bool hasActual = config->is_object() && actualIt != config->end() && !actualIt->is_null();
    const std::string actual = hasActual ? jsonutil::shortDump(*actualIt) : "none";
    if (stamp.sourceCheckpoint) {
        auto source = jsonutil::parseUntrusted(*stamp.sourceCheckpoint, stamp.file + ": gemma_source_checkpoint");
        if (!source)
            return source.error();
        const auto expectedIt = source->is_object() ? source->find("gemma_version") : source->end();
        const bool hasExpected = source->is_object() && expectedIt != source->end() && !expectedIt->is_null();
        const std::string expected = hasExpected ? jsonutil::shortDump(*expectedIt) : "none";
        if (hasExpected != hasActual || (hasExpected && *expectedIt != *actualIt))
            return makeError(ErrorCode::InvalidArgument,
                stamp.file + " was trained on the text encoder of Gemma version " + expected + ", and " + gemmaName + " is version "
                    + actual + "; give the text encoder published with this model");
        return std::string();
    }
    const auto version = versionParts(stamp.modelVersion.value_or(""));
    if (version >= std::vector<long>{2, 4, 0}) {
        if (!hasActual)
            return stamp.file + " (model_version " + *stamp.modelVersion + ") names no Gemma version and neither does " + gemmaName
                + ": the pairing is not checked";
        return makeError(ErrorCode::InvalidArgument,
            stamp.file + " (model_version " + *stamp.modelVersion + ") names no Gemma version (gemma_source_checkpoint), which "
                + "LTX-2.4 and later files carry, and " + gemmaName + " is version " + actual
                + "; the file is damaged or not Lightricks' own; download the model again");
    }
    return std::string();
}

std::string toJson(const TransformerConfig& c)
{
    Json j{{"in_channels", c.inChannels}, {"out_channels", c.outChannels}, {"num_attention_heads", c.heads},
        {"attention_head_dim", c.headDim}, {"cross_attention_dim", c.crossAttentionDim}, {"audio_in_channels", c.audioInChannels},
        {"audio_out_channels", c.audioOutChannels}, {"audio_num_attention_heads", c.audioHeads},
        {"audio_attention_head_dim", c.audioHeadDim}, {"audio_cross_attention_dim", c.audioCrossAttentionDim}, {"num_layers", c.layers},
        {"caption_channels", c.captionChannels}, {"gated_attn", c.gatedAttn}, {"cross_attn_mod", c.crossAttnMod},
        {"audio_gated_attn", c.audioGatedAttn}, {"audio_cross_attn_mod", c.audioCrossAttnMod},
        {"use_prompt_embeddings", c.usePromptEmbeddings}, {"use_prompt_adaln_single", c.usePromptAdalnSingle},
        {"perturbed_attn", c.perturbedAttn}, {"ff_bias", c.ffBias}, {"audio_ff_bias", c.audioFfBias}, {"attention_bias", c.attentionBias},
        {"attention_out_bias", c.attentionOutBias}, {"norm_eps", c.normEps}, {"rope_theta", c.ropeTheta},
        {"rope_double_precision", c.ropeDoublePrecision}, {"rope_type", c.ropeSplit ? "split" : "interleaved"},
        {"causal_offset", c.causalOffset}, {"vae_scale_factors", c.vaeScaleFactors}, {"pos_embed_max_pos", c.posEmbedMaxPos},
        {"base_height", c.baseHeight}, {"base_width", c.baseWidth}, {"audio_scale_factor", c.audioScaleFactor},
        {"audio_pos_embed_max_pos", c.audioPosEmbedMaxPos}, {"audio_sampling_rate", c.audioSamplingRate},
        {"audio_hop_length", c.audioHopLength}, {"timestep_scale_multiplier", c.timestepScaleMultiplier},
        {"cross_attn_timestep_scale_multiplier", c.crossAttnTimestepScaleMultiplier},
        {"use_keyframes_abs_pos_embedding", c.keyframesAbsPosEmbedding}};
    return j.dump();
}

std::string toJson(const ConnectorConfig& c)
{
    Json j{{"caption_channels", c.captionChannels}, {"text_proj_in_factor", c.textProjInFactor},
        {"video_connector_num_attention_heads", c.videoHeads}, {"video_connector_attention_head_dim", c.videoHeadDim},
        {"video_connector_num_layers", c.videoLayers}, {"video_connector_num_learnable_registers", c.videoRegisters},
        {"video_gated_attn", c.videoGated}, {"audio_connector_num_attention_heads", c.audioHeads},
        {"audio_connector_attention_head_dim", c.audioHeadDim}, {"audio_connector_num_layers", c.audioLayers},
        {"audio_connector_num_learnable_registers", c.audioRegisters}, {"audio_gated_attn", c.audioGated},
        {"connector_rope_base_seq_len", c.ropeBaseSeqLen}, {"rope_theta", c.ropeTheta}, {"rope_double_precision", c.ropeDoublePrecision},
        {"rope_type", c.ropeSplit ? "split" : "interleaved"}, {"per_modality_projections", c.perModalityProjections},
        {"video_hidden_dim", c.videoHiddenDim}, {"audio_hidden_dim", c.audioHiddenDim}, {"proj_bias", c.projBias}};
    return j.dump();
}

}  // namespace vireo::ltx2
