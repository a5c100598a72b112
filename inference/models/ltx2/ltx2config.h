#pragma once

#include "inference/util/result.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace vireo::ltx2 {

class Ltx2Weights;

// LTX2VideoTransformer3DModel's configuration (diffusers 0.42.1 names and defaults).
struct TransformerConfig {
    std::int64_t inChannels = 128, outChannels = 128;
    std::int64_t heads = 32, headDim = 128, crossAttentionDim = 4096;
    std::int64_t audioInChannels = 128, audioOutChannels = 128;
    std::int64_t audioHeads = 32, audioHeadDim = 64, audioCrossAttentionDim = 2048;
    std::int64_t layers = 48;
    std::int64_t captionChannels = 3840;
    bool gatedAttn = false, crossAttnMod = false, audioGatedAttn = false, audioCrossAttnMod = false;
    bool usePromptEmbeddings = true;  // 2.0: caption_projection inside the DiT
    bool usePromptAdalnSingle = true;
    bool perturbedAttn = false;
    bool ffBias = true, audioFfBias = true, attentionBias = true, attentionOutBias = true;
    // 2.5: a learned [1, dim] embedding added after proj_in to tokens whose latent frame
    // encodes one pixel frame (the causal first frame, generated keyframe slots).
    bool keyframesAbsPosEmbedding = false;
    double normEps = 1e-6;
    double ropeTheta = 10000.0;
    bool ropeDoublePrecision = true;
    bool ropeSplit = false;  // diffusers' default is interleaved; real LTX-2 configs say split
    std::int64_t causalOffset = 1;
    std::array<std::int64_t, 3> vaeScaleFactors{8, 32, 32};
    std::int64_t posEmbedMaxPos = 20, baseHeight = 2048, baseWidth = 2048;
    std::int64_t audioScaleFactor = 4, audioPosEmbedMaxPos = 20, audioSamplingRate = 16000, audioHopLength = 160;
    double timestepScaleMultiplier = 1000.0, crossAttnTimestepScaleMultiplier = 1000.0;

    std::int64_t dim() const { return heads * headDim; }
    std::int64_t audioDim() const { return audioHeads * audioHeadDim; }
    // "2.5" with the keyframe embedding, "2.3" when the text cross-attention is
    // AdaLN-modulated (9-row tables), else "2.0".
    std::string version() const { return keyframesAbsPosEmbedding ? "2.5" : crossAttnMod ? "2.3" : "2.0"; }
};

// LTX2TextConnectors' configuration.
struct ConnectorConfig {
    std::int64_t captionChannels = 3840, textProjInFactor = 49;
    std::int64_t videoHeads = 30, videoHeadDim = 128, videoLayers = 2, videoRegisters = 128;
    std::int64_t audioHeads = 30, audioHeadDim = 128, audioLayers = 2, audioRegisters = 128;
    bool videoGated = false, audioGated = false;
    std::int64_t ropeBaseSeqLen = 4096;
    double ropeTheta = 10000.0;
    bool ropeDoublePrecision = true;
    bool ropeSplit = false;
    bool perModalityProjections = false;  // 2.3
    std::int64_t videoHiddenDim = 4096, audioHiddenDim = 2048;
    bool projBias = false;

    std::string version() const { return perModalityProjections ? "2.3" : "2.0"; }
};

// Limits no published model comes near; loaders allocate, loop, divide and shift by these
// hyper-parameters, so a value outside them (0 heads, 10^9 layers) fails before any of that.
inline constexpr std::int64_t kMaxChannels = 1 << 16;
inline constexpr std::int64_t kMaxBlocks = 1024;
inline constexpr std::int64_t kMaxHeads = 1024;
inline constexpr std::int64_t kMaxHeadDim = 4096;

// Collects the first out-of-range hyper-parameter: "<where>: num_attention_heads is 0, expected
// 1 .. 1024".
class ConfigBounds {
public:
    explicit ConfigBounds(std::string where) : m_where(std::move(where)) {}
    ConfigBounds& range(const char* key, std::int64_t value, std::int64_t lo, std::int64_t hi);
    ConfigBounds& positive(const char* key, double value, double hi = 1e12);  // finite, > 0, <= hi
    ConfigBounds& finite(const char* key, double value);
    Result<void> result() const;

private:
    std::string m_where;
    std::optional<std::string> m_problem;
};

// Every size and count of the config in range (and heads x head width within kMaxChannels).
Result<void> validate(const TransformerConfig& config, const std::string& where);
Result<void> validate(const ConnectorConfig& config, const std::string& where);

// diffusers config.json text -> config (absent keys keep diffusers' defaults).
Result<TransformerConfig> transformerConfigFromDiffusers(const std::string& json);
Result<ConnectorConfig> connectorConfigFromDiffusers(const std::string& json);
// The "transformer" section of an ltx-core checkpoint's __metadata__["config"].
Result<std::pair<TransformerConfig, ConnectorConfig>> configsFromLtxCore(const std::string& json);

// ltx-core's pairing of a transformer file with its Gemma (encoder_configurator.py,
// _check_gemma_version), from what Lightricks stamps in the transformer file's metadata:
// `gemma_source_checkpoint` (JSON, its `gemma_version` must equal the Gemma config's) and
// `model_version` (from 2.4 on the stamp is required). LTX-2.5's encoder is a fine-tune that
// any other Gemma 4 12B matches in every shape, so only this stamp tells them apart. An error
// for a mismatch; otherwise a warning to log, empty when proven or when nothing is stamped.
struct GemmaStamp {
    std::optional<std::string> sourceCheckpoint, modelVersion;
    std::string file;  // the transformer file, for messages
};
Result<std::string> checkGemmaVersion(const GemmaStamp& stamp, const std::string& gemmaConfig, const std::string& gemmaName);

std::string toJson(const TransformerConfig& config);
std::string toJson(const ConnectorConfig& config);

}  // namespace vireo::ltx2
