#pragma once

// LTX-2 text connectors (diffusers 0.42.1 LTX2TextConnectors, pipelines/ltx2/connectors.py):
// the text-encoder feature projection (2.0: masked mean/range norm + one Linear; 2.3:
// per-token RMS + one Linear per modality) and the two 1-D transformers with learnable
// registers that turn Gemma hidden states into the DiT's video and audio text context.

#include "inference/models/ltx2/ltx2config.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>

namespace vireo::ltx2 {

class Ltx2Weights;

struct ConnectorOutputs {
    at::Tensor video;  // [B, L, video_hidden_dim (2.3) | caption_channels (2.0)]
    at::Tensor audio;
    at::Tensor mask;  // [B, L], 1 = attend (all ones once registers fill the padding)
};

// The text encoder's hidden width and hidden-state count (layers + 1): what the connectors'
// input is made of. Without a config (GGUF) it comes from the text encoder beside them.
struct TextFeatures {
    std::int64_t hidden = 3840, states = 49;  // Gemma-3-12B
};

struct ConnectorLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::optional<ConnectorConfig> config;
    std::optional<TextFeatures> textFeatures;
};

Result<ConnectorConfig> resolveConnectorConfig(const Ltx2Weights& weights, const std::optional<ConnectorConfig>& override,
    const std::optional<TextFeatures>& textFeatures = std::nullopt);

class Connectors {
public:
    ~Connectors();
    Connectors(Connectors&&) noexcept;
    Connectors& operator=(Connectors&&) noexcept;

    static Result<Connectors> load(const Ltx2Weights& weights, const ConnectorLoadOptions& options = {});

    // textStates: [B, L, caption_channels * layers] (layer index fastest) or
    // [B, L, caption_channels, layers]; mask [B, L] with the padding on the left.
    Result<ConnectorOutputs> forward(const at::Tensor& textStates, const at::Tensor& mask) const;

    const ConnectorConfig& config() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit Connectors(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
