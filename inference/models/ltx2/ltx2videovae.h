#pragma once

// The LTX-2 / LTX-2.3 video VAE, ported from diffusers 0.42.1 (AutoencoderKLLTX2Video,
// models/autoencoders/autoencoder_kl_ltx2.py): the decoder with the latent denormalization
// LTX2Pipeline applies before vae.decode (pipelines/ltx2/pipeline_ltx2.py), and the encoder with
// the normalization the image-to-video / condition pipelines apply after vae.encode.

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

// AutoencoderKLLTX2Video's config, diffusers' names and defaults. Like diffusers, every
// per-block list of the decoder is stored in encoder order (the decoder reverses it) except
// upsampleType, which is in decoder order.
struct VideoVaeConfig {
    // The encoder half: block_out_channels, layers_per_block, down_block_types,
    // spatio_temporal_scaling, downsample_type, encoder_causal, encoder_spatial_padding_mode.
    std::int64_t inChannels = 3;
    std::vector<std::int64_t> encoderBlockOutChannels{256, 512, 1024, 2048};
    std::vector<std::int64_t> encoderLayersPerBlock{4, 6, 6, 2, 2};  // last entry: the mid block
    std::vector<std::string> downBlockTypes = std::vector<std::string>(4, "LTX2VideoDownBlock3D");
    std::vector<bool> spatioTemporalScaling{true, true, true, true};
    std::vector<std::string> downsampleType{"spatial", "temporal", "spatiotemporal", "spatiotemporal"};
    bool encoderCausal = true;
    std::string encoderSpatialPaddingMode = "zeros";
    // The decoder half and what both share.
    std::int64_t latentChannels = 128;
    std::int64_t outChannels = 3;
    std::int64_t patchSize = 4, patchSizeT = 1;
    std::vector<std::int64_t> decoderBlockOutChannels{256, 512, 1024};
    std::vector<std::int64_t> decoderLayersPerBlock{5, 5, 5, 5};  // last entry: the mid block
    std::vector<bool> decoderSpatioTemporalScaling{true, true, true};
    std::vector<bool> decoderInjectNoise{false, false, false, false};
    std::vector<std::string> upsampleType{"spatiotemporal", "spatiotemporal", "spatiotemporal"};
    std::vector<bool> upsampleResidual{true, true, true};
    std::vector<std::int64_t> upsampleFactor{2, 2, 2};  // channel reduction per up block
    bool decoderCausal = true;  // the class default; published configs say false
    std::string decoderSpatialPaddingMode = "reflect";  // zeros | reflect | replicate
    bool timestepConditioning = false;  // refused when true
    double resnetNormEps = 1e-6;  // only the LayerNorm of a width-changing resnet uses it
    double scalingFactor = 1.0;
    // As given by the config; absent ones are derived from the decoder's up blocks (diffusers'
    // own fallback formula counts the encoder's blocks and gives 64 / 16 for the real models).
    std::optional<std::int64_t> spatialCompressionRatio, temporalCompressionRatio;

    std::int64_t upBlocks() const { return static_cast<std::int64_t>(decoderBlockOutChannels.size()); }
    std::int64_t downBlocks() const { return static_cast<std::int64_t>(encoderBlockOutChannels.size()); }
};

// vae/config.json text -> config. Absent keys keep diffusers' defaults.
Result<VideoVaeConfig> videoVaeConfigFromDiffusers(const std::string& json);
// The "vae" section of an ltx-core checkpoint's __metadata__["config"]: ltx-core's own format
// (decoder_blocks, causal_decoder, encoder_blocks, ...) or diffusers' keys. NotFound when the
// section holds no decoder description. The encoder half is filled from encoder_blocks when
// they map onto diffusers' encoder and left at the defaults otherwise (the decoder does not
// need it; resolveVideoEncoderConfig reports what does not map).
Result<VideoVaeConfig> videoVaeConfigFromLtxCore(const std::string& json);
std::string toJson(const VideoVaeConfig& config);

