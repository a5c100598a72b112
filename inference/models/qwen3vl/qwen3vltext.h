#pragma once

// The language model of Qwen3-VL as a text encoder (text only, no vision inputs), ported from
// transformers 5.24 (models/qwen3_vl/modeling_qwen3_vl.py: Qwen3VLTextModel) the way diffusers
// 0.42.1's Ideogram4Pipeline._get_text_encoder_hidden_states runs it: embed_tokens, the causal
// decoder layers with MRoPE, and the residual stream captured after chosen layers, with no
// final norm. Text-only positions are the same on the three MRoPE axes (t, h, w), so the
// interleaved MRoPE reduces to 1-D rotate-half RoPE; the angles are computed in float32.
//
// One prompt at a time and no padding: the pipeline left-pads a batch to max_sequence_length,
// but a causal model's real tokens never see the pads and their positions start at 0, so the
// rows of the real tokens are the same.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::qwen3vl {

// Qwen3VLTextConfig; the defaults are transformers'.
struct TextConfig {
    std::int64_t vocabSize = 151936;
    std::int64_t hiddenSize = 4096;
    std::int64_t intermediateSize = 22016;
    std::int64_t layers = 32;
    std::int64_t heads = 32;
    std::int64_t kvHeads = 32;
    std::int64_t headDim = 128;
    double rmsNormEps = 1e-6;
    double ropeTheta = 5'000'000.0;
    std::vector<std::int64_t> mropeSection{24, 20, 20};
    bool attentionBias = false;

    // Qwen3-VL-8B-Instruct's text tower, Ideogram-4's text encoder.
    static TextConfig qwen3vl_8b();
};

// config.json of a Qwen3VLModel / Qwen3VLForConditionalGeneration (its text_config) or of a
// Qwen3VLTextConfig; rope_parameters (transformers 5) or rope_scaling + rope_theta (4.x).
Result<TextConfig> parseTextConfig(const std::string& configJson, const std::string& origin);

struct TextEncoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // compute dtype; quantized weights stay quantized
    std::optional<TextConfig> config;  // instead of config.json
};

class TextEncoder {
public:
    ~TextEncoder();
    TextEncoder(TextEncoder&&) noexcept;
    TextEncoder& operator=(TextEncoder&&) noexcept;

    // A text_encoder folder (config.json + safetensors, sharded or not), a diffusers pipeline
    // folder (its text_encoder component) or one weights file with config.json beside it.
    // Language-model keys `language_model.*` (Qwen3VLModel, the vendor FP8 file) or
    // `model.language_model.*`; the vision tower (`visual.*`) and lm_head are ignored.
    static Result<TextEncoder> load(const std::filesystem::path& path, const TextEncoderLoadOptions& options = {});

    // ids: [T] integers of one prompt. Returns [T, hidden * taps.size()] in the compute dtype:
    // the residual stream after each layer in taps, interleaved as the pipeline packs it
    // (feature index d * taps.size() + k).
    Result<at::Tensor> features(const at::Tensor& ids, const std::vector<std::int64_t>& taps, std::stop_token stop = {}) const;

    const TextConfig& config() const;
    c10::Device device() const;
    c10::ScalarType dtype() const;
    std::int64_t residentBytes() const;
    std::map<std::string, std::int64_t> bytesByRepresentation() const;

private:
    struct Impl;
    explicit TextEncoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::qwen3vl
