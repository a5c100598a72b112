#pragma once

// Ideogram-4's DiT (diffusers 0.42.1 models/transformers/transformer_ideogram4.py:
// Ideogram4Transformer2DModel), used for both the conditional `transformer` and the
// `unconditional_transformer` of the pipeline. Checkpoint layouts: the diffusers folder (split
// to_q / to_k / to_v / to_out.0, dense or bitsandbytes NF4) and the vendor FP8 layout (fused
// attention.qkv with rows [Q; K; V] and attention.o, F8_E4M3 weights with per-row
// weight_scale), each run in its stored representation.
//
// One sample without padding: the sequence is the prompt's text tokens followed by the image
// tokens (none for the unconditional branch). The reference pads the text on the left to
// max_sequence_length, but pads form their own attention segment and every other op is per
// token, so the image tokens' velocities are the same.

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

namespace vireo::ideogram4 {

// Ideogram4Transformer2DModel's config; the defaults are the released model's.
struct TransformerConfig {
    std::int64_t inChannels = 128;
    std::int64_t layers = 34;
    std::int64_t headDim = 256;
    std::int64_t heads = 18;
    std::int64_t intermediateSize = 12288;
    std::int64_t adalnDim = 512;
    std::int64_t llmFeaturesDim = 53248;
    double ropeTheta = 5'000'000.0;
    std::vector<std::int64_t> mropeSection{24, 20, 20};
    double normEps = 1e-5;

    std::int64_t hidden() const { return headDim * heads; }
};

Result<TransformerConfig> parseTransformerConfig(const std::string& configJson, const std::string& origin);

struct TransformerLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // compute dtype; quantized weights stay quantized
    std::optional<TransformerConfig> config;
    // The sub-folder read when the path is a pipeline (or any folder of components).
    std::string component = "transformer";
    // The blocks stay in (page-locked) host memory and are copied to the device one at a
    // time during a forward: two transformers that do not fit the GPU together still run.
    bool offloadBlocks = false;
};

class Transformer {
public:
    ~Transformer();
    Transformer(Transformer&&) noexcept;
    Transformer& operator=(Transformer&&) noexcept;

    // A component folder, a pipeline folder (options.component) or one weights file.
    static Result<Transformer> load(const std::filesystem::path& path, const TransformerLoadOptions& options = {});

    // latents: [gridH * gridW, inChannels] image tokens in row-major grid order; textFeatures:
    // [T, llmFeaturesDim] (T = 0 for the unconditional branch); timestep: model time t in
    // [0, 1] (0 = noise), rounded to the compute dtype as the pipeline does. Returns the image
    // tokens' velocities [gridH * gridW, inChannels] in the compute dtype.
    Result<at::Tensor> forward(const at::Tensor& latents, const at::Tensor& textFeatures, double timestep, std::int64_t gridH,
        std::int64_t gridW, std::stop_token stop = {}) const;

    const TransformerConfig& config() const;
    c10::Device device() const;
    c10::ScalarType dtype() const;
    bool fusedQkv() const;
    bool offloadsBlocks() const;  // loaded from the vendor layout
    std::int64_t residentBytes() const;
    std::map<std::string, std::int64_t> bytesByRepresentation() const;

private:
    struct Impl;
    explicit Transformer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ideogram4