// Config from the checkpoint (diffusers config.json, else the embedded ltx-core config, else
// the tensor shapes), checked against the decoder's shapes in the headers. No weight bytes are
// read. Without a config the encoder half is inferred from the shapes too where it can be.
Result<VideoVaeConfig> resolveVideoVaeConfig(const Ltx2Weights& weights, const std::optional<VideoVaeConfig>& override);
// The same for the encoder: its half comes from the config, else ltx-core's encoder_blocks,
// else the encoder's tensor shapes, and is checked against them; the decoder need not be there.
// NotFound when the checkpoint holds no encoder.
Result<VideoVaeConfig> resolveVideoEncoderConfig(const Ltx2Weights& weights, const std::optional<VideoVaeConfig>& override);

struct VideoDecoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // compute dtype; the latent statistics stay float32
    std::optional<VideoVaeConfig> config;  // overrides what the checkpoint says or implies
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
    std::int64_t spatialScale() const;  // 32 for the real models
    std::int64_t temporalScale() const;  // 8
    std::int64_t residentBytes() const;
    // The per-channel latent statistics ([latent_channels], float32, on the decoder's device):
    // diffusion runs on (x - mean) / std.
    const at::Tensor& latentsMean() const;
    const at::Tensor& latentsStd() const;

private:
    struct Impl;
    explicit VideoDecoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

struct VideoEncoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // compute dtype; the latent statistics stay float32
    std::optional<VideoVaeConfig> config;  // overrides what the checkpoint says or implies
};

struct VideoEncodeOptions {
    // The encoder's temporal padding; default the config's encoder_causal (true in every
    // published VAE), which is what the pipelines' vae.encode(x) uses. Unlike diffusers, whose
    // encoder takes `causal or encoder_causal` and so cannot be made non-causal per call, an
    // explicit false is honoured.
    std::optional<bool> causal;
    // Spatial tiles of tileSize x tileSize latent cells (32 px each for the real models)
    // overlapping by tileOverlap cells, blended linearly across the overlap as diffusers'
    // tiled_encode does (its enable_tiling defaults, 512 / 448 px, are 16 / 2 cells). 0 = one
    // tile. As for decoding, tiles stop at the first that reaches the edge; diffusers starts one
    // at every stride below the edge, and the slivers that adds inside the last tile blend
    // differently, so the two agree where its layout has none.
    std::int64_t tileSize = 0, tileOverlap = 0;
    // Temporal chunks of chunkFrames latent frames (8 (chunkFrames - 1) + 1 video frames)
    // overlapping by chunkOverlap >= 1, as diffusers' _temporal_tiled_encode: a later chunk's
    // first latent (the one its first frame alone encodes to) is dropped and its next
    // chunkOverlap - 1 blend linearly with the previous chunk. 0 = all frames at once.
    // enable_tiling's 16 / 8 frames are 3 / 2 latents. Chunks stop at the edge as tiles do
    // (diffusers' extra sliver chunks change nothing when they keep a single latent).
    std::int64_t chunkFrames = 0, chunkOverlap = 2;
    std::stop_token stop;  // checked between resnets and between tiles
    // Called after each encoded tile: (tiles done, tiles in all), monotonic.
    std::function<void(std::int64_t done, std::int64_t total)> onProgress;
};

class VideoEncoder {
public:
    ~VideoEncoder();
    VideoEncoder(VideoEncoder&&) noexcept;
    VideoEncoder& operator=(VideoEncoder&&) noexcept;

    // NotFound ("... holds no video VAE encoder; image-to-video needs the full VAE ...") when
    // the checkpoint has no encoder, e.g. a decoder-only file.
    static Result<VideoEncoder> load(const Ltx2Weights& weights, const VideoEncoderLoadOptions& options = {});

    // video: [B, 3, F, H, W] in [-1, 1], F = 8k + 1, H and W multiples of 32 (temporalScale()
    // and spatialScale() in general). Returns the normalized latent mode,
    // (mean - latents_mean) * scaling_factor / latents_std, [B, 128, (F - 1) / 8 + 1, H / 32,
    // W / 32], float32 on the encoder's device: what LTX2ImageToVideoPipeline and
    // LTX2ConditionPipeline compute with _normalize_latents(retrieve_latents(vae.encode(x),
    // sample_mode="argmax"), ...).
    Result<at::Tensor> encode(const at::Tensor& video, const VideoEncodeOptions& options = {}) const;

    const VideoVaeConfig& config() const;
    c10::Device device() const;
    c10::ScalarType dtype() const;
    std::int64_t spatialScale() const;  // 32 for the real models
    std::int64_t temporalScale() const;  // 8
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit VideoEncoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
