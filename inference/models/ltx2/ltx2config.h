#pragma once

#include "inference/util/result.h"

#include <array>
#include <cstdint>
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
    bool usePromptEmbeddings = true;   // 2.0: caption_projection inside the DiT
    bool usePromptAdalnSingle = true;
    bool perturbedAttn = false;
    bool ffBias = true, audioFfBias = true, attentionBias = true, attentionOutBias = true;
    double normEps = 1e-6;
    double ropeTheta = 10000.0;
    bool ropeDoublePrecision = true;
    bool ropeSplit = false;            // diffusers' default is interleaved; real LTX-2 configs say split
    std::int64_t causalOffset = 1;
    std::array<std::int64_t, 3> vaeScaleFactors{8, 32, 32};
    std::int64_t posEmbedMaxPos = 20, baseHeight = 2048, baseWidth = 2048;
    std::int64_t audioScaleFactor = 4, audioPosEmbedMaxPos = 20, audioSamplingRate = 16000, audioHopLength = 160;
    double timestepScaleMultiplier = 1000.0, crossAttnTimestepScaleMultiplier = 1000.0;

    std::int64_t dim() const { return heads * headDim; }
    std::int64_t audioDim() const { return audioHeads * audioHeadDim; }
    // "2.3" when the text cross-attention is AdaLN-modulated (9-row tables), else "2.0".
    std::string version() const { return crossAttnMod ? "2.3" : "2.0"; }
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

// diffusers config.json text -> config (absent keys keep diffusers' defaults).
Result<TransformerConfig> transformerConfigFromDiffusers(const std::string& json);
Result<ConnectorConfig> connectorConfigFromDiffusers(const std::string& json);
// The "transformer" section of an ltx-core checkpoint's __metadata__["config"].
Result<std::pair<TransformerConfig, ConnectorConfig>> configsFromLtxCore(const std::string& json);

std::string toJson(const TransformerConfig& config);
std::string toJson(const ConnectorConfig& config);

} // namespace vireo::ltx2
