#pragma once

// LTX-2.5's diffusion video decoder: a decoder of the conv VAE's latent space (encoding stays
// with the conv VAE) that is itself a one-step diffusion model. Stages 1-4 upsample the latents
// into a context volume with neighbourhood-attention blocks; stage 5 denoises patchified pixels
// conditioned on it. Ported from diffusers 0.42.1 (models/autoencoders/ltx2_diffusion_decoder.py:
// LTX2VideoDiffusionDecoderModel, LTX2VideoDiffusionDecoder3d, tiled_decode), read from a
// diffusers `diffusion_decoder/` folder.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::ltx2 {

class Ltx2Weights;

using Extent3 = std::array<std::int64_t, 3>;  // (T, H, W)

// LTX2VideoDiffusionDecoderModel's config, diffusers' defaults (the shipped decoder).
struct DiffusionDecoderConfig {
    std::int64_t outChannels = 3, latentChannels = 128, patchSize = 4;
    double scalingFactor = 1.0;
    std::int64_t headDim = 64;
    std::vector<std::int64_t> stageChannels{2048, 1024, 512, 512, 256};
    std::vector<std::int64_t> stageDepths{4, 6, 4, 2, 8};
    std::vector<Extent3> stageKernels{{3, 7, 7}, {3, 7, 7}, {3, 5, 5}, {3, 5, 5}};
    std::vector<Extent3> upsampleStrides{{1, 2, 2}, {2, 1, 1}, {2, 2, 2}, {2, 2, 2}};
    std::vector<std::int64_t> channelReductions{2, 2, 1, 2};
    Extent3 stage5Kernel{11, 11, 11};
    std::int64_t timeEmbedDim = 384;
    double timestepScale = 1000.0;
    bool predictsX0 = true;  // model_output_type "x0"; false: "v"
    std::int64_t steps = 1;
    std::int64_t spatialRatio = 32, temporalRatio = 8;

    // Latent frames replicated past the end through stages 1-4 so the inward-shifted window at
    // the border never lands on frames that are kept.
    std::int64_t trailingPadFrames() const { return (stageKernels.front()[0] / 2) * 2; }
};

// From the diffusers config.json, checked for range and consistency and against the shapes in
// the headers. NotFound when the weights hold no diffusion decoder.
Result<DiffusionDecoderConfig> resolveDiffusionDecoderConfig(const Ltx2Weights& weights);
// Why these weights cannot decode with a diffusion decoder (none, or a broken one); empty when
// they can.
std::string diffusionDecoderProblem(const Ltx2Weights& weights);
// The smallest latent grid every stage's kernel fits ((3, 7, 7) for the shipped decoder: 17
// frames, 224 px); decode() pads smaller latents up to it.
Extent3 minimumLatentExtent(const DiffusionDecoderConfig& config);

// Neighbourhood attention as NATTEN's na3d computes it: each query attends to a `kernel` window
// centred on it and shifted inward at the grid's borders so it always holds kernel positions
// (a kernel larger than the grid is clamped to it). q, k, v: [B, T, H, W, heads, D], q already
// scaled; returns [B, T, H, W, heads * D]. Computed on query blocks of `block` cells with the
// union of their windows as a masked dense attention: libtorch ops only, the score memory
// bounded by the block, every device PyTorch runs on. Zero block entries pick a default.
at::Tensor neighborhoodAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Extent3& kernel, Extent3 block = {});

// The decoder's absolute 3-D rotary embedding on [B, T, H, W, heads, D]: D split into T/H/W
// chunks (a quarter, rounded to pairs, to T), adjacent pairs rotated by the cell's own indices,
// in float32 and cast back.
at::Tensor rotateNeighborhood3d(const at::Tensor& x, double base = 10000.0);

// diffusers' enable_tiling sizes, in pixels and frames of the decoded video (its defaults).
struct DiffusionDecodeTiling {
    std::int64_t tileHeight = 768, tileWidth = 768, tileFrames = 80;
    std::int64_t strideHeight = 704, strideWidth = 704, strideFrames = 56;
};

struct DiffusionDecodeOptions {
    // The starting pixels x_t of a shape, in the order the reference draws them (one draw per
    // tile for a one-step x0 decode; one canvas otherwise). Required.
    std::function<at::Tensor(const std::vector<std::int64_t>& shape)> noise;
    // Tile the last deterministic stage and stage 5 when the latents exceed a tile (as diffusers'
    // decode() does with tiling enabled); nullopt: one pass over the whole video.
    std::optional<DiffusionDecodeTiling> tiling;
    std::int64_t steps = 0;  // 0: the config's
    std::stop_token stop;  // checked between blocks
    // After each decoded tile: (tiles done, tiles in all).
    std::function<void(std::int64_t done, std::int64_t total)> onProgress;
};

class DiffusionDecoder {
public:
    ~DiffusionDecoder();
    DiffusionDecoder(DiffusionDecoder&&) noexcept;
    DiffusionDecoder& operator=(DiffusionDecoder&&) noexcept;

    // Every tensor of the part is used or the load fails naming it.
    static Result<DiffusionDecoder> load(const Ltx2Weights& weights, c10::Device device = c10::kCPU, c10::ScalarType dtype = c10::kFloat);

    // latents: denormalized [B, C, F, H, W] (as the conv VAE's decoder takes them after its own
    // statistics). Returns [B, 3, 8 (F - 1) + 1, 32 H, 32 W] in about [-1, 1], compute dtype.
    // Latents below minimumLatentExtent() are padded as ltx-core pads them (the last frame
    // repeated, the edge rows and columns replicated on both sides) and the pixels cropped back:
    // diffusers refuses them, and a 9-frame clip or a 192-px video must still decode.
    Result<at::Tensor> decode(const at::Tensor& latents, const DiffusionDecodeOptions& options) const;

    // The parts, exposed for the parity tests: stages 1-3 (channels-last features with the
    // trailing ghost frames), stage 4 (the context), and stage 5's loop on given x_t.
    Result<at::Tensor> stagesOneToThree(const at::Tensor& latents) const;
    Result<at::Tensor> stageFour(const at::Tensor& features, bool dropLeadingFrame = true, bool cropTrailingGhost = true) const;
    Result<at::Tensor> denoise(const at::Tensor& context, const at::Tensor& xT, std::int64_t steps = 0) const;

    const DiffusionDecoderConfig& config() const;
    // The latent statistics the decoder carries ([latent_channels], float32), for a decode
    // without the conv VAE loaded.
    const at::Tensor& latentsMean() const;
    const at::Tensor& latentsStd() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit DiffusionDecoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
