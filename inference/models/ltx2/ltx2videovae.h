#pragma once

// The LTX-2 / LTX-2.3 video VAE decoder, ported from diffusers 0.42.1
// (AutoencoderKLLTX2Video's decoder, models/autoencoders/autoencoder_kl_ltx2.py), with the
// latent denormalization LTX2Pipeline applies before vae.decode (pipelines/ltx2/pipeline_ltx2.py).

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::ltx2 {

class Ltx2Weights;

// The decoder half of AutoencoderKLLTX2Video's config, diffusers' names and defaults. Like
// diffusers, every per-block list is stored in encoder order (the decoder reverses it) except
// upsampleType, which is in decoder order.
struct VideoVaeConfig {
    std::int64_t latentChannels = 128;
    std::int64_t outChannels = 3;
    std::int64_t patchSize = 4, patchSizeT = 1;
    std::vector<std::int64_t> decoderBlockOutChannels{256, 512, 1024};
    std::vector<std::int64_t> decoderLayersPerBlock{5, 5, 5, 5};   // last entry: the mid block
    std::vector<bool> decoderSpatioTemporalScaling{true, true, true};
    std::vector<bool> decoderInjectNoise{false, false, false, false};
    std::vector<std::string> upsampleType{"spatiotemporal", "spatiotemporal", "spatiotemporal"};
    std::vector<bool> upsampleResidual{true, true, true};
    std::vector<std::int64_t> upsampleFactor{2, 2, 2};             // channel reduction per up block
    bool decoderCausal = true;             // the class default; published configs say false
    std::string decoderSpatialPaddingMode = "reflect";  // zeros | reflect | replicate
    bool timestepConditioning = false;     // refused when true
    double resnetNormEps = 1e-6;           // only the LayerNorm of a width-changing resnet uses it
    double scalingFactor = 1.0;
    // As given by the config; absent ones are derived from the decoder's up blocks (diffusers'
    // own fallback formula counts the encoder's blocks and gives 64 / 16 for the real models).
    std::optional<std::int64_t> spatialCompressionRatio, temporalCompressionRatio;

    std::int64_t upBlocks() const { return static_cast<std::int64_t>(decoderBlockOutChannels.size()); }
};

// vae/config.json text -> config. Absent keys keep diffusers' defaults.
Result<VideoVaeConfig> videoVaeConfigFromDiffusers(const std::string& json);
// The "vae" section of an ltx-core checkpoint's __metadata__["config"]: ltx-core's own format
// (decoder_blocks, causal_decoder, ...) or diffusers' keys. NotFound when the section holds
// no decoder description.
Result<VideoVaeConfig> videoVaeConfigFromLtxCore(const std::string& json);
std::string toJson(const VideoVaeConfig& config);

// Config from the checkpoint (diffusers config.json, else the embedded ltx-core config, else
// the tensor shapes), checked against the shapes in the headers. No weight bytes are read.
Result<VideoVaeConfig> resolveVideoVaeConfig(const Ltx2Weights& weights, const std::optional<VideoVaeConfig>& override);

struct VideoDecoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;          // compute dtype; the latent statistics stay float32
    std::optional<VideoVaeConfig> config;         // overrides what the checkpoint says or implies
};

struct VideoDecodeOptions {
    // The decoder's temporal padding; default the config's decoder_causal, which is what
    // LTX2Pipeline's decode call (causal=None) uses.
    std::optional<bool> causal;
    // Spatial tiles of tileSize x tileSize latent cells overlapping by tileOverlap cells,
    // blended linearly across the overlap as diffusers' tiled_decode does (its enable_tiling
    // defaults, 512 / 448 px, are 16 / 2 cells). 0 = one tile. A dimension no larger than
    // tileSize is not split.
    std::int64_t tileSize = 0, tileOverlap = 0;
    // Temporal chunks of chunkFrames latent frames overlapping by chunkOverlap (>= 1: the first
    // latent of a chunk decodes to a single frame) and blended over the 8 (overlap - 1) + 1
    // shared frames. 0 = all frames at once. enable_tiling's 16 / 8 frames are 3 / 2 latents.
    std::int64_t chunkFrames = 0, chunkOverlap = 2;
    // Where the video is assembled; default the decoder's device. Tiles move there one by one.
    std::optional<c10::Device> outputDevice;
    std::stop_token stop;  // checked between resnets and between tiles
    // Called after each decoded tile: (tiles done, tiles in all), monotonic.
    std::function<void(std::int64_t done, std::int64_t total)> onProgress;
};

class VideoDecoder {
public:
    ~VideoDecoder();
    VideoDecoder(VideoDecoder&&) noexcept;
    VideoDecoder& operator=(VideoDecoder&&) noexcept;

    static Result<VideoDecoder> load(const Ltx2Weights& weights, const VideoDecoderLoadOptions& options = {});

    // latents: normalized [B, latent_channels, F, H, W] as the diffusion loop leaves them.
    // Returns [B, 3, 8 (F - 1) + 1, 32 H, 32 W] in about [-1, 1] (vae.decode(...).sample, before
    // the pipeline's postprocessing), in the compute dtype.
    Result<at::Tensor> decode(const at::Tensor& latents, const VideoDecodeOptions& options = {}) const;

    const VideoVaeConfig& config() const;
    c10::Device device() const;
    c10::ScalarType dtype() const;
    std::int64_t spatialScale() const;   // 32 for the real models
    std::int64_t temporalScale() const;  // 8
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit VideoDecoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace vireo::ltx2
